"""The report service: a job's report from its manifest and what its shards recorded (Finalize's job).

What the shards recorded (ledger) and the plan's manifest (staging) → the rejects merged
(`rejects`) → the report written to staging, the jobId released unless a graph load follows.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.executions import SETTLE_MARGIN_SECONDS
from adapters.ledger import Ledger
from adapters.s3 import S3Store
from logic import bulk_put, checkpoints, layout, report, tables
from logic.errors import BulkPutFailedError, JobTakenOverError
from logic.job import PlannedJob
from reports import bulk_put as bulk_folding
from reports.rejects import merge_rejects
from reports.settings import ReportSettings

LOG = logging.getLogger(__name__)


def finalize(
    event: Mapping[str, Any],
    settings: ReportSettings,
    store: S3Store,
    ledger: Ledger,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Report on the execution's job (`event`: `state`, the execution's state, and `execution`);
    the result is what Finalize returns to the state machine (`_answer`). `now`: the clock of the
    ledger's `writersUntil` and `loaded.at`.
    Kept whole: Finalize's steps in the order the ledger needs them (counts, report, loaded, close)."""
    state = event.get("state") or {}
    execution = event.get("execution") or {}
    run_id = str(execution.get("name") or "local")
    plan = state.get("plan")
    job = PlannedJob.parse(plan["job"]) if plan and plan.get("job") else None
    spec: Mapping[str, Any] = job.spec if job else {}
    job_id = job.job_id if job else str(state.get("jobId") or run_id)
    plan_id = job.plan if job else run_id  # the ledger's key of its shards (a reload's generation)
    error = _caught_error(state, planned=plan is not None)
    manifest: list[dict[str, Any]] | None = None
    shards: dict[int, dict[str, Any]] = {}
    rejects_location: str | None = None
    sample: list[dict[str, Any]] = []
    failures: dict[int, dict[str, Any]] = {}
    bulk: BulkPutOutcome | None = None
    if plan is not None:
        manifest, shards, taken_over = _recorded(settings, store, ledger, plan, job_id, run_id, plan_id)
        error = taken_over or error
        if job is not None and bulk_put.hands_off(job.spec):
            bulk = _bulk_put(state, settings, store, job, shards)
            shards, error = bulk.shards, error or bulk.error
        missing = {int(shard["index"]) for shard in manifest or []} - set(shards)
        # Why the shards without counts failed, as their Workers recorded it (none read if none).
        failures = ledger.shard_failures(job_id, plan_id, missing) if missing else {}
        # This run's rejects only: a shard an earlier run finished wrote its rejects beside that
        # run's report (its line counts still number the lines after it).
        rejects_location, sample = merge_rejects(
            store,
            settings.staging_bucket,
            job_id,
            run_id,
            manifest or [],
            _rejects_files(shards, run_id, bulk.rejects if bulk else {}),
        )
    if not spec:  # Plan failed: say what was asked for as far as it can be read
        spec = _asked_for(state)
    # The job's table: the one its input named (or asked for, when Plan refused it), beside the
    # environment's own (same region and account), else the environment's own.
    named = job.table if job else tables.named_table(state)
    table = named or settings.table_name
    result = report.build(
        job_id=job_id,
        run_id=run_id,
        spec=spec,
        manifest=manifest,
        shards=shards,
        error=error,
        table=table,
        table_arn=tables.table_arn(settings.table_arn, table),
        seconds=_seconds(execution.get("startTime")),
        rejects_location=rejects_location,
        sample=sample,
        failures=failures,
        paced=_paced(job),
    )
    _add_graph(result, settings, spec, shards, (job_id, plan_id))
    if bulk is not None:
        result["bulkPut"] = bulk.section
    if job is not None and job.sync is not None and manifest is not None:
        _add_sync(result, store, settings, ledger, job, shards, table)
    key = layout.report_key(job_id, run_id)
    store.put_json(settings.staging_bucket, key, result)
    answer = _answer(result, f"s3://{settings.staging_bucket}/{key}")
    settled = job is None or job.sync is None or result["status"] == "SUCCEEDED"
    # A bulk put items job whose operation did not end exactly: its re-run hands the staged items off again.
    settled = settled and (bulk is None or bulk.section["exact"])
    if (
        job is not None
        and manifest is not None
        and not result["shards"]["failed"]
        and not job.graph
        and settled
    ):
        # Every shard of the plan is recorded: a re-run of it is refused (plans/service.py). Not a
        # graph job's: its re-run loads the statements its shards staged again (a failed load's retry);
        # nor a failed sync's: its re-run finishes the buckets and switches the baseline.
        ledger.record_loaded(
            job_id, str(job.plan_id or run_id), job.generation or 0, report.loaded(result, shards, now())
        )
    # The claim on the jobId lasts until the run's last state: PollGraphLoad's end when a graph
    # load follows (a second run must not start meanwhile), else here.
    # A bulk put items operation still running (its deadline's cancel not done) holds the job too:
    # a takeover or `mapload release` cancels it first (adapters/bulk_puts.py).
    if plan is not None and not answer["graphLoad"] and (bulk is None or not bulk.running):
        ledger.finish_job(
            job_id, run_id, result["status"], writers_until=_writers_until(state, result, settings, now())
        )
    return answer


def _rejects_files(
    shards: Mapping[int, Mapping[str, Any]], run_id: str, bulk_rejects: Mapping[int, str]
) -> dict[int, dict[str, Any]]:
    """The shards' rejects files this run's report merges: this run's shards' own (a shard an
    earlier run finished wrote its rejects beside that run's report; its line counts still number
    the lines after it), then the rejects this run's bulk put items operation made of any shard's
    staged records."""
    merged: dict[int, dict[str, Any]] = {}
    for index, counts in shards.items():
        own = checkpoints.rejects_keys(counts) if report.ran_in(counts, run_id) else []
        extra = [bulk_rejects[index]] if index in bulk_rejects else []
        merged[index] = {**counts, "rejectsKey": None, "rejectsKeys": [*own, *extra]}
    return merged


@dataclass
class BulkPutOutcome:
    """dynamodb.engine bulkPutItems: the shards' counts with the operation's results folded in,
    the rejects files it made (shard index -> key), the report's `bulkPut` section, the error."""

    shards: dict[int, dict[str, Any]]
    rejects: dict[int, str]
    section: dict[str, Any]
    error: dict[str, str] | None
    running: bool


def _bulk_put(
    state: Mapping[str, Any],
    settings: ReportSettings,
    store: S3Store,
    job: PlannedJob,
    shards: dict[int, dict[str, Any]],
) -> BulkPutOutcome:
    """The hand-off's outcome ($.bulkPut, or a StartBulkPut/PollBulkPut error at $.bulkPutError)
    folded into the report (reports/bulk_put.py)."""
    answer = state.get("bulkPut") or {"status": bulk_put.NOT_STARTED}
    caught = report.describe_error(state.get("bulkPutError"), planned=True)
    error = {**caught, "where": "BulkPut"} if caught else None
    if answer.get("error"):
        error = error or {**answer["error"], "where": "BulkPut"}
    status = answer.get("status")
    staged = sum(int(c.get("staged") or 0) for c in shards.values())
    folded, unplaced, rejects = None, 0, {}
    if status in bulk_put.EXACT_STATUSES and error is None:
        output = layout.bulk_output_prefix(job.job_id, job.run_id)
        objects = bulk_folding.StagedObjects(
            store, settings.staging_bucket, shards, (job.table_key or {}).keys()
        )
        try:
            reported = bulk_folding.reported_items(
                store, settings.staging_bucket, output, str(answer.get("operationArn"))
            )
            folded, unplaced = bulk_folding.fold(reported, objects)
        except (BulkPutFailedError, ValueError, KeyError, IndexError) as unreadable:
            # The output (or a sidecar) unreadable: the report says so, never a Finalize that fails.
            message = f"bulk put operation {answer.get('operationArn')}'s output: {unreadable}"
            unread = {"type": type(unreadable).__name__, "message": message, "where": "Finalize"}
            return BulkPutOutcome(shards, {}, bulk_folding.section(answer, staged, None), unread, False)
        shards = {i: bulk_folding.folded_counts(c, folded, i) for i, c in shards.items()}
        for index, records in sorted(folded.rejects.items()):
            key = layout.run_prefix(job.job_id, job.run_id) + f"rejects/bulk-{index:06d}.jsonl"
            body = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)
            store.put_bytes(settings.staging_bucket, key, body, "application/x-ndjson")
            rejects[index] = key
        if unplaced:
            error = {
                "type": "ReconciliationError",
                "message": f"{unplaced} entries of bulk put operation {answer.get('operationArn')}'s output "
                "name no record the shards staged: what was written cannot be reconciled",
                "where": "Finalize",
            }
    elif status not in (bulk_put.NOTHING_STAGED, bulk_put.NOT_STARTED, *bulk_put.EXACT_STATUSES):
        failure = answer.get("failure") or {}
        why = f" ({failure.get('code')}: {failure.get('message')})" if failure else ""
        error = error or {
            "type": BulkPutFailedError.__name__,
            "message": f"bulk put operation {answer.get('operationArn')} ended {status}{why}",
            "where": "BulkPut",
        }
    section = bulk_folding.section(answer, staged, folded, unplaced)
    return BulkPutOutcome(shards, rejects, section, error, status in bulk_put.RUNNING_STATUSES)


def _add_sync(
    result: dict[str, Any],
    store: S3Store,
    settings: ReportSettings,
    ledger: Ledger,
    job: PlannedJob,
    shards: Mapping[int, Any],
    table: str,
) -> None:
    """writeMode sync: the records the Sync Map counted, and, when the run succeeded, this run's
    merged buckets made the dataset's baseline in one conditional switch (a failed run leaves the
    previous one in force)."""
    sync = job.sync or {}
    baseline = str(sync.get("baseline") or "")
    buckets = ledger.sync_buckets(job.job_id, job.plan, int(sync["buckets"]), baseline)
    error = report.sync_section(result, shards, buckets, sync)
    caught = result["error"]
    if caught is not None and caught["where"] == "Shards" and not result["shards"]["failed"]:
        caught["where"] = "Sync"  # every shard is done: the Sync Map's Worker failed
    if result["error"] is None and error is None:
        switched = ledger.switch_baseline(
            table,
            str(sync["dataset"]),
            sync.get("baseline"),
            {"prefix": sync["prefix"], "buckets": sync["buckets"], "jobId": job.job_id, "runId": job.run_id},
        )
        if switched:
            result["sync"]["baseline"] = sync["prefix"]
            _drop_stale(store, settings.staging_bucket, table, sync)
        else:
            error = {
                "type": "SyncConflictError",
                "message": f"another sync of dataset {sync['dataset']!r} switched its baseline while this "
                "one ran: what this run wrote stays written; run it again to compare with that one",
                "where": "Finalize",
            }
    if result["error"] is None and error is not None:
        result["error"], result["status"] = error, "FAILED"


# The most staged keys of a dataset one Finalize lists (1,000 a ListObjectsV2 page, deleted 1,000
# a DeleteObjects request): 20 pages, seconds of its 15 minutes. The baseline's are at most
# MAX_BUCKETS (logic/sync.py) of them; what a larger backlog leaves, the next sync deletes.
STALE_LISTING_KEYS = 20_000


def _drop_stale(store: S3Store, bucket: str, table: str, sync: Mapping[str, Any]) -> None:
    """Once the switch is made, the dataset's merged buckets that no run can need deleted: the
    superseded baseline's and those of every run that compared with another baseline than the new
    one (failed, stopped or superseded syncs; logic/layout.py `sync_stale`). A sync's staged
    shards expire with jobs/. Best effort: one left behind costs storage, never correctness."""
    dataset = str(sync["dataset"])
    keys, failed = store.list_keys(bucket, layout.sync_dataset_prefix(table, dataset), STALE_LISTING_KEYS)
    stale = layout.sync_stale(keys, table, dataset, str(sync["prefix"]))
    deleted = store.delete_keys(bucket, stale)
    failed = failed or deleted
    if failed is not None:
        LOG.warning("stale merged buckets of dataset %s not all deleted: %s", dataset, failed)


def _writers_until(
    state: Mapping[str, Any], result: Mapping[str, Any], settings: ReportSettings, now: float
) -> int | None:
    """Until when the job's Workers may still write (epoch seconds), when the Map Run failed with
    shards not done: Step Functions stops its children, not the Lambda invocations they started,
    which run on up to the Worker's timeout (+ the takeover rule's margin). None otherwise."""
    if not state.get("error") or not result["shards"]["failed"]:
        return None
    return int(now) + settings.worker_timeout_seconds + SETTLE_MARGIN_SECONDS


def _add_graph(
    result: dict[str, Any],
    settings: ReportSettings,
    spec: Mapping[str, Any],
    shards: Mapping[int, Mapping[str, Any]],
    ids: tuple[str, str],
) -> None:
    """The report's graph section (a graph job's); `ids`: the job's and plan's."""
    job_id, plan_id = ids
    graph = report.graph_section(
        spec,
        shards,
        source=f"s3://{settings.staging_bucket}/{layout.graph_prefix(job_id, plan_id)}",
        status=result["status"],
    )
    if graph is not None:
        result["graph"] = graph


def _seconds(started: str | None) -> float | None:
    if not started:
        return None
    try:
        return round(time.time() - datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp(), 3)
    except ValueError:
        return None


def _paced(job: PlannedJob | None) -> dict[str, Any] | None:
    """`shards.workers` and `shards.estimatedSeconds` of a job Plan paced under a write budget
    (its `job.shardSeconds`); None for any other."""
    if job is None or job.shard_seconds is None:
        return None
    return {"workers": job.workers, "estimatedSeconds": job.shard_seconds}


def _caught_error(state: Mapping[str, Any], *, planned: bool) -> dict[str, str] | None:
    """The error a Catch put in the state: a step's, else Prepare's (input, source, archive)."""
    error = report.describe_error(state.get("error"), planned=planned)
    if error is None and state.get("prepareError"):
        error = report.describe_error(state["prepareError"], planned=False)
        if error is not None:
            error["where"] = "Prepare"
    return error


def _asked_for(state: Mapping[str, Any]) -> dict[str, Any]:
    """The source, format and reject limit of an input Plan could not parse, as far as they read."""
    raw = {k: v for k, v in state.items() if k not in ("error", "plan")}
    spec = {"source": raw.get("source"), "format": raw.get("format")}
    if isinstance(raw.get("maxRejectedPercent"), (int, float)):
        spec["maxRejectedPercent"] = raw["maxRejectedPercent"]
    return spec


def _taken_over(ledger: Ledger, job_id: str, run_id: str) -> dict[str, str] | None:
    """The error when the jobId is held by another run: this execution was displaced (taken over
    or released) and then redriven, so a second copy of the job ran beside the run holding it."""
    holder = (ledger.get_job(job_id) or {}).get("runId")
    if holder is None or holder == run_id:
        return None
    return {
        "type": JobTakenOverError.__name__,
        "where": "Finalize",
        "message": f"jobId {job_id!r} taken over by run {holder}: this run was displaced (a redriven "
        "execution?) and its writes may have mixed with that run's; never redrive an execution "
        "whose jobId was taken over",
    }


def _recorded(
    settings: ReportSettings,
    store: S3Store,
    ledger: Ledger,
    plan: Mapping[str, Any],
    job_id: str,
    run_id: str,
    plan_id: str,
) -> tuple[list[dict[str, Any]] | None, dict[int, dict[str, Any]], dict[str, Any] | None]:
    """The plan's manifest, what its shards recorded, and the error if the jobId was taken over.

    Whether the jobId is still this run's and what the shards recorded do not depend on each
    other: the job's record is read while the manifest and the shards' records are.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        taken_over = pool.submit(_taken_over, ledger, job_id, run_id)
        manifest = store.get_json(settings.staging_bucket, plan["manifestKey"])
        count = 1 + max((int(shard["index"]) for shard in manifest or []), default=-1)
        shards = ledger.shards(job_id, plan_id, count)
        return manifest, shards, taken_over.result()


def _answer(result: dict[str, Any], report_uri: str) -> dict[str, Any]:
    """What Finalize returns to the state machine: the status, the report and its location."""
    err = result["error"]
    graph = result.get("graph")
    return {
        "status": result["status"],
        "jobId": result["jobId"],
        "reportUri": report_uri,
        "report": result,
        "error": err["type"] if err else None,
        "cause": f"{err['type']} in {err['where']}: {err['message']}" if err else "",
        # The state machine starts the graph load only when this is true.
        "graphLoad": graph is not None and graph["status"] == "PENDING",
    }
