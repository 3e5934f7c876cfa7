"""Finalize at the largest plan the input allows (100,000 shards): its memory, its output (what
the state machine keeps of it) and the merged rejects streamed to moto's S3 in parts.

The ledger's 100,000 items are served from memory, exactly as the adapter parses them: moto's
DynamoDB Query re-reads the whole partition per page (12 minutes here; DynamoDB pages it in
seconds), which would measure moto rather than Finalize."""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import Any

import boto3
import pytest
from pipeline_support import ENV, REGION

from adapters.s3 import PART_BYTES, S3Store
from handlers import plan
from handlers.settings import FinalizeSettings
from logic import layout
from logic.planning import DEFAULT_MAX_SHARDS
from reports import service as reports_service

pytestmark = [pytest.mark.runtime, pytest.mark.slow]

# Step Functions' state payload limit: Finalize's result (status, report, ...) lands in state.
STATE_PAYLOAD_BYTES = 256 * 1024
# What Finalize may allocate in Python at 100,000 shards: well inside finalize_memory_mib (1024).
PEAK_BUDGET_BYTES = 512 * 1024 * 1024
SHARDS_WITH_REJECTS = 200
REJECTS_PER_SHARD = 500


class MemoryLedger:
    """The Ledger calls Finalize makes, over items stored as the ledger stores them (JSON)."""

    def __init__(self) -> None:
        self.items: dict[int, str] = {}
        self.finished: list[tuple[str, str, str]] = []

        self.failures: dict[int, str] = {}

    def shards(self, job_id: str, plan_id: str, count: int) -> dict[int, dict[str, Any]]:
        return {index: json.loads(counts) for index, counts in self.items.items()}

    def shard_failures(self, job_id: str, plan_id: str, indices: Any) -> dict[int, dict[str, Any]]:
        wanted = set(indices)
        return {index: json.loads(body) for index, body in self.failures.items() if index in wanted}

    def finish_job(self, job_id: str, run_id: str, status: str, *, writers_until: int | None = None) -> None:
        self.finished.append((job_id, run_id, status))

    def record_loaded(self, job_id: str, plan_id: str, generation: int, loaded: Any) -> None:
        self.loaded = loaded

    def get_job(self, job_id: str) -> None:
        return None  # no other run holds it


def test_finalize_reconciles_100000_shards_within_its_memory_and_payload_limits(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=b"postcode,lat\nAB1 1CD,1.5\n")
    planned = plan.handle(
        {
            "input": {
                "format": "csv",
                "source": "s3://src/a.csv",
                "jobId": "big",
                "dynamodb": {"key": {"pk": "P#{postcode}", "sk": "LOC"}},
                "maxRejectedPercent": 100,
            },
            "execution": {"name": "run-1", "id": "arn:run-1"},
        },
        ENV,
    )
    (template,) = json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    shards = DEFAULT_MAX_SHARDS
    manifest = [{**template, "index": i, "start": i * 10, "end": (i + 1) * 10} for i in range(shards)]
    aws.put_object(Bucket="stg", Key=planned["manifestKey"], Body=json.dumps(manifest).encode())
    rejected_shards = set(range(0, shards, shards // SHARDS_WITH_REJECTS))
    line = {"source": "s3://src/a.csv", "offset": 0, "code": "bad_number", "reason": "lat: not a number"}
    for index in rejected_shards:
        body = b"".join(
            json.dumps({**line, "shardLine": n, "raw": f"AB{n} 1CD,north" + "x" * 100}).encode() + b"\n"
            for n in range(1, REJECTS_PER_SHARD + 1)
        )
        aws.put_object(Bucket="stg", Key=layout.shard_rejects_key("big", "run-1", index), Body=body)
    ledger = MemoryLedger()
    for first in range(0, shards, 25):
        for index in range(first, min(first + 25, shards)):
            rejected = REJECTS_PER_SHARD if index in rejected_shards else 0
            counts = {
                "read": 2 + rejected,
                "written": 2,
                "rejected": rejected,
                "lines": 2 + rejected,
                "duplicates": 0,
                "bytes": 10,
                "byReason": {"bad_number": rejected} if rejected else {},
                "sample": [{**line, "shardLine": 1, "raw": "AB1 1CD,north"}] * min(rejected, 3),
                "rejectsKey": layout.shard_rejects_key("big", "run-1", index) if rejected else None,
                "graphStaged": 0,
                "runId": "run-1",
            }
            ledger.items[index] = json.dumps(counts)

    tracemalloc.start()
    started = time.monotonic()
    event = {"state": {"plan": planned}, "execution": {"name": "run-1"}}
    store = S3Store(boto3.client("s3", region_name=REGION))
    result = reports_service.finalize(event, FinalizeSettings.from_env(ENV), store, ledger)  # type: ignore[arg-type]
    seconds = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"\nFinalize at {shards:,} shards: {seconds:.1f} s, Python peak {peak / 2**20:.1f} MiB")

    assert result["status"] == "SUCCEEDED", result["cause"]
    assert ledger.finished == [("big", "run-1", "SUCCEEDED")]
    assert result["report"]["shards"]["done"] == shards
    assert result["report"]["records"]["rejected"] == SHARDS_WITH_REJECTS * REJECTS_PER_SHARD
    # What the state machine keeps of it (FinalizeTask's ResultSelector) stays a small payload.
    kept = {k: result.get(k) for k in ("status", "jobId", "report", "reportUri", "error", "cause")}
    assert len(json.dumps(kept).encode()) < STATE_PAYLOAD_BYTES
    assert peak < PEAK_BUDGET_BYTES
    # The merged rejects went up in parts: bigger than one part, never held whole.
    bucket, key = result["report"]["rejects"]["location"][5:].split("/", 1)
    head = aws.head_object(Bucket=bucket, Key=key)
    assert head["ContentLength"] > PART_BYTES
    assert "-" in head["ETag"]  # a multipart object


def test_finalize_reports_100000_failed_shards_causes_within_the_payload_limit(aws: Any) -> None:
    """Every shard failed, each recording a long cause (DynamoDB's message can be long; a
    character may cost 6 bytes of JSON): the report lists the first few, clipped, and Finalize's
    result still fits a state."""
    aws.put_object(Bucket="src", Key="a.csv", Body=b"postcode,lat\nAB1 1CD,1.5\n")
    planned = plan.handle(
        {
            "input": {
                "format": "csv",
                "source": "s3://src/a.csv",
                "jobId": "failing",
                "dynamodb": {"key": {"pk": "P#{postcode}", "sk": "LOC"}},
            },
            "execution": {"name": "run-1", "id": "arn:run-1"},
        },
        ENV,
    )
    (template,) = json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    shards = DEFAULT_MAX_SHARDS
    manifest = [{**template, "index": i, "start": i * 10, "end": (i + 1) * 10} for i in range(shards)]
    aws.put_object(Bucket="stg", Key=planned["manifestKey"], Body=json.dumps(manifest).encode())
    ledger = MemoryLedger()
    cause = {"type": "ShardWriteError", "message": "\u00e9\u0001" * 5_000, "runId": "run-1"}
    for index in range(shards):
        ledger.failures[index] = json.dumps({**cause, "shardLine": 1, "offset": 13})

    event = {"state": {"plan": planned}, "execution": {"name": "run-1"}}
    store = S3Store(boto3.client("s3", region_name=REGION))
    result = reports_service.finalize(event, FinalizeSettings.from_env(ENV), store, ledger)  # type: ignore[arg-type]

    report = result["report"]
    assert result["status"] == "FAILED" and result["error"] == "ShardWriteError"
    assert report["shards"]["failed"] == shards and len(report["shards"]["failures"]) == 5
    assert all(len(json.dumps(f["message"]).encode()) <= 1_100 for f in report["shards"]["failures"])
    assert f"{shards} of {shards} shards failed" in report["error"]["message"]
    kept = {k: result.get(k) for k in ("status", "jobId", "report", "reportUri", "error", "cause")}
    assert len(json.dumps(kept).encode()) < STATE_PAYLOAD_BYTES
