"""Powertools at the Lambda entry points: job and shard on every log line, EMF metrics per shard."""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from pipeline_support import FakeContext

pytestmark = pytest.mark.runtime

WORKER_EVENT = {"shard": {"index": 3, "bucket": "b", "key": "k"}, "job": {"jobId": "job-1", "runId": "run-1"}}
SHARD_RESULT = {
    "index": 3,
    "read": 10,
    "written": 8,
    "rejected": 2,
    "retries": 4,
    "throttles": 1,
    "bytes": 4096,
}


class _CurrentStdout:
    """Writes to whatever sys.stdout is now (capsys swaps it in only for the test's call phase)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def observability(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[ModuleType]:
    """A fresh module, so its Logger and Metrics read the environment the stacks set (and its
    Logger writes to the stdout capsys captures)."""
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "mapload-test")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Mapload")
    module = importlib.reload(importlib.import_module("handlers.observability"))
    # Powertools keeps the handler of the first Logger of a service name; point it at capsys.
    for handler in logging.getLogger("mapload-test").handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(_CurrentStdout())
    yield module
    module.metrics.clear_metrics()


def _output(capsys: pytest.CaptureFixture[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return [x for x in lines if "_aws" not in x], [x for x in lines if "_aws" in x]


def test_worker_entry_point_keys_every_line_and_emits_the_shard_counts(
    observability: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    @observability.entry_point("Worker", emit_metrics=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        observability.logger.info("inside")
        return dict(SHARD_RESULT)

    assert handler(dict(WORKER_EVENT), FakeContext()) == SHARD_RESULT
    logs, emf = _output(capsys)
    assert [line["message"] for line in logs] == ["Worker started", "inside", "Worker finished"]
    for line in logs:
        assert (line["jobId"], line["runId"], line["shard"]) == ("job-1", "run-1", 3)
        assert line["service"] == "mapload-test"
        assert line["function_request_id"] == "req-1"
    assert logs[-1]["result"]["written"] == 8
    (blob,) = emf
    directive = blob["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Mapload"
    assert directive["Dimensions"] == [["service"]] and blob["service"] == "mapload-test"
    units = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert units["Bytes"] == "Bytes" and units["Throttles"] == "Count"
    assert {name: blob[name] for name in units} == {  # EMF values are lists of data points
        "RecordsRead": [10.0],
        "RecordsWritten": [8.0],
        "RecordsRejected": [2.0],
        "Retries": [4.0],
        "Throttles": [1.0],
        "Bytes": [4096.0],
        "ShardsCompleted": [1.0],
    }


def test_a_shard_already_counted_emits_no_metrics_again(
    observability: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    observability.record_metrics({"index": 3, "skipped": True})
    observability.metrics.flush_metrics(raise_on_empty_metrics=False)
    _, emf = _output(capsys)
    assert emf == []


def test_a_failure_is_logged_with_the_job_keys_and_raised_unchanged(
    observability: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    class ShardWriteError(Exception):
        pass

    @observability.entry_point("Worker", emit_metrics=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise ShardWriteError("3 items not written")

    with pytest.raises(ShardWriteError, match="3 items not written"):
        handler(dict(WORKER_EVENT), FakeContext())
    logs, _ = _output(capsys)
    failure = logs[-1]
    assert failure["level"] == "ERROR"
    assert failure["message"] == "Worker failed: ShardWriteError"
    assert (failure["jobId"], failure["shard"]) == ("job-1", 3)
    assert "3 items not written" in failure["exception"]


@pytest.mark.parametrize(
    ("event", "keys"),
    [
        (
            {"input": {"jobId": "nightly"}, "execution": {"name": "exec-1"}},
            {"jobId": "nightly", "runId": "exec-1"},
        ),
        ({"input": {}, "execution": {"name": "exec-1"}}, {"jobId": "exec-1", "runId": "exec-1"}),
        (
            {"state": {"plan": {"job": {"jobId": "j", "runId": "r"}}}, "execution": {"name": "r"}},
            {"jobId": "j", "runId": "r"},
        ),
        (WORKER_EVENT, {"jobId": "job-1", "runId": "run-1", "shard": 3}),
    ],
)
def test_job_keys_come_from_plan_worker_and_finalize_events(
    observability: ModuleType, event: dict[str, Any], keys: dict[str, Any]
) -> None:
    assert observability.job_keys(event) == keys


def test_a_finished_graph_load_counts_once_by_outcome(
    observability: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    @observability.entry_point("PollGraphLoad", record=observability.record_graph_load)
    def poll(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return dict(event)

    poll({"pending": True, "status": "RUNNING"}, FakeContext())  # still loading: nothing
    poll({"pending": False, "status": "FAILED"}, FakeContext())
    poll({"pending": False, "status": "SUCCEEDED"}, FakeContext())
    _, emf = _output(capsys)
    assert [{k: v for k, v in blob.items() if k.startswith("GraphLoads")} for blob in emf] == [
        {"GraphLoadsFailed": [1.0]},
        {"GraphLoadsSucceeded": [1.0]},
    ]


def test_every_entry_point_is_wrapped() -> None:
    for name in ("prepare", "plan", "worker", "finalize", "start_graph_load", "poll_graph_load"):
        module = importlib.import_module(f"handlers.{name}")
        assert hasattr(module.lambda_handler, "__wrapped__"), name
