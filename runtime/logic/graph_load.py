"""Neptune bulk loader rules: the POST /loader body, pending statuses, the report's graph part."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from logic.clipping import TEXT_BYTES, clip
from logic.spec.graph import GraphOptions

# Statuses the poll loop waits through; LOAD_COMPLETED succeeds, and LOAD_FAILED for tolerated
# dangling edges alone (`accepted`); every other status fails the job.
# LOAD_COMMITTED_W_WRITE_CONFLICTS is not an end: the loader resolves the conflicts in separate
# transactions and updates the status as it goes (Neptune "Loader Error and Feed Messages"); the
# input's graph.timeoutMinutes deadline bounds the wait as for any pending status.
PENDING = ("LOAD_NOT_STARTED", "LOAD_IN_QUEUE", "LOAD_IN_PROGRESS", "LOAD_COMMITTED_W_WRITE_CONFLICTS")
_ROLE_DENIED = (
    "S3 denied the loader role (iamRoleArn): check its s3:GetObject and s3:ListBucket grant on the "
    "staged files and, with a data key, its kms:Decrypt"
)
# Loader answers no retry can change (Neptune "Loader Errors"), matched on their documented
# message, with what to check. "Unable to connect to S3 endpoint" comes as HTTP 500.
_ACCESS_CAUSES: tuple[tuple[str, str], ...] = (
    (
        "unable to connect to s3 endpoint",
        "the cluster cannot reach S3: its security group needs egress 443 to the S3 prefix list, its "
        "VPC an S3 gateway endpoint, and the bucket must be in the cluster's region",
    ),
    (
        "unable to perform s3 list operation",
        "S3 denied the loader role (iamRoleArn) s3:ListBucket on the staging bucket",
    ),
    ("access denied", _ROLE_DENIED),
    ("accessdenied", _ROLE_DENIED),
    (
        "couldn't find the aws credential for iam_role_arn",
        "the loader role (iamRoleArn) is not associated with the cluster",
    ),
    ("bucket is not in provided region", "the staging bucket is not in the cluster's region"),
)
# A feed's S3 status (the overall status is then LOAD_FAILED) and what it means.
_FEED_CAUSES: dict[str, str] = {
    "LOAD_S3_ACCESS_DENIED_ERROR": _ROLE_DENIED,
    "LOAD_S3_READ_ERROR": (
        "S3 could not be read (intermittent connectivity, or no route from the cluster: security "
        "group egress 443 to the S3 prefix list, the S3 gateway endpoint)"
    ),
}
COMPLETED = "LOAD_COMPLETED"
FAILED = "LOAD_FAILED"
# The insert error of an edge whose start or end vertex is not in the graph (Neptune, "Loader
# Errors"): what an edge the endpoint check tolerated ends as.
MISSING_VERTEX_ERROR = "FROM_OR_TO_VERTEX_ARE_MISSING"
# The staged files are N-Quads whatever the RDF input format (a triple is a quad in the default
# graph); a property graph (graph.model "property") is staged as openCypher CSV.
STAGED_FORMAT = "nquads"
PROPERTY_GRAPH_FORMAT = "opencypher"
FIRST_ERRORS = 10


def is_property_graph(graph: Mapping[str, Any], source_format: str) -> bool:
    """A job staging openCypher CSV (graph.model "property", or openCypher sources), by its
    normalized `graph` section and `format`."""
    return graph.get("model") == "property" or source_format == "opencypher"


def load_request(
    graph: Mapping[str, Any], *, source: str, role_arn: str, region: str, source_format: str = ""
) -> dict[str, Any]:
    """The POST /loader body for a job's normalized `graph` input section (and its `format`). One
    load for a property graph: the loader loads the vertex files under `source` before the edge
    files (Neptune, "Optimizing a bulk load"), so an edge may end at a vertex of the same load."""
    opencypher = is_property_graph(graph, source_format)
    body: dict[str, Any] = {
        "source": source,
        "format": PROPERTY_GRAPH_FORMAT if opencypher else STAGED_FORMAT,
        "iamRoleArn": role_arn,
        "region": region,
        "failOnError": _flag(graph, "failOnError"),
        "parallelism": str(_option(graph, "parallelism")),
        "queueRequest": _flag(graph, "queueRequest"),
        "updateSingleCardinalityProperties": _flag(graph, "updateSingleCardinalityProperties"),
    }
    if opencypher:  # not supported for openCypher; every staged edge has an :ID column
        del body["updateSingleCardinalityProperties"]
        body["userProvidedEdgeIds"] = "TRUE"
    dependencies = list(graph.get("dependencies") or [])
    if dependencies:
        body["dependencies"] = dependencies
    return body


def _option(graph: Mapping[str, Any], name: str) -> Any:
    """A loader option of the normalized graph section; absent: the input model's default."""
    return graph[name] if name in graph else _GRAPH_DEFAULTS[name]


def _flag(graph: Mapping[str, Any], name: str) -> str:
    return "TRUE" if _option(graph, name) else "FALSE"


# The loader options' defaults, written once in the input model.
_GRAPH_DEFAULTS = GraphOptions().model_dump(by_alias=True)


def is_pending(status: str) -> bool:
    return status in PENDING


def access_cause(message: str) -> str | None:
    """What to fix when a loader answer says it cannot reach or may not read S3 (else None)."""
    text = message.lower()
    return next((cause for needle, cause in _ACCESS_CAUSES if needle in text), None)


def summarize(payload: Mapping[str, Any], tolerated: int = 0) -> dict[str, Any]:
    """The report's view of a GET /loader/{id}?details=true&errors=true payload.

    `loaded` is the statements the load added: records read less duplicates (statements the
    graph already held) and every kind of error. `tolerated` is how many dangling edges the edge
    endpoint check let the load start with (failOnError false): see `accepted`.
    """
    overall = payload.get("overallStatus") or {}
    records = int(overall.get("totalRecords") or 0)
    duplicates = int(overall.get("totalDuplicates") or 0)
    counts = {
        "parsingErrors": int(overall.get("parsingErrors") or 0),
        "datatypeMismatchErrors": int(overall.get("datatypeMismatchErrors") or 0),
        "insertErrors": int(overall.get("insertErrors") or 0),
    }
    errors = (payload.get("errors") or {}).get("errorLogs") or []
    # The loader's texts are samples too (an error message may quote the record): clipped alike.
    first = [
        {k: _clipped(e.get(k)) for k in ("errorCode", "errorMessage", "fileName", "recordNum") if k in e}
        for e in errors[:FIRST_ERRORS]
    ]
    feeds = payload.get("failedFeeds") or []
    failed_feeds = [
        {k: _clipped(feed.get(k)) for k in ("fullUri", "status") if k in feed}
        for feed in feeds[:FIRST_ERRORS]
    ]
    status = str(overall.get("status") or "UNKNOWN")
    summary: dict[str, Any] = {
        "status": status,
        "records": records,
        "duplicates": duplicates,
        "loaded": max(0, records - duplicates - sum(counts.values())),
        "seconds": overall.get("totalTimeSpent"),
        "errors": {**counts, "first": first, "failedFeeds": failed_feeds}
        if any(counts.values()) or first or failed_feeds
        else None,
    }
    if summary["errors"] is not None and accepted(status, counts, errors, feeds, tolerated):
        summary["errors"]["tolerated"] = counts["insertErrors"]
    return summary


def accepted(
    status: str,
    counts: Mapping[str, int],
    errors: Sequence[Mapping[str, Any]],
    feeds: Sequence[Mapping[str, Any]],
    tolerated: int,
) -> bool:
    """A load that ended LOAD_FAILED only because of the dangling edges the endpoint check let it
    start with. With failOnError false Neptune skips an edge whose vertex is missing, loads the
    rest and still ends the load LOAD_FAILED: accepted when its only errors are at most
    `tolerated` insert errors, every failed feed (file) failed for them (LOAD_FAILED, no S3
    error) and the errors logged are all missing vertices."""
    return (
        status == FAILED
        and 0 < counts["insertErrors"] <= tolerated
        and not counts["parsingErrors"]
        and not counts["datatypeMismatchErrors"]
        and all(feed.get("status") == FAILED for feed in feeds)
        and all(e.get("errorCode") == MISSING_VERTEX_ERROR for e in errors)
    )


def succeeded(summary: Mapping[str, Any]) -> bool:
    """The load ended as the job needs: LOAD_COMPLETED, or failed only for tolerated edges."""
    return summary["status"] == COMPLETED or bool((summary.get("errors") or {}).get("tolerated"))


def _clipped(value: Any) -> Any:
    return clip(value, TEXT_BYTES) if isinstance(value, str) else value


def failure_message(summary: Mapping[str, Any], load_id: str) -> str:
    """One line for the execution's cause: the status, the error counts and the first error."""
    parts = [f"Neptune load {load_id} ended {summary['status']}"]
    errors = summary.get("errors") or {}
    counted = [
        f"{name} {errors[name]}"
        for name in ("parsingErrors", "datatypeMismatchErrors", "insertErrors")
        if errors.get(name)
    ]
    if counted:
        parts.append(", ".join(counted))
    first = (errors.get("first") or [None])[0]
    if first:
        parts.append(
            f"first error {first.get('errorCode')}: {first.get('errorMessage')} "
            f"({first.get('fileName')} record {first.get('recordNum')})"
        )
    feeds = [str(feed.get("status")) for feed in errors.get("failedFeeds") or []]
    cause = next(
        (_FEED_CAUSES[status] for status in (summary["status"], *feeds) if status in _FEED_CAUSES), None
    )
    if cause:
        parts.append(cause)
    return "; ".join(parts)
