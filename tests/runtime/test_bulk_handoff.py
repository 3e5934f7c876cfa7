"""dynamodb.engine bulkPutItems, the hand-off after the Map (issue 46, item 3): StartBulkPut checks
the staged items against what the shards recorded and starts one operation per run, PollBulkPut
follows it to its end or deadline, and a takeover or release of the job cancels it first.

The ledger and staging are moto's; the bulk put items calls go to a botocore Stubber, which
checks every request and answer against botocore's service model (dynamodb 2012-08-10)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from pipeline_support import REGION

from adapters.bulk_puts import BulkOperations
from adapters.ledger import Ledger
from adapters.s3 import S3Store
from bulk_puts.poll import poll
from bulk_puts.start import start
from logic import bulk_put, layout
from logic.errors import BulkPutInputError, JobAlreadyRunningError

pytestmark = pytest.mark.runtime

JOB, RUN, PLAN = "job-1", "run-1", "plan-a"
ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/target/bulk-operation/0123456789abcdef"
SPEC = {
    "format": "csv",
    "writeUnitsPerSecond": 2048.0,
    "dynamodb": {"engine": "bulkPutItems", "key": {"pk": "{a}", "sk": "{b}"}},
}


class Settings:
    staging_bucket = "stg"
    table_name = "target"
    data_key_arn: str | None = None
    bulk_put_timeout_minutes = 60


def _job(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jobId": JOB, "runId": RUN, "planId": PLAN, "spec": spec or SPEC}


def _description(status: str = "IN_PROGRESS", **more: Any) -> dict[str, Any]:
    return {"BulkOperationArn": ARN, "BulkOperationStatus": status, **more}


@pytest.fixture
def ledger(aws: Any) -> Ledger:
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 7)
    ledger.start_job(JOB, RUN, "arn:aws:states:us-east-1:1:execution:sm:run-1", 2)
    return ledger


@pytest.fixture
def stubbed() -> Iterator[tuple[BulkOperations, Stubber]]:
    client = boto3.client("dynamodb", region_name=REGION)
    with Stubber(client) as stubber:
        yield BulkOperations(client), stubber
        stubber.assert_no_pending_responses()


def _stage(s3: Any, ledger: Ledger, shards: int = 2) -> list[str]:
    """Each shard stages one object and records its key, as the Worker does."""
    keys = []
    for index in range(shards):
        key = layout.bulk_items_key(JOB, PLAN, index)
        s3.put_object(Bucket="stg", Key=key, Body=b"x")
        ledger.record_shard(JOB, PLAN, index, {"read": 1, "staged": 1, "bulkKeys": [key], "runId": RUN})
        keys.append(key)
    return keys


def test_start_deletes_leftovers_starts_once_and_records_the_operation(
    aws: Any, ledger: Ledger, stubbed: tuple[BulkOperations, Stubber]
) -> None:
    operations, stubber = stubbed
    keys = _stage(aws, ledger)
    # A crashed attempt's part that no shard record names: the service would load it.
    leftover = layout.bulk_items_key(JOB, PLAN, 1, 1)
    aws.put_object(Bucket="stg", Key=leftover, Body=b"stale")
    expected = {
        "ClientToken": bulk_put.client_token(JOB, RUN),
        "InputS3Configuration": {
            "S3Bucket": "stg",
            "S3KeyPrefix": f"jobs/{JOB}/{PLAN}/bulk/items/",
            "InputFormat": "DYNAMODB_JSON",
            "InputCompressionType": "GZIP",
        },
        "OutputS3Configuration": {
            "S3Bucket": "stg",
            "S3KeyPrefix": f"jobs/{JOB}/{RUN}/bulk-output/",
            "OutputType": ["ERROR", "CONDITION_CHECK_FAILURE"],
        },
        "TableName": "target",
        "PerformanceTier": "STANDARD",
        "MaxWriteRequestUnits": 2048,
    }
    stubber.add_response("start_bulk_put_items", {"BulkOperationDescription": _description()}, expected)
    answer = start(
        {"job": _job(), "shardCount": 2}, Settings(), operations, ledger, S3Store(aws), lambda: 1000.0
    )
    assert answer["operationArn"] == ARN and answer["pending"] is True and answer["stagedObjects"] == 2
    assert answer["deadline"] == 1000 + 3600
    listed = {o["Key"] for o in aws.list_objects_v2(Bucket="stg", Prefix=f"jobs/{JOB}/")["Contents"]}
    assert leftover not in listed and set(keys) <= listed
    held = ledger.get_job(JOB) or {}
    assert held["bulkOperationArn"] == ARN and held["bulkRunId"] == RUN
    # A retried StartBulkPut after the record: the same operation described, never a second start.
    stubber.add_response(
        "describe_bulk_operation", {"BulkOperationDescription": _description()}, {"BulkOperationArn": ARN}
    )
    again = start(
        {"job": _job(), "shardCount": 2}, Settings(), operations, ledger, S3Store(aws), lambda: 1010.0
    )
    assert again["operationArn"] == ARN and again["stagedObjects"] == 2


def test_start_with_the_data_key_encrypts_the_output_and_omits_an_absent_budget(
    aws: Any, ledger: Ledger, stubbed: tuple[BulkOperations, Stubber]
) -> None:
    operations, stubber = stubbed
    _stage(aws, ledger)
    settings = Settings()
    settings.data_key_arn = "arn:aws:kms:us-east-1:123456789012:key/1234"
    spec = {k: v for k, v in SPEC.items() if k != "writeUnitsPerSecond"}
    spec["dynamodb"] = {**SPEC["dynamodb"], "performanceTier": "ACCELERATED"}  # type: ignore[dict-item]
    request = bulk_put.start_request(
        job_id=JOB,
        run_id=RUN,
        plan_id=PLAN,
        bucket="stg",
        table="target",
        spec=spec,
        data_key_arn=settings.data_key_arn,
    )
    assert "MaxWriteRequestUnits" not in request and request["PerformanceTier"] == "ACCELERATED"
    assert request["OutputS3Configuration"]["S3SseAlgorithm"] == "KMS"
    stubber.add_response("start_bulk_put_items", {"BulkOperationDescription": _description()}, request)
    start({"job": _job(spec), "shardCount": 2}, settings, operations, ledger, S3Store(aws))


def test_start_refuses_when_a_recorded_object_is_missing(
    aws: Any, ledger: Ledger, stubbed: tuple[BulkOperations, Stubber]
) -> None:
    operations, _ = stubbed
    keys = _stage(aws, ledger)
    aws.delete_object(Bucket="stg", Key=keys[1])
    with pytest.raises(
        BulkPutInputError, match=r"1 staged objects the shards recorded are missing .*000001-000"
    ):
        start({"job": _job(), "shardCount": 2}, Settings(), operations, ledger, S3Store(aws))
    assert "bulkOperationArn" not in (ledger.get_job(JOB) or {})


def test_start_with_nothing_staged_starts_nothing(
    aws: Any, ledger: Ledger, stubbed: tuple[BulkOperations, Stubber]
) -> None:
    operations, _ = stubbed
    for index in range(2):  # every record rejected: no staged object
        ledger.record_shard(
            JOB, PLAN, index, {"read": 1, "rejected": 1, "staged": 0, "bulkKeys": [], "runId": RUN}
        )
    answer = start({"job": _job(), "shardCount": 2}, Settings(), operations, ledger, S3Store(aws))
    assert answer["operationArn"] is None and answer["status"] == bulk_put.NOTHING_STAGED
    assert answer["pending"] is False


def _polled(status: str = "IN_PROGRESS") -> dict[str, Any]:
    return bulk_put.answer(_description(status), staged_objects=2, started_at=1000, deadline=1000 + 3600)


def test_poll_waits_while_running_and_ends_with_the_counters(stubbed: tuple[BulkOperations, Stubber]) -> None:
    operations, stubber = stubbed
    stubber.add_response(
        "describe_bulk_operation", {"BulkOperationDescription": _description()}, {"BulkOperationArn": ARN}
    )
    running = poll({"bulkPut": _polled()}, operations, lambda: 1100.0)
    assert running["pending"] is True and 1 <= running["waitSeconds"] <= 3600
    done = _description(
        "COMPLETED_WITH_ERRORS",
        ProcessedItemCount=10,
        FailedItemCount=2,
        ProcessedInputBytes=500,
        TotalInputBytes=500,
        StartTime=datetime(2026, 12, 1, tzinfo=UTC),
    )
    stubber.add_response(
        "describe_bulk_operation", {"BulkOperationDescription": done}, {"BulkOperationArn": ARN}
    )
    ended = poll({"bulkPut": running}, operations, lambda: 1200.0)
    assert ended["pending"] is False and ended["status"] == "COMPLETED_WITH_ERRORS"
    assert ended["counters"] == {
        "processedItems": 10,
        "failedItems": 2,
        "processedInputBytes": 500,
        "totalInputBytes": 500,
    }
    assert ended["error"] is None


def test_poll_past_the_deadline_cancels_and_fails_naming_the_operation(
    stubbed: tuple[BulkOperations, Stubber],
) -> None:
    operations, stubber = stubbed
    stubber.add_response(
        "describe_bulk_operation", {"BulkOperationDescription": _description()}, {"BulkOperationArn": ARN}
    )
    stubber.add_response(
        "cancel_bulk_operation",
        {"BulkOperationArn": ARN, "BulkOperationStatus": "CANCELLING"},
        {"BulkOperationArn": ARN},
    )
    late = poll({"bulkPut": _polled()}, operations, lambda: 1000.0 + 3601)
    assert late["pending"] is False and late["status"] == "CANCELLING"
    assert late["error"]["type"] == "BulkPutFailedError"
    assert ARN in late["error"]["message"] and "\n" not in late["error"]["message"]


def test_a_takeover_cancels_a_running_operation_first_and_the_job_stays_held(
    aws: Any, ledger: Ledger, stubbed: tuple[BulkOperations, Stubber]
) -> None:
    operations, stubber = stubbed
    ledger.record_bulk_operation(JOB, RUN, ARN, 2)
    settled = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 7, settle=operations.settle)
    stubber.add_response(
        "describe_bulk_operation", {"BulkOperationDescription": _description()}, {"BulkOperationArn": ARN}
    )
    stubber.add_response(
        "cancel_bulk_operation",
        {"BulkOperationArn": ARN, "BulkOperationStatus": "CANCELLING"},
        {"BulkOperationArn": ARN},
    )
    with pytest.raises(
        JobAlreadyRunningError, match=f"held by bulk put operation {re.escape(ARN)}, CANCELLING"
    ):
        settled.start_job(JOB, "run-2", "exec-2", 2, ended=lambda _: True)
    # `mapload release` likewise, while it still cancels.
    stubber.add_response(
        "describe_bulk_operation",
        {"BulkOperationDescription": _description("CANCELLING")},
        {"BulkOperationArn": ARN},
    )
    with pytest.raises(JobAlreadyRunningError, match="CANCELLING"):
        settled.release_job(JOB, lambda _: True)
    assert (ledger.get_job(JOB) or {})["runId"] == RUN
    # Once the operation has ended, the job is taken over (and the new claim drops the record).
    stubber.add_response(
        "describe_bulk_operation",
        {"BulkOperationDescription": _description("CANCELLED")},
        {"BulkOperationArn": ARN},
    )
    settled.start_job(JOB, "run-2", "exec-2", 2, ended=lambda _: True)
    taken = ledger.get_job(JOB) or {}
    assert taken["runId"] == "run-2" and "bulkOperationArn" not in taken


def test_client_token_is_one_per_run_and_fits_the_model() -> None:
    token = bulk_put.client_token(JOB, RUN)
    assert token == bulk_put.client_token(JOB, RUN) != bulk_put.client_token(JOB, "run-2")
    assert re.fullmatch(r"[^$]+", token)


def test_bulk_engine_reads_a_parsed_or_normalized_spec() -> None:
    class Target:
        engine = "bulkPutItems"

    class Spec:
        dynamodb = Target()

    assert bulk_put.bulk_engine(SPEC) and bulk_put.bulk_engine(Spec())
    assert not bulk_put.bulk_engine({"dynamodb": {"key": {}}}) and not bulk_put.bulk_engine({"graph": {}})
    # A dry run stages and writes nothing: no hand-off, no operation in its report.
    assert bulk_put.hands_off(SPEC) and not bulk_put.hands_off({**SPEC, "dryRun": True})
