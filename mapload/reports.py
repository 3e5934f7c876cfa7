"""A job's report as the commands show it: fetched, checked for reconciliation, rendered as lines."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from logic.report import balanced
from mapload.environment import Clients, Environment


def job_report(
    clients: Clients, environment: Environment, described: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The job report: the execution's output when it succeeded, else Finalize's report.json."""
    if described.get("output"):
        output = json.loads(described["output"])
        if isinstance(output, dict) and isinstance(output.get("report"), dict):
            return dict(output["report"])
    run_id = str(described.get("name") or described["executionArn"].rsplit(":", 1)[-1])
    try:
        payload = json.loads(described.get("input") or "{}")
    except json.JSONDecodeError:
        payload = {}
    job_id = str(payload.get("jobId") or run_id) if isinstance(payload, dict) else run_id
    key = f"jobs/{job_id}/{run_id}/report.json"  # docs/CONTRACTS.md "Staging bucket layout"
    try:
        body = clients.s3.get_object(Bucket=environment.staging_bucket, Key=key)["Body"].read()
    except ClientError:
        return None  # Finalize never ran (the execution was aborted or Finalize itself failed)
    report = json.loads(body)
    return dict(report) if isinstance(report, dict) else None


def reconciliation_problems(report: Mapping[str, Any] | None, status: str) -> list[str]:
    """Why this job does not count as a clean load (empty when it does)."""
    if report is None:
        return [f"execution {status} without a report"]
    problems = []
    if status != "SUCCEEDED":
        problems.append(f"execution {status}")
    if report.get("status") != "SUCCEEDED":
        problems.append(f"report status {report.get('status')}")
    records = report.get("records") or {}
    read, written, skipped, rejected = (
        int(records.get(k) or 0) for k in ("read", "written", "skipped", "rejected")
    )
    if read != balanced(records):
        problems.append(f"records read {read} != written {written} + skipped {skipped} + rejected {rejected}")
    shards = report.get("shards") or {}
    if int(shards.get("done") or 0) + int(shards.get("carried") or 0) != shards.get("total") or shards.get(
        "missing"
    ):
        problems.append(f"shards done {shards.get('done')} of {shards.get('total')}")
    return problems


def summary(report: Mapping[str, Any] | None, described: Mapping[str, Any]) -> str:
    lines = [f"execution {described.get('name')}: {described['status']}"]
    if described.get("error"):
        lines.append(f"  error     {described.get('error')}: {described.get('cause', '')[:500]}")
    if report is None:
        return "\n".join(lines)
    lines.append(f"  job       {report.get('jobId')} (report status {report.get('status')})")
    return "\n".join(lines + report_lines(report))


def failure_line(report: Mapping[str, Any], report_path: object) -> str:
    """One line saying why a run failed and where its report is (what --quiet still prints)."""
    error = report.get("error") or {}
    why = (
        f"{error.get('type')} in {error.get('where')}: {error.get('message')}"
        if error
        else "no error recorded"
    )
    return f"mapload run {report.get('runId', '')}: {report.get('status')}: {why} (report {report_path})"


def _table(dynamodb: Mapping[str, Any]) -> str:
    """The table's name, with its region and account from its ARN when the report has it."""
    arn = str(dynamodb.get("tableArn") or "")
    parts = arn.split(":")
    where = f" ({parts[3]}, account {parts[4]})" if len(parts) > 5 else ""
    return f"{dynamodb.get('table')}{where}"


def _store(store: Any) -> str:
    """What the local graph store holds after the run: the property graph's vertices and edges
    (openCypher loads), else the RDF store's statements."""
    if not isinstance(store, Mapping):
        return ""
    if "vertices" in store:
        return f" · store {store['vertices']:,} vertices, {store.get('edges', 0):,} edges"
    return f" · store {store.get('statements', 0):,} statements"


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """A report's counts, shards, time, table, graph load, rejects and error, a line each
    (`mapload status` and `mapload run-local` print them the same way).
    Kept whole: the summary's lines in the order they are printed."""
    rec = report.get("records") or {}
    shards = report.get("shards") or {}
    # A dry run writes nothing: its counts are what a real run would write.
    dry = bool(report.get("dryRun"))
    lines = [
        f"  records   {'DRY RUN, nothing written: ' if dry else ''}read {rec.get('read', 0):,} = "
        f"{'would write' if dry else 'written'} {rec.get('written', 0):,}"
        # skipped: a write mode's condition not met; shown when there are any
        + (f" + skipped {rec['skipped']:,}" if rec.get("skipped") else "")
        # writeMode sync: the items equal to the baseline's, not written
        + (f" + unchanged {rec['unchanged']:,}" if "unchanged" in rec else "")
        + f" + rejected {rec.get('rejected', 0):,}"
        + (
            f" + duplicates {rec.get('duplicates', 0):,} · deleted {rec['deleted']:,}"
            if "deleted" in rec
            # bulkPutItems: a key's earlier records in a shard are not staged (not written)
            else f" + duplicates {rec.get('duplicates', 0):,}"
            if report.get("bulkPut")
            else f"  (duplicates in a batch: {rec.get('duplicates', 0):,})"
        ),
        f"  shards    {shards.get('done')}/{shards.get('total')} done"
        + (f" ({shards['sizeMiB']:g} MiB each)" if shards.get("sizeMiB") else "")
        + (
            f" · ~{shards['estimatedSeconds']:,.0f} s a shard on {shards.get('workers')} Workers "
            "at the budget"
            if shards.get("estimatedSeconds") is not None
            else ""
        )
        # Shards an earlier run of the job finished: not redone, their records not in this run's.
        + (f" · {shards['carried']:,} shards done by an earlier run" if shards.get("carried") else ""),
        f"  seconds   {report.get('seconds')}",
    ]
    if report.get("writeMode") is not None or not isinstance(report.get("graph"), dict):
        lines.append(f"  table     {_table(report.get('dynamodb') or {})}")  # not on a graph-only run
    graph = report.get("graph")
    if isinstance(graph, dict):
        loaded = graph.get("loaded")
        lines.append(
            f"  graph     staged {graph.get('staged')} · "
            + (f"loaded {loaded} · " if loaded is not None else "not loaded · ")
            + str(graph.get("status"))
            + _store(graph.get("store"))
            + (
                f" · {graph['errors']['tolerated']:,} dangling edges left out (graph.maxDanglingPercent)"
                if (graph.get("errors") or {}).get("tolerated")
                else ""
            )
            + (
                f" · optional left out: {graph.get('skippedVertices', 0):,} vertices, "
                f"{graph.get('skippedEdges', 0):,} edges"
                if graph.get("skippedVertices") or graph.get("skippedEdges")
                else ""
            )
        )
        dangling = graph.get("danglingEdges")
        if isinstance(dangling, dict) and "skipped" in dangling:
            lines.append(f"  endpoints not checked: {dangling['skipped']}")
        elif isinstance(dangling, dict):
            least = "" if dangling.get("complete", True) else "at least "
            lines.append(
                f"  endpoints dangling edges {least}{dangling['count']:,} of {dangling['edges']:,} "
                f"({dangling['percent']:g}%, limit {dangling['maxPercent']:g}%)"
                + (" · load held back" if dangling["blocked"] else "")
                + (
                    f" · e.g. {dangling['sample'][0]['id']} -> {', '.join(dangling['sample'][0]['missing'])}"
                    if dangling["sample"]
                    else ""
                )
            )
    bulk = report.get("bulkPut")
    if isinstance(bulk, dict):
        written = bulk.get("written")
        # Not exact (FAILED, CANCELLED): only an upper bound is known.
        most = bulk.get("writtenAtMost", 0)
        wrote = f"written {written:,}" if written is not None else f"written at most {most:,}"
        lines.append(
            f"  bulk put  {bulk.get('status')} · "
            + wrote
            + f" · errors {bulk.get('errors', 0):,} · condition failures {bulk.get('conditionFailures', 0):,}"
            + (f" · {bulk['operationArn']}" if bulk.get("operationArn") else "")
        )
    rejects = report.get("rejects") or {}
    if rejects.get("count"):
        reasons = ", ".join(
            f"{reason} {count:,}" for reason, count in (rejects.get("byReason") or {}).items()
        )
        lines.append(f"  rejects   {rejects['count']:,} ({reasons}) -> {rejects.get('location')}")
    if report.get("error"):
        err = report["error"]
        lines.append(f"  error     {err.get('type')} in {err.get('where')}: {err.get('message')}")
    return lines
