"""The Loader stack's functions: runtime, handler, environment and least-privilege IAM."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stacks.loader_functions import STATE_MACHINE_NAME_PREFIX
from tests.infra.support import (
    Synth,
    grants,
    output_target,
    outputs_read,
    policy_statements,
    resources,
    stack_output,
)

pytestmark = pytest.mark.infra

# docs/CONTRACTS.md "Environment variables" — exact names, per function.
CONTRACT_ENV = {
    "Prepare": {"SOURCE_BUCKETS", "STAGING_BUCKET", "TABLE_KEY"},
    "Plan": {
        "GRAPH_ENABLED",
        "SOURCE_BUCKETS",
        "STAGING_BUCKET",
        "LEDGER_TABLE",
        "TABLE_NAME",
        "TABLE_KEY",
        "TABLES",  # the other tables a job may name (`tables`; dev: none)
        "MAX_CONCURRENCY_CAP",
        "LEDGER_TTL_DAYS",
        "WORKER_MEMORY_MIB",
        "WORKER_TIMEOUT_SECONDS",
        "PLAN_TIMEOUT_SECONDS",
        "PLAN_MEMORY_MIB",
        "MAP_EXECUTION_TYPE",
    },
    "Worker": {
        "SOURCE_BUCKETS",
        "STAGING_BUCKET",
        "LEDGER_TABLE",
        "TABLE_NAME",
        "LEDGER_TTL_DAYS",
        "WRITE_CONCURRENCY",
        "MAX_WRITE_CONCURRENCY",
    },
    "Finalize": {
        "STAGING_BUCKET",
        "LEDGER_TABLE",
        "TABLE_NAME",
        "TABLE_ARN",
        "LEDGER_TTL_DAYS",
        "WORKER_TIMEOUT_SECONDS",
    },
}
HANDLERS = {
    "Prepare": "handlers.prepare.lambda_handler",
    "Plan": "handlers.plan.lambda_handler",
    "Worker": "handlers.worker.lambda_handler",
    "Finalize": "handlers.finalize.lambda_handler",
}
DATA = "Mapload-dev-Data"
STAGING_JOBS = "${Output:" + DATA + ":StagingBucketArn}/jobs/*"
STAGING_PREPARED = "${Output:" + DATA + ":StagingBucketArn}/prepared/*"
STAGING_SYNC_SHARDS = "${Output:" + DATA + ":StagingBucketArn}/jobs/*/*/sync/*"
STAGING_DATASETS = "${Output:" + DATA + ":StagingBucketArn}/datasets/*"
SOURCE_BUCKET = "${Output:" + DATA + ":SourceBucketArn}"
TABLE_ARN = "arn:${Ref:AWS::Partition}:dynamodb:${Ref:AWS::Region}:${Ref:AWS::AccountId}:table/"
LEDGER = TABLE_ARN + "${Output:" + DATA + ":LedgerTableName}"
TARGET = TABLE_ARN + "${Output:" + DATA + ":TableName}"
STAGING_BUCKET = "${Output:" + DATA + ":StagingBucketArn}"
BULK_OPERATIONS = TARGET + "/bulk-operation/*"
EXECUTIONS = (
    "arn:${Ref:AWS::Partition}:states:${Ref:AWS::Region}:${Ref:AWS::AccountId}:execution:"
    + STATE_MACHINE_NAME_PREFIX
    + "*:*"
)


def function(synth: Synth, name: str) -> tuple[str, dict[str, Any]]:
    logical = output_target(synth.loader_json, f"{name}FunctionName")
    return logical, synth.loader_json["Resources"][logical]


def role_of(synth: Synth, name: str) -> str:
    return str(function(synth, name)[1]["Properties"]["Role"]["Fn::GetAtt"][0])


def log_writes(synth: Synth, name: str) -> set[tuple[str, str]]:
    log_group = function(synth, name)[1]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    arn = "${GetAtt:" + log_group + ".Arn}"
    return {("logs:CreateLogStream", arn), ("logs:PutLogEvents", arn)}


def test_three_python_312_arm64_functions_with_contract_handlers(dev: Synth) -> None:
    found = {
        fn["Properties"]["Handler"] for fn in resources(dev.loader_json, "AWS::Lambda::Function").values()
    }
    # The graph-load functions are tested with the Graph stack, the bulk put ones below.
    assert {h for h in found if "graph" not in h and "bulk_put" not in h} == set(HANDLERS.values())
    assert {h for h in found if "bulk_put" in h} == {
        "handlers.start_bulk_put.lambda_handler",
        "handlers.poll_bulk_put.lambda_handler",
    }
    for name, handler in HANDLERS.items():
        props = function(dev, name)[1]["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["Handler"] == handler


def test_function_sizes_come_from_config(dev: Synth) -> None:
    sizes = {name: function(dev, name)[1]["Properties"] for name in HANDLERS}
    assert (sizes["Worker"]["MemorySize"], sizes["Worker"]["Timeout"]) == (1024, 900)
    # Prepare decompresses as long as a function may run, with the worker's memory.
    assert (sizes["Prepare"]["MemorySize"], sizes["Prepare"]["Timeout"]) == (1024, 900)
    assert (sizes["Plan"]["MemorySize"], sizes["Plan"]["Timeout"]) == (512, 300)
    # Finalize reads up to 100,000 ledger items (tests/runtime/test_finalize_scale.py measures it).
    assert (sizes["Finalize"]["MemorySize"], sizes["Finalize"]["Timeout"]) == (1024, 900)
    # /tmp, where a shard's rejects and graph file spool: worker_ephemeral_storage_mib.
    for name in ("Worker", "Prepare"):
        assert sizes[name]["EphemeralStorage"] == {"Size": 2048}, name
    for name in ("Plan", "Finalize"):
        assert "EphemeralStorage" not in sizes[name], name


def test_environment_variable_names_are_exactly_the_contract(dev: Synth) -> None:
    for name, expected in CONTRACT_ENV.items():
        variables = function(dev, name)[1]["Properties"]["Environment"]["Variables"]
        # Plus the Powertools settings every function gets (docs/CONTRACTS.md, stacks/monitoring.py).
        assert set(variables) == expected | {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"}, name


def test_environment_values_come_from_the_data_stack_and_config(dev: Synth) -> None:
    plan = function(dev, "Plan")[1]["Properties"]["Environment"]["Variables"]
    assert plan["SOURCE_BUCKETS"] == stack_output(DATA, "SourceBucketName")
    assert plan["STAGING_BUCKET"] == stack_output(DATA, "StagingBucketName")
    assert plan["LEDGER_TABLE"] == stack_output(DATA, "LedgerTableName")
    assert plan["TABLE_NAME"] == stack_output(DATA, "TableName")
    assert plan["TABLE_KEY"] == '{"pk": "S", "sk": "S"}'
    assert plan["MAX_CONCURRENCY_CAP"] == "100"
    assert plan["LEDGER_TTL_DAYS"] == "30"
    # The Worker's own memory (stacks/loader_settings.py worker_memory_mib): Plan bounds a graph shard by it.
    assert plan["WORKER_MEMORY_MIB"] == str(function(dev, "Worker")[1]["Properties"]["MemorySize"]) == "1024"
    # ... and its timeout: a jobId is taken over only once a stopped run's Workers are over.
    assert plan["WORKER_TIMEOUT_SECONDS"] == str(function(dev, "Worker")[1]["Properties"]["Timeout"])
    # Its own timeout and memory: it refuses a source with more objects to read than fit in half of it.
    assert plan["PLAN_TIMEOUT_SECONDS"] == str(function(dev, "Plan")[1]["Properties"]["Timeout"]) == "300"
    assert plan["PLAN_MEMORY_MIB"] == str(function(dev, "Plan")[1]["Properties"]["MemorySize"]) == "512"
    worker = function(dev, "Worker")[1]["Properties"]["Environment"]["Variables"]
    assert worker["WRITE_CONCURRENCY"] == "8"
    # Every Data output the functions read is one the Data stack has; nothing is imported.
    variables = [function(dev, name)[1]["Properties"]["Environment"]["Variables"] for name in HANDLERS]
    assert {output for stack, output in outputs_read(variables) if stack == DATA} <= set(
        dev.data_json["Outputs"]
    )
    assert "Fn::ImportValue" not in json.dumps(variables)


def test_each_function_logs_to_its_own_retained_log_group(dev: Synth) -> None:
    groups = resources(dev.loader_json, "AWS::Logs::LogGroup")
    seen = set()
    for name in HANDLERS:
        _, fn = function(dev, name)
        group = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert groups[group]["Properties"]["RetentionInDays"] == 30
        assert group in fn["DependsOn"]
        seen.add(group)
    assert len(seen) == len(HANDLERS)


def test_plan_grants_are_exactly_its_needs(dev: Synth) -> None:
    assert grants(policy_statements(dev.loader_json, role_of(dev, "Plan"))) == log_writes(dev, "Plan") | {
        ("s3:ListBucket", SOURCE_BUCKET),
        ("s3:GetObject", SOURCE_BUCKET + "/*"),
        ("s3:GetObject", STAGING_PREPARED),
        ("s3:PutObject", STAGING_JOBS),
        ("dynamodb:GetItem", LEDGER),
        ("dynamodb:PutItem", LEDGER),
        ("dynamodb:UpdateItem", LEDGER),
        # Whether the run holding a jobId still runs: this state machine's executions only.
        ("states:DescribeExecution", EXECUTIONS),
        # A takeover first cancels the held job's bulk put items operation, if it still runs.
        ("dynamodb:DescribeBulkOperation", BULK_OPERATIONS),
        ("dynamodb:CancelBulkOperation", BULK_OPERATIONS),
        # dynamodb.engine bulkPutItems: whether the target is ACTIVE, building no index, not global.
        ("dynamodb:DescribeTable", TARGET),
    }


def test_plan_may_describe_exactly_this_state_machines_executions(dev: Synth) -> None:
    (logical,) = resources(dev.loader_json, "AWS::StepFunctions::StateMachine")
    # CloudFormation names it <logical id>-<suffix>; the grant's prefix matches that, no other.
    assert logical.startswith(STATE_MACHINE_NAME_PREFIX)
    assert "StateMachine" not in logical[len(STATE_MACHINE_NAME_PREFIX) :]


def test_prepare_grants_are_exactly_its_needs(dev: Synth) -> None:
    """Reads sources; writes (multipart, aborts on failure) and heads only staging prepared/*."""
    assert grants(policy_statements(dev.loader_json, role_of(dev, "Prepare"))) == log_writes(
        dev, "Prepare"
    ) | {
        ("s3:ListBucket", SOURCE_BUCKET),
        ("s3:GetObject", SOURCE_BUCKET + "/*"),
        ("s3:GetObject", STAGING_PREPARED),
        ("s3:PutObject", STAGING_PREPARED),
        ("s3:AbortMultipartUpload", STAGING_PREPARED),
    }


def test_worker_grants_are_exactly_its_needs(dev: Synth) -> None:
    assert grants(policy_statements(dev.loader_json, role_of(dev, "Worker"))) == log_writes(dev, "Worker") | {
        ("s3:GetObject", SOURCE_BUCKET + "/*"),
        ("s3:GetObject", STAGING_PREPARED),
        ("s3:PutObject", STAGING_JOBS),
        ("s3:AbortMultipartUpload", STAGING_JOBS),  # rejects and graph files stream in parts
        ("s3:GetObject", STAGING_SYNC_SHARDS),  # writeMode sync: the shards' staged items
        ("s3:GetObject", STAGING_DATASETS),  # writeMode sync: the baseline's buckets
        ("s3:PutObject", STAGING_DATASETS),  # writeMode sync: this run's merged buckets
        ("dynamodb:BatchWriteItem", TARGET),  # put; delete (DeleteRequests)
        ("dynamodb:PartiQLInsert", TARGET),  # putIfAbsent (INSERTs in BatchExecuteStatement)
        ("dynamodb:PutItem", TARGET),  # newerWins; a putIfAbsent INSERT whose answer was lost
        ("dynamodb:UpdateItem", TARGET),  # update; a numeric ADD's TransactWriteItems: its Update
        ("dynamodb:GetItem", LEDGER),
        ("dynamodb:PutItem", LEDGER),  # shard counts, CSV start states; a numeric ADD's marker Put
        ("dynamodb:Query", LEDGER),  # the CSV start-state walk-back
        ("dynamodb:UpdateItem", LEDGER),  # a write-budget heartbeat (runtime/adapters/budget.py)
        ("dynamodb:BatchGetItem", LEDGER),  # reads the previous window's heartbeat counters
    }


WRITES = {"dynamodb:BatchWriteItem", "dynamodb:PartiQLInsert", "dynamodb:PutItem", "dynamodb:UpdateItem"}


def test_worker_may_only_write_the_target_table(dev: Synth) -> None:
    on_target = {
        action
        for action, resource in grants(policy_statements(dev.loader_json, role_of(dev, "Worker")))
        if resource.startswith(TARGET)
    }
    assert on_target == WRITES  # each write mode's call; no read


def test_finalize_grants_are_exactly_its_needs(dev: Synth) -> None:
    statements = policy_statements(dev.loader_json, role_of(dev, "Finalize"))
    # Listing: a bulk put items operation's output, and a sync's dataset stagings (the stale ones
    # deleted), each only under its prefix.
    assert sorted(
        s["Condition"]["StringLike"]["s3:prefix"] for s in statements if s["Action"] == "s3:ListBucket"
    ) == [
        ["datasets/*"],
        ["jobs/*/*/bulk-output/*"],
    ]
    assert grants(statements) == log_writes(dev, "Finalize") | {
        ("s3:GetObject", STAGING_JOBS),
        ("s3:PutObject", STAGING_JOBS),
        # The merged rejects go up as a streamed multipart upload, aborted if the merge fails.
        ("s3:AbortMultipartUpload", STAGING_JOBS),
        ("s3:DeleteObject", STAGING_DATASETS),  # writeMode sync: the stale stagings of a dataset
        ("s3:ListBucket", STAGING_BUCKET),  # under the s3:prefix conditions above
        ("dynamodb:Query", LEDGER),
        ("dynamodb:GetItem", LEDGER),
        ("dynamodb:UpdateItem", LEDGER),
        ("dynamodb:PutItem", LEDGER),
    }


def handler_role(synth: Synth, handler: str) -> str:
    (fn,) = [
        fn
        for fn in resources(synth.loader_json, "AWS::Lambda::Function").values()
        if fn["Properties"]["Handler"] == handler
    ]
    return str(fn["Properties"]["Role"]["Fn::GetAtt"][0])


def test_the_bulk_put_functions_grants_are_exactly_their_needs(dev: Synth) -> None:
    """StartBulkPut lists and checks the plan's staged items (deleting a crashed attempt's), starts
    the operation on the target table and records it; the service is assumed to read the items and
    write the output with its permissions. PollBulkPut follows or cancels the operation, nothing else."""
    start = handler_role(dev, "handlers.start_bulk_put.lambda_handler")
    statements = policy_statements(dev.loader_json, start)
    log_group_writes = {p for p in grants(statements) if p[0].startswith("logs:")}
    assert grants(statements) - log_group_writes == {
        ("dynamodb:StartBulkPutItems", TARGET),
        ("dynamodb:DescribeBulkOperation", BULK_OPERATIONS),
        ("s3:ListBucket", STAGING_BUCKET),
        ("s3:GetObject", STAGING_BUCKET + "/jobs/*/*/bulk/items/*"),
        ("s3:DeleteObject", STAGING_BUCKET + "/jobs/*/*/bulk/items/*"),
        ("s3:PutObject", STAGING_BUCKET + "/jobs/*/*/bulk-output/*"),
        ("dynamodb:GetItem", LEDGER),
        ("dynamodb:Query", LEDGER),
        ("dynamodb:UpdateItem", LEDGER),
    }
    (listing,) = [s for s in statements if s["Action"] == "s3:ListBucket"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["jobs/*/*/bulk/items/*"]}}
    poll = policy_statements(dev.loader_json, handler_role(dev, "handlers.poll_bulk_put.lambda_handler"))
    assert {p for p in grants(poll) if not p[0].startswith("logs:")} == {
        ("dynamodb:DescribeBulkOperation", BULK_OPERATIONS),
        ("dynamodb:CancelBulkOperation", BULK_OPERATIONS),
    }


def test_function_roles_are_lambda_roles_without_managed_policies(dev: Synth) -> None:
    for name in HANDLERS:
        role = dev.loader_json["Resources"][role_of(dev, name)]["Properties"]
        assert "ManagedPolicyArns" not in role
        assert role["AssumeRolePolicyDocument"]["Statement"] == [
            {
                "Action": "sts:AssumeRole",
                "Effect": "Allow",
                "Principal": {"Service": "lambda.amazonaws.com"},
            }
        ]


def test_no_wildcard_actions_and_unscoped_resources_only_where_aws_requires(dev: Synth) -> None:
    unscoped_allowed = {
        "logs:CreateLogDelivery",
        "logs:DeleteLogDelivery",
        "logs:DescribeLogGroups",
        "logs:DescribeResourcePolicies",
        "logs:GetLogDelivery",
        "logs:ListLogDeliveries",
        "logs:PutResourcePolicy",
        "logs:UpdateLogDelivery",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "xray:PutTelemetryRecords",
        "xray:PutTraceSegments",
        # The VPC functions' network interfaces (inline, in place of AWSLambdaVPCAccessExecutionRole).
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    }
    for template in (dev.loader_json, dev.data_json):
        for policy in resources(template, "AWS::IAM::Policy").values():
            for action, resource in grants(policy["Properties"]["PolicyDocument"]["Statement"]):
                assert "*" not in action, action
                if resource == "*":
                    assert action in unscoped_allowed, action


def test_state_machine_role_grants(dev: Synth) -> None:
    machine = next(iter(resources(dev.loader_json, "AWS::StepFunctions::StateMachine").values()))
    role = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    pairs = grants(policy_statements(dev.loader_json, role))
    functions = ["${GetAtt:" + function(dev, name)[0] + ".Arn}" for name in HANDLERS]
    # The graph-load functions too (their own grants are in tests/infra/test_graph.py).
    functions += [
        "${GetAtt:" + logical + ".Arn}"
        for logical, fn in resources(dev.loader_json, "AWS::Lambda::Function").items()
        if "graph_load" in fn["Properties"]["Handler"] or "bulk_put" in fn["Properties"]["Handler"]
    ]
    invoke = {("lambda:InvokeFunction", arn) for arn in functions} | {
        ("lambda:InvokeFunction", arn + ":*") for arn in functions
    }
    assert {p for p in pairs if p[0].startswith("lambda:")} == invoke
    # The ItemReader reads manifests from the staging jobs/ prefix and the ResultWriter writes the
    # Map's results there (AWS's documented actions for it: multipart included), nothing wider.
    assert {p for p in pairs if p[0].startswith("s3:")} == {
        (action, STAGING_JOBS)
        for action in (
            "s3:GetObject",
            "s3:PutObject",
            "s3:ListMultipartUploadParts",
            "s3:AbortMultipartUpload",
        )
    }
    logical = next(iter(resources(dev.loader_json, "AWS::StepFunctions::StateMachine")))
    executions = {p for p in pairs if p[0].startswith("states:")}
    assert ("states:StartExecution", "${Ref:" + logical + "}") in executions
    assert {action for action, _ in executions} == {
        "states:StartExecution",
        "states:DescribeExecution",
        "states:StopExecution",
        "states:RedriveExecution",
    }
    for action, resource in executions - {("states:StartExecution", "${Ref:" + logical + "}")}:
        assert ":execution:" in resource and logical in resource, (action, resource)
    assert {p[0].split(":")[0] for p in pairs} == {"lambda", "s3", "states", "logs", "xray"}


def test_loader_outputs(dev: Synth) -> None:
    assert set(dev.loader_json["Outputs"]) == {
        "StateMachineArn",
        "StateMachineName",
        "PrepareFunctionName",
        "PlanFunctionName",
        "WorkerFunctionName",
        "FinalizeFunctionName",
        # The table key Plan validates against, for `mapload start` to check a spec locally.
        "TableKey",
        # Whether Plan accepts graph inputs (GRAPH_ENABLED), for `mapload start` to check too.
        "GraphEnabled",
        # stacks/monitoring.py: which dashboard and alarm topic are this environment's.
        "DashboardName",
        "AlarmTopicArn",
        # stacks/stage.py: a settings change updates this stack, so it reads Data's outputs again.
        "SettingsRevision",
    }


def test_the_table_key_output_is_the_plan_functions_table_key(dev: Synth) -> None:
    plan = next(
        r
        for r in dev.loader_json["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Handler"] == "handlers.plan.lambda_handler"
    )
    assert (
        dev.loader_json["Outputs"]["TableKey"]["Value"]
        == plan["Properties"]["Environment"]["Variables"]["TABLE_KEY"]
    )


def test_no_physical_names(dev: Synth) -> None:
    named = {
        "AWS::S3::Bucket": "BucketName",
        "AWS::DynamoDB::Table": "TableName",
        "AWS::Lambda::Function": "FunctionName",
        "AWS::IAM::Role": "RoleName",
        "AWS::IAM::Policy": None,
        "AWS::Logs::LogGroup": "LogGroupName",
        "AWS::StepFunctions::StateMachine": "StateMachineName",
    }
    for template in (dev.data_json, dev.loader_json):
        for logical, resource in template["Resources"].items():
            prop = named.get(resource["Type"])
            if logical.startswith("ShardedLoaderStateMachineLogs"):
                # Derived from the construct path under /aws/vendedlogs/ (see test_state_machine).
                assert resource["Properties"]["LogGroupName"].startswith("/aws/vendedlogs/states/")
            elif prop:
                assert prop not in resource.get("Properties", {}), f"{logical} sets {prop}"
