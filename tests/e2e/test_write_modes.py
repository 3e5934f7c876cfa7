"""Write modes end to end through the embedded run, against a table that already holds items (the
documented `mapload serve` endpoint, which outlives the runs), and one file using every attribute
type."""

from __future__ import annotations

import base64
import csv
import json
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
from conftest import REPORT_SCHEMA

from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

HEADER = "id,v,tag,note\n"
SEED = [("A", "5", "x", "keep"), ("B", "1", "y", "keep"), ("C", "9", "z", "keep")]
# Repeated keys and versions in file order; D is new; one bad version (a reject).
ROWS = [
    ("A", "3", "a1", ""),
    ("B", "2", "b1", ""),
    ("D", "4", "d1", "new"),
    ("B", "7", "b2", ""),
    ("D", "2", "d2", ""),
    ("A", "6", "a2", "changed"),
    ("E", "x", "e1", ""),
]


def _spec(mode: str, **extra: Any) -> dict[str, Any]:
    tags: dict[str, Any] = {"field": "tag", "type": "SS"}
    if mode == "update":
        tags["update"] = "add"
    dynamodb: dict[str, Any] = {"key": {"pk": "K#{id}", "sk": "S"}, "writeMode": mode}
    if mode != "delete":
        dynamodb["attributes"] = {
            "v": {"field": "v", "type": "N"},
            "tags": tags,
            "note": {"field": "note", "type": "S", "optional": True},
        }
    if mode == "newerWins":
        dynamodb["version"] = "v"
    return {"format": "csv", "dynamodb": dynamodb, "maxRejectedPercent": 50, "maxConcurrency": 4, **extra}


class Server:
    """The runs' DynamoDB endpoint and the table they share (named alike in every run)."""

    def __init__(self, endpoint: str, tmp_path: Path) -> None:
        self.db = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        self.tmp_path = tmp_path
        self.table = ""
        self.report: dict[str, Any] = {}

    def run(self, rows: list[tuple[str, ...]], spec: dict[str, Any]) -> dict[str, Any]:
        source = self.tmp_path / "in.csv"
        source.write_text(HEADER + "".join(",".join(row) + "\n" for row in rows))
        report = run_local(source, spec, report_path=self.tmp_path / "report.json", quiet=True)
        jsonschema.validate(report, REPORT_SCHEMA)
        assert report["status"] == "SUCCEEDED", report["error"]
        records = report["records"]
        assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
        assert report["skipped"]["count"] == records["skipped"]
        self.table = report["dynamodb"]["table"]
        self.report = report
        return records

    def items(self) -> dict[str, dict[str, Any]]:
        found = {}
        for page in self.db.get_paginator("scan").paginate(TableName=self.table):
            for item in page["Items"]:
                found[item["pk"]["S"][2:]] = item
        return found

    def seeded(self) -> dict[str, dict[str, Any]]:
        """Reset the table to SEED (put mode), whatever an earlier run left."""
        if self.table:
            for key in self.items():
                self.db.delete_item(TableName=self.table, Key={"pk": {"S": f"K#{key}"}, "sk": {"S": "S"}})
        self.run(SEED, _spec("put"))
        return self.items()


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str) -> Server:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", served)
    return Server(served, tmp_path)


def _versions(items: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {key: item["v"]["N"] for key, item in items.items()}


def test_each_write_mode_against_a_table_that_holds_items(server: Server) -> None:
    # putIfAbsent (one shard: file order): stored keys stay; D's first record is written.
    before = server.seeded()
    assert server.run(ROWS, _spec("putIfAbsent")) == {
        "read": 7,
        "written": 1,
        "skipped": 5,
        "rejected": 1,
        "duplicates": 0,
    }
    assert server.report["writeMode"] == "putIfAbsent"
    after = server.items()
    assert {key: after[key] for key in before} == before
    assert (after["D"]["v"], after["D"]["note"]) == ({"N": "4"}, {"S": "new"})

    # newerWins, many small shards run 4 at a time: any order keeps each key's highest version.
    server.seeded()
    records = server.run(ROWS, _spec("newerWins", shardSizeMiB=0.00003))
    # The counts depend on the order (D at 2 before D at 4 writes both); A at 3 is always skipped.
    assert records["written"] + records["skipped"] == 6 and 1 <= records["skipped"] <= 3
    assert records["rejected"] == 1
    assert server.report["shards"]["total"] > 2
    after = server.items()
    assert _versions(after) == {"A": "6", "B": "7", "C": "9", "D": "4"}
    assert after["A"]["note"] == {"S": "changed"} and "note" not in after["B"]  # whole items

    # update: SET v and note (an empty optional note is left as stored), ADD to the tag set.
    server.seeded()
    records = server.run(ROWS, _spec("update"))
    assert (records["written"], records["skipped"], records["rejected"]) == (6, 0, 1)
    after = server.items()
    assert _versions(after) == {"A": "6", "B": "7", "C": "9", "D": "2"}
    assert set(after["A"]["tags"]["SS"]) == {"x", "a1", "a2"}
    assert (after["A"]["note"], after["B"]["note"], after["D"]["note"]) == (
        {"S": "changed"},
        {"S": "keep"},
        {"S": "new"},
    )

    # delete: the file's keys go (absent ones are no error), the others stay.
    server.seeded()
    records = server.run(ROWS, _spec("delete"))
    assert (records["written"], records["skipped"], records["rejected"]) == (7, 0, 0)
    assert set(server.items()) == {"C"}


def test_numeric_adds_through_the_served_endpoint_are_all_written(server: Server) -> None:
    # Each add is a transaction with its ledger marker; a plain moto_server applied them but
    # answered most of them cancelled (read 150 = written 1 + skipped 149).
    spec = _spec("update")
    spec["dynamodb"]["attributes"]["v"]["update"] = "add"
    rows = [(f"K{i % 10}", "1", "t", "") for i in range(150)]

    records = server.run(rows, spec)

    assert records == {"read": 150, "written": 150, "skipped": 0, "rejected": 0, "duplicates": 0}
    assert _versions(server.items()) == {f"K{i}": "15" for i in range(10)}


TYPED_SPEC: dict[str, Any] = {
    "format": "csv",
    "csv": {"delimiter": "\t"},
    "dynamodb": {
        "key": {"pk": "T#{id}", "sk": "S"},
        "attributes": {
            "s": {"field": "s"},
            "n": {"field": "n", "type": "N"},
            "bool": {"field": "bool", "type": "BOOL"},
            "null": {"field": "null", "type": "NULL"},
            "b": {"field": "b", "type": "B"},
            "ss": {"field": "ss", "type": "SS", "separator": ";"},
            "ns": {"field": "ns", "type": "NS"},
            "bs": {"field": "bs", "type": "BS"},
            "l": {"field": "l", "type": "L"},
            "m": {"field": "m", "type": "M"},
            "expires": {"field": "expires", "type": "N", "from": "iso8601"},
        },
    },
}
TYPED_ROW = {
    "id": "1",
    "s": "text",
    "n": "12345678901234567890.5",
    "bool": "yes",
    "null": "",
    "b": base64.b64encode(b"\x00\xffbytes").decode(),
    "ss": "a;b",
    "ns": "1|2.5",
    "bs": "AQI=|/w==",
    "l": '[1, "x", [true, null]]',
    "m": '{"deep": {"n": 0.1}}',
    "expires": "2026-12-01T00:00:00Z",
}


def test_one_file_with_every_type_reads_back_as_its_cells_say(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    source = tmp_path / "typed.csv"
    with source.open("w", newline="") as out:  # JSON cells hold quotes: CSV-quoted
        writer = csv.writer(out, delimiter="\t", lineterminator="\n")
        writer.writerows([TYPED_ROW, TYPED_ROW.values()])

    run = run_file(source, TYPED_SPEC)

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    item = run.items[("T#1", "S")]
    expires = int(datetime.fromisoformat(TYPED_ROW["expires"]).timestamp())
    assert item == {
        "pk": {"S": "T#1"},
        "sk": {"S": "S"},
        "s": {"S": "text"},
        "n": {"N": "12345678901234567890.5"},
        "bool": {"BOOL": True},
        "null": {"NULL": True},
        "b": {"B": b"\x00\xffbytes"},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2.5"]},
        "bs": {"BS": [b"\x01\x02", b"\xff"]},
        "l": {"L": [{"N": "1"}, {"S": "x"}, {"L": [{"BOOL": True}, {"NULL": True}]}]},
        "m": {"M": {"deep": {"M": {"n": {"N": "0.1"}}}}},
        "expires": {"N": str(expires)},
    }
    assert Decimal(item["n"]["N"]) == Decimal(TYPED_ROW["n"])  # exact, never through float


WIDTH = 400


def _wide_export(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """An export reloaded with `"attributes": "*"` in writeMode update: 400 attributes make an
    UpdateExpression of about 6 KB (DynamoDB allows 4 KB, 300 operators)."""
    source = tmp_path / "wide.jsonl"
    records = [{"id": n, **{f"attribute_{i}": f"{n}-{i}" for i in range(WIDTH)}} for n in range(3)]
    source.write_text("".join(json.dumps(record) + "\n" for record in records))
    spec = {
        "format": "jsonl",
        "dynamodb": {"key": {"pk": "W#{id}", "sk": "S"}, "attributes": "*", "writeMode": "update"},
    }
    return source, spec


def _assert_wide_item(item: dict[str, Any]) -> None:
    assert len(item) == WIDTH + 3  # pk, sk, id and the 400
    assert item["attribute_399"] == {"S": "2-399"}


def test_an_update_past_dynamodb_s_expression_limits_loads_in_several_requests(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    """Each record's update is sent in several requests, each within the limits, and stores
    every attribute."""
    run = run_file(*_wide_export(tmp_path))

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    assert run.report["records"]["written"] == 3
    _assert_wide_item(run.items[("W#2", "S")])


def test_a_wide_update_through_the_served_endpoint_stores_every_attribute(server: Server) -> None:
    # The served moto raised RecursionError on an update of ~200 SET actions (one 4 KB request).
    source, spec = _wide_export(server.tmp_path)
    report = run_local(source, spec, report_path=server.tmp_path / "report.json", quiet=True)

    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["records"]["written"] == 3
    table = report["dynamodb"]["table"]
    _assert_wide_item(server.db.get_item(TableName=table, Key={"pk": {"S": "W#2"}, "sk": {"S": "S"}})["Item"])


def test_the_served_endpoint_refuses_what_dynamodb_refuses(server: Server) -> None:
    """An expression past 4 KB and an item past 400 KB: DynamoDB's ValidationException, as in the
    in-process run; an item just under 400 KB is stored (plain moto refused it past 405,000 bytes)."""
    server.run(SEED, _spec("put"))
    key = {"pk": {"S": "K#A"}, "sk": {"S": "S"}}
    names = {f"#attribute{i}": f"attribute_{i}" for i in range(250)}
    update = "SET " + ", ".join(f"{name} = :v" for name in names)
    assert len(update.encode()) > 4096
    with pytest.raises(server.db.exceptions.ClientError, match="ValidationException"):
        server.db.update_item(
            TableName=server.table,
            Key=key,
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={":v": {"S": "x"}},
        )
    with pytest.raises(server.db.exceptions.ClientError, match=r"ValidationException.*size"):
        server.db.put_item(TableName=server.table, Item={**key, "big": {"S": "x" * 410_000}})
    server.db.put_item(TableName=server.table, Item={**key, "big": {"S": "x" * 409_000}})


def test_a_numeric_add_past_dynamodb_s_expression_limits_is_refused_at_plan(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    """A numeric add goes in one transaction with its marker, which cannot be split: a mapping
    whose update cannot fit in one UpdateExpression is refused before any record is written."""
    source = tmp_path / "counts.csv"
    source.write_text("id,n\n1,2\n")
    attributes: dict[str, Any] = {"n": {"field": "n", "type": "N", "update": "add"}}
    attributes |= {f"first_{i}": {"field": "id", "type": "S", "update": "setIfAbsent"} for i in range(150)}
    spec = {
        "format": "csv",
        "dynamodb": {"key": {"pk": "C#{id}", "sk": "S"}, "attributes": attributes, "writeMode": "update"},
    }

    run = run_file(source, spec)

    assert run.report["status"] == "FAILED"
    error = run.report["error"]
    assert error["where"] == "Plan" and error["type"] == "InputValidationError", error
    assert "dynamodb.attributes" in error["message"] and "4096" in error["message"]
    assert not run.items


def test_an_update_that_would_take_a_stored_item_past_400_kb_rejects_that_record(server: Server) -> None:
    """DynamoDB refuses an UpdateItem whose item would pass 400 KB (ValidationException): no retry
    mends it, so that record is rejected with DynamoDB's words and the others are written."""
    server.seeded()
    key = {"pk": {"S": "K#A"}, "sk": {"S": "S"}}
    server.db.update_item(
        TableName=server.table,
        Key=key,
        UpdateExpression="SET big = :b",
        ExpressionAttributeValues={":b": {"S": "x" * 300_000}},
    )
    rows = [("B", "2", "b", "small"), ("A", "7", "a", "y" * 150_000), ("D", "4", "d", "new")]
    records = server.run(rows, _spec("update", maxRejectedPercent=50))
    assert records == {"read": 3, "written": 2, "skipped": 0, "rejected": 1, "duplicates": 0}
    rejects = server.report["rejects"]
    assert rejects["byReason"] == {"dynamodb_refused": 1}
    (sample,) = rejects["sample"]
    # A's record is the file's line 3 (the header is line 1).
    assert sample["code"] == "dynamodb_refused" and sample["line"] == 3 and sample["offset"] > 0
    assert "ValidationException" in sample["reason"] and "size" in sample["reason"]
    after = server.items()
    assert after["A"]["v"] == {"N": "5"} and after["A"]["note"] == {"S": "keep"}  # untouched
    assert (after["B"]["v"], after["D"]["v"]) == ({"N": "2"}, {"N": "4"})
