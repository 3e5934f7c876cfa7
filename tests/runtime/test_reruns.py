"""A second run of a jobId (issue 41, items 1 and 6), through the handlers on moto: a finished plan
is refused unless reloaded, a resumed run reports its own shards apart from an earlier run's,
and a re-run waits out the Workers a failed Map Run may have left writing."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from pipeline_support import ENV, REGION
from virtual_clock import VirtualClock

from adapters import executions
from handlers import finalize, plan, worker
from logic.errors import InputValidationError, JobAlreadyLoadedError, JobAlreadyRunningError
from mapload.reports import report_lines

pytestmark = pytest.mark.runtime

SPEC = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}},
    },
    "shardSizeMiB": 0.001,
    "maxConcurrency": 50,
}
ROWS = 300


def _csv(rows: int) -> bytes:
    return b"postcode,lat\n" + b"".join(f"AB{i} 1CD,{i}.5\n".encode() for i in range(rows))


CLOCK = VirtualClock()


def _plan(run: str, **extra: Any) -> dict[str, Any]:
    event = {
        "input": {**SPEC, "source": "s3://src/a.csv", "jobId": "job", **extra},
        "execution": {"name": run, "id": f"arn:{run}"},
    }
    return plan.handle(event, ENV, now=CLOCK.time)


def _manifest(aws: Any, planned: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())


def _run(
    aws: Any, run: str, shards: slice = slice(None), error: dict[str, str] | None = None, **extra: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Plan, the Workers of the manifest's `shards`, Finalize (with the Map's `error`, if any):
    what the Workers returned and Finalize's answer."""
    planned = _plan(run, **extra)
    done = [worker.handle({"shard": s, "job": planned["job"]}, ENV) for s in _manifest(aws, planned)[shards]]
    state = {"plan": planned, **({"error": error} if error else {})}
    return done, finalize.handle({"state": state, "execution": {"name": run}}, ENV, now=CLOCK.time)


def _table() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


def test_a_rerun_of_a_finished_plan_is_refused_in_one_line_and_a_reload_repairs_the_table(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(ROWS))
    _, first = _run(aws, "run-1")
    assert first["status"] == "SUCCEEDED", first["cause"]
    key = {"pk": {"S": "P#AB7 1CD"}, "sk": {"S": "LOC"}}
    _table().delete_item(TableName="target", Key=key)  # broken by hand

    with pytest.raises(JobAlreadyLoadedError) as refused:
        _plan("run-2")
    assert str(refused.value).startswith("jobId job loaded this plan in run run-1 at 20")
    assert str(refused.value).endswith(
        '(written 300, skipped 0, rejected 0): use a new jobId or "reload": true'
    )
    assert "\n" not in str(refused.value)

    done, reloaded = _run(aws, "run-3", reload=True)
    assert not any(d.get("skipped") for d in done)  # every shard again
    report = reloaded["report"]
    assert reloaded["status"] == "SUCCEEDED", reloaded["cause"]
    assert report["records"]["written"] == ROWS and report["lines"]["total"] == ROWS
    assert report["shards"]["done"] == report["shards"]["total"] and report["shards"]["carried"] == 0
    zeros = dict.fromkeys(("read", "written", "skipped", "rejected"), 0)
    assert report["carried"] == {"shards": 0, "records": zeros, "runs": []}
    assert "Item" in _table().get_item(TableName="target", Key=key)  # repaired

    with pytest.raises(JobAlreadyLoadedError, match="in run run-3 at"):
        _plan("run-4")  # the reload is now the run that loaded the plan


def test_a_reload_that_crashed_resumes_its_own_missing_shards(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(ROWS))
    _run(aws, "run-1")
    _, crashed = _run(aws, "run-2", slice(0, 2), reload=True)
    assert crashed["status"] == "FAILED" and crashed["report"]["shards"]["done"] == 2

    done, resumed = _run(aws, "run-3")  # no reload: the reload's missing shards, only
    report = resumed["report"]
    assert [d.get("skipped", False) for d in done[:2]] == [True, True]
    assert not any(d.get("skipped") for d in done[2:])
    assert resumed["status"] == "SUCCEEDED", resumed["cause"]
    assert report["shards"]["carried"] == 2 and report["carried"]["runs"][0]["runId"] == "run-2"


def test_a_resumed_run_counts_its_own_shards_and_reports_an_earlier_run_s_apart(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(ROWS))
    _, failed = _run(aws, "run-1", slice(0, -1))
    assert failed["status"] == "FAILED"
    earlier = failed["report"]["records"]

    done, second = _run(aws, "run-2")
    report = second["report"]
    total = report["shards"]["total"]
    assert second["status"] == "SUCCEEDED", second["cause"]
    assert [d.get("skipped", False) for d in done] == [True] * (total - 1) + [False]
    assert report["shards"] == {**report["shards"], "done": 1, "carried": total - 1, "failed": 0}
    assert report["carried"]["runs"] == [
        {
            "runId": "run-1",
            "shards": total - 1,
            "records": {name: earlier[name] for name in ("read", "written", "skipped", "rejected")},
        }
    ]
    records = report["records"]
    assert records["read"] == ROWS - earlier["read"] == records["written"] > 0
    shards_line = next(line for line in report_lines(report) if line.lstrip().startswith("shards"))
    assert f"1/{total} done " in shards_line
    assert shards_line.endswith(f" · {total - 1} shards done by an earlier run")
    assert report["lines"]["total"] == records["read"]
    with pytest.raises(JobAlreadyLoadedError, match=r"in run run-2 at .* \(written 300, skipped 0"):
        _plan("run-3")


def test_a_reload_is_refused_with_a_numeric_add(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(30))
    adding = {
        **SPEC["dynamodb"],
        "writeMode": "update",
        "attributes": {"lat": {"field": "lat", "type": "N", "update": "add"}},
    }
    with pytest.raises(InputValidationError, match="not with a numeric update add") as refused:
        _plan("run-1", reload=True, dynamodb=adding)
    assert refused.value.field == "reload"


def test_after_a_failed_map_run_a_rerun_waits_out_the_workers_that_may_still_write(aws: Any) -> None:
    clock = CLOCK
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(ROWS))
    map_failed = {"Error": "States.ExceedToleratedFailureThreshold", "Cause": "a child failed"}
    _, failed = _run(aws, "run-1", slice(0, 1), error=map_failed)
    assert failed["status"] == "FAILED"

    with pytest.raises(JobAlreadyRunningError) as refused:
        _plan("run-2")
    settle = int(ENV["WORKER_TIMEOUT_SECONDS"]) + executions.SETTLE_MARGIN_SECONDS
    message = str(refused.value)
    assert message.startswith("jobId job: Workers of its failed run run-1 may still write until 20")
    assert message.endswith(f"start this run after then (in {settle} s)")

    clock.advance(settle - 5)
    with pytest.raises(JobAlreadyRunningError, match=r"\(in [1-5] s\)"):
        _plan("run-2")
    clock.advance(5)
    _plan("run-2")  # the Workers are over: the re-run starts


def test_a_run_that_failed_after_its_map_leaves_no_wait(aws: Any) -> None:
    # Too many rejects is Finalize's verdict: every Worker had ended, a re-run may start at once.
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(ROWS))
    _, failed = _run(aws, "run-1", slice(0, 1))  # shards missing, but the Map did not fail
    assert failed["status"] == "FAILED"
    _plan("run-2")
