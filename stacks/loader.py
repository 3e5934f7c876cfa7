"""The loading machinery: Plan/Worker/Finalize functions and the Distributed Map state machine."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.bundling import lambda_code
from stacks.config import LoaderConfig
from stacks.data import KEY_WRITE, STAGING_JOBS_PREFIX, STAGING_PREPARED_PREFIX, DataStack, key_use
from stacks.graph import GraphStack, GraphTarget
from stacks.nag import (
    acknowledge,
    acknowledge_wildcards,
    default_policy,
    flatten_reference,
    resource_finding,
    wildcard_findings,
)

HANDLER_INDEX: Final[Mapping[str, str]] = {
    "Prepare": "handlers/prepare.py",
    "Plan": "handlers/plan.py",
    "Worker": "handlers/worker.py",
    "Finalize": "handlers/finalize.py",
    "StartGraphLoad": "handlers/start_graph_load.py",
    "PollGraphLoad": "handlers/poll_graph_load.py",
}
HANDLER_FUNCTION: Final[str] = "lambda_handler"


def handler_path(name: str) -> str:
    """Lambda's `Handler` for a function: handlers/plan.py -> handlers.plan.lambda_handler."""
    return HANDLER_INDEX[name].removesuffix(".py").replace("/", ".") + "." + HANDLER_FUNCTION


# Transient Lambda service errors every Task retries (docs/CONTRACTS.md "State machine"): AWS's
# recommended retrier, plus ClientExecutionTimeoutException and Unknown (out of memory, some
# timeouts). Retrying is safe for every function: Prepare/Plan write per-run keys, a Worker's
# shard counts once through the ledger's conditional write, Finalize and the graph functions
# are idempotent per job.
LAMBDA_SERVICE_ERRORS: Final[Sequence[str]] = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.Unknown",
)
# Throttling (reserved concurrency or the account's quota reached) waits instead of failing the
# job: capped exponential backoff with full jitter, so a throttled invocation keeps trying for
# about THROTTLE_MAX_ATTEMPTS x THROTTLE_MAX_DELAY_SECONDS / 2 (~20 minutes), not ~2 minutes.
LAMBDA_THROTTLE_ERRORS: Final[Sequence[str]] = ("Lambda.TooManyRequestsException",)
THROTTLE_MAX_ATTEMPTS: Final[int] = 40
THROTTLE_MAX_DELAY_SECONDS: Final[int] = 60
# Worker-only retries: the runtime's ShardWriteError, a function that hit its own timeout
# (Lambda reports Sandbox.Timedout) and a Task that outlived its timeout.
WORKER_RETRY_ERRORS: Final[Sequence[str]] = ("ShardWriteError", "Sandbox.Timedout", "States.Timeout")
WORKER_RETRY_ATTEMPTS: Final[int] = 2
FAILED_ERROR: Final[str] = "MaploadJobFailed"
# The loader client's own retries are exhausted (its queue of 64 loads is full, or it is
# unavailable): the state machine tries again, for hours rather than ~1.5 minutes, since a full
# queue empties only as other loads finish. Capped at 5 minutes between attempts, 60 attempts
# (~4.5 h at most; ~300 history events).
GRAPH_RETRY_ERRORS: Final[Sequence[str]] = ("GraphLoaderBusyError",)
GRAPH_RETRY_ATTEMPTS: Final[int] = 60
GRAPH_RETRY_MAX_DELAY_SECONDS: Final[int] = 300

# PollGraphLoad runs once per round of the poll loop, so its retries are paid every round: they
# stay within the round's share of the 25,000-event history that runtime/logic/polling.py's
# POLL_ROUND_EVENTS assumes (Wait 2 + Choice 2 + Task 5 + 3 per retry <= 50; tests/infra/
# test_history.py checks the synthesized definition). A poll that still fails goes to
# GraphLoadError, which has the full retries: it runs once.
POLL_SERVICE_RETRY_ATTEMPTS_MAX: Final[int] = 6
POLL_THROTTLE_ATTEMPTS: Final[int] = 4
POLL_BUSY_ATTEMPTS: Final[int] = 3

# Where AWS advises Step Functions log groups to live (vended logs need no resource policy).
VENDED_LOGS_PREFIX: Final[str] = "/aws/vendedlogs/states/"

RETENTION_DAYS: Final[Mapping[int, logs.RetentionDays]] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


_ARCHITECTURES: Final[Mapping[str, lambda_.Architecture]] = {
    "arm64": lambda_.Architecture.ARM_64,
    "x86_64": lambda_.Architecture.X86_64,
}


class ManifestItemReader(sfn.S3JsonItemReader):
    """S3JsonItemReader whose IAM grant covers only the staging `jobs/` prefix.

    The stock reader grants s3:GetObject on the whole bucket; manifests only ever live under
    `jobs/`, so the state machine role gets exactly that prefix.
    """

    def __init__(self, *, bucket: s3.IBucket, key: str) -> None:
        super().__init__(bucket=bucket, key=key)
        self._manifest_bucket = bucket

    def provide_policy_statements(self) -> list[iam.PolicyStatement]:
        return [
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[self._manifest_bucket.arn_for_objects(f"{STAGING_JOBS_PREFIX}*")],
            )
        ]


class MapResultWriter(sfn.ResultWriterV2):
    """ResultWriterV2 whose IAM grant covers only the staging `jobs/` prefix.

    The stock writer grants its four actions on every object of the bucket; the Map's results
    only ever go to jobs/<jobId>/<runId>/map-results/ (Plan's mapResultsPrefix). The actions are
    AWS's documented ones for ResultWriter (it writes large result files by multipart upload).
    """

    def __init__(self, *, bucket: s3.IBucket, prefix: str) -> None:
        super().__init__(bucket=bucket, prefix=prefix)
        self._results_bucket = bucket

    def provide_policy_statements(self) -> list[iam.PolicyStatement]:
        return [
            iam.PolicyStatement(
                actions=[
                    "s3:PutObject",
                    "s3:GetObject",
                    "s3:ListMultipartUploadParts",
                    "s3:AbortMultipartUpload",
                ],
                resources=[self._results_bucket.arn_for_objects(f"{STAGING_JOBS_PREFIX}*")],
            )
        ]


class ShardedLoader(Construct):
    """Plan → Distributed Map of Workers → Finalize → Done, with narrowly granted functions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        loader_config: LoaderConfig,
        source_bucket: s3.IBucket,
        staging_bucket: s3.IBucket,
        table: dynamodb.ITable,
        table_key: Mapping[str, str],
        ledger_table: dynamodb.ITable,
        graph: GraphTarget | None = None,
        data_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = loader_config
        self._graph = graph
        # The customer managed key of the buckets, tables and (so) these log groups, if configured.
        self._key = data_key
        # One package for all six functions (stacks/bundling.py): same code root, same pins.
        self._code = lambda_code(loader_config.lambda_architecture)
        self._log_removal = (
            cdk.RemovalPolicy.RETAIN if loader_config.retain_logs else cdk.RemovalPolicy.DESTROY
        )
        stack = cdk.Stack.of(self)
        extra_bucket_arns = [
            stack.format_arn(service="s3", region="", account="", resource=name)
            for name in loader_config.source_extra_buckets
        ]
        source_bucket_arns = [source_bucket.bucket_arn, *extra_bucket_arns]
        source_object_arns = [f"{arn}/*" for arn in source_bucket_arns]
        staging_jobs_arn = staging_bucket.arn_for_objects(f"{STAGING_JOBS_PREFIX}*")

        common_env = {
            "STAGING_BUCKET": staging_bucket.bucket_name,
            "LEDGER_TABLE": ledger_table.table_name,
            "TABLE_NAME": table.table_name,
            "LEDGER_TTL_DAYS": str(loader_config.ledger_ttl_days),
        }
        source_buckets = ",".join([source_bucket.bucket_name, *loader_config.source_extra_buckets])

        # Prepare decompresses gzip/zip sources into staging prepared/*; it streams for as long as
        # the worker limit allows (docs: about how many GB one run can decompress).
        self.prepare_function = self._function(
            "Prepare",
            memory_mib=loader_config.worker_memory_mib,
            timeout_seconds=loader_config.worker_timeout_seconds,
            ephemeral_storage_mib=loader_config.worker_ephemeral_storage_mib,
            environment={
                "SOURCE_BUCKETS": source_buckets,
                "STAGING_BUCKET": staging_bucket.bucket_name,
                "TABLE_KEY": json.dumps(dict(table_key)),
            },
        )
        self.plan_function = self._function(
            "Plan",
            memory_mib=loader_config.control_memory_mib,
            timeout_seconds=loader_config.control_timeout_seconds,
            environment={
                "SOURCE_BUCKETS": source_buckets,
                **common_env,
                # Partition key first, as the runtime's spec parser expects.
                "TABLE_KEY": json.dumps(dict(table_key)),
                "MAX_CONCURRENCY_CAP": str(loader_config.max_concurrency_cap),
                # Plan refuses a graph input where there is no cluster to load it into.
                "GRAPH_ENABLED": "true" if graph is not None else "false",
            },
        )
        self.worker_function = self._function(
            "Worker",
            memory_mib=loader_config.worker_memory_mib,
            timeout_seconds=loader_config.worker_timeout_seconds,
            ephemeral_storage_mib=loader_config.worker_ephemeral_storage_mib,
            environment={
                "SOURCE_BUCKETS": source_buckets,
                **common_env,
                "WRITE_CONCURRENCY": str(loader_config.write_concurrency),
            },
        )
        # Reserved concurrency: a full-width load cannot starve the account's other functions, and
        # the Worker always has its executions (max_concurrency_cap <= this, stacks/config.py).
        # Set on the L1 so that _function stays one shape for every function.
        worker_cfn = self.worker_function.node.default_child
        assert isinstance(worker_cfn, lambda_.CfnFunction)
        worker_cfn.reserved_concurrent_executions = loader_config.worker_reserved_concurrency
        self.finalize_function = self._function(
            "Finalize",
            memory_mib=loader_config.finalize_memory_mib,
            timeout_seconds=loader_config.finalize_timeout_seconds,
            environment={**common_env, "TABLE_ARN": table.table_arn},
        )
        self.start_graph_load_function: lambda_.Function | None = None
        self.poll_graph_load_function: lambda_.Function | None = None
        if graph is not None:
            self._graph_functions(graph, staging_bucket, ledger_table, staging_jobs_arn)

        # Least privilege, statement by statement; no grantRead/grantReadWriteData helpers,
        # which would add List*/GetBucket*/Scan/Query/DeleteItem the functions never call.
        staging_prepared_arn = staging_bucket.arn_for_objects(f"{STAGING_PREPARED_PREFIX}*")
        # Prepare: list and read sources; write (multipart: PutObject, and AbortMultipartUpload on
        # failure) and head what it wrote under prepared/*.
        self._allow(self.prepare_function, ["s3:ListBucket"], source_bucket_arns)
        self._allow(self.prepare_function, ["s3:GetObject"], source_object_arns)
        self._allow(
            self.prepare_function,
            ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
            [staging_prepared_arn],
        )
        # Plan and Worker read the plain objects Prepare wrote.
        self._allow(self.plan_function, ["s3:GetObject"], [staging_prepared_arn])
        self._allow(self.worker_function, ["s3:GetObject"], [staging_prepared_arn])
        self._allow(self.plan_function, ["s3:ListBucket"], source_bucket_arns)
        self._allow(self.plan_function, ["s3:GetObject"], source_object_arns)
        self._allow(self.plan_function, ["s3:PutObject"], [staging_jobs_arn])
        ledger_table.grant(self.plan_function, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")

        self._allow(self.worker_function, ["s3:GetObject"], source_object_arns)
        if loader_config.source_kms_keys:
            # Source objects encrypted with a customer managed key: decrypt with exactly the keys
            # the environment allows, and only when S3 asks on the function's behalf.
            for function in (self.prepare_function, self.plan_function, self.worker_function):
                function.add_to_role_policy(
                    iam.PolicyStatement(
                        actions=["kms:Decrypt"],
                        resources=list(loader_config.source_kms_keys),
                        conditions={"StringEquals": {"kms:ViaService": f"s3.{stack.region}.amazonaws.com"}},
                    )
                )
        # Rejects and graph files stream as multipart uploads (PutObject), aborted on an error.
        self._allow(self.worker_function, ["s3:PutObject", "s3:AbortMultipartUpload"], [staging_jobs_arn])
        table.grant(self.worker_function, "dynamodb:BatchWriteItem")
        # Query: count the shards holding a write-budget lease (runtime/adapters/budget.py).
        ledger_table.grant(self.worker_function, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query")

        # Finalize streams the merged rejects as a multipart upload (aborted if the merge fails).
        self._allow(
            self.finalize_function,
            ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
            [staging_jobs_arn],
        )
        ledger_table.grant(
            self.finalize_function,
            "dynamodb:Query",
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:PutItem",
        )

        self._grant_data_key()
        self.state_machine_log_group = logs.LogGroup(
            self,
            "StateMachineLogs",
            # Under /aws/vendedlogs/ so that Step Functions' log delivery needs no CloudWatch Logs
            # resource policy entry (those are capped at 5,120 characters per account and region).
            # The rest is derived from this construct's path (stage, stack, construct), unique per
            # app like a generated name, not a name chosen per stack.
            log_group_name=VENDED_LOGS_PREFIX
            + cdk.Names.unique_resource_name(self, max_length=200, separator="-"),
            retention=RETENTION_DAYS[loader_config.log_retention_days],
            removal_policy=self._log_removal,
            encryption_key=self._key,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(self._definition(staging_bucket)),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.state_machine_log_group,
                level=sfn.LogLevel.ALL,
                # Execution data holds user input and report excerpts; keep it out of logs.
                include_execution_data=False,
            ),
        )
        if self._key is not None:
            # The Distributed Map's ItemReader reads the manifest (staging jobs/*) itself, and
            # its ResultWriter writes the children's results there.
            self.state_machine.add_to_role_policy(key_use(self, self._key, KEY_WRITE, "s3"))
        self._acknowledge_findings(staging_jobs_arn, source_object_arns)
        self._acknowledge_prepared(staging_prepared_arn, source_object_arns)

    # -- functions ---------------------------------------------------------------------------

    def _function(
        self,
        name: str,
        *,
        memory_mib: int,
        timeout_seconds: int,
        environment: Mapping[str, str],
        network: Mapping[str, Any] | None = None,
        ephemeral_storage_mib: int | None = None,
    ) -> lambda_.Function:
        log_group = logs.LogGroup(
            self,
            f"{name}Logs",
            retention=RETENTION_DAYS[self._config.log_retention_days],
            removal_policy=self._log_removal,
            encryption_key=self._key,
        )
        # An explicit role instead of the AWSLambdaBasicExecutionRole managed policy, which
        # would allow writing to every log group in the account.
        role = iam.Role(
            self,
            f"{name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"mapload {name} function",
        )
        log_group.grant_write(role)
        function = lambda_.Function(
            self,
            name,
            code=self._code,
            handler=handler_path(name),
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=_ARCHITECTURES[self._config.lambda_architecture],
            memory_size=memory_mib,
            timeout=cdk.Duration.seconds(timeout_seconds),
            ephemeral_storage_size=cdk.Size.mebibytes(ephemeral_storage_mib)
            if ephemeral_storage_mib
            else None,
            environment=dict(environment),
            role=role,
            log_group=log_group,
            description=f"mapload {name.lower()} (runtime/{HANDLER_INDEX[name]})",
            **dict(network or {}),
        )
        # The log group must exist before the function first runs, or Lambda creates its own.
        function.node.add_dependency(log_group)
        return function

    def _graph_functions(
        self,
        graph: GraphTarget,
        staging_bucket: s3.IBucket,
        ledger_table: dynamodb.ITable,
        staging_jobs_arn: str,
    ) -> None:
        """StartGraphLoad and PollGraphLoad: in the VPC, the only callers of the Neptune loader API."""
        neptune_env = {
            "NEPTUNE_ENDPOINT": graph.endpoint,
            "NEPTUNE_PORT": graph.port,
            "NEPTUNE_REGION": cdk.Aws.REGION,
        }
        ledger_env = {
            "STAGING_BUCKET": staging_bucket.bucket_name,
            "LEDGER_TABLE": ledger_table.table_name,
            "LEDGER_TTL_DAYS": str(self._config.ledger_ttl_days),
        }
        network = {"vpc": graph.vpc, "vpc_subnets": graph.subnets, "security_groups": [graph.security_group]}
        start = self._function(
            "StartGraphLoad",
            memory_mib=self._config.control_memory_mib,
            timeout_seconds=self._config.control_timeout_seconds,
            environment={**neptune_env, "LOADER_ROLE_ARN": graph.loader_role_arn, **ledger_env},
            network=network,
        )
        poll = self._function(
            "PollGraphLoad",
            memory_mib=self._config.control_memory_mib,
            timeout_seconds=self._config.control_timeout_seconds,
            environment={**neptune_env, **ledger_env},
            network=network,
        )
        # neptune-db actions are scoped by the cluster's resource id (arn:...:neptune-db:region:account:id/*).
        self._neptune_arn = cdk.Stack.of(self).format_arn(
            service="neptune-db",
            resource=graph.cluster_resource_id,
            resource_name="*",
            arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
        )
        # List/GetStatus: a retried start adopts the load an earlier attempt started.
        self._allow(
            start,
            ["neptune-db:StartLoaderJob", "neptune-db:ListLoaderJobs", "neptune-db:GetLoaderJobStatus"],
            [self._neptune_arn],
        )
        # UpdateItem: Ledger.record_graph_load writes the started load's id into the job item.
        ledger_table.grant(start, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
        self._allow(
            poll, ["neptune-db:GetLoaderJobStatus", "neptune-db:CancelLoaderJob"], [self._neptune_arn]
        )
        self._allow(poll, ["s3:PutObject"], [staging_jobs_arn])
        ledger_table.grant(poll, "dynamodb:UpdateItem")
        for function in (start, poll):
            role = function.role
            assert isinstance(role, iam.Role)
            # ENIs in the VPC: AWS's own policy for exactly that (ec2:Create/Describe/Delete
            # NetworkInterface and IP assignment, which take no narrower resource).
            role.add_managed_policy(
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole")
            )
            cfn_role = role.node.default_child
            assert isinstance(cfn_role, cdk.CfnResource)
            acknowledge(
                cfn_role,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaVPCAccessExecutionRole]",
                "A function in a VPC needs to create and delete its network interfaces; AWS maintains "
                "this policy for exactly that and the EC2 actions take no narrower resource.",
            )
        neptune_reason = {
            resource_finding(self, self._neptune_arn): (
                "neptune-db data actions are granted per cluster as <cluster resource id>/*; these "
                "functions call only the loader API actions listed, on this one cluster."
            )
        }
        acknowledge_wildcards(default_policy(start.role), neptune_reason)
        acknowledge_wildcards(
            default_policy(poll.role),
            {
                **neptune_reason,
                resource_finding(self, staging_jobs_arn): (
                    "PollGraphLoad rewrites the job report under jobs/<jobId>/<runId>/ when the load ends."
                ),
            },
        )
        self.start_graph_load_function = start
        self.poll_graph_load_function = poll

    def _grant_data_key(self) -> None:
        """The data key, per function, for exactly the services through which it touches encrypted
        data: S3 (source and staging objects) and DynamoDB (the ledger, a created target table)."""
        if self._key is None:
            return
        key = self._key
        # Every function here that reads S3 also writes it (staging), and every DynamoDB user writes.
        uses: list[tuple[lambda_.IFunction | None, tuple[str, ...]]] = [
            (self.prepare_function, ("s3",)),
            (self.plan_function, ("s3", "dynamodb")),
            (self.worker_function, ("s3", "dynamodb")),
            (self.finalize_function, ("s3", "dynamodb")),
            # StartGraphLoad only claims the load in the ledger; Poll also rewrites the report.
            (self.start_graph_load_function, ("dynamodb",)),
            (self.poll_graph_load_function, ("s3", "dynamodb")),
        ]
        for function, services in uses:
            if function is not None:
                for service in services:
                    function.add_to_role_policy(key_use(self, key, KEY_WRITE, service))

    @staticmethod
    def _allow(function: lambda_.IFunction, actions: list[str], resources: list[str]) -> None:
        function.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=resources))

    # -- state machine -----------------------------------------------------------------------

    def _retry(
        self,
        task: tasks.LambdaInvoke,
        errors: Sequence[str],
        attempts: int,
        max_delay_seconds: int | None = None,
    ) -> None:
        task.add_retry(
            errors=list(errors),
            interval=cdk.Duration.seconds(self._config.retry_interval_seconds),
            max_attempts=attempts,
            backoff_rate=self._config.retry_backoff_rate,
            max_delay=cdk.Duration.seconds(max_delay_seconds) if max_delay_seconds is not None else None,
            jitter_strategy=sfn.JitterType.FULL,
        )

    def _retry_lambda(self, task: tasks.LambdaInvoke) -> None:
        """What Lambda itself reports, on every Lambda task: service errors, then throttling."""
        self._retry(task, LAMBDA_SERVICE_ERRORS, self._config.retry_max_attempts)
        self._retry(task, LAMBDA_THROTTLE_ERRORS, THROTTLE_MAX_ATTEMPTS, THROTTLE_MAX_DELAY_SECONDS)

    def _definition(self, staging_bucket: s3.IBucket) -> sfn.IChainable:
        execution = {
            "name": sfn.JsonPath.string_at("$$.Execution.Name"),
            "id": sfn.JsonPath.string_at("$$.Execution.Id"),
        }

        prepare = tasks.LambdaInvoke(
            self,
            "PrepareTask",
            state_name="Prepare",
            lambda_function=self.prepare_function,
            payload=sfn.TaskInput.from_object({"input": sfn.JsonPath.object_at("$"), "execution": execution}),
            result_selector={
                "preparedKey": sfn.JsonPath.string_at("$.Payload.preparedKey"),
                "objects": sfn.JsonPath.number_at("$.Payload.objects"),
                "compressed": sfn.JsonPath.number_at("$.Payload.compressed"),
            },
            # Plan reads $.prepare from its input (and leaves it out of the spec).
            result_path="$.prepare",
            retry_on_service_exceptions=False,
        )
        self._retry_lambda(prepare)

        plan = tasks.LambdaInvoke(
            self,
            "PlanTask",
            state_name="Plan",
            lambda_function=self.plan_function,
            payload=sfn.TaskInput.from_object({"input": sfn.JsonPath.object_at("$"), "execution": execution}),
            result_selector={
                "job": sfn.JsonPath.object_at("$.Payload.job"),
                "manifestKey": sfn.JsonPath.string_at("$.Payload.manifestKey"),
                "maxConcurrency": sfn.JsonPath.number_at("$.Payload.maxConcurrency"),
                "shardCount": sfn.JsonPath.number_at("$.Payload.shardCount"),
                "mapResultsPrefix": sfn.JsonPath.string_at("$.Payload.mapResultsPrefix"),
            },
            result_path="$.plan",
            # Our own Retry below (with jitter) replaces CDK's default service-error retrier.
            retry_on_service_exceptions=False,
        )
        self._retry_lambda(plan)

        worker = tasks.LambdaInvoke(
            self,
            "WorkerTask",
            state_name="Worker",
            lambda_function=self.worker_function,
            payload=sfn.TaskInput.from_json_path_at("$"),
            result_selector={"index": sfn.JsonPath.number_at("$.Payload.index")},
            # A little beyond the function's own timeout: States.Timeout then means the
            # invocation itself hung, and the shard is retried.
            task_timeout=sfn.Timeout.duration(cdk.Duration.seconds(self._config.worker_timeout_seconds + 60)),
            retry_on_service_exceptions=False,
        )
        self._retry_lambda(worker)
        self._retry(worker, WORKER_RETRY_ERRORS, WORKER_RETRY_ATTEMPTS)

        shards = sfn.DistributedMap(
            self,
            "ShardsMap",
            state_name="Shards",
            item_reader=ManifestItemReader(
                bucket=staging_bucket, key=sfn.JsonPath.string_at("$.plan.manifestKey")
            ),
            max_concurrency_path=sfn.JsonPath.string_at("$.plan.maxConcurrency"),
            item_selector={
                "shard": sfn.JsonPath.object_at("$$.Map.Item.Value"),
                "job": sfn.JsonPath.object_at("$.plan.job"),
            },
            # The children's outputs go to S3, never into state: collected, they would pass the
            # 256 KiB state limit at ~17,000 shards (States.DataLimitExceeded, which no Catch sees).
            result_writer_v2=MapResultWriter(
                bucket=staging_bucket, prefix=sfn.JsonPath.string_at("$.plan.mapResultsPrefix")
            ),
            result_path=sfn.JsonPath.DISCARD,
            # EXPRESS children cost less per shard but end after 5 minutes (checked in config).
            map_execution_type=sfn.StateMachineType[self._config.map_execution_type],
        )
        shards.item_processor(worker)

        finalize = tasks.LambdaInvoke(
            self,
            "FinalizeTask",
            state_name="Finalize",
            lambda_function=self.finalize_function,
            payload=sfn.TaskInput.from_object(
                {
                    "state": sfn.JsonPath.object_at("$"),
                    # The start time lets the report say how long the whole job took.
                    "execution": {**execution, "startTime": sfn.JsonPath.string_at("$$.Execution.StartTime")},
                }
            ),
            result_selector={
                "status": sfn.JsonPath.string_at("$.Payload.status"),
                "jobId": sfn.JsonPath.string_at("$.Payload.jobId"),
                "report": sfn.JsonPath.object_at("$.Payload.report"),
                "reportUri": sfn.JsonPath.string_at("$.Payload.reportUri"),
                "error": sfn.JsonPath.string_at("$.Payload.error"),
                "cause": sfn.JsonPath.string_at("$.Payload.cause"),
                **(
                    {"graphLoad": sfn.JsonPath.string_at("$.Payload.graphLoad")}
                    if self._graph is not None
                    else {}
                ),
            },
            result_path="$.result",
            retry_on_service_exceptions=False,
        )
        self._retry_lambda(finalize)

        # Finalize runs after a failed Plan or Map too, so every execution writes a report.
        # Its own path, so the report can say the error happened in Prepare.
        prepare.add_catch(finalize, errors=[sfn.Errors.ALL], result_path="$.prepareError")
        plan.add_catch(finalize, errors=[sfn.Errors.ALL], result_path="$.error")
        shards.add_catch(finalize, errors=[sfn.Errors.ALL], result_path="$.error")

        succeeded = sfn.Succeed(self, "SucceededState", state_name="Succeeded", output_path="$.result")
        failed = sfn.Fail(
            self,
            "FailedState",
            state_name="Failed",
            error=FAILED_ERROR,
            cause_path=sfn.JsonPath.string_at("$.result.cause"),
        )
        done = sfn.Choice(self, "DoneChoice", state_name="Done")
        if self._graph is not None:
            done.when(
                sfn.Condition.and_(
                    sfn.Condition.string_equals("$.result.status", "SUCCEEDED"),
                    sfn.Condition.boolean_equals("$.result.graphLoad", True),
                ),
                self._graph_load_states(execution, succeeded, failed),
            )
        done.when(sfn.Condition.string_equals("$.result.status", "SUCCEEDED"), succeeded).otherwise(failed)
        return prepare.next(plan).next(shards).next(finalize).next(done)

    def _graph_load_states(
        self, execution: Mapping[str, Any], succeeded: sfn.Succeed, failed: sfn.Fail
    ) -> sfn.IChainable:
        """StartGraphLoad → PollGraphLoad → GraphLoaded? (pending: GraphWait, then poll again).

        Polling happens in the state machine, never by sleeping in a Lambda. Poll returns
        Finalize's result shape with the report finished, so Succeeded/Failed serve both paths.
        """
        assert self.start_graph_load_function is not None and self.poll_graph_load_function is not None
        result_selector: dict[str, Any] = {
            name: sfn.JsonPath.string_at(f"$.Payload.{name}")
            for name in ("status", "jobId", "reportUri", "error", "cause", "graphLoad", "graphStatus")
        }
        result_selector["report"] = sfn.JsonPath.object_at("$.Payload.report")
        result_selector["pending"] = sfn.JsonPath.string_at("$.Payload.pending")
        result_selector["waitSeconds"] = sfn.JsonPath.number_at("$.Payload.waitSeconds")

        start = tasks.LambdaInvoke(
            self,
            "StartGraphLoadTask",
            state_name="StartGraphLoad",
            lambda_function=self.start_graph_load_function,
            payload=sfn.TaskInput.from_object(
                {"job": sfn.JsonPath.object_at("$.plan.job"), "execution": execution}
            ),
            result_selector={
                "loadId": sfn.JsonPath.string_at("$.Payload.loadId"),
                "source": sfn.JsonPath.string_at("$.Payload.source"),
                "waitSeconds": sfn.JsonPath.number_at("$.Payload.waitSeconds"),
                "startedAt": sfn.JsonPath.number_at("$.Payload.startedAt"),
                "deadline": sfn.JsonPath.number_at("$.Payload.deadline"),
            },
            result_path="$.graphLoad",
            retry_on_service_exceptions=False,
        )
        self._retry_lambda(start)
        self._retry(start, GRAPH_RETRY_ERRORS, GRAPH_RETRY_ATTEMPTS, GRAPH_RETRY_MAX_DELAY_SECONDS)
        wait = sfn.Wait(
            self,
            "GraphWaitState",
            state_name="GraphWait",
            # Poll's own answer: the interval grows with the load's age (runtime/logic/polling.py).
            time=sfn.WaitTime.seconds_path("$.result.waitSeconds"),
        )
        poll = tasks.LambdaInvoke(
            self,
            "PollGraphLoadTask",
            state_name="PollGraphLoad",
            lambda_function=self.poll_graph_load_function,
            payload=sfn.TaskInput.from_object(
                {"load": sfn.JsonPath.object_at("$.graphLoad"), "result": sfn.JsonPath.object_at("$.result")}
            ),
            result_selector=result_selector,
            result_path="$.result",
            retry_on_service_exceptions=False,
        )
        # Inside the loop: bounded retries (see POLL_SERVICE_RETRY_ATTEMPTS_MAX).
        self._retry(
            poll, LAMBDA_SERVICE_ERRORS, min(self._config.retry_max_attempts, POLL_SERVICE_RETRY_ATTEMPTS_MAX)
        )
        self._retry(poll, LAMBDA_THROTTLE_ERRORS, POLL_THROTTLE_ATTEMPTS, THROTTLE_MAX_DELAY_SECONDS)
        self._retry(poll, GRAPH_RETRY_ERRORS, POLL_BUSY_ATTEMPTS, GRAPH_RETRY_MAX_DELAY_SECONDS)
        # A start or poll that failed for good still finishes the report (status FAILED, the error).
        record_error = tasks.LambdaInvoke(
            self,
            "GraphLoadErrorTask",
            state_name="GraphLoadError",
            lambda_function=self.poll_graph_load_function,
            payload=sfn.TaskInput.from_object(
                {
                    "error": sfn.JsonPath.object_at("$.graphError"),
                    "result": sfn.JsonPath.object_at("$.result"),
                }
            ),
            result_selector=result_selector,
            result_path="$.result",
            retry_on_service_exceptions=False,
        )
        self._retry_lambda(record_error)
        start.add_catch(record_error, errors=[sfn.Errors.ALL], result_path="$.graphError")
        poll.add_catch(record_error, errors=[sfn.Errors.ALL], result_path="$.graphError")
        loaded = (
            sfn.Choice(self, "GraphLoadedChoice", state_name="GraphLoaded")
            .when(sfn.Condition.boolean_equals("$.result.pending", True), wait)
            .when(sfn.Condition.string_equals("$.result.status", "SUCCEEDED"), succeeded)
            .otherwise(failed)
        )
        record_error.next(loaded)
        # The first poll right after the start; each later one after the wait Poll asked for.
        wait.next(poll)
        return start.next(poll).next(loaded)

    # -- cdk-nag -----------------------------------------------------------------------------

    def _acknowledge_findings(self, staging_jobs_arn: str, source_object_arns: list[str]) -> None:
        """Acknowledge, finding by finding, the wildcards this design needs (see the reasons)."""
        for function in self.functions:
            cfn_function = function.node.default_child
            assert isinstance(cfn_function, cdk.CfnResource)
            acknowledge(
                cfn_function,
                "AwsSolutions-L1",
                "Pinned to python3.12 (docs/CONTRACTS.md): the runtime, its pinned dependencies and "
                "the embedded runner are tested on 3.12; moving the runtime is a deliberate change.",
            )

        staging = {
            resource_finding(self, staging_jobs_arn): (
                "Objects under the staging bucket's jobs/ prefix only: keys are "
                "jobs/<jobId>/<runId>/... and created per run, so the prefix is the narrowest grant."
            )
        }
        sources = {
            resource_finding(self, arn): (
                "Any object of an allowed source bucket: each execution names its own source "
                "key or prefix; the grant is read-only (s3:GetObject)."
            )
            for arn in source_object_arns
        }
        for function in (self.plan_function, self.worker_function):
            acknowledge_wildcards(default_policy(function.role), {**staging, **sources})
        acknowledge_wildcards(default_policy(self.finalize_function.role), staging)

        invoke_versions = {
            resource_finding(self, f"{function.function_arn}:*"): (
                "LambdaInvoke grants the function's versions and aliases (ARN:*) with its ARN; the "
                "state machine invokes the unqualified ARN of its own three functions only."
            )
            for function in self.functions
        }
        unscoped = {
            "Resource::*": (
                "CloudWatch Logs vended-log delivery (logs:*LogDelivery, PutResourcePolicy, "
                "Describe*) and X-Ray (xray:PutTraceSegments etc.) do not support resource-level "
                "permissions; CDK adds them for the state machine's logging and tracing."
            )
        }
        acknowledge_wildcards(
            default_policy(self.state_machine.role), {**staging, **invoke_versions, **unscoped}
        )

        # CDK's DistributedMap lets the state machine manage its own child executions.
        map_policy = self.state_machine.node.try_find_child("DistributedMapPolicy")
        assert isinstance(map_policy, iam.Policy)
        machine_ref = flatten_reference(cdk.Stack.of(self).resolve(self.state_machine.state_machine_arn))
        acknowledge_wildcards(
            map_policy,
            {
                finding: (
                    "Distributed Map child executions: Describe/Stop/RedriveExecution on this state "
                    "machine's own executions (execution:<name>:* and its map runs), as CDK grants them."
                )
                for finding in wildcard_findings(map_policy)
                # The partition is a token unless the environment names its region.
                if finding.startswith("Resource::arn:")
                and ":states:" in finding
                and ":execution:" in finding
                and machine_ref.strip("<>") in finding
            },
        )

    def _acknowledge_prepared(self, staging_prepared_arn: str, source_object_arns: list[str]) -> None:
        prepared = {
            resource_finding(self, staging_prepared_arn): (
                "Objects under the staging bucket's prepared/ prefix only: Prepare writes "
                "prepared/<jobId>/<runId>/... per run (decompressed sources); Plan and Worker read them."
            )
        }
        sources = {
            resource_finding(self, arn): (
                "Any object of an allowed source bucket: each execution names its own source key or "
                "prefix; Prepare only reads it (s3:GetObject) to detect and decompress gzip/zip."
            )
            for arn in source_object_arns
        }
        acknowledge_wildcards(default_policy(self.prepare_function.role), {**prepared, **sources})
        for function in (self.plan_function, self.worker_function):
            acknowledge_wildcards(default_policy(function.role), prepared)

    @property
    def functions(self) -> tuple[lambda_.Function, ...]:
        graph = (self.start_graph_load_function, self.poll_graph_load_function)
        return (
            self.prepare_function,
            self.plan_function,
            self.worker_function,
            self.finalize_function,
            *(function for function in graph if function is not None),
        )


class LoaderStack(cdk.Stack):
    """The stateless half of an environment: functions and the state machine."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        loader_config: LoaderConfig,
        data: DataStack,
        table_key: Mapping[str, str],
        graph: GraphStack | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        shared = data.share_with(self)
        # Explicit imports are invisible to CDK's dependency tracking; deploy Data first.
        self.add_stack_dependency(data, "imports the Data stack's exports")
        self.loader = ShardedLoader(
            self,
            "ShardedLoader",
            loader_config=loader_config,
            source_bucket=shared.source_bucket,
            staging_bucket=shared.staging_bucket,
            table=shared.table,
            table_key=table_key,
            ledger_table=shared.ledger_table,
            graph=graph.share_with(self) if graph is not None else None,
            data_key=shared.key,
        )
        cdk.CfnOutput(self, "StateMachineArn", value=self.loader.state_machine.state_machine_arn)
        cdk.CfnOutput(self, "StateMachineName", value=self.loader.state_machine.state_machine_name)
        # The TABLE_KEY Plan validates against: `mapload start` checks a spec with it before uploading.
        cdk.CfnOutput(self, "TableKey", value=json.dumps(dict(table_key)))
        cdk.CfnOutput(self, "PrepareFunctionName", value=self.loader.prepare_function.function_name)
        cdk.CfnOutput(self, "PlanFunctionName", value=self.loader.plan_function.function_name)
        cdk.CfnOutput(self, "WorkerFunctionName", value=self.loader.worker_function.function_name)
        cdk.CfnOutput(self, "FinalizeFunctionName", value=self.loader.finalize_function.function_name)
