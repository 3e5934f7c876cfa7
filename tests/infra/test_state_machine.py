"""The state machine's ASL, read back from the template, matches docs/CONTRACTS.md."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.support import Synth, flat, output_target, resources

pytestmark = pytest.mark.infra

LAMBDA_ERRORS = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]
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


def retrier(errors: list[str], attempts: int, interval: int = 2) -> dict[str, Any]:
    return {
        "ErrorEquals": errors,
        "IntervalSeconds": interval,
        "MaxAttempts": attempts,
        "BackoffRate": 2,
        "JitterStrategy": "FULL",
    }


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
    assert states["Shards"]["Next"] == "Finalize"
    assert states["Finalize"]["Next"] == "Done"


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
    assert prepare["Retry"] == [retrier(LAMBDA_ERRORS, 6)]
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
    }
    assert plan["ResultPath"] == "$.plan"
    assert plan["Retry"] == [retrier(LAMBDA_ERRORS, 6)]
    assert plan["Catch"] == CATCH_TO_FINALIZE


def test_shards_is_a_distributed_map_over_the_manifest(dev: Synth) -> None:
    shards = definition(dev)["States"]["Shards"]
    assert shards["Type"] == "Map"
    assert shards["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert shards["ItemReader"] == {
        "Resource": "arn:${Ref:AWS::Partition}:states:::s3:getObject",
        "ReaderConfig": {"InputType": "JSON"},
        "Parameters": {
            "Bucket": "${Import:Mapload-dev-Data:StagingBucketName}",
            "Key.$": "$.plan.manifestKey",
        },
    }
    assert shards["MaxConcurrencyPath"] == "$.plan.maxConcurrency"
    assert shards["ItemSelector"] == {"shard.$": "$$.Map.Item.Value", "job.$": "$.plan.job"}
    # The children's outputs go to S3 under the run's prefix, never into state (256 KiB).
    assert shards["ResultWriter"] == {
        "Resource": "arn:${Ref:AWS::Partition}:states:::s3:putObject",
        "Parameters": {
            "Bucket": "${Import:Mapload-dev-Data:StagingBucketName}",
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
    assert set(processor["States"]) == {"Worker"}
    assert worker["End"] is True
    assert worker["Parameters"] == {"FunctionName": function_arn(dev, "Worker"), "Payload.$": "$"}
    assert worker["ResultSelector"] == {"index.$": "$.Payload.index"}
    assert worker["Retry"] == [
        retrier(LAMBDA_ERRORS, 6),
        retrier(["ShardWriteError", "Sandbox.Timedout", "States.Timeout"], 2),
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
    assert finalize["Retry"] == [retrier(LAMBDA_ERRORS, 6)]
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
