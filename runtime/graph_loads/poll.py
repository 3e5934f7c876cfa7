"""Polling a job's Neptune bulk load: the loader's status; at its end (or past its deadline, or
held back by the endpoint check) the report finished and the jobId released."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters.ledger import Ledger
from adapters.neptune import LoaderClient
from adapters.s3 import S3Store
from logic import endpoints, graph_load, polling
from logic import report as report_errors
from logic.errors import DanglingEdgesError, GraphLoaderError, GraphLoadFailedError, GraphLoadTimeoutError

# What to do when a graph load function ran out of time or memory: StartGraphLoad's edge endpoint
# check grows with the ids a property graph job references (docs/NEPTUNE.md, "Edge endpoints").
_CHECK_HINT = (
    " (StartGraphLoad checks a property graph's edge endpoints before the load, in time and memory"
    " that grow with the ids the job references: raise the environment's control_timeout_seconds,"
    " at most 900, or control_memory_mib, then re-run the job: its staged shards are kept)"
)
TIMEOUT_HINTS = {"Sandbox.Timedout": _CHECK_HINT, "Runtime.OutOfMemory": _CHECK_HINT}


def poll(
    event: Mapping[str, Any],
    client: LoaderClient,
    store: S3Store,
    ledger: Ledger,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """The same result shape Finalize returns (status, report, cause, ...) plus `graphStatus`,
    `pending` and `load`; the state machine waits and polls again while `pending` is true.

    With `error` (StartGraphLoad or PollGraphLoad failed for good), it only finishes the report:
    status FAILED, the error named, `where` GraphLoad.
    """
    result = dict(event["result"])
    # StartGraphLoad's answer ($.result.load; `load` beside the result in executions started
    # before that) carries the edge endpoint check to the first poll, which moves it into the
    # report: the state holds it once.
    load = dict(event.get("load") or result.get("load") or {})
    if load.get("danglingEdges") is not None:
        graph = {**(result["report"].get("graph") or {}), "danglingEdges": load["danglingEdges"]}
        result["report"] = {**result["report"], "graph": graph}
    result["load"] = {k: v for k, v in load.items() if k != "danglingEdges"} or None
    if event.get("error") is not None:
        return _finish(result, store, ledger, _caught(event["error"], result), {"status": "ERROR"}, None)
    if not load.get("loadId"):  # the endpoint check held the load back
        blocked = _blocked(result["report"]["graph"]["danglingEdges"])
        return _finish(result, store, ledger, blocked, {"status": "BLOCKED"}, None)
    load_id = str(load["loadId"])
    dangling = (result["report"].get("graph") or {}).get("danglingEdges")
    summary = graph_load.summarize(client.status(load_id), tolerated=endpoints.tolerated(dangling))
    status = summary["status"]
    error: dict[str, str] | None = None
    if graph_load.is_pending(status):
        if now() < float(load["deadline"]):
            # The next GraphWait: longer as the load ages, so the loop fits the execution history.
            wait = polling.next_wait(
                now() - float(load.get("startedAt", now())),
                int(load["waitSeconds"]),
                float(load["deadline"]) - now(),
            )
            return {**result, "graphStatus": status, "pending": True, "waitSeconds": wait}
        error = _cancelled(client, load_id, status)
    elif not graph_load.succeeded(summary):
        error = {
            "type": GraphLoadFailedError.__name__,
            "message": graph_load.failure_message(summary, load_id),
            "where": "GraphLoad",
        }
    return _finish(result, store, ledger, error, summary, load_id)


def _caught(caught_error: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, str]:
    """The report's error for a graph load function that failed for good (a Catch result)."""
    caught = report_errors.describe_error(caught_error, planned=True) or {}
    # Only a property graph's StartGraphLoad grows with the job (its report's graph section
    # counts edges); PollGraphLoad's one GET does not.
    property_graph = "edges" in (result["report"].get("graph") or {})
    hint = TIMEOUT_HINTS.get(caught.get("type", ""), "") if property_graph else ""
    return {
        "type": caught.get("type", "Error"),
        "message": caught.get("message", "") + hint,
        "where": "GraphLoad",
    }


def _cancelled(client: LoaderClient, load_id: str, status: str) -> dict[str, str]:
    """Past the deadline: stop the load rather than leave it running unobserved; the error."""
    try:
        client.cancel(load_id)
        cancelled = "; the load was cancelled"
    except GraphLoaderError as failure:
        cancelled = f"; cancelling it failed: {failure}"
    message = (
        f"Neptune load {load_id} was still {status} at the input's graph.timeoutMinutes deadline{cancelled}"
    )
    return {"type": GraphLoadTimeoutError.__name__, "message": message, "where": "GraphLoad"}


def _blocked(dangling: Mapping[str, Any]) -> dict[str, str]:
    count, edges = dangling["count"], dangling["edges"]
    # Not complete: the check stopped once it was sure (the counts are lower bounds).
    least = "" if dangling.get("complete", True) else "at least "
    return {
        "type": DanglingEdgesError.__name__,
        "message": (
            f"{least}{count:,} of {edges:,} edges ({dangling['percent']}%) have an endpoint that is neither "
            f"a vertex of this job nor in the graph ({least}{dangling['missingVertices']:,} vertex ids, e.g. "
            f"{', '.join(repr(i) for i in dangling['sample'][0]['missing'])}); graph.maxDanglingPercent "
            f"is {dangling['maxPercent']}: the load was not started (report: graph.danglingEdges)"
        ),
        "where": "GraphLoad",
    }


def _finish(
    result: dict[str, Any],
    store: S3Store,
    ledger: Ledger,
    error: dict[str, str] | None,
    summary: Mapping[str, Any],
    load_id: str | None,
) -> dict[str, Any]:
    """Write the report with the load's outcome, close the job in the ledger, return the result."""
    report = dict(result["report"])
    graph = dict(report.get("graph") or {})
    graph["status"] = summary["status"]
    if load_id is not None:
        graph.update(
            {
                "loadId": load_id,
                "loaded": summary["loaded"],
                "records": summary["records"],
                "duplicates": summary["duplicates"],
                "seconds": summary["seconds"],
                "errors": summary["errors"],
            }
        )
    report["graph"] = graph
    if error is not None:
        report["status"] = "FAILED"
        report["error"] = error
    bucket, key = str(result["reportUri"])[5:].split("/", 1)
    store.put_json(bucket, key, report)
    job_id = str(report["jobId"])
    ledger.finish_job(job_id, str(report["runId"]), report["status"])
    return {
        **result,
        "status": report["status"],
        "report": report,
        "error": error["type"] if error else None,
        "cause": f"{error['type']} in {error['where']}: {error['message']}" if error else "",
        "graphStatus": graph["status"],
        "pending": False,
        "waitSeconds": 0,
    }
