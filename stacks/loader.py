"""The loading machinery: its functions and the Distributed Map state machine that runs them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.data import KEY_WRITE, DataStack, key_use
from stacks.graph import GraphStack, GraphTarget
from stacks.load_definition import LoadDefinition
from stacks.loader_functions import HANDLER_INDEX, RETENTION_DAYS, LoaderData, LoaderFunctions, handler_path
from stacks.loader_settings import LoaderConfig
from stacks.nag import (
    acknowledge_wildcards,
    default_policy,
    flatten_reference,
    resource_finding,
    wildcard_findings,
)

# Where they were defined before the functions had their own module (tests and stage.py import them).
__all__ = [
    "HANDLER_INDEX",
    "RETENTION_DAYS",
    "VENDED_LOGS_PREFIX",
    "LoaderStack",
    "ShardedLoader",
    "handler_path",
]

# Where AWS advises Step Functions log groups to live (vended logs need no resource policy).
VENDED_LOGS_PREFIX: Final[str] = "/aws/vendedlogs/states/"


class ShardedLoader(Construct):
    """Plan → Distributed Map of Workers → Finalize → Done, with narrowly granted functions.

    Composes LoaderFunctions (the functions and their grants, added to this scope so that their
    logical ids stay `ShardedLoader<Name>...`) and LoadDefinition (the states), and owns the
    state machine with its log group and role.
    """

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
        table_key_arns: tuple[str, ...] = (),
        tables: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.loader_functions = LoaderFunctions(
            self,
            loader_config=loader_config,
            data=LoaderData(
                source_bucket=source_bucket,
                staging_bucket=staging_bucket,
                table=table,
                table_key=table_key,
                ledger_table=ledger_table,
                graph=graph,
                data_key=data_key,
                table_key_arns=table_key_arns,
                tables=tables,
            ),
        )
        functions = self.loader_functions
        self.prepare_function = functions.prepare_function
        self.plan_function = functions.plan_function
        self.worker_function = functions.worker_function
        self.finalize_function = functions.finalize_function
        self.start_graph_load_function = functions.start_graph_load_function
        self.poll_graph_load_function = functions.poll_graph_load_function
        self.state_machine_log_group = functions.log_group(
            "StateMachineLogs",
            # Under /aws/vendedlogs/ so that Step Functions' log delivery needs no CloudWatch Logs
            # resource policy entry (those are capped at 5,120 characters per account and region).
            # The rest is derived from this construct's path (stage, stack, construct), unique per
            # app like a generated name, not a name chosen per stack.
            log_group_name=VENDED_LOGS_PREFIX
            + cdk.Names.unique_resource_name(self, max_length=200, separator="-"),
        )
        definition = LoadDefinition(
            self,
            "Definition",
            loader_config=loader_config,
            functions=functions,
            staging_bucket=staging_bucket,
        )
        self.state_machine = self._state_machine(definition.chain, data_key)
        self._acknowledge_state_machine()

    def _state_machine(self, definition: sfn.IChainable, data_key: kms.IKey | None) -> sfn.StateMachine:
        """STANDARD, traced, logging every event without execution data."""
        state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.state_machine_log_group,
                level=sfn.LogLevel.ALL,
                # Execution data holds user input and report excerpts; keep it out of logs.
                include_execution_data=False,
            ),
        )
        if data_key is not None:
            # The Distributed Map's ItemReader reads the manifest (staging jobs/*) itself, and
            # its ResultWriter writes the children's results there.
            state_machine.add_to_role_policy(key_use(self, data_key, KEY_WRITE, "s3"))
        return state_machine

    def _acknowledge_state_machine(self) -> None:
        """Acknowledge, finding by finding, the wildcards the state machine's roles need."""
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
            default_policy(self.state_machine.role),
            {**self.loader_functions.staging_jobs_finding(), **invoke_versions, **unscoped},
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

    @property
    def functions(self) -> tuple[lambda_.Function, ...]:
        return self.loader_functions.all


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
        # CDK's own references from here (the Graph VPC's subnets and security group) are read
        # with Fn::GetStackOutput too: new subnets (graph_availability_zones) or a replaced group
        # would change an export in use. BOTH keeps the producer's generated exports, which
        # Loader stacks deployed before imported, until those have been updated.
        cdk.CrossStackReferences.of(self).consume(cdk.ReferenceStrength.BOTH)
        # CDK warns on every synth that BOTH is transitional; it is, on purpose, until every
        # environment has deployed once with it (docs/DEPLOY.md): say so once, not on each synth.
        cdk.Annotations.of(self).acknowledge_warning(
            "@aws-cdk/core:crossStackReferencesBothTransitional",
            "exports kept until every deployed Loader has stopped importing them (docs/DEPLOY.md)",
        )
        shared = data.share_with(self)
        self.shared = shared
        # Explicit output reads are invisible to CDK's dependency tracking; deploy Data first.
        self.add_stack_dependency(data, "reads the Data stack's outputs")
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
            table_key_arns=shared.table_key_arns,
            tables=shared.tables,
        )
        cdk.CfnOutput(self, "StateMachineArn", value=self.loader.state_machine.state_machine_arn)
        cdk.CfnOutput(self, "StateMachineName", value=self.loader.state_machine.state_machine_name)
        # The TABLE_KEY Plan validates against: `mapload start` checks a spec with it before uploading.
        cdk.CfnOutput(self, "TableKey", value=json.dumps(dict(table_key)))
        # Whether Plan accepts graph inputs here (GRAPH_ENABLED): `mapload start` checks it too.
        cdk.CfnOutput(self, "GraphEnabled", value="true" if graph is not None else "false")
        cdk.CfnOutput(self, "PrepareFunctionName", value=self.loader.prepare_function.function_name)
        cdk.CfnOutput(self, "PlanFunctionName", value=self.loader.plan_function.function_name)
        cdk.CfnOutput(self, "WorkerFunctionName", value=self.loader.worker_function.function_name)
        cdk.CfnOutput(self, "FinalizeFunctionName", value=self.loader.finalize_function.function_name)
