"""The shard service: one shard from its manifest entry to its recorded counts (the Worker's job).

Read the byte range (`sources`) → records → mapped writes and stagings (`records`, `writing`,
`staging`) → counts, recorded in the ledger once the shard's outputs are complete.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from adapters.dynamodb import ItemWriter
from adapters.keyed_batches import KeyedBatchWriter
from adapters.ledger import Ledger
from adapters.s3 import ObjectInfo, S3Store
from logic import checkpoints, layout, report
from logic.checkpoints import Stop
from logic.errors import SourceNotAllowedError
from logic.job import ManifestEntry, PlannedJob
from logic.spec.parse import parse_spec
from shards import sources, staging, writing
from shards.bulk_staging import BulkStager
from shards.records import process, process_parquet
from shards.settings import ShardSettings
from shards.sync_staging import SyncStager

# What the Worker returns besides `index`: the state machine keeps only `index`; these feed the
# EMF metrics (handlers/observability.py).
METRIC_FIELDS = ("read", "written", "rejected", "retries", "throttles", "bytes")


def process_shard(
    shard: ManifestEntry | Mapping[str, Any],
    job: PlannedJob | Mapping[str, Any],
    settings: ShardSettings,
    store: S3Store,
    ledger: Ledger,
    db: Any,
    item_db: Any = None,
    remaining: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """Process one shard of the manifest (`shard`) of a planned `job`, once: a shard the ledger has
    done is skipped. `db` sends BatchWriteItem; `item_db` (default `db`) the single-item calls of
    another write mode. Both are parsed here, once (logic/job.py), and passed on as models.
    `remaining`: the invocation's time left in seconds; with it the Worker stops before its
    deadline at a checkpoint and answers `more` (logic/checkpoints.py)."""
    shard, job = ManifestEntry.parse(shard), PlannedJob.parse(job)
    try:
        return _process(shard, job, settings, store, ledger, db, item_db, remaining)
    except Exception as error:
        # Why the shard failed, where Finalize reads it: the Map's failed child says only that
        # the Lambda failed, and a shard without recorded counts said nothing more.
        with contextlib.suppress(Exception):  # the shard's own error is the one to raise
            failure = report.shard_failure(error, job.run_id)
            ledger.record_shard_failure(job.job_id, job.plan, shard.index, failure)
        raise


def _process(
    shard: ManifestEntry,
    job: PlannedJob,
    settings: ShardSettings,
    store: S3Store,
    ledger: Ledger,
    db: Any,
    item_db: Any,
    remaining: Callable[[], float] | None,
) -> dict[str, Any]:
    """One invocation's segment of the shard: from its checkpoint (or start) to its end or to a
    stop before the deadline, then its checkpoint advanced or the shard recorded. Kept whole: the
    reading, the sinks the segment writes to and the writer are opened and closed in one
    ExitStack, and what is recorded after (the checkpoint's offset, the segment's rejects key,
    the summed counts) is read from all of them; split, each part would take a dozen of them."""
    job_id, run_id, plan_id, index = job.job_id, job.run_id, job.plan, shard.index
    _check_source(shard, settings)
    if ledger.shard_done(job_id, plan_id, index):
        # A retry after the counts were recorded, or a re-run of the job whose earlier run
        # finished this shard: the items are written, count nothing twice.
        return {"index": index, "skipped": True, "more": False}
    spec = parse_spec(job.spec, table_key=job.table_key or {})
    # A graph job's staged files are one per shard (its endpoint check reads them by shard), as
    # are a sync's and a bulkPutItems job's staged items: it runs to its shard's end in one invocation.
    staged = spec.dynamodb is not None and (spec.dynamodb.staged or spec.dynamodb.bulk)
    stop = Stop(remaining) if remaining is not None and spec.graph is None and not staged else None
    checkpoint = ledger.checkpoint(job_id, plan_id, index) if stop is not None else None
    seq = int(checkpoint["seq"]) if checkpoint else 0
    earlier: dict[str, Any] | None = checkpoint["counts"] if checkpoint else None
    obj = ObjectInfo(shard.bucket, shard.key, shard.object_size, shard.etag)
    start, end = (int(checkpoint["offset"]) if checkpoint else shard.start), shard.end
    parquet = spec.format == "parquet"
    # The CSV start chain is the shard's first segment's: a later one starts at a record's first byte.
    chain = (
        None if parquet or checkpoint else sources.csv_chain(store, obj, spec, ledger, job_id, plan_id, index)
    )
    data_start = start if checkpoint else shard.data_start
    lines = None if parquet else sources.shard_lines(store, obj, spec, start, end, data_start, chain)
    source = shard.source_uri
    # The records' object and member, for property graph edge ids.
    origin = staging.origin(source, shard.member)
    markers = ledger.markers(job_id, plan_id, index, run_id)
    writer = writing.writer(db, item_db or db, spec, settings, markers, job.target_table(settings.table_name))
    if isinstance(writer, SyncStager):
        writer.buckets = job.sync_buckets
    if isinstance(writer, ItemWriter | KeyedBatchWriter) and writing.conditional(writer):
        # A conditional mode's write replayed after this run's crashed attempt is this run's write.
        writer.replayed = ledger.start_attempt(job_id, plan_id, index, run_id, seq)
    # Rejects and graph statements stream to staging as multipart uploads while the shard is
    # read (an object only if something is written): a 10 GiB shard needs no /tmp for them. An
    # error aborts both; a retried shard writes the same keys afresh.
    segment = f"{seq:04d}-{secrets.token_hex(4)}" if stop is not None else ""
    rejects_key = layout.shard_rejects_key(job_id, run_id, index, segment)
    graph_keys = staging.graph_keys(spec, job_id, plan_id, index)
    line_base = int(earlier.get("lines") or 0) if earlier else 0
    with contextlib.ExitStack() as outputs:
        rejects, graph = staging.sinks(
            outputs, store, settings, spec, shard, source, rejects_key, graph_keys, line_base
        )
        try:
            workers = job.workers or 1  # Plan's min(maxConcurrency, shards)
            with writing.budget(writer, spec, ledger, settings, job_id, run_id, index, workers):
                if lines is None:  # Parquet: the shard's row groups
                    skip = int(checkpoint["rows"]) if checkpoint else 0
                    rows = sources.parquet_rows(store, obj, spec, shard, skip)
                    counts = process_parquet(rows, spec, writer, rejects, graph, source=origin, stop=stop)
                else:
                    header = shard.header
                    counts = process(lines, spec, header, writer, rejects, graph, source=origin, stop=stop)
        finally:
            stats = writer.close() if writer is not None else None
        if chain is not None:
            chain.published()  # the shard's CSV start state is stored before it is recorded done
        stopped = stop is not None and stop.at is not None
        if not stopped:
            ids_keys = layout.graph_ids_keys(job_id, plan_id, index)
            staging.finish_graph(graph, store, settings.staging_bucket, ids_keys)
    read_to = (start if parquet else int(stop.at)) if stop is not None and stop.at is not None else end
    segment_bytes = (shard.end - shard.start if not stopped else 0) if parquet else read_to - start
    result = _result(counts, stats, writer, spec, segment_bytes, store.retries)
    result.update(rejected=rejects.count, rejectedLines=rejects.lines)
    result.update(staging.outputs(rejects, rejects_key, graph, graph_keys))
    if isinstance(writer, SyncStager) and not stopped:
        # The shard's staged items, before the shard is recorded done: the Sync Map reads them.
        body, sections = writer.finish()
        key = layout.sync_shard_key(job_id, plan_id, index)
        store.put_bytes(settings.staging_bucket, key, body, "application/gzip")
        result.update(syncKey=key, syncSections=sections)
    if isinstance(writer, BulkStager):
        # The shard's staged objects, before the shard is recorded done: the bulk put items
        # operation after the Map reads them. Nothing is written: each record read is staged, a
        # duplicate of a later one or rejected (logic/report.py balanced).
        size = shard.end - shard.start
        bucket = settings.staging_bucket
        objects = writer.finish(store, bucket, job_id, plan_id, index, size, source, shard.member)
        result.update(objects, written=0)
    metrics = {name: result[name] for name in METRIC_FIELDS}
    total = {**checkpoints.merged(earlier, result), "runId": run_id} if stop is not None else result
    if stopped:
        assert stop is not None and stop.at is not None
        position = {"rows": stop.at, "offset": shard.start} if parquet else {"offset": stop.at}
        # Conditional on the checkpoint it started from: when another invocation advanced it
        # first, this segment is not counted and the next invocation resumes from that one's.
        ledger.advance_checkpoint(job_id, plan_id, index, {**position, "counts": total, "runId": run_id}, seq)
        return {"index": index, "more": True, **metrics}
    ledger.record_shard(job_id, plan_id, index, {**total, "runId": run_id})
    return {"index": index, "more": False, **metrics}


def _result(
    counts: Mapping[str, Any], stats: Any, writer: Any, spec: Any, shard_bytes: int, s3_retries: int
) -> dict[str, Any]:
    """The shard's counts as recorded: the reader's, less the records whose condition was not met
    (read and accepted, but not written), and the writer's requests."""
    skipped = stats.skipped if stats else 0
    return {
        **counts,
        "written": counts["written"] - skipped,
        "skipped": skipped,
        "uncertain": stats.uncertain if stats else 0,
        "skippedSample": writing.skipped_keys(writer, spec),
        "bytes": shard_bytes,
        "requests": stats.requests if stats else 0,
        "retries": stats.retries if stats else 0,
        "throttles": stats.throttles if stats else 0,
        "s3Retries": s3_retries,
    }


def _check_source(shard: ManifestEntry, settings: ShardSettings) -> None:
    """A shard reads a source bucket, or Prepare's decompressed copy in staging: nothing else."""
    prepared = shard.bucket == settings.staging_bucket and shard.key.startswith("prepared/")
    if shard.bucket not in settings.source_buckets and not prepared:
        raise SourceNotAllowedError(f"shard {shard.index}: bucket {shard.bucket!r} is not an allowed source")
