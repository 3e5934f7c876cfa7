"""Every function's `lambda_handler` — the Powertools entry Lambda really calls, reading
os.environ — runs once with a fake context, as the state machine would call it."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from pipeline_support import ENV, REGION, FakeContext

from mapload.emulator.neptune_local import LocalNeptuneLoader

pytestmark = pytest.mark.runtime

SPEC = {
    "format": "csv",
    "jobId": "job-lh",
    "dynamodb": {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}},
    },
    "shardSizeMiB": 0.001,
}
EXECUTION = {"name": "run-1", "id": "arn:run-1"}


@pytest.fixture
def environment(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    powertools = {"POWERTOOLS_SERVICE_NAME": "mapload-test", "POWERTOOLS_METRICS_NAMESPACE": "Mapload"}
    for name, value in {**ENV, "GRAPH_ENABLED": "true", **powertools}.items():
        monkeypatch.setenv(name, value)
    # In Lambda the environment is set before the first import: Powertools reads it then.
    importlib.reload(importlib.import_module("handlers.observability"))
    for name in ("prepare", "plan", "worker", "finalize", "start_graph_load", "poll_graph_load"):
        importlib.reload(importlib.import_module(f"handlers.{name}"))
    return aws


def test_prepare_plan_worker_and_finalize_through_lambda_handler(environment: Any) -> None:
    from handlers import finalize, plan, prepare, worker

    rows = "".join(f"P{i},{i}.5\n" for i in range(300))
    environment.put_object(Bucket="src", Key="a.csv", Body=f"postcode,lat\n{rows}".encode())
    spec = {**SPEC, "source": "s3://src/a.csv"}

    prepared = prepare.lambda_handler({"input": spec, "execution": EXECUTION}, FakeContext())
    planned = plan.lambda_handler(
        {"input": {**spec, "prepare": prepared}, "execution": EXECUTION}, FakeContext()
    )
    manifest = json.loads(environment.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    shards = [worker.lambda_handler({"shard": s, "job": planned["job"]}, FakeContext()) for s in manifest]
    result = finalize.lambda_handler(
        {"state": {**spec, "plan": planned}, "execution": EXECUTION}, FakeContext()
    )

    assert prepared["preparedKey"] is None and len(manifest) > 1
    assert sum(s["written"] for s in shards) == 300
    assert result["status"] == "SUCCEEDED", result["cause"]
    assert result["report"]["records"] == {**result["report"]["records"], "read": 300, "written": 300}


def test_start_and_poll_graph_load_through_lambda_handler(
    environment: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from handlers import poll_graph_load, start_graph_load

    nquads = b'<http://a/s> <http://a/p> "one" .\n'
    environment.put_object(Bucket="stg", Key="jobs/j/run-1/graph/000000.nq", Body=nquads)
    report = {"jobId": "j", "runId": "run-1", "status": "SUCCEEDED", "error": None, "graph": {"staged": 1}}
    environment.put_object(Bucket="stg", Key="jobs/j/run-1/report.json", Body=json.dumps(report).encode())
    finalized = {
        "status": "SUCCEEDED",
        "jobId": "j",
        "report": report,
        "reportUri": "s3://stg/jobs/j/run-1/report.json",
        "error": None,
        "cause": None,
        "graphLoad": True,
    }
    job = {"jobId": "j", "runId": "run-1", "spec": {"format": "nquads", "graph": {"pollSeconds": 1}}}
    with LocalNeptuneLoader() as loader:
        monkeypatch.setenv("NEPTUNE_ENDPOINT", "http://127.0.0.1")
        monkeypatch.setenv("NEPTUNE_PORT", str(loader.port))
        monkeypatch.setenv("NEPTUNE_REGION", REGION)
        monkeypatch.setenv("LOADER_ROLE_ARN", "arn:aws:iam::123456789012:role/loader")

        load = start_graph_load.lambda_handler({"job": job, "execution": EXECUTION}, FakeContext())
        # The load runs on the loader's thread: wait for its end, then poll once (no race).
        assert loader.loads[load["loadId"]].done.wait(60), "the local load did not end in 60 s"
        polled = poll_graph_load.lambda_handler({"result": {**finalized, "load": load}}, FakeContext())

    assert load["loadId"] and load["waitSeconds"] == 1
    assert (polled["pending"], polled["status"]) == (False, "SUCCEEDED"), polled
