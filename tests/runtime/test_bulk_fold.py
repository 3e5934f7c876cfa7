"""dynamodb.engine bulkPutItems, Finalize's fold-back (issue 46, item 4): the service's ERROR entries
become rejects with their source lines and reason, CONDITION_CHECK_FAILURE entries skips; the
counts reconcile (read = written + skipped + rejected, every line accounted for); after a FAILED
or CANCELLED operation the report says "at most" and claims no reconciliation.

The service's output is given as ReportedItems built here (the reader of the real output is the
emulator's model writes, tests/e2e/test_bulk_put_run.py: `logic/bulk_output.py read_output`,
called once in `reports/bulk_put.py reported_items`, is patched here)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import boto3
import pytest
from pipeline_support import REGION

from adapters.ledger import Ledger
from adapters.s3 import S3Store
from logic import bulk_output, bulk_put, layout
from logic.bulk_output import ReportedItem
from logic.bulk_sidecar import Sidecar, TextPosition
from mapload.reports import report_lines
from reports import bulk_put as folding
from reports.service import finalize

pytestmark = pytest.mark.runtime

JOB, RUN, PLAN = "job-1", "run-1", "plan-a"
ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/target/bulk-operation/0123456789abcdef"
KEY = {"pk": "S", "sk": "S"}
SOURCE = "s3://src/people.csv"


class Settings:
    staging_bucket = "stg"
    table_name = "target"
    table_arn = "arn:aws:dynamodb:us-east-1:123456789012:table/target"
    worker_timeout_seconds = 900


def _item(n: int) -> dict[str, Any]:
    return {"pk": {"S": f"P#{n}"}, "sk": {"S": "X"}, "name": {"S": f"n{n}"}}


def _stage(s3: Any, index: int, numbers: list[int], first_line: int) -> str:
    """A shard's staged object (gzip DynamoDB JSON Lines) and its sidecar: record k of it is the
    shard's line k + 1, the source's line first_line + k (one line each, 10 bytes)."""
    key = layout.bulk_items_key(JOB, PLAN, index)
    body = "".join(json.dumps({"Item": _item(n)}) + "\n" for n in numbers).encode()
    s3.put_object(Bucket="stg", Key=key, Body=gzip.compress(body))
    sidecar = Sidecar(SOURCE)
    for k in range(len(numbers)):
        sidecar.add(TextPosition(shard_line=1 + k, lines=1, offset=10 * (first_line + k), length=10))
    s3.put_object(Bucket="stg", Key=layout.bulk_lines_key(key), Body=sidecar.encode())
    return key


def _setup(s3: Any, ledger: Ledger) -> list[str]:
    """Two shards of one object: shard 0 read 5 records (1 rejected by mapload, 4 staged, lines
    1-5), shard 1 read 3 (3 staged, lines 6-8)."""
    keys = [_stage(s3, 0, [1, 2, 3, 4], 1), _stage(s3, 1, [5, 6, 7], 6)]
    counts = [
        {
            "read": 5,
            "written": 4,
            "staged": 4,
            "rejected": 1,
            "lines": 5,
            "recordLines": 5,
            "rejectedLines": 1,
        },
        {
            "read": 3,
            "written": 3,
            "staged": 3,
            "rejected": 0,
            "lines": 3,
            "recordLines": 3,
            "rejectedLines": 0,
        },
    ]
    for index, body in enumerate(counts):
        body |= {"skipped": 0, "ignoredLines": 0, "byReason": {"bad_number": 1} if index == 0 else {}}
        ledger.record_shard(JOB, PLAN, index, {**body, "bulkKeys": [keys[index]], "runId": RUN})
    manifest = [{"index": i, "bucket": "src", "key": "people.csv", "lineBase": 0} for i in range(2)]
    s3.put_object(Bucket="stg", Key=layout.manifest_key(JOB, RUN), Body=json.dumps(manifest).encode())
    return keys


@pytest.fixture
def ledger(aws: Any) -> Ledger:
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 7)
    ledger.start_job(JOB, RUN, "exec-1", 2)
    return ledger


def _state(status: str, **bulk: Any) -> dict[str, Any]:
    spec = {
        "source": SOURCE,
        "format": "csv",
        "maxRejectedPercent": 100,
        "dynamodb": {"engine": "bulkPutItems", "key": {"pk": "P#{id}", "sk": "X"}},
    }
    job = {"jobId": JOB, "runId": RUN, "planId": PLAN, "spec": spec, "tableKey": KEY}
    plan = {"job": job, "manifestKey": layout.manifest_key(JOB, RUN), "shardCount": 2, "bulkPut": True}
    answer = bulk_put.answer(
        {"BulkOperationArn": ARN, "BulkOperationStatus": status, "ProcessedItemCount": 7},
        staged_objects=2,
        started_at=1000,
        deadline=5000,
        pending=False,
    )
    return {"plan": plan, "bulkPut": {**answer, **bulk}}


def _run(state: dict[str, Any], s3: Any, ledger: Ledger) -> dict[str, Any]:
    answer = finalize({"state": state, "execution": {"name": RUN}}, Settings(), S3Store(s3), ledger)
    return dict(answer["report"])


def test_errors_are_rejects_with_their_lines_and_condition_failures_skips(
    aws: Any, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = _setup(aws, ledger)
    reported = [
        # By record index: shard 0's record 1 is line 2.
        ReportedItem(
            "ERROR", "Item size has exceeded the maximum allowed size", keys[0], 1, code="ValidationError"
        ),
        # By the item's key only: shard 1's record 2 (item 7) is line 8.
        ReportedItem("ERROR", "One or more parameter values were invalid", keys[1], item=_item(7)),
        # The same record again, about the whole object? No: a condition failure of another one.
        ReportedItem("CONDITION_CHECK_FAILURE", "The conditional request failed", keys[0], 3, item=_item(4)),
    ]
    monkeypatch.setattr(bulk_output, "read_output", lambda keys, get, arn: reported)
    result = _run(_state("COMPLETED_WITH_ERRORS"), aws, ledger)
    assert result["status"] == "SUCCEEDED", result["error"]
    records = result["records"]
    assert records == {"read": 8, "written": 4, "skipped": 1, "rejected": 3, "duplicates": 0}
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
    lines = result["lines"]
    assert lines == {"total": 8, "accepted": 5, "rejected": 3, "ignored": 0}
    assert result["rejects"]["byReason"] == {"bad_number": 1, "bulk_put_error": 2}
    section = result["bulkPut"]
    assert section["operationArn"] == ARN and section["status"] == "COMPLETED_WITH_ERRORS"
    assert (section["staged"], section["written"], section["errors"], section["conditionFailures"]) == (
        7,
        4,
        2,
        1,
    )
    assert section["exact"] is True and section["note"] is None
    assert section["counters"]["processedItems"] == 7
    merged = aws.get_object(Bucket="stg", Key=layout.rejects_key(JOB, RUN))["Body"].read().decode()
    service = [json.loads(line) for line in merged.splitlines() if "bulk_put_error" in line]
    assert [(r["line"], r["offset"]) for r in service] == [(2, 20), (8, 80)]
    assert service[0]["reason"] == "ValidationError: Item size has exceeded the maximum allowed size"
    assert result["skipped"]["sample"] == [{"pk": {"S": "P#4"}, "sk": {"S": "X"}}]
    assert (ledger.get_job(JOB) or {})["status"] == "SUCCEEDED"
    assert f"  bulk put  COMPLETED_WITH_ERRORS · written 4 · errors 2 · condition failures 1 · {ARN}" in (
        report_lines(result)
    )


def test_an_entry_about_a_whole_object_rejects_each_of_its_records_once(aws: Any, ledger: Ledger) -> None:
    keys = _setup(aws, ledger)
    staged = folding.StagedObjects(S3Store(aws), "stg", ledger.shards(JOB, PLAN, 2), KEY)
    reported = [
        ReportedItem("ERROR", "Unexpected token", keys[1], whole_object=True),
        ReportedItem("ERROR", "Unexpected token", keys[1], 0),  # already in the whole object's
    ]
    folded, unplaced = folding.fold(reported, staged)
    assert unplaced == 0 and list(folded.rejects) == [1]
    assert [r["shardLine"] for r in folded.rejects[1]] == [1, 2, 3]
    counts = folding.folded_counts(ledger.shards(JOB, PLAN, 2)[1], folded, 1)
    assert (counts["written"], counts["rejected"], counts["rejectedLines"]) == (0, 3, 3)
    assert counts["read"] == counts["written"] + counts["skipped"] + counts["rejected"]


def test_an_entry_naming_no_staged_record_fails_the_reconciliation(
    aws: Any, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = _setup(aws, ledger)
    reported = [ReportedItem("ERROR", "invalid", keys[0], item=_item(99))]
    monkeypatch.setattr(bulk_output, "read_output", lambda keys, get, arn: reported)
    result = _run(_state("COMPLETED_WITH_ERRORS"), aws, ledger)
    assert result["status"] == "FAILED" and result["error"]["type"] == "ReconciliationError"
    assert ARN in result["error"]["message"]


@pytest.mark.parametrize("status", ["FAILED", "CANCELLED"])
def test_after_a_failed_or_cancelled_operation_the_report_says_at_most_and_claims_no_reconciliation(
    aws: Any, ledger: Ledger, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(aws, ledger)

    def unread(*_: Any) -> list[ReportedItem]:
        raise AssertionError("the output is not read after an inexact end")

    monkeypatch.setattr(bulk_output, "read_output", unread)
    failure = {"code": "InternalFailure", "message": "the operation failed"}
    result = _run(_state(status, failure=failure), aws, ledger)
    assert result["status"] == "FAILED"
    assert result["error"]["type"] == "BulkPutFailedError" and result["error"]["where"] == "BulkPut"
    assert ARN in result["error"]["message"] and status in result["error"]["message"]
    section = result["bulkPut"]
    assert section["exact"] is False and section["written"] is None and section["writtenAtMost"] == 7
    assert "at most 7" in section["note"] and "no reconciliation" in section["note"]
    assert any(
        line.startswith(f"  bulk put  {status} · written at most 7 · ") for line in report_lines(result)
    )
    # Not recorded as loaded: a re-run hands the staged items off again.
    assert ledger.plan_record(JOB, PLAN).get("loaded") is None


def test_an_output_that_cannot_be_read_fails_the_run_in_its_report(aws: Any, ledger: Ledger) -> None:
    """No manifest under the output prefix (nothing patched: the real reader). Finalize still
    writes the report (a Finalize that raised would leave none)."""
    _setup(aws, ledger)
    result = _run(_state("COMPLETED"), aws, ledger)
    assert result["status"] == "FAILED" and result["error"]["type"] == "OutputError"
    assert (
        result["error"]["where"] == "Finalize"
        and "no manifest of bulk operation" in result["error"]["message"]
    )
    section = result["bulkPut"]
    assert section["exact"] is False and section["written"] is None
    assert "output could not be read" in section["note"]


def test_an_operation_still_cancelling_at_the_deadline_keeps_the_job_held(aws: Any, ledger: Ledger) -> None:
    _setup(aws, ledger)
    error = {
        "type": "BulkPutFailedError",
        "message": f"bulk put operation {ARN} was still IN_PROGRESS at its deadline",
    }
    result = _run(_state("CANCELLING", error=error), aws, ledger)
    assert result["status"] == "FAILED" and result["error"]["message"] == error["message"]
    held = ledger.get_job(JOB) or {}
    assert held["status"] == "RUNNING" and held["runId"] == RUN


def test_a_start_that_failed_for_good_is_reported_where_it_happened(aws: Any, ledger: Ledger) -> None:
    _setup(aws, ledger)
    state = _state("IN_PROGRESS")
    del state["bulkPut"]
    state["bulkPutError"] = {
        "Error": "BulkPutRefusedError",
        "Cause": json.dumps(
            {"errorType": "BulkPutRefusedError", "errorMessage": "table target is not ACTIVE"}
        ),
    }
    result = _run(state, aws, ledger)
    assert result["error"] == {
        "type": "BulkPutRefusedError",
        "message": "table target is not ACTIVE",
        "where": "BulkPut",
    }
    section = result["bulkPut"]
    assert section["status"] == "NOT_STARTED" and section["operationArn"] is None
    assert section["written"] is None and section["writtenAtMost"] == 7 and "did not start" in section["note"]
