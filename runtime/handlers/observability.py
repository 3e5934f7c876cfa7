"""Powertools for the Lambda entry points: JSON logs keyed by job and shard, EMF metrics per shard.

Only `lambda_handler` uses this module. `handle(event, env)` (what the embedded run and the
tests call) stays free of it, so nothing here needs AWS, and logs/metrics are flushed once
per invocation. The service and namespace come from POWERTOOLS_SERVICE_NAME and
POWERTOOLS_METRICS_NAMESPACE, which the stacks set on every function (handlers/settings.py
POWERTOOLS_ENV_NAMES); Powertools reads them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

logger = Logger()
metrics = Metrics()

# Worker result field -> (EMF metric name, unit); names match stacks/monitoring.py WORKER_METRICS.
WORKER_METRICS: dict[str, tuple[str, str]] = {
    "read": ("RecordsRead", MetricUnit.Count.value),
    "written": ("RecordsWritten", MetricUnit.Count.value),
    "rejected": ("RecordsRejected", MetricUnit.Count.value),
    "retries": ("Retries", MetricUnit.Count.value),
    "throttles": ("Throttles", MetricUnit.Count.value),
    "bytes": ("Bytes", MetricUnit.Bytes.value),
}

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def job_keys(event: Mapping[str, Any]) -> dict[str, Any]:
    """jobId, runId and (for a Worker) shard index, from any of the three functions' events."""
    execution = event.get("execution") or {}
    state = event.get("state") or {}
    job = event.get("job") or ((state.get("plan") or {}).get("job")) or {}
    user_input = event.get("input") or state
    keys: dict[str, Any] = {
        "jobId": job.get("jobId") or user_input.get("jobId") or execution.get("name"),
        "runId": job.get("runId") or execution.get("name"),
    }
    shard = event.get("shard")
    if isinstance(shard, Mapping) and "index" in shard:
        keys["shard"] = shard["index"]
    return {key: value for key, value in keys.items() if value is not None}


def record_metrics(result: Mapping[str, Any]) -> None:
    """A shard's counts as EMF metrics (a skipped, already-counted shard adds nothing): a segment's
    when the Worker stopped at a checkpoint (`more`), the shard counted completed at its last."""
    if result.get("skipped"):
        return
    for field, (name, unit) in WORKER_METRICS.items():
        if field in result:
            metrics.add_metric(name=name, unit=unit, value=int(result[field]))
    if not result.get("more"):
        metrics.add_metric(name="ShardsCompleted", unit=MetricUnit.Count, value=1)


def record_graph_load(result: Mapping[str, Any]) -> None:
    """A Neptune bulk load that ended (PollGraphLoad's result once `pending` is false)."""
    if result.get("pending") is not False:
        return
    name = "GraphLoadsSucceeded" if result.get("status") == "SUCCEEDED" else "GraphLoadsFailed"
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)


def entry_point(
    function: str,
    *,
    emit_metrics: bool = False,
    record: Callable[[Mapping[str, Any]], None] | None = None,
) -> Callable[[Handler], Handler]:
    """Wrap a lambda_handler: job keys on every log line, a start and an end line, EMF flush.

    `emit_metrics` records a Worker's shard counts; `record` turns another result into metrics.
    """
    if emit_metrics and record is None:
        record = record_metrics

    def decorate(handler: Handler) -> Handler:
        @wraps(handler)
        def run(event: dict[str, Any], context: Any) -> dict[str, Any]:
            logger.append_keys(function=function, **job_keys(event))
            logger.info(f"{function} started")
            try:
                result = handler(event, context)
            except Exception as error:
                logger.exception(f"{function} failed: {type(error).__name__}")
                raise
            if record is not None:
                record(result)
            logger.info(f"{function} finished", extra={"result": _summary(result)})
            return result

        wrapped: Handler = logger.inject_lambda_context(clear_state=True)(run)
        if record is not None:
            wrapped = metrics.log_metrics(wrapped)
        return wrapped

    return decorate


def _summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """Scalars only: a report or manifest does not belong in every log line."""
    return {k: v for k, v in result.items() if isinstance(v, int | float | str | bool) or v is None}
