"""Write modes through Plan -> Worker -> Finalize on moto, against a table that already holds
items: what each mode leaves in the table, and records read = written + skipped + rejected."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from pipeline_support import REGION, run_pipeline, scan

pytestmark = pytest.mark.runtime

# Stored before the load: A at version 5 with a note, B at version 1, C untouched by the file.
EXISTING = {
    "A": {"v": "5", "tags": ["x"], "note": "keep"},
    "B": {"v": "1", "tags": ["y"], "note": "keep"},
    "C": {"v": "9", "tags": ["z"], "note": "keep"},
}
# Repeated keys with versions, in file order; one bad row (a reject).
ROWS = [
    ("A", "3", "a1"),
    ("B", "2", "b1"),
    ("D", "4", "d1"),
    ("B", "7", "b2"),
    ("D", "2", "d2"),
    ("A", "6", "a2"),
    ("E", "x", "e1"),
]


def _spec(mode: str, **dynamodb: Any) -> dict[str, Any]:
    attributes = {
        "v": {"field": "v", "type": "N"},
        "tags": {"field": "tag", "type": "SS", **({"update": "add"} if mode == "update" else {})},
    }
    target: dict[str, Any] = {"key": {"pk": "K#{id}", "sk": "S"}, "writeMode": mode, **dynamodb}
    if mode != "delete":
        target["attributes"] = attributes
    return {
        "source": "s3://src/in.csv",
        "format": "csv",
        "dynamodb": target,
        "shardSizeMiB": 0.00003,  # ~30 bytes: several shards, each a Worker of its own
        "jobId": f"modes-{mode}",
        "maxRejectedPercent": 50,
    }


def _load(aws: Any, mode: str, **dynamodb: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    db = boto3.client("dynamodb", region_name=REGION)
    for key, item in EXISTING.items():
        db.put_item(
            TableName="target",
            Item={
                "pk": {"S": f"K#{key}"},
                "sk": {"S": "S"},
                "v": {"N": item["v"]},
                "tags": {"SS": item["tags"]},
                "note": {"S": item["note"]},
            },
        )
    body = "id,v,tag\n" + "".join(f"{k},{v},{t}\n" for k, v, t in ROWS)
    aws.put_object(Bucket="src", Key="in.csv", Body=body.encode())
    result = run_pipeline(aws, _spec(mode, **dynamodb))
    report = result["report"]
    records = report["records"]
    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["shards"]["total"] > 1
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
    rejected = 0 if mode == "delete" else 1  # delete maps the key only: E's bad version is not read
    assert (records["read"], records["rejected"], records["duplicates"]) == (7, rejected, 0)
    assert report["skipped"]["count"] == records["skipped"]
    table = {pk[2:]: item for (pk, _), item in scan().items()}
    return report, table


def _versions(table: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {key: item["v"]["N"] for key, item in table.items()}


def test_put_if_absent_leaves_existing_items_and_the_first_record_of_a_new_key(aws: Any) -> None:
    report, table = _load(aws, "putIfAbsent")
    assert _versions(table) == {"A": "5", "B": "1", "C": "9", "D": "4"}
    assert table["A"]["note"] == {"S": "keep"}
    # A twice, B twice, D's second record: skipped.
    assert (report["records"]["written"], report["records"]["skipped"]) == (1, 5)
    assert {"pk": "K#A", "sk": "S"} in report["skipped"]["sample"]


def test_newer_wins_keeps_the_highest_version(aws: Any) -> None:
    report, table = _load(aws, "newerWins", version="v")
    assert _versions(table) == {"A": "6", "B": "7", "C": "9", "D": "4"}
    assert table["A"]["tags"] == {"SS": ["a2"]}  # the whole item is the newer record's
    assert "note" not in table["A"]
    # Written: B(2), D(4), B(7), A(6); skipped: A(3) below 5, D(2) below 4.
    assert (report["records"]["written"], report["records"]["skipped"]) == (4, 2)


def test_update_sets_and_adds_and_keeps_other_attributes(aws: Any) -> None:
    report, table = _load(aws, "update")
    assert _versions(table) == {"A": "6", "B": "7", "C": "9", "D": "2"}  # SET: the last in file order
    assert set(table["A"]["tags"]["SS"]) == {"x", "a1", "a2"}  # ADD to the stored set
    assert set(table["D"]["tags"]["SS"]) == {"d1", "d2"}
    assert table["A"]["note"] == table["B"]["note"] == {"S": "keep"}
    assert (report["records"]["written"], report["records"]["skipped"]) == (6, 0)


def test_delete_removes_the_keys_of_the_file(aws: Any) -> None:
    report, table = _load(aws, "delete")
    assert set(table) == {"C"}
    assert (report["records"]["written"], report["records"]["skipped"]) == (7, 0)
