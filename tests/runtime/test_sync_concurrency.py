"""writeMode sync's Sync Map follows the job's maxConcurrency and write budget as the Shards Map
does (logic/shardtime.py): Plan gives it `syncConcurrency` (at most maxConcurrency within the
deployment's cap, the inline Map's 40 and the buckets; under a budget fewer, where that lets one
SyncWorker write a whole bucket within half its timeout), and each SyncWorker writes at most
budget / that many write units a second."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from pipeline_support import ENV, REGION
from test_shard_service import Settings, planned, run_shards

from adapters.s3 import S3Store
from logic import shardtime, sync
from shards import sync_buckets

pytestmark = pytest.mark.runtime

CAP = int(ENV["MAX_CONCURRENCY_CAP"])
WORKER_TIMEOUT = int(ENV["WORKER_TIMEOUT_SECONDS"])
SPEC = {
    "source": "s3://src/s.csv",
    "jobId": "sync-conc",
    "format": "csv",
    "dynamodb": {
        "writeMode": "sync",
        "dataset": "d",
        "key": {"pk": "P#{id}", "sk": "X"},
        "attributes": {"v": "{v}"},
    },
}


def test_the_sync_maps_concurrency_rule() -> None:
    # Without a budget: maxConcurrency, within the inline Map's 40 and the buckets.
    assert sync.sync_workers(1000, 100, None, 0, 1, 450) == sync.MAX_CONCURRENCY == 40
    assert sync.sync_workers(1000, 7, None, 0, 1, 450) == 7
    assert sync.sync_workers(3, 100, None, 0, 1, 450) == 3
    # Under a budget: a bucket of 2,000 one-unit items at 100 units/s: 4.5 s of budget per Worker
    # share within 450 s → at most 22 Workers (each writing 100/22 units/s: 440 s a bucket).
    workers = sync.sync_workers(1000, 100, 100, 2000, 1, 450)
    assert workers == shardtime.budget_workers(2000, 1, 100, 40, 450) == 22
    assert sync.sync_workers(1000, 100, 1, 10**6, 1, 450) == 1  # even one is too slow: one at a time


def _csv(rows: int) -> bytes:
    return ("id,v\n" + "".join(f"{i:06d},{'x' * 190}\n" for i in range(rows))).encode()


@pytest.fixture
def small_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync, "BUCKET_SOURCE_BYTES", 16 * 1024)  # 64 buckets of a 1 MiB file


def _plan(aws: Any, **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    aws.put_object(Bucket="src", Key="s.csv", Body=_csv(5000))
    return planned(aws, {**SPEC, **extra})


def test_plan_gives_the_sync_map_the_jobs_max_concurrency_within_the_cap(
    aws: Any, small_buckets: None
) -> None:
    job, _ = _plan(aws)
    assert job["sync"]["buckets"] == 61 and job["sync"]["workers"] == CAP  # 100 asked, the cap 10
    job, _ = _plan(aws, maxConcurrency=3, jobId="sync-conc-3")
    assert job["sync"]["workers"] == 3


def test_plan_lowers_the_sync_map_under_a_budget_and_each_syncworker_keeps_its_share(
    aws: Any, small_buckets: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 5,000 records of 198 bytes over 61 buckets: ~82 a bucket; at 1 write unit/s a Worker's share
    # writes a bucket within 450 s on at most 5 Workers.
    job, manifest = _plan(aws, writeUnitsPerSecond=1, shardSizeMiB=0.1)
    # The Shards Map only stages: the budget does not lower it (10 shards, the cap 10).
    assert job["workers"] == CAP and "shardSeconds" not in job
    workers = job["sync"]["workers"]
    records = 5000 / 61
    assert workers == shardtime.budget_workers(records, 1, 1, CAP, WORKER_TIMEOUT / 2) == 5
    ledger, _ = run_shards(job, manifest)
    rates: list[float | None] = []

    class Recording(sync_buckets.BatchWriter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            rates.append(kwargs.pop("rate", None))
            super().__init__(*args, **kwargs)  # unpaced here: the test checks the share only

    monkeypatch.setattr(sync_buckets, "BatchWriter", Recording)
    store = S3Store(boto3.client("s3", region_name=REGION))
    db = boto3.client("dynamodb", region_name=REGION)
    sync_buckets.sync_bucket(0, job, Settings(), store, ledger, db)
    assert rates == [pytest.approx(1 / workers)]
