"""Plan refuses a bulkPutItems job, in one line, where bulk put items cannot start: a table not ACTIVE,
an index being built, a global table, more staged objects than one operation reads, a write
budget under MaxWriteRequestUnits' minimum (logic/bulk_items.py, plans/service.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import boto3
import pytest
from pipeline_support import ENV, REGION

from adapters.ledger import Ledger
from adapters.s3 import S3Store
from handlers.settings import PlanSettings
from logic import bulk_items
from logic.errors import InputValidationError
from plans.service import plan

pytestmark = pytest.mark.runtime

ACTIVE: dict[str, Any] = {
    "TableName": "target",
    "TableStatus": "ACTIVE",
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ],
}
JOB: dict[str, Any] = {
    "source": "s3://src/a.csv",
    "format": "csv",
    "jobId": "bulk",
    "dynamodb": {"key": {"pk": "P#{postcode}", "sk": "LOC"}, "engine": "bulkPutItems"},
}


def _plan(aws: Any, table: Mapping[str, Any] | None = ACTIVE, **given: Any) -> dict[str, Any]:
    aws.put_object(Bucket="src", Key="a.csv", Body=b"postcode\n" + b"AB1 1CD\n" * 200)
    db = boto3.client("dynamodb", region_name=REGION)
    described: list[str] = []

    def describe(name: str) -> Mapping[str, Any] | None:
        described.append(name)
        return table

    done = plan(
        {"input": {**JOB, **given}, "execution": {"name": "run-1", "id": "arn:run-1"}},
        PlanSettings.from_env(ENV),
        S3Store(boto3.client("s3", region_name=REGION)),
        Ledger(db, "ledger", 7),
        describe=describe,
    )
    assert described == ["target"]  # the environment's own table is described too
    return done


def _refused(aws: Any, table: Mapping[str, Any] | None = ACTIVE, **given: Any) -> InputValidationError:
    with pytest.raises(InputValidationError) as caught:
        _plan(aws, table, **given)
    assert "\n" not in str(caught.value)
    return caught.value


def test_an_active_table_plans(aws: Any) -> None:
    done = _plan(aws, writeUnitsPerSecond=1024)
    assert done["shardCount"] == 1 and "shardTime" not in done  # the Workers write nothing: no pacing


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (None, "does not exist"),
        ({**ACTIVE, "TableStatus": "UPDATING"}, "is UPDATING, not ACTIVE"),
        (
            {**ACTIVE, "GlobalSecondaryIndexes": [{"IndexName": "byName", "IndexStatus": "CREATING"}]},
            "building index byName",
        ),
        (
            {
                **ACTIVE,
                "GlobalSecondaryIndexes": [{"IndexName": "g", "IndexStatus": "ACTIVE", "Backfilling": True}],
            },
            "building index g",
        ),
        ({**ACTIVE, "Replicas": [{"RegionName": "eu-west-1"}]}, "global table (replicas in eu-west-1)"),
        ({**ACTIVE, "GlobalTableVersion": "2017.11.29"}, "global table"),
    ],
)
def test_a_table_bulk_put_items_cannot_start_on_is_refused(aws: Any, table: Any, words: str) -> None:
    error = _refused(aws, table)
    assert error.field == "dynamodb.engine" and words in error.message
    assert error.message.startswith("bulkPutItems: table 'target'")


def test_a_built_index_is_no_refusal(aws: Any) -> None:
    _plan(aws, {**ACTIVE, "GlobalSecondaryIndexes": [{"IndexName": "g", "IndexStatus": "ACTIVE"}]})


def test_a_write_budget_under_the_minimum_is_refused(aws: Any) -> None:
    error = _refused(aws, writeUnitsPerSecond=1023)
    assert error.field == "writeUnitsPerSecond" and "1,024" in error.message


def test_more_staged_objects_than_one_operation_reads_are_refused(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk_items, "MAX_OBJECTS", 3)
    error = _refused(aws, shardSizeMiB=0.0005)
    assert (
        error.field == "dynamodb.engine"
        and "more than the 3 one bulk put items operation reads" in error.message
    )


def test_a_dry_run_stages_nothing_and_is_not_refused_for_the_table(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=b"postcode\nAB1 1CD\n")
    done = plan(
        {"input": {**JOB, "dryRun": True}, "execution": {"name": "run-1", "id": "arn:run-1"}},
        PlanSettings.from_env(ENV),
        S3Store(boto3.client("s3", region_name=REGION)),
        Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 7),
        describe=lambda name: {**ACTIVE, "Replicas": [{"RegionName": "x"}]},
    )
    assert done["shardCount"] == 1


def test_the_object_count_is_what_the_workers_stage_at_most() -> None:
    assert bulk_items.staged_objects([]) == 0
    with pytest.raises(InputValidationError, match="50,001 objects"):
        bulk_items.check_objects(50_001)
    bulk_items.check_objects(50_000)
    assert json.dumps(bulk_items.MIN_WRITE_REQUEST_UNITS) == "1024"


def test_a_bulk_shard_is_no_larger_than_the_worker_holds_of_its_staged_items(aws: Any) -> None:
    largest = bulk_items.max_shard_mib(1024)  # ENV's WORKER_MEMORY_MIB
    assert 0 < largest < 64
    error = _refused(aws, shardSizeMiB=largest + 1)
    assert error.field == "shardSizeMiB" and f"at most {largest}" in error.message
    assert "worker_memory_mib 1024" in error.message
    _plan(aws, shardSizeMiB=largest)


def test_a_bulk_job_without_a_shard_size_gets_the_largest_the_worker_holds() -> None:
    from logic.spec.checks import check_shard_memory, fit_shard_size
    from logic.spec.parse import parse_spec

    spec = parse_spec(JOB, table_key={"pk": "S", "sk": "S"})
    fitted = fit_shard_size(spec, worker_memory_mib=1024)
    assert fitted.shard_size_mib == bulk_items.max_shard_mib(1024)
    check_shard_memory(fitted, worker_memory_mib=1024)
    big = fit_shard_size(spec, worker_memory_mib=10240)
    assert big.shard_size_mib == 64  # the default, when the Worker holds more
