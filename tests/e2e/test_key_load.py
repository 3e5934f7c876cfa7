"""Requests per partition key in the embedded run (issue 23: no ledger key is hot).

DynamoDB serves at most 1,000 write / 3,000 read units a second per partition key; moto models
none of it. tests/keymeter.py (an observer of the emulator's calls) counts each request by table
and partition key, so this small run fails when a change puts per-shard traffic back on one key
(as every shard record, CSV state and budget lease once sat under `JOB#<jobId>`). The largest run
is computed in tests/runtime/test_ledger_keys.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from keymeter import KeyMeter, metering

from adapters.ledger import BLOCK_SHARDS
from mapload.emulator.embedded import Deployment, Emulator
from mapload.local import run_local
from mapload.sample import write_csv

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

SPEC: dict[str, Any] = {
    "format": "csv",
    "jobId": "metered",
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {"latitude": {"field": "latitude", "type": "N"}},
    },
    # Enough shards for 5+ blocks: the quarter rule below needs more than 4 keys to share the
    # traffic (short shards end before their first budget beat, so the counters add nothing).
    "shardSizeMiB": 0.002,
    "maxConcurrency": 4,
    "writeUnitsPerSecond": 50_000,
}
# Per shard on its block key: shard_done, its CSV state, its record (and a retry of each).
PER_SHARD_CALLS = 6
# The job's own key: Plan's reads and claim, the plan's `loaded` record, Finalize's close: a few per
# run, whatever the shards.
PER_RUN_JOB_CALLS = 7


def test_no_ledger_key_takes_every_shards_requests(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "postcodes.csv", 3000)
    tables: dict[str, str] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        tables.update(ledger=deployment.output("LedgerTableName"), target=deployment.output("TableName"))

    with metering() as meter:
        report = run_local(source, SPEC, report_path=tmp_path / "r.json", quiet=True, inspect=inspect)
    assert report["status"] == "SUCCEEDED", report.get("error")
    shards = report["shards"]["total"]
    assert shards > 4 * BLOCK_SHARDS  # several blocks

    ledger = meter.keys(tables["ledger"])
    assert ledger["JOB#metered"] <= PER_RUN_JOB_CALLS
    busiest, calls = ledger.most_common(1)[0]
    assert calls <= BLOCK_SHARDS * PER_SHARD_CALLS, (busiest, calls)
    # The traffic spreads with the shards: no key carries a quarter of it (once, the job's key
    # carried nearly all).
    assert calls <= sum(ledger.values()) / 4, (busiest, calls, sum(ledger.values()))

    target = meter.keys(tables["target"])
    assert sum(target.values()) >= 3000 * 0.9  # every record's key, each about once
    assert target.most_common(1)[0][1] <= 3


def test_the_meter_reads_the_partition_key_of_every_kind_of_request() -> None:
    meter = KeyMeter({"t": "pk"})
    key = {"pk": {"S": "A"}, "sk": {"S": "1"}}
    meter.record({"TableName": "t", "Key": key}, "GetItem")
    meter.record({"TableName": "t", "Item": key}, "PutItem")
    meter.record(
        {
            "TableName": "t",
            "KeyConditionExpression": "#k = :v AND begins_with(sk, :p)",
            "ExpressionAttributeNames": {"#k": "pk"},
            "ExpressionAttributeValues": {":v": {"S": "A"}, ":p": {"S": "x"}},
        },
        "Query",
    )
    meter.record(
        {"RequestItems": {"t": [{"PutRequest": {"Item": key}}, {"DeleteRequest": {"Key": key}}]}},
        "BatchWriteItem",
    )
    meter.record({"RequestItems": {"t": {"Keys": [key, {"pk": {"S": "B"}}]}}}, "BatchGetItem")
    meter.record(
        {
            "TransactItems": [
                {"Update": {"TableName": "t", "Key": key}},
                {"Put": {"TableName": "t", "Item": key}},
            ]
        },
        "TransactWriteItems",
    )
    insert = {
        "Statement": """INSERT INTO "t" VALUE {'sk': ?, 'pk': ?}""",
        "Parameters": [key["sk"], key["pk"]],
    }
    meter.record({"Statements": [insert, insert]}, "BatchExecuteStatement")  # putIfAbsent
    assert meter.keys("t") == {"A": 10, "B": 1}
    assert meter.busiest_second("t")[0] == "A"


def test_fifty_shards_adding_to_one_counter_load_the_exact_sum(tmp_path: Path) -> None:
    """Issue 42 item 5, through the state machine: every record of 50+ shards adds to one key, the
    emulator cancels a transaction on an item another holds (TransactionConflict, as DynamoDB);
    the job succeeds, every record written once, the counter the exact sum."""
    rows = 6000
    source = tmp_path / "adds.csv"
    source.write_text("n\n" + "".join(f"{i % 7 + 1}\n" for i in range(rows)))
    spec = {
        "format": "csv",
        "jobId": "hot-counter",
        "dynamodb": {
            "key": {"pk": "COUNTER", "sk": "ALL"},
            "writeMode": "update",
            "attributes": {"total": {"field": "n", "type": "N", "update": "add"}},
        },
        "shardSizeMiB": 0.0002,
        "maxConcurrency": 50,
    }
    stored: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        db = emu.client("dynamodb")
        key = {"pk": {"S": "COUNTER"}, "sk": {"S": "ALL"}}
        stored.update(db.get_item(TableName=deployment.output("TableName"), Key=key)["Item"])

    report = run_local(source, spec, report_path=tmp_path / "r.json", quiet=True, inspect=inspect)
    assert report["status"] == "SUCCEEDED", report.get("error")
    assert report["shards"]["total"] >= 50
    assert (report["records"]["written"], report["records"]["skipped"]) == (rows, 0)
    assert stored["total"] == {"N": str(sum(i % 7 + 1 for i in range(rows)))}
