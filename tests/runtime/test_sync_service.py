"""writeMode sync's two services against moto (no state machine): the shards stage their items by
bucket, each bucket is synced once (a retry sends nothing and counts nothing again), duplicates of
a key across shards keep the later, and the second sync writes only the difference."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from pipeline_support import REGION
from test_shard_service import Settings, planned, run_shards

from adapters.ledger import Ledger
from adapters.s3 import S3Store
from shards.sync_buckets import sync_bucket

pytestmark = pytest.mark.runtime

SPEC = {
    "source": "s3://src/a.csv",
    "jobId": "sync",
    "format": "csv",
    "dynamodb": {
        "writeMode": "sync",
        "dataset": "d",
        "key": {"pk": "P#{id}", "sk": "X"},
        "attributes": {"v": "{v}"},
    },
    "shardSizeMiB": 0.0005,
}


class CountingDb:
    """The client the bucket sync writes through, its BatchWriteItem requests counted by kind."""

    def __init__(self, db: Any) -> None:
        self._db, self.puts, self.deletes = db, 0, 0

    def batch_write_item(self, **kwargs: Any) -> Any:
        for requests in kwargs["RequestItems"].values():
            self.puts += sum("PutRequest" in r for r in requests)
            self.deletes += sum("DeleteRequest" in r for r in requests)
        return self._db.batch_write_item(**kwargs)


def _sync(
    aws: Any, rows: list[tuple[str, str]], buckets: int = 3
) -> tuple[dict[str, Any], list[dict[str, Any]], CountingDb]:
    aws.put_object(
        Bucket="src", Key="a.csv", Body=("id,v\n" + "".join(f"{i},{v}\n" for i, v in rows)).encode()
    )
    job, manifest = planned(aws, SPEC)
    job["sync"]["buckets"] = buckets  # as a dataset of several buckets
    ledger, _ = run_shards(job, manifest)
    db = CountingDb(boto3.client("dynamodb", region_name=REGION))
    store = S3Store(boto3.client("s3", region_name=REGION))
    results = [sync_bucket(b, job, Settings(), store, ledger, db) for b in range(buckets)]
    return job, results, db


def test_a_first_sync_puts_each_key_once_the_later_record_winning(aws: Any) -> None:
    rows = [(str(i), f"v{i}") for i in range(60)] + [("5", "again")]
    job, results, db = _sync(aws, rows)
    assert len({r["bucket"] for r in results}) == 3 and all(r["written"] for r in results)
    assert sum(r["written"] for r in results) == 60 and sum(r["duplicates"] for r in results) == 1
    assert db.puts == 60 and db.deletes == 0
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName="target")["Items"]
    assert {i["pk"]["S"]: i["v"]["S"] for i in items}["P#5"] == "again"

    # A retried bucket: recorded for this baseline, it sends and counts nothing again.
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 7)
    store = S3Store(boto3.client("s3", region_name=REGION))
    again = CountingDb(boto3.client("dynamodb", region_name=REGION))
    assert sync_bucket(0, job, Settings(), store, ledger, again) == {"bucket": 0, "skipped": True}
    assert again.puts == again.deletes == 0
