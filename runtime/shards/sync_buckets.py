"""One bucket of a sync (the Sync Map's item): this run's staged items of the bucket, from every
shard, deduped (the later wins), compared with the same bucket of the dataset's baseline; the new
and changed items put and the removed keys deleted (BatchWriteItem), the merged bucket written
as the run's own (the next baseline once the run succeeds) and the counts recorded once.

Idempotent: a retried or re-run bucket compares the same staged items with the same baseline and
sends the same puts and deletes (each of which may be sent twice without harm); a bucket the
ledger has recorded for that baseline is skipped.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Mapping
from typing import Any

from adapters.dynamodb import BatchWriter
from adapters.ledger import Ledger
from adapters.s3 import S3Store
from logic import layout, sync
from logic.batching import BATCH_ITEMS
from logic.job import PlannedJob
from logic.spec.parse import parse_spec
from shards.settings import ShardSettings


def _sections(
    store: S3Store, staging: str, shards: Mapping[int, Mapping[str, Any]], bucket: int
) -> Iterator[Iterator[tuple[bytes, bytes]]]:
    """The bucket's section of each shard's staged object, in shard order, each read when the
    merge reaches it (one shard's section in memory at a time, beside the merged lines)."""
    for index in sorted(shards):
        counts = shards[index]
        start, end = (counts.get("syncSections") or {}).get(str(bucket), [0, 0])
        if end > start:
            yield sync.read_lines(
                gzip.decompress(store.get_bytes_range(staging, counts["syncKey"], start, end))
            )


# What a bucket without a baseline compares with (the dataset's first sync).
NO_BASELINE = ""


def sync_bucket(
    bucket: int,
    job: PlannedJob | Mapping[str, Any],
    settings: ShardSettings,
    store: S3Store,
    ledger: Ledger,
    db: Any,
) -> dict[str, Any]:
    """Sync bucket `bucket` of the planned `job` (writeMode sync) into its table through `db`.
    Kept whole: the bucket's steps in the order its idempotence needs (done? read, compare,
    write, stage the merged bucket, record once), each a few lines."""
    job = PlannedJob.parse(job)
    assert job.sync is not None, "not a sync job"
    baseline = str(job.sync.get("baseline") or NO_BASELINE)
    if ledger.sync_bucket_done(job.job_id, job.plan, bucket, baseline):
        return {"bucket": bucket, "skipped": True}
    spec = parse_spec(job.spec, table_key=job.table_key or {})
    assert spec.dynamodb is not None
    key_names = tuple(spec.dynamodb.key)
    shards = ledger.shards(job.job_id, job.plan, int(job.sync["shards"]))
    sections = _sections(store, settings.staging_bucket, shards, bucket)
    items, duplicates = sync.merge(sections)
    old: dict[bytes, bytes] = {}
    if baseline:
        old = dict(
            sync.read_lines(
                gzip.decompress(
                    store.get_bytes(settings.staging_bucket, layout.sync_bucket_key(baseline, bucket))
                )
            )
        )
    change = sync.diff(items, old, key_names, bucket=bucket, buckets=job.sync_buckets)
    # Under a write budget each of the SyncWorkers Plan runs at once takes an equal share
    # (plans/service.py `syncConcurrency`): together never above the budget.
    budget = job.spec.get("writeUnitsPerSecond")
    writer = BatchWriter(
        db,
        job.target_table(settings.table_name),
        in_flight=settings.write_concurrency,
        max_in_flight=settings.write_ceiling,
        rate=float(budget) / max(1, int(job.sync.get("workers") or 1)) if budget else None,
    )
    try:
        for start in range(0, len(change.puts), BATCH_ITEMS):
            writer.submit([sync.wire_item(item) for item in change.puts[start : start + BATCH_ITEMS]])
        for start in range(0, len(change.deletes), BATCH_ITEMS):
            writer.submit_deletes(
                [sync.wire_item(key) for key in change.deletes[start : start + BATCH_ITEMS]]
            )
    finally:
        stats = writer.close()
    # The bucket as this run has it: the next sync's baseline once this run succeeds. Written for
    # every bucket, even empty, so the next sync reads known keys.
    merged = sync.merged_lines(items)
    store.put_bytes(
        settings.staging_bucket,
        layout.sync_bucket_key(str(job.sync["prefix"]), bucket),
        gzip.compress(merged),
        "application/gzip",
    )
    counts = {
        "written": len(change.puts),
        "unchanged": change.unchanged,
        "deleted": len(change.deletes),
        "duplicates": duplicates,
        "requests": stats.requests,
        "retries": stats.retries,
        "throttles": stats.throttles,
        "runId": job.run_id,
    }
    ledger.record_sync_bucket(job.job_id, job.plan, bucket, baseline, counts)
    return {"bucket": bucket, **counts}
