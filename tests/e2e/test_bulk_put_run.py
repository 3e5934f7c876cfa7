"""dynamodb.engine bulkPutItems end to end in the embedded run (the synthesized state machine, the
handlers, the emulator's bulk put items model, the observed-call IAM check): the Workers stage the
postcode sample, a Parquet file and a JSON Lines file as gzip DynamoDB JSON Lines with sidecars,
reject bad rows as the lambda engine does, the operation after the Map writes the staged items,
and the table ends equal to the lambda engine's; a record the service refuses comes back as a
reject of its source line with the service's reason."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
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
from mapload.reports import report_lines

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

TABLE = "bulk-target"


def _scan(emu: Emulator) -> dict[str, dict[str, Any]]:
    db = emu.client("dynamodb")
    items: dict[str, dict[str, Any]] = {}
    for page in db.get_paginator("scan").paginate(TableName=TABLE):
        for item in page["Items"]:
            items[item["pk"]["S"]] = item
    return items


def _run(
    tmp_path: Path,
    source: Path,
    spec: dict[str, Any],
    engine: str,
    prepare: Callable[[Emulator], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's report and what it left: {"table": the table's items by pk, "staged": {pk: (item,
    position)} of the staged objects, "keys": the staged objects' keys}."""
    seen: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        s3, bucket = emu.client("s3"), deployment.output("StagingBucketName")
        keys = [
            o["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="jobs/")
            for o in page.get("Contents", [])
            if "/bulk/items/" in o["Key"]
        ]
        staged: dict[str, Any] = {}
        for key in keys:
            lines = gzip.decompress(s3.get_object(Bucket=bucket, Key=key)["Body"].read()).splitlines()
            sidecar = bulk_sidecar.decode(
                s3.get_object(Bucket=bucket, Key=key.replace("/bulk/items/", "/bulk/lines/"))["Body"].read()
            )
            assert len(lines) == len(sidecar.records)
            for text, position in zip(lines, sidecar.records, strict=True):
                item = dict(parse_item(text.decode()))
                assert item["pk"]["S"] not in staged  # one line a key
                staged[item["pk"]["S"]] = (item, position)
        seen.update(keys=keys, staged=staged, table=_scan(emu))

    spec = {**spec, "dynamodb": {**spec["dynamodb"], "table": TABLE, "engine": engine}}
    report = run_local(
        source, spec, report_path=tmp_path / f"{engine}.json", quiet=True, inspect=inspect, prepare=prepare
    )
    return report, seen


def _rejects(report: dict[str, Any]) -> list[dict[str, Any]]:
    location = report["rejects"]["location"]
    return [json.loads(line) for line in Path(location).read_text().splitlines()] if location else []


def _both(tmp_path: Path, source: Path, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each engine's run of the same file and spec: bulk put items' report and what it left, after
    asserting the table equals the lambda engine's and both reports count the same records."""
    lam, lam_seen = _run(tmp_path, source, spec, "lambda")
    bulk, seen = _run(tmp_path, source, spec, "bulkPutItems")
    assert lam["status"] == bulk["status"] == "SUCCEEDED", (lam["error"], bulk["error"])
    assert seen["table"] == lam_seen["table"]
    assert not lam_seen["keys"]  # the lambda engine stages nothing
    for name in ("read", "written", "rejected"):
        assert bulk["records"][name] == lam["records"][name], name
    assert bulk["lines"] == lam["lines"]
    assert [(r.get("line"), r.get("row"), r["code"]) for r in _rejects(bulk)] == [
        (r.get("line"), r.get("row"), r["code"]) for r in _rejects(lam)
    ]
    section = bulk["bulkPut"]
    assert section["status"] == "COMPLETED" and section["exact"] is True
    assert section["written"] == bulk["records"]["written"] == section["staged"]
    assert "bulkPut" not in lam or lam["bulkPut"] is None
    return bulk, seen


def test_the_postcode_sample_loads_as_the_lambda_engine_loads_it(tmp_path: Path) -> None:
    source = tmp_path / "postcodes.csv"
    good, bad_lines = _csv_with_bad_rows(source, 3_000)
    text = source.read_bytes()

    report, seen = _both(tmp_path, source, POSTCODE_SPEC)

    records = report["records"]
    assert (records["read"], records["written"], records["rejected"]) == (
        len(good) + len(BAD_CSV_ROWS),
        len(good),
        len(BAD_CSV_ROWS),
    )
    assert sorted(r["line"] for r in _rejects(report)) == bad_lines
    assert report["shards"]["total"] > 5 and len(seen["keys"]) == report["shards"]["total"]
    assert set(seen["table"]) == {f"POSTCODE#{code}" for code in good}
    for code, (lat, lon) in good.items():
        assert Decimal(seen["table"][f"POSTCODE#{code}"]["latitude"]["N"]) == Decimal(lat)
        assert Decimal(seen["table"][f"POSTCODE#{code}"]["longitude"]["N"]) == Decimal(lon)
    # Each staged record's sidecar entry is its own line of the file.
    for pk, (_, position) in seen["staged"].items():
        line = text[position.offset : position.offset + position.length]
        assert line.split(b",")[0].decode() == pk.removeprefix("POSTCODE#")


def test_a_key_twice_in_a_shard_is_staged_once_the_later_record_winning(tmp_path: Path) -> None:
    source = tmp_path / "postcodes.csv"
    good, _ = _csv_with_bad_rows(source, 500)
    last = next(reversed(good))
    with source.open("ab") as out:
        out.write(f"{last},1.25,-2.5\n".encode())

    report, seen = _run(tmp_path, source, POSTCODE_SPEC, "bulkPutItems")

    assert report["status"] == "SUCCEEDED", report["error"]
    records = report["records"]
    assert records["duplicates"] == 1
    assert records["read"] == records["written"] + records["rejected"] + records["duplicates"]
    summary = report_lines(report)[0]
    assert summary.endswith(f"+ rejected {records['rejected']:,} + duplicates 1"), summary
    assert seen["table"][f"POSTCODE#{last}"]["latitude"] == {"N": "1.25"}


def test_a_parquet_file_loads_as_the_lambda_engine_loads_it(tmp_path: Path) -> None:
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

    report, seen = _both(tmp_path, source, spec)

    assert (report["records"]["read"], report["records"]["written"], report["records"]["rejected"]) == (
        300,
        299,
        1,
    )
    assert [(r["rowGroup"], r["row"]) for r in _rejects(report)] == [(0, 7)]
    assert len(seen["table"]) == 299
    for pk, (item, position) in seen["staged"].items():
        row = int(pk.removeprefix("p"))
        assert item["age"] == {"N": str(row)} == seen["table"][pk]["age"]
        assert (position.row_group, position.row) == (row // 50, row)


JSONL_SPEC: dict[str, Any] = {
    "format": "jsonl",
    "dynamodb": {"key": {"pk": "{id}", "sk": "EVENT"}, "attributes": "*"},
    "maxRejectedPercent": 10,
}


def test_a_json_lines_file_loads_as_the_lambda_engine_loads_it(tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    rows = [json.dumps({"id": f"e{i}", "n": i, "tags": ["a", "b"]}) for i in range(100)]
    rows[40] = '{"id": "e40", "n": '  # not JSON
    source.write_text("\n".join(rows) + "\n")

    report, seen = _both(tmp_path, source, JSONL_SPEC)

    assert (report["records"]["read"], report["records"]["written"], report["records"]["rejected"]) == (
        100,
        99,
        1,
    )
    assert [r["line"] for r in _rejects(report)] == [41]
    assert seen["table"]["e3"]["n"] == {"N": "3"}
    assert seen["table"]["e3"]["tags"] == {"L": [{"S": "a"}, {"S": "b"}]}


def _table_with_an_index(emu: Emulator) -> None:
    """The target table, with a global secondary index on `region` (DynamoDB refuses an empty
    string as an index key's value: a record mapload accepts and the service refuses)."""
    emu.client("dynamodb").create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "region")
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-region",
                "KeySchema": [{"AttributeName": "region", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def test_a_record_the_service_refuses_is_a_reject_of_its_source_line(tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    rows = [json.dumps({"id": f"e{i}", "region": "north" if i != 12 else ""}) for i in range(60)]
    source.write_text("\n".join(rows) + "\n")

    report, seen = _run(tmp_path, source, JSONL_SPEC, "bulkPutItems", prepare=_table_with_an_index)

    assert report["status"] == "SUCCEEDED", report["error"]
    assert (report["records"]["read"], report["records"]["written"], report["records"]["rejected"]) == (
        60,
        59,
        1,
    )
    (reject,) = _rejects(report)
    assert reject["line"] == 13 and reject["code"] == "bulk_put_error"
    assert "secondary index key" in reject["reason"] and reject["item"]["id"] == {"S": "e12"}
    assert report["lines"]["total"] == report["lines"]["accepted"] + report["lines"]["rejected"]
    section = report["bulkPut"]
    assert section["status"] == "COMPLETED_WITH_ERRORS" and section["errors"] == 1
    assert "e12" not in seen["table"] and len(seen["table"]) == 59


def test_the_environments_own_table_loads_with_bulk_put_items(tmp_path: Path) -> None:
    """No `dynamodb.table`: Plan describes the environment's table (ACTIVE, no index building, not
    global) and the operation writes it; the IAM check sees every call allowed."""
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join(json.dumps({"id": f"e{i}", "n": i}) for i in range(30)) + "\n")
    spec = {**JSONL_SPEC, "dynamodb": {**JSONL_SPEC["dynamodb"], "engine": "bulkPutItems"}}

    report = run_local(source, spec, report_path=tmp_path / "report.json", quiet=True)

    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["records"]["written"] == 30 and report["bulkPut"]["status"] == "COMPLETED"
