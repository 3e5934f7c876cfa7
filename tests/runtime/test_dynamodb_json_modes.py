"""format dynamodb-json with every write mode, through Plan → Workers → Finalize on moto."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from pipeline_support import REGION, run_pipeline, scan

pytestmark = pytest.mark.runtime

STORED = {
    "pk": {"S": "a"},
    "sk": {"S": "X"},
    "v": {"N": "5"},
    "tags": {"SS": ["x"]},
    "kept": {"S": "only in the table"},
}


def _export(aws: Any, *items: dict[str, Any]) -> str:
    body = "".join(json.dumps({"Item": item}) + "\n" for item in items)
    aws.put_object(Bucket="src", Key="export/data/part-1.json", Body=body.encode())
    return "s3://src/export/data/"


def _load(aws: Any, dynamodb: dict[str, Any], *items: dict[str, Any]) -> dict[str, Any]:
    boto3.client("dynamodb", region_name=REGION).put_item(TableName="target", Item=STORED)
    spec = {"format": "dynamodb-json", "source": _export(aws, *items), "dynamodb": dynamodb}
    report: dict[str, Any] = run_pipeline(aws, spec)["report"]
    assert report["status"] == "SUCCEEDED", report.get("error")
    return report


NEW_A = {
    "pk": {"S": "a"},
    "sk": {"S": "X"},
    "v": {"N": "3"},
    "tags": {"SS": ["y"]},
    "m": {"M": {"b": {"B": "AQ=="}}},
}
NEW_B = {"pk": {"S": "b"}, "sk": {"S": "X"}, "v": {"N": "1"}, "tags": {"SS": ["z"]}}


def test_put_if_absent_writes_only_keys_not_in_the_table(aws: Any) -> None:
    report = _load(aws, {"writeMode": "putIfAbsent"}, NEW_A, NEW_B)

    assert report["records"]["skipped"] == 1 and report["records"]["written"] == 1
    assert scan()[("a", "X")] == STORED
    assert scan()[("b", "X")] == NEW_B


def test_update_without_attributes_sets_every_exported_attribute_and_keeps_the_others(aws: Any) -> None:
    _load(aws, {"writeMode": "update"}, NEW_A)

    assert scan()[("a", "X")] == {**NEW_A, "m": {"M": {"b": {"B": b"\x01"}}}, "kept": STORED["kept"]}


def test_update_with_mapped_attributes_adds_to_a_set(aws: Any) -> None:
    target = {
        "writeMode": "update",
        "key": {"pk": "{pk}", "sk": "{sk}"},
        "attributes": {"tags": {"field": "tags", "type": "SS", "update": "add"}},
    }

    _load(aws, target, NEW_A)

    stored = scan()[("a", "X")]
    assert sorted(stored["tags"]["SS"]) == ["x", "y"]
    assert stored["v"] == STORED["v"] and stored["kept"] == STORED["kept"]


def test_newer_wins_keeps_the_higher_version(aws: Any) -> None:
    target = {
        "writeMode": "newerWins",
        "version": "v",
        "key": {"pk": "{pk}", "sk": "{sk}"},
        "attributes": {"v": {"field": "v", "type": "N"}, "m": {"field": "m", "type": "M", "optional": True}},
    }

    report = _load(aws, target, NEW_A, NEW_B)

    assert report["records"]["skipped"] == 1
    assert scan()[("a", "X")] == STORED  # version 3 < 5
    assert scan()[("b", "X")] == {"pk": {"S": "b"}, "sk": {"S": "X"}, "v": {"N": "1"}}


def test_delete_removes_the_exported_keys(aws: Any) -> None:
    boto3.client("dynamodb", region_name=REGION).put_item(TableName="target", Item=NEW_B)

    report = _load(aws, {"writeMode": "delete"}, NEW_A)

    assert report["records"]["written"] == 1
    assert set(scan()) == {("b", "X")}
