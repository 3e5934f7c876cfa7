"""dynamodb.engine bulkPutItems in the embedded run (the synthesized state machine, the handlers, the
emulator): the Workers stage the postcode sample, a Parquet file and a JSON Lines file as gzip
DynamoDB JSON Lines with sidecars, reject bad rows as the lambda engine does, and write nothing to
the table (the bulk put items operation after the Map writes it)."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_embedded_run import BAD_CSV_ROWS, POSTCODE_SPEC, _csv_with_bad_rows

from logic import bulk_sidecar
from logic.dynamodb_json import parse_item
from mapload.emulator.embedded import Deployment, Emulator
from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

TABLE = "bulk-target"


def _run(tmp_path: Path, source: Path, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's report and what it staged: {"items": {pk: (item, position)}, "counts": table scan,
    "keys": the staged items' object keys}."""
    seen: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        s3, bucket = emu.client("s3"), deployment.output("StagingBucketName")
        keys = [
            o["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="jobs/")
            for o in page.get("Contents", [])
            if "/bulk/items/" in o["Key"]
        ]
        items: dict[str, Any] = {}
        for key in keys:
            lines = gzip.decompress(s3.get_object(Bucket=bucket, Key=key)["Body"].read()).splitlines()
            sidecar_key = key.replace("/bulk/items/", "/bulk/lines/")
            sidecar = bulk_sidecar.decode(s3.get_object(Bucket=bucket, Key=sidecar_key)["Body"].read())
            assert len(lines) == len(sidecar.records)
            for text, position in zip(lines, sidecar.records, strict=True):
                item = dict(parse_item(text.decode()))
                assert item["pk"]["S"] not in items  # one line a key
                items[item["pk"]["S"]] = (item, position)
        seen.update(keys=keys, items=items)
        seen["count"] = emu.client("dynamodb").scan(TableName=TABLE, Select="COUNT")["Count"]

    spec = {**spec, "dynamodb": {**spec["dynamodb"], "table": TABLE, "engine": "bulkPutItems"}}
    report = run_local(source, spec, report_path=tmp_path / "report.json", quiet=True, inspect=inspect)
    return report, seen


def test_the_postcode_sample_is_staged_with_its_rejects_and_nothing_written(tmp_path: Path) -> None:
    source = tmp_path / "postcodes.csv"
    good, bad_lines = _csv_with_bad_rows(source, 3_000)
    # A key twice in one shard (the last lines are one ~10 KB shard): the later record is staged.
    last = next(reversed(good))
    with source.open("ab") as out:
        out.write(f"{last},1.25,-2.5\n".encode())
    good[last] = ("1.25", "-2.5")
    text = source.read_bytes()

    report, seen = _run(tmp_path, source, POSTCODE_SPEC)

    assert report["status"] == "SUCCEEDED", report["error"]
    records = report["records"]
    assert records["read"] == len(good) + len(BAD_CSV_ROWS) + 1
    assert (records["written"], records["rejected"], records["duplicates"]) == (0, len(BAD_CSV_ROWS), 1)
    assert report["rejects"]["byReason"] == {
        "bad_number": 1,
        "column_count": 2,
        "empty_key": 1,
        "bad_quote": 1,
        "invalid_utf8": 1,
    }
    assert seen["count"] == 0  # the Workers stage; nothing is in the table
    assert report["shards"]["total"] > 5 and len(seen["keys"]) == report["shards"]["total"]
    staged = {pk.removeprefix("POSTCODE#"): item for pk, (item, _) in seen["items"].items()}
    assert set(staged) == set(good)
    for code, (lat, lon) in good.items():
        assert Decimal(staged[code]["latitude"]["N"]) == Decimal(lat)
        assert Decimal(staged[code]["longitude"]["N"]) == Decimal(lon)
    # Each staged record's sidecar entry is its own line of the file.
    for pk, (_, position) in seen["items"].items():
        line = text[position.offset : position.offset + position.length]
        assert line.split(b",")[0].decode() == pk.removeprefix("POSTCODE#")
    assert sorted(r["line"] for r in _rejects(report)) == bad_lines


def _rejects(report: dict[str, Any]) -> list[dict[str, Any]]:
    location = report["rejects"]["location"]
    return [json.loads(line) for line in Path(location).read_text().splitlines()] if location else []


def test_a_parquet_file_is_staged_by_row_with_its_rejects(tmp_path: Path) -> None:
    source = tmp_path / "people.parquet"
    ids = [f"p{i}" if i != 7 else None for i in range(300)]
    pq.write_table(pa.table({"id": ids, "age": list(range(300))}), source, row_group_size=50)
    spec = {
        "format": "parquet",
        "dynamodb": {
            "key": {"pk": "{id}", "sk": "PERSON"},
            "attributes": {"age": {"field": "age", "type": "N"}},
        },
        "shardSizeMiB": 0.001,
        "maxRejectedPercent": 10,
    }

    report, seen = _run(tmp_path, source, spec)

    assert report["status"] == "SUCCEEDED", report["error"]
    assert (report["records"]["read"], report["records"]["written"], report["records"]["rejected"]) == (
        300,
        0,
        1,
    )
    assert [(r["rowGroup"], r["row"]) for r in _rejects(report)] == [(0, 7)]
    assert seen["count"] == 0 and len(seen["items"]) == 299
    for pk, (item, position) in seen["items"].items():
        row = int(pk.removeprefix("p"))
        assert item["age"] == {"N": str(row)}
        assert (position.row_group, position.row) == (row // 50, row)


def test_a_json_lines_file_is_staged_with_its_rejects(tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    rows = [json.dumps({"id": f"e{i}", "n": i, "tags": ["a", "b"]}) for i in range(100)]
    rows[40] = '{"id": "e40", "n": '  # not JSON
    source.write_text("\n".join(rows) + "\n")
    spec = {
        "format": "jsonl",
        "dynamodb": {"key": {"pk": "{id}", "sk": "EVENT"}, "attributes": "*"},
        "maxRejectedPercent": 10,
    }

    report, seen = _run(tmp_path, source, spec)

    assert report["status"] == "SUCCEEDED", report["error"]
    assert (report["records"]["read"], report["records"]["written"], report["records"]["rejected"]) == (
        100,
        0,
        1,
    )
    assert [r["line"] for r in _rejects(report)] == [41]
    assert seen["count"] == 0 and len(seen["items"]) == 99
    item, _ = seen["items"]["e3"]
    assert item["n"] == {"N": "3"} and item["tags"] == {"L": [{"S": "a"}, {"S": "b"}]}
