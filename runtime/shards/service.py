"""The shard service: one shard from its manifest entry to its recorded counts (the Worker's job).

Read the byte range (`sources`) → records → mapped writes and stagings (`records`, `writing`,
`staging`) → counts, recorded in the ledger once the shard's outputs are complete.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from adapters.ledger import Ledger
from adapters.s3 import ObjectInfo, S3Store
from logic import layout, report
from logic.errors import SourceNotAllowedError
from logic.job import ManifestEntry, PlannedJob
from logic.spec.parse import parse_spec
from shards import sources, staging, writing
from shards.records import process, process_parquet
from shards.settings import ShardSettings

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
) -> dict[str, Any]:
    """Process one shard of the manifest (`shard`) of a planned `job`, once: a shard the ledger has
    done is skipped. `db` sends BatchWriteItem; `item_db` (default `db`) the single-item calls of
    another write mode. Both are parsed here, once (logic/job.py), and passed on as models."""
    shard, job = ManifestEntry.parse(shard), PlannedJob.parse(job)
    try:
        return _process(shard, job, settings, store, ledger, db, item_db)
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
) -> dict[str, Any]:
    job_id, run_id, plan_id, index = job.job_id, job.run_id, job.plan, shard.index
    _check_source(shard, settings)
    if ledger.shard_done(job_id, plan_id, index):
        # A retry after the counts were recorded, or a re-run of the job whose earlier run
        # finished this shard: the items are written, count nothing twice.
        return {"index": index, "skipped": True}
    spec = parse_spec(job.spec, table_key=job.table_key or {})
    obj = ObjectInfo(shard.bucket, shard.key, shard.object_size, shard.etag)
    start, end = shard.start, shard.end
    parquet = spec.format == "parquet"
    chain = None if parquet else sources.csv_chain(store, obj, spec, ledger, job_id, plan_id, index)
    lines = None if parquet else sources.shard_lines(store, obj, spec, start, end, shard.data_start, chain)
    source = shard.source_uri
    # The records' object and member, for property graph edge ids.
    origin = staging.origin(source, shard.member)
    writer = writing.writer(db, item_db or db, spec, settings, ledger.markers(job_id, plan_id, index))
    # Rejects and graph statements stream to staging as multipart uploads while the shard is
    # read (an object only if something is written): a 10 GiB shard needs no /tmp for them. An
    # error aborts both; a retried shard writes the same keys afresh.
    rejects_key = layout.shard_rejects_key(job_id, run_id, index)
    graph_keys = staging.graph_keys(spec, job_id, plan_id, index)
    with contextlib.ExitStack() as outputs:
        rejects, graph = staging.sinks(outputs, store, settings, spec, shard, source, rejects_key, graph_keys)
        try:
            workers = job.workers or 1  # Plan's min(maxConcurrency, shards)
            with writing.budget(writer, spec, ledger, settings, job_id, run_id, index, workers):
                if lines is None:  # Parquet: the shard's row groups
                    rows = sources.parquet_rows(store, obj, spec, shard)
                    counts = process_parquet(rows, spec, writer, rejects, graph, source=origin)
                else:
                    counts = process(lines, spec, shard.header, writer, rejects, graph, source=origin)
        finally:
            stats = writer.close() if writer is not None else None
        if chain is not None:
            chain.published()  # the shard's CSV start state is stored before it is recorded done
        ids_keys = layout.graph_ids_keys(job_id, plan_id, index)
        staging.finish_graph(graph, store, settings.staging_bucket, ids_keys)
    result = _result(counts, stats, writer, spec, end - start, store.retries)
    result.update(rejected=rejects.count, rejectedLines=rejects.lines)
    result.update(staging.outputs(rejects, rejects_key, graph, graph_keys))
    ledger.record_shard(job_id, plan_id, index, {**result, "runId": run_id})
    return {"index": index, **{name: result[name] for name in METRIC_FIELDS}}


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
