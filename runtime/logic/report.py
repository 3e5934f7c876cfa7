"""Reconcile a run's shard counts against its manifest and build the job report (version 1)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from logic import graph_load
from logic.clipping import TEXT_BYTES, clip
from logic.errors import record_of
from logic.spec.inputs import Common

REPORT_VERSION = 1
SAMPLE_SIZE = 10
# Skipped keys kept: each shard records up to this many, the report the first this many.
SKIPPED_SAMPLE_SIZE = 5
MISSING_LISTED = 20
# Failed shards whose cause the report lists (each cause's message clipped to TEXT_BYTES): with
# 100,000 failed shards the report still fits the state machine's 256 KiB payloads.
FAILURES_LISTED = 5


def clip_sample(record: Mapping[str, Any]) -> dict[str, Any]:
    """A reject or a skipped key as shown in samples (ledger item, report): each text clipped to
    TEXT_BYTES of JSON (logic/clipping.py), so a 400 KB line cannot push a ledger item or a state
    of the execution over its size limit."""
    return {k: clip(v, TEXT_BYTES) if isinstance(v, str) else v for k, v in record.items()}


def describe_error(error: Mapping[str, Any] | None, planned: bool) -> dict[str, str] | None:
    """Turn a Step Functions Catch result into {type, message, where}."""
    if not error:
        return None
    kind = str(error.get("Error") or "Error")
    message = str(error.get("Cause") or "")
    try:  # a Lambda failure's cause is the function's JSON error document
        cause = json.loads(message)
        if isinstance(cause, dict) and "errorMessage" in cause:
            kind = str(cause.get("errorType") or kind)
            message = str(cause["errorMessage"])
    except ValueError:
        pass
    return {"type": kind, "message": message, "where": "Shards" if planned else "Plan"}


def shard_failure(error: BaseException, run_id: str) -> dict[str, Any]:
    """Why a shard's attempt failed, as the Worker records it and the report shows it: the error's
    name, its message (clipped), the run, and the record it was raised at when one was being
    processed (`shardLine` and `offset`, or a Parquet row's `rowGroup` and `row`)."""
    return {
        "type": type(error).__name__,
        "message": clip(str(error) or repr(error), TEXT_BYTES),
        "runId": run_id,
        **(record_of(error) or {}),
    }


def failure_section(
    manifest: Sequence[Mapping[str, Any]],
    shards: Mapping[int, Mapping[str, Any]],
    failures: Mapping[int, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """The first failed shards' causes, in shard order: `shard`, `source`, `type`, `message`,
    `runId`, and the record's `line` (in its object; None when an earlier shard of the object has
    no counts), `shardLine` and `offset` (or `rowGroup` and `row`) when one record was being
    processed. Only shards without recorded counts: a shard done on a retry did not fail."""
    failed = sorted(set(failures) - set(shards))[:FAILURES_LISTED]
    if not failed:
        return []
    bases = line_numbers(manifest, shards)
    entries = {int(s["index"]): s for s in manifest}
    listed = []
    for index in failed:
        failure = dict(failures[index])
        entry = entries.get(index) or {}
        cause: dict[str, Any] = {"shard": index, "source": f"s3://{entry.get('bucket')}/{entry.get('key')}"}
        cause.update(
            type=str(failure.pop("type", "Error")), message=clip(str(failure.pop("message", "")), TEXT_BYTES)
        )
        if "shardLine" in failure:
            base = bases.get(index)
            cause["line"] = None if base is None else base + int(failure["shardLine"])
        listed.append({**cause, **failure})
    return listed


def _failed_shards_error(
    total: int, missing: list[int], causes: list[dict[str, Any]], unexplained: int
) -> dict[str, str]:
    """The job's error when shards failed: the first cause, in one line (error name, message, the
    record's line), and how many other shards failed or have no recorded cause."""
    first = causes[0]
    at = ""
    if "shardLine" in first:
        line = first.get("line")
        at = (
            f" at line {line}"
            if line is not None
            else f" at line {first['shardLine']} of shard {first['shard']}"
        )
        at += f" (byte offset {first['offset']}) of {first['source']}"
    elif "rowGroup" in first:
        at = f" at row {first['row']} (row group {first['rowGroup']}) of {first['source']}"
    others = f"; {len(missing)} of {total} shards failed" if len(missing) > 1 else ""
    if unexplained:
        others += (
            f" ({unexplained} with no recorded cause: a Worker timed out, ran out of memory or was stopped)"
        )
    return {
        "type": first["type"],
        "message": f"shard {first['shard']} failed{at}: {first['message']}{others}",
        "where": "Shards",
    }


def line_numbers(
    manifest: Sequence[Mapping[str, Any]], shards: Mapping[int, Mapping[str, Any]]
) -> dict[int, int | None]:
    """Absolute line number of the line before each shard's first, when every earlier shard
    of the same object reported its line count (a missing shard leaves the rest unknown)."""
    bases: dict[int, int | None] = {}
    running: int | None = None
    current_key: tuple[str, str] | None = None
    for shard in manifest:
        key = (str(shard["bucket"]), str(shard["key"]))
        if key != current_key:
            current_key = key
            running = int(shard.get("lineBase") or 0)
        index = int(shard["index"])
        bases[index] = running
        done = shards.get(index)
        running = None if running is None or done is None else running + int(done["lines"])
    return bases


# The report's `records`.
RECORD_COUNTS = ("read", "written", "skipped", "uncertain", "rejected", "duplicates")
# The per-shard counts a report sums.
SUMMED = (
    "read",
    "written",
    "skipped",
    "uncertain",
    "rejected",
    "duplicates",
    "retries",
    "throttles",
    "requests",
    "bytes",
    "lines",
    "recordLines",
    "rejectedLines",
    "ignoredLines",
    "s3Retries",
)
# Recorded by every shard of a plan format 2 or later (logic/planning.py PLAN_FORMAT).
LINE_COUNTS = ("recordLines", "rejectedLines", "ignoredLines")
# The report's `lines`.
LINE_TOTALS = ("total", "accepted", "rejected", "ignored")


def build(
    *,
    job_id: str,
    run_id: str,
    spec: Mapping[str, Any] | None,
    manifest: Sequence[Mapping[str, Any]] | None,
    shards: Mapping[int, Mapping[str, Any]],
    error: dict[str, str] | None,
    table: str,
    seconds: float | None,
    table_arn: str | None = None,
    rejects_location: str | None,
    sample: list[dict[str, Any]],
    failures: Mapping[int, Mapping[str, Any]] | None = None,
    paced: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The job's report from its shards' recorded counts. Kept whole: most of it is the report's
    shape, one literal that reads top to bottom as schemas/report.schema.json does."""
    total = len(manifest) if manifest is not None else 0
    expected = {int(s["index"]) for s in manifest or []}
    missing = sorted(expected - set(shards))
    causes = failure_section(manifest or [], shards, failures or {})
    if missing and causes and (error is None or error.get("where") == "Shards"):
        # The shards' own causes say more than the Map's "a child failed" or a missing count.
        unexplained = len(set(missing) - set(failures or {}))
        error = _failed_shards_error(total, missing, causes, unexplained)
    # This run's shards are its counts; shards an earlier run of the job finished are reported apart.
    ran = {index: counts for index, counts in shards.items() if ran_in(counts, run_id)}
    totals, by_reason, unbalanced = _sum_shards(ran)
    lines = line_section(totals, ran) if ran or len(shards) == 0 else dict.fromkeys(LINE_TOTALS, 0)
    max_rejected = float(_given(spec, "maxRejectedPercent"))
    rejected_percent = 100.0 * totals["rejected"] / totals["read"] if totals["read"] else 0.0
    if error is None:
        dry_run = bool(_given(spec, "dryRun"))
        error = _reconciliation_error(
            totals, missing, total, unbalanced, rejected_percent, max_rejected, dry_run
        ) or _lines_error(lines)
    return {
        "version": REPORT_VERSION,
        "jobId": job_id,
        "runId": run_id,
        "status": "FAILED" if error is not None else "SUCCEEDED",
        "error": error,
        "source": (spec or {}).get("source"),
        "format": (spec or {}).get("format"),
        "dryRun": bool(_given(spec, "dryRun")),
        "writeMode": ((spec or {}).get("dynamodb") or {}).get("writeMode"),
        # `uncertain` only when a redone range could not tell (docs/REPORT.md).
        "records": {name: totals[name] for name in RECORD_COUNTS if name != "uncertain" or totals[name]},
        "lines": lines,
        "shards": {
            "total": total,
            "done": len(ran),
            "failed": len(missing),
            "missing": missing[:MISSING_LISTED],
            "failures": causes,
            "sizeMiB": (spec or {}).get("shardSizeMiB"),
            "carried": len(shards) - len(ran),
            # Under a write budget: the Workers Plan ran and a shard's estimated seconds at their share.
            **(paced or {}),
        },
        "carried": carried_section(shards, run_id),
        "bytes": totals["bytes"],
        "seconds": seconds,
        "dynamodb": {
            "table": table,
            "tableArn": table_arn,
            "requests": totals["requests"],
            "retries": totals["retries"],
            "throttles": totals["throttles"],
        },
        "s3": {"retries": totals["s3Retries"]},
        "skipped": {"count": totals["skipped"], "sample": _skipped_sample(ran)},
        "rejects": {
            "count": totals["rejected"],
            "percent": round(rejected_percent, 4),
            "maxPercent": max_rejected,
            "byReason": dict(sorted(by_reason.items())),
            "sample": sample[:SAMPLE_SIZE],
            "location": rejects_location,
        },
    }


# writeMode sync's records beside RECORD_COUNTS: the Sync Map's, summed over the buckets.
SYNC_COUNTS = ("written", "unchanged", "deleted", "duplicates")


def sync_section(
    result: dict[str, Any],
    shards: Mapping[int, Mapping[str, Any]],
    buckets: Mapping[int, Mapping[str, Any]],
    sync: Mapping[str, Any],
) -> dict[str, str] | None:
    """A sync's records in `result` (changed in place): read and rejected over every shard of the
    plan (an earlier run's too: the buckets compare the whole file), written (new and changed),
    unchanged, deleted and duplicates (a key's earlier records: the later wins) over the buckets,
    and the `sync` section. The error when a bucket has no counts or the counts do not reconcile
    (read = written + unchanged + rejected + duplicates), else None."""
    count = int(sync["buckets"])
    summed = {name: sum(int(b.get(name) or 0) for b in buckets.values()) for name in SYNC_COUNTS}
    read = sum(int(c.get("read") or 0) for c in shards.values())
    rejected = sum(int(c.get("rejected") or 0) for c in shards.values())
    staged = sum(int(c.get("written") or 0) for c in shards.values())
    duplicates = summed["duplicates"] + sum(int(c.get("duplicates") or 0) for c in shards.values())
    result["records"] = {
        "read": read,
        "written": summed["written"],
        "unchanged": summed["unchanged"],
        "deleted": summed["deleted"],
        "skipped": 0,
        "rejected": rejected,
        "duplicates": duplicates,
    }
    result["dynamodb"]["requests"] += sum(int(b.get("requests") or 0) for b in buckets.values())
    result["dynamodb"]["retries"] += sum(int(b.get("retries") or 0) for b in buckets.values())
    result["dynamodb"]["throttles"] += sum(int(b.get("throttles") or 0) for b in buckets.values())
    missing = sorted(set(range(count)) - set(buckets))
    result["sync"] = {
        "dataset": sync["dataset"],
        "buckets": count,
        "synced": count - len(missing),
        "firstSync": not sync.get("baseline"),
        "baseline": None,
    }
    if missing:
        return {
            "type": "SyncIncompleteError",
            "message": f"{len(missing)} of {count} sync buckets have no recorded counts (bucket "
            f"{', '.join(map(str, missing[:MISSING_LISTED]))}): the dataset's baseline is unchanged; "
            "run the job again to finish the sync",
            "where": "Sync",
        }
    if staged != summed["written"] + summed["unchanged"] + summed["duplicates"]:
        return {
            "type": "ReconciliationError",
            "message": f"the shards staged {staged} items but the buckets account for "
            f"{summed['written'] + summed['unchanged'] + summed['duplicates']} (written + unchanged + "
            "duplicates)",
            "where": "Finalize",
        }
    return None


def ran_in(counts: Mapping[str, Any], run_id: str) -> bool:
    """Whether a shard's recorded counts are this run's: its Worker recorded them under `runId`
    (a record without one predates it, and is taken as the run's own)."""
    return str(counts.get("runId", run_id)) == run_id


CARRIED_RECORDS = ("read", "written", "skipped", "rejected")
# Earlier runs the report lists by name (their totals are all in `carried.shards`, `.records`).
CARRIED_LISTED = 20


def carried_section(shards: Mapping[int, Mapping[str, Any]], run_id: str) -> dict[str, Any]:
    """What earlier runs of the job did on the shards this run did not redo: their `shards` and
    `records` in all, and the first CARRIED_LISTED of those `runs` (the report travels in 256 KiB
    state payloads, whatever the number of runs before it)."""
    runs = carried_runs(shards, run_id)
    return {
        "shards": sum(run["shards"] for run in runs),
        "records": {name: sum(run["records"][name] for run in runs) for name in CARRIED_RECORDS},
        "runs": runs[:CARRIED_LISTED],
    }


def carried_runs(shards: Mapping[int, Mapping[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """The earlier runs of the job whose recorded shards this run did not redo, in the order of
    their first shard: `{runId, shards, records: {read, written, skipped, rejected}}` each."""
    runs: dict[str, dict[str, Any]] = {}
    for _, counts in sorted(shards.items()):
        if ran_in(counts, run_id):
            continue
        entry = runs.setdefault(
            str(counts["runId"]), {"runId": str(counts["runId"]), "shards": 0, "records": Counter()}
        )
        entry["shards"] += 1
        entry["records"].update({name: int(counts.get(name) or 0) for name in CARRIED_RECORDS})
    return [
        {**entry, "records": {name: entry["records"][name] for name in CARRIED_RECORDS}}
        for entry in runs.values()
    ]


def loaded(
    result: Mapping[str, Any], shards: Mapping[int, Mapping[str, Any]], now: float | None = None
) -> dict[str, Any]:
    """What the ledger keeps of a run that finished a plan's last shard (adapters/ledger.py
    record_loaded), for Plan's refusal of a re-run: the run, when (epoch seconds), the plan's
    records over every run that did its shards, and those runs."""
    records = {name: sum(int(c.get(name) or 0) for c in shards.values()) for name in CARRIED_RECORDS}
    runs = [str(result["runId"])] + [str(run["runId"]) for run in result["carried"]["runs"]]
    return {  # the runs listed: this one and the first CARRIED_LISTED before it
        "runId": result["runId"],
        "at": int(time.time() if now is None else now),
        "status": result["status"],
        "records": records,
        "runs": runs,
    }


def _sum_shards(shards: Mapping[int, Mapping[str, Any]]) -> tuple[Counter[str], Counter[str], list[int]]:
    """(the summed counts, rejects by reason, the shards whose read != written + skipped + rejected)."""
    totals: Counter[str] = Counter()
    by_reason: Counter[str] = Counter()
    unbalanced = []
    for index, counts in sorted(shards.items()):
        for name in SUMMED:
            totals[name] += int(counts.get(name) or 0)
        by_reason.update({k: int(v) for k, v in (counts.get("byReason") or {}).items()})
        if int(counts["read"]) != balanced(counts):
            unbalanced.append(index)
    return totals, by_reason, unbalanced


def line_section(totals: Mapping[str, int], shards: Mapping[int, Mapping[str, Any]]) -> dict[str, int] | None:
    """The source's lines by where they went: `total` (the data's lines, the header line not among
    them) = `accepted` (lines of records written or skipped) + `rejected` (lines the rejected
    records hold: a CSV record may span lines) + `ignored` (blank and comment lines). None when a
    shard recorded no line counts (none was done)."""
    if not shards or any(name not in counts for counts in shards.values() for name in LINE_COUNTS):
        return None
    return {
        "total": totals["lines"],
        "accepted": totals["recordLines"] - totals["rejectedLines"],
        "rejected": totals["rejectedLines"],
        "ignored": totals["ignoredLines"],
    }


def _lines_error(lines: Mapping[str, int] | None) -> dict[str, str] | None:
    """A ReconciliationError when a line of the source was read in no record or in two."""
    if lines is None or lines["total"] == balanced_lines(lines):
        return None
    return {
        "type": "ReconciliationError",
        "message": (
            f"the source's {lines['total']} lines are not accepted {lines['accepted']} + rejected "
            f"{lines['rejected']} + ignored {lines['ignored']}: a line was read in no record or in two"
        ),
        "where": "Finalize",
    }


def balanced_lines(lines: Mapping[str, int]) -> int:
    """What `lines.total` must equal: every line of the source is in exactly one record read
    (accepted or rejected) or is a blank or comment line."""
    return lines["accepted"] + lines["rejected"] + lines["ignored"]


def balanced(records: Mapping[str, Any]) -> int:
    """What `read` must equal: every record read is written, skipped (its write mode's condition
    was not met) or rejected. A count recorded before `skipped` existed has none. A shard of
    engine bulkPutItems (it records `staged`) writes nothing itself: every record it read is
    staged, a duplicate of a later record of its key, or rejected; once the operation's results
    are folded in (`bulkFolded`, reports/bulk_put.py), each staged record is written, skipped (a
    condition) or rejected (the service's error)."""
    if "staged" in records:
        parts = ("written", "skipped") if records.get("bulkFolded") else ("staged",)
        return sum(int(records.get(name) or 0) for name in (*parts, "duplicates", "rejected"))
    return sum(int(records.get(name) or 0) for name in ("written", "skipped", "rejected"))


def _skipped_sample(shards: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The first skipped keys, in shard order (each shard keeps a few); a key's value may be 2 KB
    of control characters, six bytes each as JSON: clipped like any sample text."""
    sample: list[dict[str, Any]] = []
    for _, counts in sorted(shards.items()):
        sample.extend(counts.get("skippedSample") or ())
    return [clip_sample(key) for key in sample[:SKIPPED_SAMPLE_SIZE]]


def _reconciliation_error(
    totals: Counter[str],
    missing: list[int],
    total: int,
    unbalanced: list[int],
    rejected_percent: float,
    max_rejected: float,
    dry_run: bool = False,
) -> dict[str, str] | None:
    """Why the counts fail the job (the first reason), or None when they reconcile."""
    if missing:
        listed = ", ".join(str(i) for i in missing[:MISSING_LISTED])
        return {
            "type": "ReconciliationError",
            "message": f"{len(missing)} of {total} shards have no recorded counts (shard {listed}) and "
            "no recorded cause: a Worker timed out, ran out of memory or was stopped (the Map Run's "
            "failed children say which)",
            "where": "Finalize",
        }
    if unbalanced:
        return {
            "type": "ReconciliationError",
            "message": f"read != written + skipped + rejected in shards {unbalanced[:MISSING_LISTED]}",
            "where": "Finalize",
        }
    if rejected_percent > max_rejected:
        return {
            "type": "TooManyRejectsError",
            "message": (
                f"{totals['rejected']} of {totals['read']} records rejected ({rejected_percent:.2f}%), "
                f"above maxRejectedPercent {max_rejected:g}; "
                + ("a dry run: nothing was written" if dry_run else "what was written stays written")
            ),
            "where": "Finalize",
        }
    return None


def graph_section(
    spec: Mapping[str, Any] | None, shards: Mapping[int, Mapping[str, Any]], *, source: str, status: str
) -> dict[str, Any] | None:
    """The report's `graph` part before the load: what was staged and where; None without a graph target."""
    if not spec or spec.get("graph") is None:
        return None
    staged = sum(int(counts.get("graphStaged") or 0) for counts in shards.values())
    if spec.get("dryRun"):
        graph_status = "DRY_RUN"
    elif status != "SUCCEEDED":
        graph_status = "NOT_STARTED"
    elif staged == 0:
        graph_status = "NOTHING_TO_LOAD"
    else:
        graph_status = "PENDING"
    section: dict[str, Any] = {
        "staged": staged,
        "loaded": None,
        "status": graph_status,
        "loadId": None,
        "source": source if staged else None,
        "errors": None,
    }
    if graph_load.is_property_graph(spec["graph"], str(spec.get("format") or "")):
        # StartGraphLoad weighs dangling edges against `edges` (graph.maxDanglingPercent) and
        # sizes its passes by `openEndpoints` and `openEndpointBytes` (the endpoints each shard's
        # vertices do not cover, and their text).
        fields = (
            ("vertices", "graphVertices"),
            ("edges", "graphEdges"),
            ("skippedVertices", "graphSkippedVertices"),
            ("skippedEdges", "graphSkippedEdges"),
            ("openEndpoints", "graphOpenEndpoints"),
            ("openEndpointBytes", "graphOpenEndpointBytes"),
        )
        for name, field in fields:
            section[name] = sum(int(counts.get(field) or 0) for counts in shards.values())
    return section


# The defaults of the fields every input has, written once in the input model.
_SPEC_DEFAULTS = {field.alias or name: field.default for name, field in Common.model_fields.items()}


def _given(spec: Mapping[str, Any] | None, name: str) -> Any:
    """A field of the normalized spec; absent (or no spec): the input model's default."""
    return (spec or {}).get(name, _SPEC_DEFAULTS[name])
