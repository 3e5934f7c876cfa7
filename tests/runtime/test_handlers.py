"""Handlers against moto's S3 and DynamoDB (no state machine): Plan's refusals, Worker's idempotence."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from pipeline_support import ENV, REGION

from adapters import executions
from adapters.ledger import Ledger
from handlers import finalize, plan, worker
from logic.errors import (
    InputValidationError,
    JobAlreadyRunningError,
    SourceNotAllowedError,
    SourceNotFoundError,
)
from logic.payloads import INPUT_STATE_BYTES
from logic.spec.checks import fit_shard_size
from logic.spec.dynamodb import WRITE_MODES
from logic.spec.parse import parse_spec

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


def _plan(source: str, run: str = "run-1", **extra: Any) -> dict[str, Any]:
    event = {"input": {**SPEC, "source": source, **extra}, "execution": {"name": run, "id": f"arn:{run}"}}
    return plan.handle(event, ENV)


def _csv(rows: int) -> bytes:
    return b"postcode,lat\n" + b"".join(f"AB{i} 1CD,{i}.5\n".encode() for i in range(rows))


def test_plan_names_a_missing_source_object(aws: Any) -> None:
    with pytest.raises(SourceNotFoundError, match=r"s3://src/nothing\.csv does not exist"):
        _plan("s3://src/nothing.csv")


def test_plan_names_an_empty_prefix(aws: Any) -> None:
    with pytest.raises(SourceNotFoundError, match=r"no objects under s3://src/empty/"):
        _plan("s3://src/empty/")


def test_plan_refuses_a_bucket_that_is_not_allowed(aws: Any) -> None:
    aws.put_object(Bucket="elsewhere", Key="a.csv", Body=_csv(3))
    with pytest.raises(SourceNotAllowedError, match="'elsewhere' is not one this loader may read"):
        _plan("s3://elsewhere/a.csv")


def test_plan_names_a_template_field_missing_from_the_header(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=b"postcode,latitude\nAB1,1\n")
    with pytest.raises(InputValidationError) as failure:
        _plan("s3://src/a.csv")
    assert failure.value.field == "dynamodb.attributes.lat.field"
    assert "s3://src/a.csv" in str(failure.value)


def test_plan_cuts_shards_caps_concurrency_and_refuses_a_running_job_id(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="in/a.csv", Body=_csv(200))
    aws.put_object(Bucket="src", Key="in/b.csv", Body=_csv(100))

    planned = _plan("s3://src/in/", jobId="job-1")

    assert planned["maxConcurrency"] == 10  # MAX_CONCURRENCY_CAP
    assert planned["job"]["workers"] == min(10, planned["shardCount"])  # the write budget's floor
    manifest = json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    assert len(manifest) == planned["shardCount"] > 2
    assert {s["key"] for s in manifest} == {"in/a.csv", "in/b.csv"}
    assert all(s["header"] == ["postcode", "lat"] for s in manifest)
    assert planned["bulkPut"] is False  # the Lambda engine: no bulk put items hand-off after the Map
    with pytest.raises(JobAlreadyRunningError, match="job-1"):
        _plan("s3://src/in/", run="run-2", jobId="job-1")
    _plan("s3://src/in/", run="run-1", jobId="job-1")  # a Lambda retry of the same run may proceed


def test_a_job_adding_numbers_is_refused_a_rerun_under_another_plan(aws: Any) -> None:
    # Its markers are keyed by plan and byte offset: a changed file would add every record twice.
    adding = {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "writeMode": "update",
        "attributes": {"lat": {"field": "lat", "type": "N", "update": "add"}},
    }
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(30))
    _plan("s3://src/a.csv", jobId="adds", dynamodb=adding)
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 1)
    ledger.finish_job("adds", "run-1", "FAILED")
    _plan("s3://src/a.csv", run="run-2", jobId="adds", dynamodb=adding)  # the same plan: resumes
    ledger.finish_job("adds", "run-2", "FAILED")

    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(31))  # corrected: another plan
    with pytest.raises(InputValidationError, match="already added numbers") as refused:
        _plan("s3://src/a.csv", run="run-3", jobId="adds", dynamodb=adding)
    assert refused.value.field == "jobId"
    _plan("s3://src/a.csv", run="run-3", jobId="adds", dynamodb=SPEC["dynamodb"])  # a plain put may


def test_a_put_run_between_two_add_runs_keeps_the_counted_plan(aws: Any) -> None:
    # A put run replaces the job item: it must carry countedPlanId over, or a changed add run
    # after it adds every record again.
    adding = {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "writeMode": "update",
        "attributes": {"lat": {"field": "lat", "type": "N", "update": "add"}},
    }
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(30))
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 1)
    _plan("s3://src/a.csv", jobId="mixed", dynamodb=adding)
    ledger.finish_job("mixed", "run-1", "FAILED")
    _plan("s3://src/a.csv", run="run-2", jobId="mixed", dynamodb=SPEC["dynamodb"])
    ledger.finish_job("mixed", "run-2", "SUCCEEDED")
    assert "countedPlanId" in (ledger.get_job("mixed") or {})

    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(31))  # changed: another plan
    with pytest.raises(InputValidationError, match="already added numbers"):
        _plan("s3://src/a.csv", run="run-3", jobId="mixed", dynamodb=adding)


def test_a_retried_shard_writes_its_items_and_is_counted_once(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(300))
    planned = _plan("s3://src/a.csv", jobId="job-2")
    manifest = json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())

    for shard in manifest:
        worker.handle({"shard": shard, "job": planned["job"]}, ENV)
    again = worker.handle({"shard": manifest[0], "job": planned["job"]}, ENV)

    assert again == {"index": 0, "skipped": True, "more": False}
    result = finalize.handle({"state": {"plan": planned}, "execution": {"name": "run-1"}}, ENV)
    assert result["status"] == "SUCCEEDED", result["cause"]
    assert result["report"]["writeMode"] == "put"
    assert result["report"]["records"] == {
        "read": 300,
        "written": 300,
        "skipped": 0,
        "rejected": 0,
        "duplicates": 0,
    }
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName="target", Select="COUNT")["Count"]
    assert items == 300


def test_finalize_fails_a_run_with_a_missing_shard(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(300))
    planned = _plan("s3://src/a.csv", jobId="job-3")
    manifest = json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    for shard in manifest[1:]:  # shard 0's worker never finished
        worker.handle({"shard": shard, "job": planned["job"]}, ENV)

    result = finalize.handle({"state": {"plan": planned}, "execution": {"name": "run-1"}}, ENV)

    assert result["status"] == "FAILED"
    assert result["report"]["shards"]["missing"] == [0]
    assert "ReconciliationError" in result["cause"]
    assert "shard 0" in result["cause"]


def test_a_source_replaced_after_planning_fails_the_shard_instead_of_mixing_versions(aws: Any) -> None:
    from logic.errors import SourceChangedError

    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(50))
    planned = _plan("s3://src/a.csv", jobId="job-4")
    manifest = json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(60))

    with pytest.raises(SourceChangedError, match="changed after it was planned"):
        worker.handle({"shard": manifest[0], "job": planned["job"]}, ENV)


def test_a_rerun_of_a_failed_job_skips_the_shards_done_and_redoes_only_the_rest(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(300))
    first = _plan("s3://src/a.csv", run="run-1", jobId="job-5")
    manifest = json.loads(aws.get_object(Bucket="stg", Key=first["manifestKey"])["Body"].read())
    for shard in manifest[:-1]:  # the last shard failed in run-1
        worker.handle({"shard": shard, "job": first["job"]}, ENV)
    failed = finalize.handle({"state": {"plan": first}, "execution": {"name": "run-1"}}, ENV)
    assert failed["status"] == "FAILED"

    second = _plan("s3://src/a.csv", run="run-2", jobId="job-5")
    done = [worker.handle({"shard": s, "job": second["job"]}, ENV) for s in manifest]
    result = finalize.handle({"state": {"plan": second}, "execution": {"name": "run-2"}}, ENV)

    assert second["job"]["planId"] == first["job"]["planId"]
    assert [d.get("skipped", False) for d in done] == [True] * (len(manifest) - 1) + [False]
    assert result["status"] == "SUCCEEDED", result["cause"]
    assert result["report"]["shards"]["carried"] == len(manifest) - 1
    assert (
        result["report"]["records"]["read"] + result["report"]["carried"]["runs"][0]["records"]["read"] == 300
    )


def test_a_rerun_with_a_changed_source_plans_afresh(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(300))
    first = _plan("s3://src/a.csv", run="run-1", jobId="job-6")
    finalize.handle({"state": {"plan": first}, "execution": {"name": "run-1"}}, ENV)
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(301))
    second = _plan("s3://src/a.csv", run="run-2", jobId="job-6")
    assert second["job"]["planId"] != first["job"]["planId"]


def test_a_source_encrypted_with_a_customer_kms_key_loads(aws: Any) -> None:
    from pipeline_support import run_pipeline

    key = boto3.client("kms", region_name=REGION).create_key(Description="source data")["KeyMetadata"]["Arn"]
    aws.put_object(
        Bucket="src", Key="enc.csv", Body=_csv(40), ServerSideEncryption="aws:kms", SSEKMSKeyId=key
    )
    assert aws.head_object(Bucket="src", Key="enc.csv")["SSEKMSKeyId"] == key

    result = run_pipeline(aws, {**SPEC, "source": "s3://src/enc.csv", "jobId": "job-kms"})

    assert result["status"] == "SUCCEEDED", result["cause"]
    assert result["report"]["records"]["written"] == 40


def test_the_report_schema_names_every_write_mode_the_input_has() -> None:
    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "report.schema.json").read_text())
    assert schema["properties"]["writeMode"]["enum"] == [*WRITE_MODES, None]


def test_plan_refuses_a_property_graph_shard_larger_than_the_worker_holds(aws: Any) -> None:
    from logic.endpoints import max_shard_mib
    from logic.spec.inputs import MAX_SHARD_SIZE_MIB

    # Given an edges-only property graph input whose shards are past what the Worker's memory holds
    aws.put_object(Bucket="src", Key="edges.csv", Body=b"a,b\n1000000,1000001\n")
    largest = max_shard_mib(int(ENV["WORKER_MEMORY_MIB"]), MAX_SHARD_SIZE_MIB)
    graph = {"model": "property", "edges": [{"from": "{a}", "to": "{b}", "label": "L"}]}
    spec = {"source": "s3://src/edges.csv", "format": "csv", "graph": graph, "shardSizeMiB": largest + 1}
    event = {"input": spec, "execution": {"name": "run-1", "id": "arn:run-1"}}
    # When Plan runs, Then it refuses before writing a manifest, naming the field, the largest
    # value allowed and the setting that bounds it
    with pytest.raises(InputValidationError) as refused:
        plan.handle(event, ENV)
    assert refused.value.field == "shardSizeMiB"
    assert f"at most {largest} with worker_memory_mib {ENV['WORKER_MEMORY_MIB']}" in str(refused.value)
    assert "Contents" not in aws.list_objects_v2(Bucket="stg")
    # ... and a Worker with the memory for it plans the same input
    roomy = str(int(ENV["WORKER_MEMORY_MIB"]) * 2)
    assert plan.handle(event, {**ENV, "WORKER_MEMORY_MIB": roomy})["shardCount"] == 1


# -- a jobId whose run ended without Finalize (issue 23 item 4) ------------------------------


def _execution(name: str) -> str:
    """A real (moto) execution of a state machine, RUNNING until stopped."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machines = sfn.list_state_machines()["stateMachines"]
    machine = (
        machines[0]["stateMachineArn"]
        if machines
        else sfn.create_state_machine(
            name="ShardedLoaderStateMachineABC-x1",
            definition=json.dumps({"StartAt": "W", "States": {"W": {"Type": "Pass", "End": True}}}),
            roleArn="arn:aws:iam::123456789012:role/sfn",
        )["stateMachineArn"]
    )
    return str(sfn.start_execution(stateMachineArn=machine, name=name)["executionArn"])


def _plan_as(source: str, run: str, arn: str, **extra: Any) -> dict[str, Any]:
    event = {"input": {**SPEC, "source": source, **extra}, "execution": {"name": run, "id": arn}}
    return plan.handle(event, ENV)


def test_plan_takes_over_a_job_id_whose_execution_was_stopped_without_finalize(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(50))
    first = _execution("run-1")
    _plan_as("s3://src/a.csv", "run-1", first, jobId="stuck")
    # While run-1's execution runs, another run of the jobId is refused.
    with pytest.raises(JobAlreadyRunningError, match="stuck"):
        _plan_as("s3://src/a.csv", "run-2", _execution("run-2"), jobId="stuck")
    # StopExecution (or a timeout, or Finalize out of retries): nothing closed the job item.
    boto3.client("stepfunctions", region_name=REGION).stop_execution(executionArn=first)
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 1)
    assert (ledger.get_job("stuck") or {})["status"] == "RUNNING"

    third = _execution("run-3")
    # Its Workers may still run up to their timeout after the stop: refused, saying how long.
    with pytest.raises(JobAlreadyRunningError, match=r"ABORTED since .* try again in 9[56]\d s"):
        _plan_as("s3://src/a.csv", "run-3", third, jobId="stuck")
    later = time.time() + int(ENV["WORKER_TIMEOUT_SECONDS"]) + executions.SETTLE_MARGIN_SECONDS + 1
    monkeypatch.setattr(executions, "_now", lambda: later)
    _plan_as("s3://src/a.csv", "run-3", third, jobId="stuck")  # proceeds: run-1 and its Workers are over

    job = ledger.get_job("stuck") or {}
    assert (job["status"], job["runId"], job["executionId"]) == ("RUNNING", "run-3", third)


def test_release_frees_a_job_id_only_once_its_execution_is_over(aws: Any) -> None:
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 1)
    ledger.start_job("held", "run-1", "arn:aws:states:r:1:execution:M:run-1", 3)
    with pytest.raises(JobAlreadyRunningError, match="still RUNNING"):
        ledger.release_job("held", lambda arn: False)
    released = ledger.release_job("held", lambda arn: arn.endswith(":run-1"))
    assert released["runId"] == "run-1"
    assert (ledger.get_job("held") or {})["status"] == "RELEASED"
    with pytest.raises(ValueError, match="not held"):
        ledger.release_job("held", lambda arn: True)
    with pytest.raises(ValueError, match="no job"):
        ledger.release_job("never", lambda arn: True)
    ledger.start_job("held", "run-2", "arn:aws:states:r:1:execution:M:run-2", 3)  # free again


def test_release_waits_for_the_longest_worker_timeout_after_the_stop(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `mapload release` does not know the Worker's timeout: it waits for Lambda's longest.
    arn = _execution("run-9")
    sfn = boto3.client("stepfunctions", region_name=REGION)
    sfn.stop_execution(executionArn=arn)
    with pytest.raises(JobAlreadyRunningError, match=r"up to 960 s after it stopped: try again in"):
        executions.execution_ended(sfn, arn)
    monkeypatch.setattr(executions, "_now", lambda: time.time() + 961)
    assert executions.execution_ended(sfn, arn)


def test_finalize_of_a_run_whose_job_id_was_taken_over_fails_and_leaves_the_holder(aws: Any) -> None:
    # A displaced execution redriven (AWS allows it for 14 days) reaches Finalize again.
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(20))
    planned = _plan("s3://src/a.csv", run="run-1", jobId="redriven")
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 1)
    ledger.release_job("redriven", lambda arn: True)
    _plan("s3://src/a.csv", run="run-2", jobId="redriven")
    result = finalize.handle({"state": {"plan": planned}, "execution": {"name": "run-1"}}, ENV)
    assert result["status"] == "FAILED"
    assert result["error"] == "JobTakenOverError" and "taken over by run run-2" in result["cause"]
    job = ledger.get_job("redriven") or {}
    assert (job["status"], job["runId"]) == ("RUNNING", "run-2")


def test_the_claim_lasts_until_the_graph_load_ends_not_finalize(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="g.csv", Body=_csv(20))
    graph = {
        "statements": [
            {"subject": "http://x/{postcode}", "predicate": "http://x/lat", "object": {"literal": "{lat}"}}
        ]
    }
    planned = _plan("s3://src/g.csv", run="run-1", jobId="graph-job", graph=graph)
    manifest = json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    for shard in manifest:
        worker.handle({"shard": shard, "job": planned["job"]}, ENV)
    result = finalize.handle({"state": {"plan": planned}, "execution": {"name": "run-1"}}, ENV)
    assert result["status"] == "SUCCEEDED" and result["graphLoad"] is True, result["cause"]
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 1)
    # The graph load runs next: the job is still RUNNING, so no second run starts meanwhile.
    assert (ledger.get_job("graph-job") or {})["status"] == "RUNNING"
    with pytest.raises(JobAlreadyRunningError):
        _plan("s3://src/g.csv", run="run-2", jobId="graph-job", graph=graph)


def test_plan_refuses_an_input_that_with_its_spec_passes_half_a_state_naming_the_size(aws: Any) -> None:
    from mapload.emulator.limits import STATE_PAYLOAD_BYTES

    assert INPUT_STATE_BYTES == STATE_PAYLOAD_BYTES // 2  # the emulator's limit, AWS's 256 KiB
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv(3))
    names = {f"attribute_{n:05d}": "{lat}" for n in range(4000)}
    dynamodb = {"key": {"pk": "P#{postcode}", "sk": "LOC"}, "attributes": names}
    with pytest.raises(InputValidationError, match=r"the execution input is [\d,]+ bytes") as refused:
        _plan("s3://src/a.csv", dynamodb=dynamodb)
    assert "\n" not in str(refused.value) and "131,072" in str(refused.value)
    fewer = dict(list(names.items())[:300])
    _plan("s3://src/a.csv", jobId="fits", dynamodb={**dynamodb, "attributes": fewer})


def test_plan_gives_a_property_graph_input_without_a_shard_size_one_its_worker_holds(aws: Any) -> None:
    from stacks.config import EnvironmentConfig

    # Given the default Worker memory and a manager hierarchy input with prefixed ids
    # (`person-{id}`: longer ids than the field, so the default 64 MiB is more than the Worker holds)
    # and no shardSizeMiB
    memory = str(EnvironmentConfig.model_fields["worker_memory_mib"].default)
    env = {**ENV, "WORKER_MEMORY_MIB": memory}
    aws.put_object(Bucket="src", Key="people.csv", Body=b"id,boss\n1,\n2,1\n")
    graph = {
        "model": "property",
        "vertices": [{"id": "person-{id}", "label": "Person"}],
        "edges": [{"from": "person-{id}", "to": "person-{boss}", "label": "REPORTS_TO"}],
    }
    spec: dict[str, Any] = {"source": "s3://src/people.csv", "format": "csv", "graph": graph}
    event = {"input": spec, "execution": {"name": "run-1", "id": "arn:run-1"}}
    # When Plan runs, Then it plans the input with a shard the Worker holds (shown in the
    # normalized spec the Workers and the report get): the size chosen for the source, at most the
    # largest the Worker holds (planning.with_chosen_shard_size; a tiny file: 1 MiB, one shard)
    planned = plan.handle(event, env)
    assert planned["shardCount"] == 1
    assert planned["job"]["spec"]["shardSizeMiB"] == 1
    parsed = parse_spec(spec, table_key={"pk": "S", "sk": "S"}, execution_name="run-1")
    held = fit_shard_size(parsed, worker_memory_mib=int(memory))
    assert held.shard_size_mib == 63  # the bound the choice is held to
    # ... while the same 64 MiB given by the user is refused, naming the largest allowed
    with pytest.raises(InputValidationError, match=f"at most 63 with worker_memory_mib {memory}"):
        plan.handle({**event, "input": {**spec, "shardSizeMiB": 64}}, env)
