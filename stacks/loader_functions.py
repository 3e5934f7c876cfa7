"""The loader's Lambda functions, each with its own log group and role, and what each may do."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.bulk_put_functions import bulk_put_functions
from stacks.bundling import CORE, PACKAGES, PARQUET, lambda_code
from stacks.data import (
    KEY_READ,
    KEY_WRITE,
    STAGING_DATASETS_PREFIX,
    STAGING_GRAPH_EDGE_FILES,
    STAGING_GRAPH_ID_FILES,
    STAGING_JOBS_PREFIX,
    STAGING_PREPARED_PREFIX,
    STAGING_REPORTS,
    STAGING_SYNC_SHARD_FILES,
    key_use,
)
from stacks.graph import GraphTarget
from stacks.loader_settings import LoaderConfig
from stacks.nag import acknowledge, acknowledge_wildcards, default_policy, resource_finding

HANDLER_INDEX: Final[Mapping[str, str]] = {
    "Prepare": "handlers/prepare.py",
    "Plan": "handlers/plan.py",
    "Worker": "handlers/worker.py",
    "Finalize": "handlers/finalize.py",
    "StartGraphLoad": "handlers/start_graph_load.py",
    "PollGraphLoad": "handlers/poll_graph_load.py",
    "StartBulkPut": "handlers/start_bulk_put.py",
    "PollBulkPut": "handlers/poll_bulk_put.py",
}
HANDLER_FUNCTION: Final[str] = "lambda_handler"
# The functions that read Parquet (Plan its footers, the Worker its row groups) take the package
# with pyarrow (stacks/bundling.py PACKAGES); the others keep the core package, half its zipped
# size (docs/DEPLOY.md, "The Lambda packages").
PARQUET_FUNCTIONS: Final[frozenset[str]] = frozenset({"Plan", "Worker"})
# What CloudFormation names the state machine after: its logical id (ShardedLoader/StateMachine).
# The pipeline's smoke role scopes by the same prefix (stacks/pipeline.py).
STATE_MACHINE_NAME_PREFIX: Final[str] = "ShardedLoaderStateMachine"
# The language StartGraphLoad's one query is written in, as Neptune's data-access condition key
# names it (Neptune user guide, "IAM condition keys for accessing data": Gremlin, OpenCypher, Sparql).
NEPTUNE_QUERY_LANGUAGE_KEY: Final[str] = "neptune-db:QueryLanguage"
NEPTUNE_QUERY_LANGUAGE: Final[str] = "OpenCypher"

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


def handler_path(name: str) -> str:
    """Lambda's `Handler` for a function: handlers/plan.py -> handlers.plan.lambda_handler."""
    return HANDLER_INDEX[name].removesuffix(".py").replace("/", ".") + "." + HANDLER_FUNCTION


def package_of(name: str) -> str:
    """The Lambda package (stacks/bundling.py PACKAGES) a function's code is."""
    return PARQUET if name in PARQUET_FUNCTIONS else CORE


# What the Worker calls on the target table, one call per write mode (see _grant_worker).
TABLE_WRITES: tuple[str, ...] = (
    "dynamodb:BatchWriteItem",
    "dynamodb:PartiQLInsert",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)


def allow(function: lambda_.IFunction, actions: list[str], resources: list[str]) -> None:
    """One statement on the function's role: exactly these actions on exactly these resources."""
    function.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=resources))


@dataclass(frozen=True)
class LoaderData:
    """What the loader reads and writes: buckets, tables, the graph target, the data key."""

    source_bucket: s3.IBucket
    staging_bucket: s3.IBucket
    table: dynamodb.ITable
    table_key: Mapping[str, str]
    ledger_table: dynamodb.ITable
    graph: GraphTarget | None
    data_key: kms.IKey | None
    # The customer managed keys of the tables the Worker writes (`existing_table_key`, `table_keys`),
    # used by DynamoDB with the Worker's permissions on every write.
    table_key_arns: tuple[str, ...] = ()
    # The other tables a job may name (`tables`: names, prefixes ending in `*`, or their ARNs).
    tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class ObjectArns:
    """The S3 ARNs the grants name (and the cdk-nag acknowledgements explain)."""

    source_buckets: list[str]
    source_objects: list[str]
    staging_jobs: str
    staging_prepared: str
    # StartGraphLoad's edge endpoint check: the shards' id files and staged edge files only.
    staging_graph_check: list[str]
    # PollGraphLoad: the run's report, which it rewrites when the load ends.
    staging_reports: str
    # writeMode sync: the shards' staged items and the datasets' merged buckets (baselines).
    staging_sync_shards: str
    staging_datasets: str

    @classmethod
    def of(cls, scope: Construct, config: LoaderConfig, data: LoaderData) -> ObjectArns:
        stack = cdk.Stack.of(scope)
        extra = [
            stack.format_arn(service="s3", region="", account="", resource=name)
            for name in config.source_extra_buckets
        ]
        buckets = [data.source_bucket.bucket_arn, *extra]
        return cls(
            source_buckets=buckets,
            source_objects=[f"{arn}/*" for arn in buckets],
            staging_jobs=data.staging_bucket.arn_for_objects(f"{STAGING_JOBS_PREFIX}*"),
            staging_prepared=data.staging_bucket.arn_for_objects(f"{STAGING_PREPARED_PREFIX}*"),
            staging_graph_check=[
                data.staging_bucket.arn_for_objects(pattern)
                for pattern in (STAGING_GRAPH_ID_FILES, STAGING_GRAPH_EDGE_FILES)
            ],
            staging_reports=data.staging_bucket.arn_for_objects(STAGING_REPORTS),
            staging_sync_shards=data.staging_bucket.arn_for_objects(STAGING_SYNC_SHARD_FILES),
            staging_datasets=data.staging_bucket.arn_for_objects(f"{STAGING_DATASETS_PREFIX}*"),
        )


class LoaderFunctions:
    """Prepare, Plan, Worker, Finalize (and StartGraphLoad, PollGraphLoad with a graph target).

    Not a Construct of its own: it adds to its owner's scope, so the functions, roles and log
    groups keep the logical ids (`ShardedLoader<Name>...`) they were first deployed with.
    Least privilege, statement by statement; no grantRead/grantReadWriteData helpers, which would
    add List*/GetBucket*/Scan/Query/DeleteItem the functions never call.
    """

    def __init__(self, scope: Construct, *, loader_config: LoaderConfig, data: LoaderData) -> None:
        self._scope = scope
        self._config = loader_config
        self._data = data
        # One asset per package (stacks/bundling.py), each shared by the functions using it.
        architecture = loader_config.lambda_architecture
        self._code = {package: lambda_code(architecture, package) for package in PACKAGES}
        self._log_removal = (
            cdk.RemovalPolicy.RETAIN if loader_config.retain_logs else cdk.RemovalPolicy.DESTROY
        )
        self.arns = ObjectArns.of(scope, loader_config, data)
        self.prepare_function, self.plan_function, self.worker_function, self.finalize_function = (
            self._load_functions()
        )
        self.start_graph_load_function: lambda_.Function | None = None
        self.poll_graph_load_function: lambda_.Function | None = None
        self._grant_prepare()
        self._grant_plan()
        self._grant_worker()
        self._grant_finalize()
        if data.graph is not None:
            self.start_graph_load_function, self.poll_graph_load_function = self._graph_functions(data.graph)
        # dynamodb.engine bulkPutItems is chosen per job: every environment has the hand-off.
        self.start_bulk_put_function, self.poll_bulk_put_function = bulk_put_functions(self)
        self._grant_data_key()
        self._grant_table_key()
        self._acknowledge()
        self._acknowledge_sync()

    @property
    def all(self) -> tuple[lambda_.Function, ...]:
        graph = (self.start_graph_load_function, self.poll_graph_load_function)
        return (
            self.prepare_function,
            self.plan_function,
            self.worker_function,
            self.finalize_function,
            *(function for function in graph if function is not None),
            self.start_bulk_put_function,
            self.poll_bulk_put_function,
        )

    # What stacks/bulk_put_functions.py builds its functions with.
    @property
    def scope(self) -> Construct:
        return self._scope

    @property
    def config(self) -> LoaderConfig:
        return self._config

    @property
    def data(self) -> LoaderData:
        return self._data

    def function(self, name: str, **kwargs: Any) -> lambda_.Function:
        """A function of the loader with its own role and log group (`_function`)."""
        return self._function(name, **kwargs)

    def log_group(self, construct_id: str, **kwargs: Any) -> logs.LogGroup:
        """A log group of the loader: the environment's retention, removal policy and data key."""
        return logs.LogGroup(
            self._scope,
            construct_id,
            retention=RETENTION_DAYS[self._config.log_retention_days],
            removal_policy=self._log_removal,
            encryption_key=self._data.data_key,
            **kwargs,
        )

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
        log_group = self.log_group(f"{name}Logs")
        # An explicit role instead of the AWSLambdaBasicExecutionRole managed policy, which
        # would allow writing to every log group in the account.
        role = iam.Role(
            self._scope,
            f"{name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"mapload {name} function",
        )
        log_group.grant_write(role)
        function = lambda_.Function(
            self._scope,
            name,
            code=self._code[package_of(name)],
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

    def _environments(self) -> dict[str, dict[str, str]]:
        """Each load function's environment variables (runtime/handlers/settings.py reads them)."""
        config, data = self._config, self._data
        common = {
            "STAGING_BUCKET": data.staging_bucket.bucket_name,
            "LEDGER_TABLE": data.ledger_table.table_name,
            "TABLE_NAME": data.table.table_name,
            "LEDGER_TTL_DAYS": str(config.ledger_ttl_days),
        }
        sources = {"SOURCE_BUCKETS": ",".join([data.source_bucket.bucket_name, *config.source_extra_buckets])}
        # Partition key first, as the runtime's spec parser expects.
        table_key = json.dumps(dict(data.table_key))
        return {
            "Prepare": {**sources, "STAGING_BUCKET": data.staging_bucket.bucket_name, "TABLE_KEY": table_key},
            "Plan": {
                **sources,
                **common,
                "TABLE_KEY": table_key,
                # The other tables a job may name (`tables`): Plan refuses any other.
                "TABLES": ",".join(self.table_names),
                "MAX_CONCURRENCY_CAP": str(config.max_concurrency_cap),
                # Plan refuses a graph input where there is no cluster to load it into.
                "GRAPH_ENABLED": "true" if data.graph is not None else "false",
                # ... and a property graph shard larger than the Worker's memory holds.
                "WORKER_MEMORY_MIB": str(config.worker_memory_mib),
                # ... and a jobId is taken over only once the Workers of the run holding it are over.
                "WORKER_TIMEOUT_SECONDS": str(config.worker_timeout_seconds),
                # ... and a source with more objects to read than fit in half of its own timeout.
                "PLAN_TIMEOUT_SECONDS": str(config.control_timeout_seconds),
                "PLAN_MEMORY_MIB": str(config.control_memory_mib),
                # ... and, for EXPRESS children (5 minutes each), a job whose shard takes longer.
                "MAP_EXECUTION_TYPE": config.map_execution_type,
            },
            "Worker": {
                **sources,
                **common,
                "WRITE_CONCURRENCY": str(config.write_concurrency),
                "MAX_WRITE_CONCURRENCY": str(config.max_write_concurrency),
            },
            "Finalize": {
                **common,
                "TABLE_ARN": data.table.table_arn,
                # After a failed Map Run it records until when the job's Workers may still write.
                "WORKER_TIMEOUT_SECONDS": str(config.worker_timeout_seconds),
            },
        }

    def _load_functions(
        self,
    ) -> tuple[lambda_.Function, lambda_.Function, lambda_.Function, lambda_.Function]:
        config = self._config
        environments = self._environments()
        worker_sizing: dict[str, Any] = {
            "memory_mib": config.worker_memory_mib,
            "timeout_seconds": config.worker_timeout_seconds,
            "ephemeral_storage_mib": config.worker_ephemeral_storage_mib,
        }
        # Prepare decompresses gzip/zip sources into staging prepared/*; it streams for as long as
        # the worker limit allows (docs: about how many GB one run can decompress).
        prepare = self._function("Prepare", **worker_sizing, environment=environments["Prepare"])
        plan = self._function(
            "Plan",
            memory_mib=config.control_memory_mib,
            timeout_seconds=config.control_timeout_seconds,
            environment=environments["Plan"],
        )
        worker = self._function("Worker", **worker_sizing, environment=environments["Worker"])
        # Reserved concurrency: a full-width load cannot starve the account's other functions, and
        # the Worker always has its executions (max_concurrency_cap <= this, stacks/loader_settings.py).
        # Set on the L1 so that _function stays one shape for every function.
        worker_cfn = worker.node.default_child
        assert isinstance(worker_cfn, lambda_.CfnFunction)
        worker_cfn.reserved_concurrent_executions = config.worker_reserved_concurrency
        finalize = self._function(
            "Finalize",
            memory_mib=config.finalize_memory_mib,
            timeout_seconds=config.finalize_timeout_seconds,
            environment=environments["Finalize"],
        )
        return prepare, plan, worker, finalize

    # -- grants, per function, in the order its role's policy lists them ----------------------

    def _grant_prepare(self) -> None:
        """List and read sources; write (multipart: PutObject, and AbortMultipartUpload on
        failure) and head what it wrote under prepared/*."""
        arns, function = self.arns, self.prepare_function
        allow(function, ["s3:ListBucket"], arns.source_buckets)
        allow(function, ["s3:GetObject"], arns.source_objects)
        allow(function, ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"], [arns.staging_prepared])
        self._grant_source_keys(function)

    def _grant_plan(self) -> None:
        """Read the plain objects Prepare wrote and the sources; write the manifest under jobs/*."""
        arns, function = self.arns, self.plan_function
        allow(function, ["s3:GetObject"], [arns.staging_prepared])
        allow(function, ["s3:ListBucket"], arns.source_buckets)
        allow(function, ["s3:GetObject"], arns.source_objects)
        allow(function, ["s3:PutObject"], [arns.staging_jobs])
        self._data.ledger_table.grant(function, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
        # Whether the execution holding a jobId still runs (runtime/adapters/executions.py): this
        # state machine's executions only, by its name's prefix (its ARN would be a cycle).
        allow(function, ["states:DescribeExecution"], [self.executions_arn])
        # dynamodb.engine bulkPutItems: whether the target (the environment's table, or one the
        # job names: `tables`) is ACTIVE, building no index and not global; a named table's key.
        allow(function, ["dynamodb:DescribeTable"], [self._data.table.table_arn, *self.other_table_arns])
        self._grant_source_keys(function)

    @property
    def executions_arn(self) -> str:
        """The executions of this stack's state machine, as CloudFormation names it
        (`<logical id>-<suffix>`, the logical id under ShardedLoader/StateMachine)."""
        return cdk.Stack.of(self._scope).format_arn(
            service="states",
            resource="execution",
            resource_name=f"{STATE_MACHINE_NAME_PREFIX}*:*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )

    def _grant_worker(self) -> None:
        arns, function = self.arns, self.worker_function
        allow(function, ["s3:GetObject"], [arns.staging_prepared])
        allow(function, ["s3:GetObject"], arns.source_objects)
        self._grant_source_keys(function)
        # Rejects and graph files stream as multipart uploads (PutObject), aborted on an error.
        allow(function, ["s3:PutObject", "s3:AbortMultipartUpload"], [arns.staging_jobs])
        # writeMode sync: the Sync Map's Worker reads the shards' staged items and the baseline's
        # buckets, and writes its run's merged buckets (runtime/shards/sync_buckets.py); its deletes
        # are DeleteRequests in BatchWriteItem (granted below).
        allow(function, ["s3:GetObject"], [arns.staging_sync_shards])
        allow(function, ["s3:GetObject", "s3:PutObject"], [arns.staging_datasets])
        # The write mode is chosen per execution (the input's dynamodb.writeMode), so the Worker holds
        # what every mode calls: BatchWriteItem (put; delete's DeleteRequests), PartiQLInsert
        # (putIfAbsent's INSERTs in BatchExecuteStatement: DynamoDB developer guide, "IAM security
        # policies with PartiQL"), PutItem (newerWins; a putIfAbsent record whose answer was lost),
        # UpdateItem (update) — no reads, no other table. A numeric ADD's TransactWriteItems needs
        # its parts' actions: UpdateItem here, PutItem on the ledger (its marker; already granted
        # below for the shard counts, so no narrower statement helps).
        self._data.table.grant(function, *TABLE_WRITES)
        # ... and exactly the other tables a job may name (`tables`; Plan checks the name first).
        if self._data.tables:
            allow(function, list(TABLE_WRITES), self.other_table_arns)
        # Query: the CSV start-state walk-back; UpdateItem and BatchGetItem: the write budget's
        # heartbeat counters (runtime/adapters/budget.py).
        self._data.ledger_table.grant(
            function,
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:Query",
            "dynamodb:UpdateItem",
            "dynamodb:BatchGetItem",
        )

    def _grant_finalize(self) -> None:
        """Finalize streams the merged rejects as a multipart upload (aborted if the merge fails)."""
        function = self.finalize_function
        allow(function, ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"], [self.arns.staging_jobs])
        # writeMode sync: once the new baseline is switched in, the dataset's merged buckets that no
        # run can need (the superseded baseline's, failed and superseded syncs'), listed and deleted.
        allow(function, ["s3:DeleteObject"], [self.arns.staging_datasets])
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self._data.staging_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{STAGING_DATASETS_PREFIX}*"]}},
            )
        )
        self._data.ledger_table.grant(
            function, "dynamodb:Query", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"
        )

    def _grant_source_keys(self, function: lambda_.Function) -> None:
        """Source objects encrypted with a customer managed key: decrypt with exactly the keys
        the environment allows, and only when S3 asks on the function's behalf."""
        if not self._config.source_kms_keys:
            return
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt"],
                resources=list(self._config.source_kms_keys),
                conditions={
                    "StringEquals": {"kms:ViaService": f"s3.{cdk.Stack.of(self._scope).region}.amazonaws.com"}
                },
            )
        )

    def _grant_table_key(self) -> None:
        """The customer keys of the tables the Worker writes (`existing_table_key`, `table_keys`):
        the Worker, the one function that reads or writes their items, uses them through DynamoDB
        as it uses the data key."""
        for index, arn in enumerate(self._data.table_key_arns):
            key = kms.Key.from_key_arn(self._scope, f"ExistingTableKeyRef{index or ''}", arn)
            self.worker_function.add_to_role_policy(key_use(self._scope, key, KEY_WRITE, "dynamodb"))

    @property
    def other_table_arns(self) -> list[str]:
        """The ARNs of the `tables` a job may name besides the environment's own (a prefix's ARN
        pattern ends in `*`); an entry given as an ARN is taken as it is."""
        stack = cdk.Stack.of(self._scope)
        return [
            entry
            if entry.startswith("arn:")
            else stack.format_arn(service="dynamodb", resource="table", resource_name=entry)
            for entry in self._data.tables
        ]

    @property
    def table_names(self) -> list[str]:
        """The `tables` by name or prefix, as Plan compares a job's table (TABLES)."""
        return [entry.rsplit(":table/", 1)[-1] for entry in self._data.tables]

    def _grant_data_key(self) -> None:
        """The data key, per function, for exactly the services through which it touches encrypted
        data: S3 (source and staging objects) and DynamoDB (the ledger, a created target table)."""
        key = self._data.data_key
        if key is None:
            return
        # Every function here that reads S3 also writes it (staging) but StartGraphLoad, and every
        # DynamoDB user writes.
        write, read = KEY_WRITE, KEY_READ
        uses: list[tuple[lambda_.IFunction | None, tuple[tuple[str, tuple[str, ...]], ...]]] = [
            (self.prepare_function, (("s3", write),)),
            (self.plan_function, (("s3", write), ("dynamodb", write))),
            (self.worker_function, (("s3", write), ("dynamodb", write))),
            (self.finalize_function, (("s3", write), ("dynamodb", write))),
            # StartGraphLoad reads the shards' id and edge files (the endpoint check) and claims
            # the load in the ledger; Poll also rewrites the report.
            (self.start_graph_load_function, (("s3", read), ("dynamodb", write))),
            (self.poll_graph_load_function, (("s3", write), ("dynamodb", write))),
        ]
        for function, services in uses:
            if function is not None:
                for service, actions in services:
                    function.add_to_role_policy(key_use(self._scope, key, actions, service))

    # -- the graph load's functions ----------------------------------------------------------

    def _graph_functions(self, graph: GraphTarget) -> tuple[lambda_.Function, lambda_.Function]:
        """StartGraphLoad and PollGraphLoad: in the VPC, the only callers of the Neptune loader API."""
        config, data = self._config, self._data
        neptune_env = {
            "NEPTUNE_ENDPOINT": graph.endpoint,
            "NEPTUNE_PORT": graph.port,
            "NEPTUNE_REGION": cdk.Aws.REGION,
        }
        ledger_env = {
            "STAGING_BUCKET": data.staging_bucket.bucket_name,
            "LEDGER_TABLE": data.ledger_table.table_name,
            "LEDGER_TTL_DAYS": str(config.ledger_ttl_days),
        }
        network = {"vpc": graph.vpc, "vpc_subnets": graph.subnets, "security_groups": [graph.security_group]}
        control: dict[str, Any] = {
            "memory_mib": config.control_memory_mib,
            "timeout_seconds": config.control_timeout_seconds,
            "network": network,
        }
        start = self._function(
            "StartGraphLoad",
            environment={**neptune_env, "LOADER_ROLE_ARN": graph.loader_role_arn, **ledger_env},
            **control,
        )
        poll = self._function("PollGraphLoad", environment={**neptune_env, **ledger_env}, **control)
        # neptune-db actions are scoped by the cluster's resource id (arn:...:neptune-db:region:account:id/*).
        neptune_arn = cdk.Stack.of(self._scope).format_arn(
            service="neptune-db",
            resource=graph.cluster_resource_id,
            resource_name="*",
            arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
        )
        self._grant_start_graph_load(start, neptune_arn)
        self._grant_poll_graph_load(poll, neptune_arn)
        for function in (start, poll):
            _allow_network_interfaces(function)
        self._acknowledge_graph(start, poll, neptune_arn)
        return start, poll

    def _grant_start_graph_load(self, start: lambda_.Function, neptune_arn: str) -> None:
        """Start (or adopt) the load, check the edge endpoints, claim and record the load."""
        # List/GetStatus: a retried start adopts the load an earlier attempt started; GetStatus
        # also reads whether the loads in graph.dependencies have completed (the endpoint check).
        allow(
            start,
            ["neptune-db:StartLoaderJob", "neptune-db:ListLoaderJobs", "neptune-db:GetLoaderJobStatus"],
            [neptune_arn],
        )
        # ReadDataViaQuery: the edge endpoint check asks the graph which vertex ids it holds (one
        # read-only openCypher query, runtime/adapters/neptune.py EXISTING_IDS_QUERY) - in openCypher
        # only, not Gremlin or SPARQL. A statement of its own: the loader actions have no
        # neptune-db:QueryLanguage in their request context, so the condition would deny them.
        start.add_to_role_policy(
            iam.PolicyStatement(
                actions=["neptune-db:ReadDataViaQuery"],
                resources=[neptune_arn],
                conditions={"StringEquals": {NEPTUNE_QUERY_LANGUAGE_KEY: NEPTUNE_QUERY_LANGUAGE}},
            )
        )
        # The endpoint check reads the shards' id files and staged edge files (jobs/<job>/<plan>/),
        # not the rest of jobs/* (rejects hold raw source records).
        allow(start, ["s3:GetObject"], self.arns.staging_graph_check)
        # UpdateItem: Ledger.record_graph_load writes the started load's id into the job item.
        self._data.ledger_table.grant(start, "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")

    def _grant_poll_graph_load(self, poll: lambda_.Function, neptune_arn: str) -> None:
        """Follow (or cancel) the load, rewrite the run's report, close the job in the ledger."""
        allow(poll, ["neptune-db:GetLoaderJobStatus", "neptune-db:CancelLoaderJob"], [neptune_arn])
        # One PutObject of the report (runtime/graph_loads/poll.py), no multipart.
        allow(poll, ["s3:PutObject"], [self.arns.staging_reports])
        self._data.ledger_table.grant(poll, "dynamodb:UpdateItem")

    def _acknowledge_graph(self, start: lambda_.Function, poll: lambda_.Function, neptune_arn: str) -> None:
        neptune_reason = {
            resource_finding(self._scope, neptune_arn): (
                "neptune-db data actions are granted per cluster as <cluster resource id>/*; these "
                "functions call only the loader API actions listed (and StartGraphLoad one read-only "
                "openCypher query: ReadDataViaQuery with neptune-db:QueryLanguage OpenCypher), on "
                "this one cluster."
            )
        }
        id_files, edge_files = self.arns.staging_graph_check
        acknowledge_wildcards(
            default_policy(start.role),
            {
                **neptune_reason,
                resource_finding(self._scope, id_files): (
                    "StartGraphLoad reads (s3:GetObject only) the shards' vertex and endpoint id files, "
                    "jobs/<jobId>/<planId>/graph-ids/<shard>.vertices.gz and .endpoints.gz, for the "
                    "edge endpoint check; job and plan ids are per run, the shard count per plan."
                ),
                resource_finding(self._scope, edge_files): (
                    "StartGraphLoad reads (s3:GetObject only) the staged edge files, "
                    "jobs/<jobId>/<planId>/graph/edges/<shard>.csv[.gz], of the shards that reference "
                    "an id found nowhere, to count and sample the dangling edges."
                ),
            },
        )
        acknowledge_wildcards(
            default_policy(poll.role),
            {
                **neptune_reason,
                resource_finding(self._scope, self.arns.staging_reports): (
                    "PollGraphLoad rewrites (s3:PutObject only) the run's report, "
                    "jobs/<jobId>/<runId>/report.json, when the load ends; job and run ids are per "
                    "execution. No other staged object."
                ),
            },
        )

    # -- cdk-nag -----------------------------------------------------------------------------

    def _acknowledge(self) -> None:
        """Acknowledge, finding by finding, the wildcards the functions' roles need (see the reasons)."""
        for function in self.all:
            cfn_function = function.node.default_child
            assert isinstance(cfn_function, cdk.CfnResource)
            acknowledge(
                cfn_function,
                "AwsSolutions-L1",
                "Pinned to python3.12 (docs/CONTRACTS.md): the runtime, its pinned dependencies and "
                "the embedded runner are tested on 3.12; moving the runtime is a deliberate change.",
            )
        scope, arns = self._scope, self.arns
        staging = self.staging_jobs_finding()
        sources = {
            resource_finding(scope, arn): (
                "Any object of an allowed source bucket: each execution names its own source "
                "key or prefix; the grant is read-only (s3:GetObject)."
            )
            for arn in arns.source_objects
        }
        prepared = {
            resource_finding(scope, arns.staging_prepared): (
                "Objects under the staging bucket's prepared/ prefix only: Prepare writes "
                "prepared/<jobId>/<runId>/... per run (decompressed sources); Plan and Worker read them."
            )
        }
        prepare_sources = {
            resource_finding(scope, arn): (
                "Any object of an allowed source bucket: each execution names its own source key or "
                "prefix; Prepare only reads it (s3:GetObject) to detect and decompress gzip/zip."
            )
            for arn in arns.source_objects
        }
        for function in (self.plan_function, self.worker_function):
            acknowledge_wildcards(default_policy(function.role), {**staging, **sources})
            acknowledge_wildcards(default_policy(function.role), prepared)
        acknowledge_wildcards(
            default_policy(self.plan_function.role),
            {
                resource_finding(scope, self.executions_arn): (
                    "DescribeExecution on this stack's state machine's executions (by its name's "
                    "prefix: naming its ARN would be a dependency cycle): Plan asks whether the run "
                    "holding a jobId still runs before it takes the jobId over."
                )
            },
        )
        prefixes = {
            resource_finding(scope, arn): (
                "A `tables` prefix the environment's owner configured: a job may name any table whose "
                "name starts so (Plan checks the name, and that the table exists and has the job's key, "
                "before any shard); the Worker only writes it, Plan only describes it."
            )
            for arn in self.other_table_arns
            if arn.endswith("*")
        }
        if prefixes:
            acknowledge_wildcards(default_policy(self.plan_function.role), prefixes)
            acknowledge_wildcards(default_policy(self.worker_function.role), prefixes)
        acknowledge_wildcards(default_policy(self.finalize_function.role), staging)
        acknowledge_wildcards(default_policy(self.prepare_function.role), {**prepared, **prepare_sources})

    def _acknowledge_sync(self) -> None:
        """writeMode sync's wildcards: the shards' staged items and the datasets' buckets."""
        scope, arns = self._scope, self.arns
        acknowledge_wildcards(
            default_policy(self.worker_function.role),
            {
                resource_finding(scope, arns.staging_sync_shards): (
                    "writeMode sync: the shards' staged items only (jobs/<jobId>/<planId>/sync/...), "
                    "read (s3:GetObject) by the Sync Map's Worker; job and plan ids are per run."
                ),
                resource_finding(scope, arns.staging_datasets): (
                    "writeMode sync: the datasets' merged buckets only (datasets/<table>/<dataset>/"
                    "<against>/<jobId>/<planId>/...): the Sync Map's Worker writes its run's and reads the "
                    "baseline's; datasets are named per execution."
                ),
            },
        )
        acknowledge_wildcards(
            default_policy(self.finalize_function.role),
            {
                resource_finding(scope, arns.staging_datasets): (
                    "writeMode sync: the datasets' merged buckets only (datasets/<table>/<dataset>/"
                    "...): Finalize deletes (s3:DeleteObject only) what no run can need once a sync "
                    "succeeds: the superseded baseline, failed and superseded syncs' buckets."
                )
            },
        )

    def staging_jobs_finding(self) -> dict[str, str]:
        """The staging jobs/* wildcard, explained, for the state machine's role as well."""
        return {
            resource_finding(self._scope, self.arns.staging_jobs): (
                "Objects under the staging bucket's jobs/ prefix only: keys are "
                "jobs/<jobId>/<runId>/... and created per run, so the prefix is the narrowest grant."
            )
        }


# What a function in a VPC needs for its network interfaces (Lambda Developer Guide, "Giving Lambda
# functions access to resources in an Amazon VPC", execution role permissions): the EC2 actions of
# AWSLambdaVPCAccessExecutionRole (v3, 2024-01-05) without its logs actions on `*`.
NETWORK_INTERFACE_ACTIONS: tuple[str, ...] = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


def _allow_network_interfaces(function: lambda_.Function) -> None:
    """ENIs in the VPC: one inline policy holding only the EC2 network-interface actions (the
    function's logs stay granted on its own log group, `_function`)."""
    role = function.role
    assert isinstance(role, iam.Role)
    policy = iam.Policy(
        function,
        "NetworkInterfaces",
        roles=[role],
        statements=[
            iam.PolicyStatement(
                sid="LambdaVpcNetworkInterfaces", actions=list(NETWORK_INTERFACE_ACTIONS), resources=["*"]
            )
        ],
    )
    # Lambda checks these permissions when it creates the function in the VPC.
    function.node.add_dependency(policy)
    cfn_policy = policy.node.default_child
    assert isinstance(cfn_policy, cdk.CfnResource)
    acknowledge(
        cfn_policy,
        "AwsSolutions-IAM5[Resource::*]",
        "Only the EC2 network-interface actions Lambda needs for a function in a VPC: "
        "DescribeNetworkInterfaces and DescribeSubnets work only on all resources, and Lambda names "
        "the interfaces it creates and deletes itself, so no narrower resource applies.",
    )
