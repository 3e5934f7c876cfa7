"""The state machine's ASL, read back from the template, matches docs/CONTRACTS.md."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.support import Synth, flat, output_target, resources

pytestmark = pytest.mark.infra

# What Lambda really reports for a failed invocation (AWS's recommended retrier, plus Unknown:
# out of memory, some timeouts; and the SDK's client-side timeout).
LAMBDA_ERRORS = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.Unknown",
]
# Throttling waits (capped backoff, many attempts) rather than failing the job after ~2 minutes.
THROTTLE_RETRIER = {
    "ErrorEquals": ["Lambda.TooManyRequestsException"],
    "IntervalSeconds": 2,
    "MaxAttempts": 40,
    "BackoffRate": 2,
    "MaxDelaySeconds": 60,
    "JitterStrategy": "FULL",
}
EXECUTION = {"name.$": "$$.Execution.Name", "id.$": "$$.Execution.Id"}


def machine(synth: Synth) -> dict[str, Any]:
    found = resources(synth.loader_json, "AWS::StepFunctions::StateMachine")
    assert len(found) == 1
    return next(iter(found.values()))


def definition(synth: Synth) -> dict[str, Any]:
    """The DefinitionString's Fn::Join as one JSON document, intrinsics as ${...} placeholders."""
    return dict(json.loads(flat(machine(synth)["Properties"]["DefinitionString"])))


def function_arn(synth: Synth, name: str) -> str:
    return "${GetAtt:" + output_target(synth.loader_json, f"{name}FunctionName") + ".Arn}"


def handler_arn(synth: Synth, handler: str) -> str:
    """The ARN, as the definition names it, of the one function running `handler`."""
    (logical,) = [
        name
        for name, res in resources(synth.loader_json, "AWS::Lambda::Function").items()
        if res["Properties"].get("Handler") == handler
    ]
    return "${GetAtt:" + logical + ".Arn}"


def retrier(errors: list[str], attempts: int, interval: int = 2) -> dict[str, Any]:
    return {
        "ErrorEquals": errors,
        "IntervalSeconds": interval,
        "MaxAttempts": attempts,
        "BackoffRate": 2,
        "JitterStrategy": "FULL",
    }


def lambda_retriers(attempts: int = 6, interval: int = 2) -> list[dict[str, Any]]:
    """The retriers every Lambda task starts with: service errors, then throttling."""
    return [retrier(LAMBDA_ERRORS, attempts, interval), {**THROTTLE_RETRIER, "IntervalSeconds": interval}]


def all_states(states: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state by name, the Distributed Map's item processor included."""
    found: dict[str, dict[str, Any]] = {}
    for name, state in states.items():
        found[name] = state
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            found.update(all_states(processor["States"]))
    return found


def lambda_tasks(asl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: state
        for name, state in all_states(asl["States"]).items()
        if state["Type"] == "Task" and str(state.get("Resource", "")).endswith(":lambda:invoke")
    }


def longest_wait_seconds(retry: dict[str, Any]) -> float:
    """The most a retrier waits in all (before jitter): capped exponential intervals summed."""
    interval, cap = retry["IntervalSeconds"], retry.get("MaxDelaySeconds", float("inf"))
    rate = retry.get("BackoffRate", 2.0)
    return float(sum(min(interval * rate**attempt, cap) for attempt in range(retry["MaxAttempts"])))


CATCH_TO_FINALIZE = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Finalize"}]


def test_standard_machine_with_logging_and_tracing(dev: Synth) -> None:
    props = machine(dev)["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    logging = props["LoggingConfiguration"]
    assert logging["Level"] == "ALL"
    assert logging["IncludeExecutionData"] is False
    group = logging["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert dev.loader_json["Resources"][group]["Properties"]["RetentionInDays"] == 30


def test_shape_plan_shards_finalize_done(dev: Synth) -> None:
    asl = definition(dev)
    assert asl["StartAt"] == "Prepare"
    states = asl["States"]
    assert {"Prepare", "Plan", "Shards", "Finalize", "Done", "Succeeded", "Failed"} <= set(states)
    assert states["Prepare"]["Next"] == "Plan"
    assert states["Plan"]["Next"] == "Shards"
    assert states["Shards"]["Next"] == "Sync?"
    assert states["Finalize"]["Next"] == "Done"


def test_the_sync_map_runs_only_for_a_sync_and_then_finalizes(dev: Synth) -> None:
    """writeMode sync: Plan's syncBuckets ([] for any other job) feed an inline Map of the Worker
    function per bucket; every other job goes on to BulkPut? (then Finalize)."""
    states = definition(dev)["States"]
    choice = states["Sync?"]
    assert choice["Type"] == "Choice"
    assert choice["Choices"] == [{"Variable": "$.plan.syncBuckets[0]", "IsPresent": True, "Next": "Sync"}]
    assert choice["Default"] == "BulkPut?"
    sync = states["Sync"]
    assert sync["Type"] == "Map" and sync["ItemsPath"] == "$.plan.syncBuckets"
    assert sync["ResultPath"] is None and sync["Next"] == "Finalize"
    # Plan's syncConcurrency (maxConcurrency and the budget, at most the inline Map's 40): not fixed.
    assert sync["MaxConcurrencyPath"] == "$.plan.syncConcurrency" and "MaxConcurrency" not in sync
    assert sync["ItemSelector"] == {"bucket.$": "$$.Map.Item.Value", "job.$": "$.plan.job"}
    assert sync["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Finalize"}]
    worker = sync["ItemProcessor"]["States"]["SyncWorker"]
    assert worker["Parameters"]["FunctionName"] == function_arn(dev, "Worker")
    assert worker["Parameters"]["Payload"] == {"bucket.$": "$.bucket", "job.$": "$.job"}
    assert worker["ResultSelector"] == {"bucket.$": "$.Payload.bucket"}


def test_the_bulk_put_hand_off_runs_only_for_a_bulk_put_job_and_then_finalizes(dev: Synth) -> None:
    """dynamodb.engine bulkPutItems (Plan's `bulkPut`): StartBulkPut, then PollBulkPut until the
    operation is no longer pending (BulkPutWait between polls), then Finalize; a start or poll
    that failed for good goes to Finalize with its error at $.bulkPutError. Any other job: Finalize."""
    states = definition(dev)["States"]
    choice = states["BulkPut?"]
    assert choice["Type"] == "Choice" and choice["Default"] == "Finalize"
    assert choice["Choices"] == [
        {
            "And": [
                {"Variable": "$.plan.bulkPut", "IsPresent": True},
                {"Variable": "$.plan.bulkPut", "BooleanEquals": True},
            ],
            "Next": "StartBulkPut",
        }
    ]
    assert states["Plan"]["ResultSelector"]["bulkPut.$"] == "$.Payload.bulkPut"
    start, poll = states["StartBulkPut"], states["PollBulkPut"]
    assert start["Parameters"]["FunctionName"] == handler_arn(dev, "handlers.start_bulk_put.lambda_handler")
    assert start["Parameters"]["Payload"] == {"job.$": "$.plan.job", "shardCount.$": "$.plan.shardCount"}
    assert start["ResultPath"] == poll["ResultPath"] == "$.bulkPut"
    assert start["Next"] == "PollBulkPut" and poll["Next"] == "BulkPutEnded?"
    assert poll["Parameters"]["FunctionName"] == handler_arn(dev, "handlers.poll_bulk_put.lambda_handler")
    assert poll["Parameters"]["Payload"] == {"bulkPut.$": "$.bulkPut"}
    for task in (start, poll):
        assert task["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.bulkPutError", "Next": "Finalize"}
        ]
    assert any(r["ErrorEquals"] == ["BulkPutBusyError"] for r in start["Retry"])
    ended = states["BulkPutEnded?"]
    assert ended["Choices"] == [
        {"Variable": "$.bulkPut.pending", "BooleanEquals": True, "Next": "BulkPutWait"}
    ]
    assert ended["Default"] == "Finalize"
    assert states["BulkPutWait"] == {
        "Type": "Wait",
        "SecondsPath": "$.bulkPut.waitSeconds",
        "Next": "PollBulkPut",
    }


def test_prepare_task(dev: Synth) -> None:
    prepare = definition(dev)["States"]["Prepare"]
    assert prepare["Type"] == "Task"
    assert prepare["Parameters"] == {
        "FunctionName": function_arn(dev, "Prepare"),
        "Payload": {"input.$": "$", "execution": EXECUTION},
    }
    assert prepare["ResultSelector"] == {
        "preparedKey.$": "$.Payload.preparedKey",
        "objects.$": "$.Payload.objects",
        "compressed.$": "$.Payload.compressed",
    }
    assert prepare["ResultPath"] == "$.prepare"
    assert prepare["Retry"] == lambda_retriers()
    # Its own error path, so the report can say the failure happened in Prepare.
    assert prepare["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.prepareError", "Next": "Finalize"}
    ]


def test_plan_task(dev: Synth) -> None:
    plan = definition(dev)["States"]["Plan"]
    assert plan["Type"] == "Task"
    assert plan["Resource"] == "arn:${Ref:AWS::Partition}:states:::lambda:invoke"
    assert plan["Parameters"] == {
        "FunctionName": function_arn(dev, "Plan"),
        "Payload": {"input.$": "$", "execution": EXECUTION},
    }
    assert plan["ResultSelector"] == {
        "job.$": "$.Payload.job",
        "manifestKey.$": "$.Payload.manifestKey",
        "maxConcurrency.$": "$.Payload.maxConcurrency",
        "shardCount.$": "$.Payload.shardCount",
        "mapResultsPrefix.$": "$.Payload.mapResultsPrefix",
        "syncBuckets.$": "$.Payload.syncBuckets",
        "syncConcurrency.$": "$.Payload.syncConcurrency",
        "bulkPut.$": "$.Payload.bulkPut",
    }
    assert plan["ResultPath"] == "$.plan"
    assert plan["Retry"] == lambda_retriers()
    assert plan["Catch"] == CATCH_TO_FINALIZE


def test_shards_is_a_distributed_map_over_the_manifest(dev: Synth) -> None:
    shards = definition(dev)["States"]["Shards"]
    assert shards["Type"] == "Map"
    assert shards["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert shards["ItemReader"] == {
        "Resource": "arn:${Ref:AWS::Partition}:states:::s3:getObject",
        "ReaderConfig": {"InputType": "JSON"},
        "Parameters": {
            "Bucket": "${Output:Mapload-dev-Data:StagingBucketName}",
            "Key.$": "$.plan.manifestKey",
        },
    }
    assert shards["MaxConcurrencyPath"] == "$.plan.maxConcurrency"
    assert shards["ItemSelector"] == {"shard.$": "$$.Map.Item.Value", "job.$": "$.plan.job"}
    # The children's outputs go to S3 under the run's prefix, never into state (256 KiB).
    assert shards["ResultWriter"] == {
        "Resource": "arn:${Ref:AWS::Partition}:states:::s3:putObject",
        "Parameters": {
            "Bucket": "${Output:Mapload-dev-Data:StagingBucketName}",
            "Prefix.$": "$.plan.mapResultsPrefix",
        },
    }
    assert shards["ResultPath"] is None
    assert shards["Catch"] == CATCH_TO_FINALIZE
    # moto 5.2.5's parser rejects these; the design does without them (Finalize reconciles).
    for absent in (
        "ItemBatcher",
        "ToleratedFailurePercentage",
        "ToleratedFailureCount",
        "MaxConcurrency",
        "ItemsPath",
        "Parameters",
    ):
        assert absent not in shards, absent


def test_worker_task_inside_the_map(dev: Synth) -> None:
    processor = definition(dev)["States"]["Shards"]["ItemProcessor"]
    assert processor["StartAt"] == "Worker"
    worker = processor["States"]["Worker"]
    assert set(processor["States"]) == {"Worker", "MoreOfShard", "ShardDone"}
    assert worker["Next"] == "MoreOfShard"
    assert worker["Parameters"] == {
        "FunctionName": function_arn(dev, "Worker"),
        "Payload": {"shard.$": "$.shard", "job.$": "$.job"},
    }
    assert worker["ResultSelector"] == {"index.$": "$.Payload.index", "more.$": "$.Payload.more"}
    assert worker["ResultPath"] == "$.turn"
    # A Worker that stopped at a checkpoint is invoked again (runtime/logic/checkpoints.py).
    assert processor["States"]["MoreOfShard"] == {
        "Type": "Choice",
        "Choices": [{"Variable": "$.turn.more", "BooleanEquals": True, "Next": "Worker"}],
        "Default": "ShardDone",
    }
    assert processor["States"]["ShardDone"] == {"Type": "Succeed", "OutputPath": "$.turn"}
    assert worker["Retry"] == [
        *lambda_retriers(),
        retrier(["ShardWriteError", "Sandbox.Timedout", "States.Timeout"], 2),
        # A CSV shard waiting for its predecessors' start state waits in Step Functions, as long as
        # a throttled invocation may (its predecessor may be one), not in a Lambda.
        {**THROTTLE_RETRIER, "ErrorEquals": ["CsvStartPendingError"]},
    ]
    # States.Timeout needs a Task timeout; it sits beyond the function's own 900 s.
    assert worker["TimeoutSeconds"] == 960
    assert "Catch" not in worker


def test_finalize_task(dev: Synth) -> None:
    finalize = definition(dev)["States"]["Finalize"]
    assert finalize["Parameters"] == {
        "FunctionName": function_arn(dev, "Finalize"),
        "Payload": {
            "state.$": "$",
            "execution": {**EXECUTION, "startTime.$": "$$.Execution.StartTime"},
        },
    }
    assert finalize["ResultSelector"] == {
        "status.$": "$.Payload.status",
        "jobId.$": "$.Payload.jobId",
        "report.$": "$.Payload.report",
        "reportUri.$": "$.Payload.reportUri",
        "error.$": "$.Payload.error",
        "cause.$": "$.Payload.cause",
        # Whether to start the graph load (environments with a Graph stack only).
        "graphLoad.$": "$.Payload.graphLoad",
    }
    assert finalize["ResultPath"] == "$.result"
    assert finalize["Retry"] == lambda_retriers()
    assert "Catch" not in finalize


def test_done_choice(dev: Synth, variant: Synth) -> None:
    states = definition(dev)["States"]
    succeeded = {"Variable": "$.result.status", "StringEquals": "SUCCEEDED", "Next": "Succeeded"}
    graph_load = {
        "And": [
            {"Variable": "$.result.status", "StringEquals": "SUCCEEDED"},
            {"Variable": "$.result.graphLoad", "BooleanEquals": True},
        ],
        "Next": "StartGraphLoad",
    }
    assert states["Done"] == {"Type": "Choice", "Choices": [graph_load, succeeded], "Default": "Failed"}
    # Without a Graph stack there is no graph branch (and Finalize selects no graphLoad).
    plain = definition(variant)["States"]
    assert plain["Done"] == {"Type": "Choice", "Choices": [succeeded], "Default": "Failed"}
    assert "graphLoad.$" not in plain["Finalize"]["ResultSelector"]
    assert not {"StartGraphLoad", "GraphWait", "PollGraphLoad", "GraphLoaded"} & set(plain)
    assert states["Succeeded"] == {"Type": "Succeed", "OutputPath": "$.result"}
    assert states["Failed"] == {"Type": "Fail", "Error": "MaploadJobFailed", "CausePath": "$.result.cause"}


def test_retry_interval_is_a_context_override(variant: Synth) -> None:
    asl = definition(variant)
    for retry in asl["States"]["Plan"]["Retry"] + asl["States"]["Finalize"]["Retry"]:
        assert retry["IntervalSeconds"] == 1


@pytest.mark.parametrize("name", ["dev", "prod", "variant"])
def test_every_lambda_task_retries_what_lambda_really_reports(
    name: str, request: pytest.FixtureRequest
) -> None:
    tasks = lambda_tasks(definition(request.getfixturevalue(name)))
    expected = {"Prepare", "Plan", "Worker", "SyncWorker", "Finalize", "StartBulkPut", "PollBulkPut"}
    if name != "variant":
        expected |= {"StartGraphLoad", "PollGraphLoad", "GraphLoadError"}
    assert set(tasks) == expected
    for task_name, task in tasks.items():
        retried = [error for retry in task["Retry"] for error in retry["ErrorEquals"]]
        for error in [*LAMBDA_ERRORS, "Lambda.TooManyRequestsException"]:
            assert error in retried, (task_name, error)
        # Step Functions' rules: a name in one retrier only; States.ALL alone and in the last one.
        assert len(retried) == len(set(retried)), (task_name, retried)
        for index, retry in enumerate(task["Retry"]):
            if "States.ALL" in retry["ErrorEquals"]:
                assert retry["ErrorEquals"] == ["States.ALL"] and index == len(task["Retry"]) - 1, task_name


def test_a_throttled_invocation_waits_minutes_not_two(dev: Synth) -> None:
    for task_name, task in lambda_tasks(definition(dev)).items():
        if task_name in ("PollGraphLoad", "PollBulkPut"):
            continue  # in a poll loop: bounded by the history budget (test_graph, test_history)
        throttle = next(r for r in task["Retry"] if "Lambda.TooManyRequestsException" in r["ErrorEquals"])
        assert throttle["ErrorEquals"] == ["Lambda.TooManyRequestsException"], task_name
        # Capped, so no single wait is long, yet together (full jitter halves them on average)
        # they span well over the ~2 minutes the service retrier's 6 attempts would.
        assert throttle["MaxDelaySeconds"] == 60
        assert longest_wait_seconds(throttle) >= 30 * 60, task_name


def test_the_state_machine_logs_under_vended_logs_with_a_derived_name(dev: Synth, prod: Synth) -> None:
    """Step Functions log groups belong under /aws/vendedlogs/ (otherwise each needs an entry in the
    account's CloudWatch Logs resource policy, capped at 5,120 characters); the rest of the name is
    derived from the construct path, not chosen per stack."""
    names = []
    for synth in (dev, prod):
        logging = machine(synth)["Properties"]["LoggingConfiguration"]
        group = logging["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
        name = synth.loader_json["Resources"][group]["Properties"]["LogGroupName"]
        assert isinstance(name, str) and name.startswith("/aws/vendedlogs/states/"), name
        assert len(name) <= 512
        names.append(name)
    assert names[0] != names[1]


def test_every_bulk_put_answer_has_each_field_the_states_select(dev: Synth) -> None:
    """A field a ResultSelector names and the answer lacks is a States.Runtime error no Catch sees:
    StartBulkPut's and PollBulkPut's every answer ($.bulkPut) has exactly the selected fields."""
    from bulk_puts.poll import poll
    from logic import bulk_put

    states = definition(dev)["States"]
    selected = {k.removesuffix(".$") for k in states["StartBulkPut"]["ResultSelector"]}
    assert selected == {k.removesuffix(".$") for k in states["PollBulkPut"]["ResultSelector"]}
    started = bulk_put.answer(
        {"BulkOperationStatus": "IN_PROGRESS", "BulkOperationArn": "arn:x"},
        staged_objects=1,
        started_at=0,
        deadline=60,
    )
    nothing = bulk_put.answer(None, staged_objects=0, started_at=0, deadline=0)

    class Gone:
        def describe(self, arn: str) -> None:
            return None

    answers = [started, nothing, poll({"bulkPut": nothing}, Gone()), poll({"bulkPut": started}, Gone())]  # type: ignore[arg-type]
    for answer in answers:
        assert set(answer) == selected, answer
