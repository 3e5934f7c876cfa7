"""The planning service: a job's input to its manifest of shards and its planned `job` (Plan's job).

Parse and check the input → the source's objects (`sources`) → shards → the plan's fingerprint,
the jobId claimed in the ledger, the manifest written to staging.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from adapters.ledger import Ledger
from adapters.s3 import ObjectInfo, S3Store
from logic import bulk_items, bulk_put, layout, parquet, planning, shardtime, sync
from logic.errors import InputValidationError, JobAlreadyLoadedError, JobAlreadyRunningError
from logic.job import PlannedJob
from logic.payloads import check_input_size
from logic.spec.checks import check_graph_database, check_shard_memory, check_source_bucket, fit_shard_size
from logic.spec.inputs import JobSpec
from logic.spec.parse import parse_s3_uri, parse_spec, spec_to_json
from logic.writemodes import check_update_limits, record_units, write_plan
from plans import reads, sources
from plans.settings import PlanningSettings
from plans.target import Describe, target


def _no_table(name: str) -> Mapping[str, Any] | None:
    """No DescribeTable at hand: every named table is missing."""
    return None


def plan(
    event: Mapping[str, Any],
    settings: PlanningSettings,
    store: S3Store,
    ledger: Ledger,
    ended: Callable[[str], bool] | None = None,
    now: Callable[[], float] = time.time,
    describe: Describe = _no_table,
) -> dict[str, Any]:
    """Plan the execution's input (`event`: `input`, `execution`): the manifest is written to
    staging, the jobId claimed; the result is the planned `job` and what the Map reads.
    `ended(execution id)`: whether the execution holding the jobId is over (then taken over);
    `now`: the clock a failed run's `writersUntil` is compared with; `describe(table name)`:
    DescribeTable's `Table` (None: no such table), for a table the input names (plans/target.py).
    Kept whole: Plan's steps in the order the ledger needs them (plan, refusals, claim, manifest)."""
    execution = event.get("execution") or {}
    run_id = str(execution.get("name") or "local")
    raw_input = dict(event.get("input") or {})
    # Prepare's result ($.prepare in the state machine): the plain objects it wrote, if any.
    prepared = raw_input.pop("prepare", None) or {}
    table = target(raw_input, settings, describe)
    spec = _checked_spec(raw_input, settings, run_id, table.key)
    bucket, key = parse_s3_uri(spec.source)
    check_source_bucket(bucket, settings.source_buckets)
    given = "shardSizeMiB" in raw_input
    bulk = spec.dynamodb is not None and spec.dynamodb.bulk and not spec.dry_run
    if bulk:
        bulk_items.check_write_units(spec.write_units_per_second)
        bulk_items.check_table(table.name, describe(table.name))
    objects, shards, spec, row_bytes = _shards(store, settings, bucket, key, prepared, spec, given)
    if bulk:
        bulk_items.check_objects(bulk_items.staged_objects([s["end"] - s["start"] for s in shards]))
    job_id = spec.job_id
    spec_json = spec_to_json(spec)
    # Shards are recorded under the plan's fingerprint: a re-run of the job with the same
    # objects and spec finds the shards an earlier run finished, and skips them.
    plan_id = planning.plan_id(shards, spec_json)
    counted = _counted_plan(spec, ledger, plan_id)
    current = ledger.get_job(job_id) or {}
    writers_still_running(current, job_id, run_id, now())
    recorded = ledger.plan_record(job_id, plan_id)
    # A run that holds the jobId is refused as running (or taken over) by start_job, first.
    held = current.get("status") == "RUNNING" and current.get("runId") != run_id
    # A plan of no shards writes nothing whatever its objects (their ETags are in the shards' cuts,
    # so its id does not tell one empty source from another): it runs again, reporting 0.
    if not spec.reload and not held and shards:
        refuse_loaded(job_id, recorded.get("loaded"))
    execution_id = str(execution.get("id") or run_id)
    ledger.start_job(job_id, run_id, execution_id, len(shards), counted_plan=counted, ended=ended)
    # A reload records its shards afresh, under the plan's next generation (logic/job.py PlannedJob.plan).
    generation = ledger.reload_plan(job_id, plan_id, run_id) if spec.reload else recorded.get("generation", 0)
    manifest = layout.manifest_key(job_id, run_id)
    store.put_json(settings.staging_bucket, manifest, shards)
    max_concurrency = min(spec.max_concurrency, settings.max_concurrency_cap)
    sized = _sized(store, spec, shards, row_bytes)
    # Under a budget, fewer Workers where that keeps a shard within half the Worker's timeout
    # (not for a staged mode, whose Workers write nothing: its Sync Map is lowered instead).
    timing = _shard_time(settings, spec, shards, max_concurrency, sized)
    if timing is not None:
        _check_express(timing, settings.map_execution_type)
        max_concurrency = timing.workers
    named: dict[str, Any] = {"table": table.name} if table.named else {}
    reloaded: dict[str, Any] = {"generation": generation} if generation else {}
    timed: dict[str, Any] = {"shardSeconds": round(timing.seconds, 1)} if timing is not None else {}
    synced = _sync(
        spec, ledger, table.name, job_id, plan_id, generation, sum(o.size for o in objects), len(shards)
    )
    if synced is not None:
        synced["workers"] = _sync_workers(settings, spec, synced["buckets"], sized)
    synced_job: dict[str, Any] = {"sync": synced} if synced is not None else {}
    job = PlannedJob(  # named as in the JSON; to_json() gives them in the model's field order
        jobId=job_id,
        runId=run_id,
        planId=plan_id,
        **reloaded,
        spec=spec_json,
        tableKey=table.key,
        **named,
        objects=len(objects),
        bytes=sum(o.size for o in objects),
        # The Workers that can run at once: the write budget's share is never above budget / this.
        workers=max(1, min(max_concurrency, len(shards))),
        **timed,
        **synced_job,
    )
    return {
        "job": job.to_json(),
        "manifestKey": manifest,
        "mapResultsPrefix": layout.map_results_prefix(job_id, run_id),
        "maxConcurrency": max_concurrency,
        "shardCount": len(shards),
        # writeMode sync: the Sync Map's items, one per bucket (none: no Sync Map).
        "syncBuckets": list(range(synced["buckets"])) if synced is not None else [],
        # ... and the SyncWorkers it runs at once (its MaxConcurrencyPath; 1 without a sync).
        "syncConcurrency": synced["workers"] if synced is not None else 1,
        # dynamodb.engine bulkPutItems: the state machine hands the staged items off after the Map.
        "bulkPut": bulk_put.hands_off(spec),
        **({"shardTime": timing.describe()} if timing is not None else {}),
    }


def _sync(
    spec: JobSpec,
    ledger: Ledger,
    table: str,
    job_id: str,
    plan_id: str,
    generation: int,
    source_bytes: int,
    shards: int,
) -> dict[str, Any] | None:
    """writeMode sync: the dataset's buckets (its baseline's, else chosen from the source size at
    its first sync), the baseline to compare with and this run's prefix; None for other modes."""
    if spec.dynamodb is None or not spec.dynamodb.staged or spec.dry_run:
        # A dry run stages nothing: its report counts what the shards would stage.
        return None
    dataset = str(spec.dynamodb.dataset)
    baseline = ledger.dataset(table, dataset)
    plan = f"{plan_id}.{generation}" if generation else plan_id
    return {
        "dataset": dataset,
        "buckets": int(baseline["buckets"]) if baseline else sync.bucket_count(source_bytes),
        "baseline": baseline["prefix"] if baseline else None,
        "prefix": layout.sync_prefix(table, dataset, job_id, plan, baseline["prefix"] if baseline else None),
        "shards": shards,
    }


def _check_express(timing: shardtime.ShardTime, map_execution_type: str) -> None:
    """Refuse a job whose shard takes longer than an EXPRESS child execution runs (5 minutes, its
    Worker turns and retries included): it would end with the shard unfinished, every time."""
    if map_execution_type == "EXPRESS" and timing.seconds > shardtime.EXPRESS_CHILD_SECONDS:
        raise InputValidationError(
            "writeUnitsPerSecond",
            f"{timing.budget:,.0f} write units/s leaves a shard ~{timing.seconds:,.0f} s on "
            f"{timing.workers} Worker(s), more than the {shardtime.EXPRESS_CHILD_SECONDS} s an EXPRESS "
            "child execution runs (map_execution_type EXPRESS): raise writeUnitsPerSecond, lower "
            "shardSizeMiB, or deploy with map_execution_type STANDARD",
        )


@dataclass(frozen=True)
class _Sized:
    """The records Plan estimates under a write budget: the largest shard's, all shards', and a
    record's item size (its source bytes where nothing better is known)."""

    largest: float
    total: float
    item_bytes: float


def _sized(
    store: S3Store, spec: JobSpec, shards: list[dict[str, Any]], row_bytes: float | None
) -> _Sized | None:
    """The shards' records (logic/shardtime.py); None without a budget that paces writes (none
    given, a dry run, no DynamoDB target, engine bulkPutItems: the operation after the Map
    writes) or shards. A text shard's records are measured from the
    largest one's first bytes (one ranged GET); a Parquet shard's are its rows, of the row groups'
    uncompressed bytes a row."""
    budget = spec.write_units_per_second
    if budget is None or spec.dry_run or spec.dynamodb is None or spec.dynamodb.bulk or not shards:
        return None
    largest = max(shards, key=lambda s: s.get("rows") or s["end"] - s["start"])
    if row_bytes is not None:  # Parquet: rows counted in the footers
        rows = float(largest["rows"] or 0)
        return _Sized(rows, float(sum(s.get("rows") or 0 for s in shards)), row_bytes)
    obj = ObjectInfo(largest["bucket"], largest["key"], largest["objectSize"], largest["etag"])
    last = min(largest["end"], largest["start"] + shardtime.SAMPLE_BYTES) - 1
    sample = store.read_range(obj, largest["start"], last) if last >= largest["start"] else b""
    records, item_bytes = shardtime.text_shard_records([largest["end"] - largest["start"]], sample)
    total = sum(s["end"] - s["start"] for s in shards) / item_bytes
    return _Sized(records, total, item_bytes)


def _shard_time(
    settings: PlanningSettings,
    spec: JobSpec,
    shards: list[dict[str, Any]],
    concurrency: int,
    sized: _Sized | None,
) -> shardtime.ShardTime | None:
    """The largest shard's time at the job's write budget and the Workers chosen for it
    (logic/shardtime.py); None without a budget (`sized` None) or for a staged mode."""
    if sized is None or spec.dynamodb is None or spec.dynamodb.staged:
        return None
    assert spec.write_units_per_second is not None
    plan = write_plan(spec.dynamodb)
    return shardtime.shard_time(
        sized.largest,
        sized.item_bytes,
        spec.write_units_per_second,
        min(concurrency, len(shards)),
        settings.worker_timeout_seconds,
        numeric_add=plan is not None and bool(plan.counters),
    )


def _sync_workers(settings: PlanningSettings, spec: JobSpec, buckets: int, sized: _Sized | None) -> int:
    """writeMode sync: the SyncWorkers run at once (logic/sync.py `sync_workers`), a bucket's
    records estimated as the source's over the buckets (a hash spreads keys evenly)."""
    records = sized.total / buckets if sized is not None else 0.0
    units = record_units(max(1, math.ceil(sized.item_bytes))) if sized is not None else 1
    return sync.sync_workers(
        buckets,
        min(spec.max_concurrency, settings.max_concurrency_cap),
        spec.write_units_per_second if sized is not None else None,
        records,
        units,
        settings.worker_timeout_seconds / 2,
    )


def _checked_spec(
    raw_input: Mapping[str, Any], settings: PlanningSettings, run_id: str, table_key: Mapping[str, str]
) -> JobSpec:
    """The input parsed and checked against this environment and the target table's key, its shard
    size fitted to the Worker."""
    spec = parse_spec(raw_input, table_key=table_key, execution_name=run_id)
    check_input_size(raw_input, spec_to_json(spec))
    check_graph_database(spec, raw_input, graph_enabled=settings.graph_enabled)
    spec = fit_shard_size(spec, worker_memory_mib=settings.worker_memory_mib)
    check_shard_memory(spec, worker_memory_mib=settings.worker_memory_mib)
    if spec.dynamodb is not None:
        check_update_limits(spec.dynamodb)
    return spec


def _counted_plan(spec: JobSpec, ledger: Ledger, plan_id: str) -> str | None:
    """The plan id when the job adds numbers (`"update": "add"`), else None; refuses a re-run of
    such a job under another plan: its markers are keyed by plan and byte offset, so a changed
    input or spec would add every record an earlier run already added once more."""
    target = write_plan(spec.dynamodb) if spec.dynamodb is not None else None
    if target is None or not target.counters:
        return None
    if spec.reload:
        raise InputValidationError(
            "reload",
            f"not with a numeric update add ({', '.join(target.counters)}): each record is added exactly "
            "once per plan, through retries and re-runs, so a reload would add nothing; to add the "
            "records again, load them under a new jobId",
        )
    earlier = (ledger.get_job(spec.job_id) or {}).get("countedPlanId")
    if earlier is not None and earlier != plan_id:
        raise InputValidationError(
            "jobId",
            f"jobId {spec.job_id!r} already added numbers (update add) under another plan: its input "
            "objects or spec have changed since, so a re-run cannot tell which records were added; "
            "start the corrected load under a new jobId (the earlier additions stay)",
        )
    return plan_id


def refuse_loaded(job_id: str, loaded: Mapping[str, Any] | None) -> None:
    """Refuse (JobAlreadyLoadedError) a run of a plan every shard of which is recorded for the
    jobId (`loaded`, from the ledger's plan record): it would write nothing and repair nothing."""
    if not loaded:
        return
    at = datetime.fromtimestamp(int(loaded.get("at") or 0), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    records = loaded.get("records") or {}
    raise JobAlreadyLoadedError(
        f"jobId {job_id} loaded this plan in run {loaded.get('runId')} at {at} (written "
        f"{int(records.get('written') or 0):,}, skipped {int(records.get('skipped') or 0):,}, rejected "
        f'{int(records.get("rejected") or 0):,}): use a new jobId or "reload": true'
    )


def writers_still_running(job: Mapping[str, Any], job_id: str, run_id: str, now: float) -> None:
    """Refuse (JobAlreadyRunningError) a run while Workers of the job's last run may still write:
    its Map Run failed, and Step Functions does not stop the Lambda invocations already running
    (they go on up to the Worker timeout; Finalize recorded `writersUntil`, the takeover rule's
    Worker timeout + 60 s). `job`: the ledger's job item. The refusal says when the run may start."""
    until = int(job.get("writersUntil") or 0)
    if job.get("runId") == run_id or until <= now:
        return
    at = datetime.fromtimestamp(until, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raise JobAlreadyRunningError(
        f"jobId {job_id}: Workers of its failed run {job.get('runId')} may still write until {at}; "
        f"start this run after then (in {math.ceil(until - now)} s)"
    )


def _shards(
    store: S3Store,
    settings: PlanningSettings,
    bucket: str,
    key: str,
    prepared: Mapping[str, Any],
    spec: JobSpec,
    given: bool,
) -> tuple[list[Any], list[dict[str, Any]], JobSpec, float | None]:
    """The source's objects and the shards cut from them: whole row groups from Parquet footers,
    byte ranges from the other formats' objects; the spec, with the shard size chosen for the
    source when the input gave none (`given` false: planning.with_chosen_shard_size); and, for
    Parquet, the row groups' uncompressed bytes a row (None for the other formats)."""
    workers = min(spec.max_concurrency, settings.max_concurrency_cap)
    if spec.format == "parquet":  # shards of whole row groups, from the objects' footers
        objects = sources.parquet_objects(store, bucket, key)
        _check_objects(settings, len(objects), "footer", f"s3://{bucket}/{key}")
        spec = planning.with_chosen_shard_size(spec, sum(o.size for o in objects), workers, given=given)
        footers = sources.read_footers(store, objects, spec, settings.worker_memory_mib)
        held = sources.held_bytes(spec, settings.worker_memory_mib)
        shards = parquet.cut_row_groups(
            footers,
            spec.shard_size_bytes,
            max_shards=planning.DEFAULT_MAX_SHARDS,
            # A property graph shard's size bounds its ids in the Worker's memory, a bulkPutItems
            # shard's its staged items: count them as text.
            uncompressed=held is not None,
            held_bytes=held,
        )
        groups = [g for f in footers for g in f.row_groups]
        row_bytes = sum(g.uncompressed for g in groups) / max(1, sum(g.rows for g in groups))
        return objects, shards, spec, row_bytes
    else:
        objects, origin = sources.objects(store, settings.staging_bucket, bucket, key, prepared, spec.format)
        read = "header line" if planning.has_header(spec) else None
        _check_objects(settings, len(objects), read, f"s3://{bucket}/{key}")
        planned, line_bases = sources.read_headers(store, objects, spec, origin)
        data_bytes = sum(max(0, o["size"] - o.get("data_start", 0)) for o in planned)
        spec = planning.with_chosen_shard_size(spec, data_bytes, workers, given=given)
        shards = planning.cut_shards(planned, spec.shard_size_bytes)
        sources.number_and_attribute(shards, line_bases, origin)
    return objects, shards, spec, None


def _check_objects(settings: PlanningSettings, objects: int, read: str | None, source: str) -> None:
    """Refuse a source with more objects than Plan lists and reads in half of its timeout."""
    reads.check_objects(
        objects,
        read=read,
        source=source,
        timeout_seconds=settings.plan_timeout_seconds,
        memory_mib=settings.plan_memory_mib,
    )
