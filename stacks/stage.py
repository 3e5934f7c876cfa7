"""One environment's deployable unit: the Data, Graph (when enabled) and Loader stacks wired together."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from stacks.checkov import CheckovAcknowledgements
from stacks.config import EnvironmentConfig
from stacks.data import DataStack
from stacks.graph import GraphStack
from stacks.loader import RETENTION_DAYS, LoaderStack
from stacks.monitoring import LoaderMonitoring
from stacks.smoke_test import SmokeTestAccess

DATA_STACK_ID = "Data"
LOADER_STACK_ID = "Loader"
GRAPH_STACK_ID = "Graph"


def stage_id(env_name: str) -> str:
    """Construct id (and CloudFormation stack-name prefix) of an environment's stage."""
    return f"Mapload-{env_name}"


SETTINGS_REVISION_OUTPUT = "SettingsRevision"


def _settings_revision(consumer: cdk.Stack, config: EnvironmentConfig) -> None:
    """A digest of the environment's settings as an output of a stack that reads other stacks'
    outputs. `Fn::GetStackOutput` is read only when the consumer is created or updated, and
    `cdk deploy` skips a stack whose template did not change: without this, a setting that
    replaces a producer's resource (a new table key, new subnets) but leaves the consumer's
    template alone would leave it holding the old value (tests/infra/test_exports.py)."""
    settings = json.dumps(config.model_dump(mode="json"), sort_keys=True, default=str)
    cdk.CfnOutput(
        consumer,
        SETTINGS_REVISION_OUTPUT,
        value=hashlib.sha256(settings.encode()).hexdigest()[:16],
        description="digest of the environment's settings: any change updates this stack, which "
        "reads the Data/Graph stacks' outputs again",
    )


class MaploadStage(cdk.Stage):
    """Data (stateful, retained in prod), Graph (when enabled) and Loader (stateless, with its
    monitoring) for one environment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        smoke_test_from: str | None = None,
        **kwargs: Any,
    ) -> None:
        env = (
            cdk.Environment(account=config.account, region=config.region)
            if config.account or config.region
            else None
        )
        super().__init__(scope, construct_id, env=env, **kwargs)
        self.config = config
        # Checkov (make scan) reads its acknowledgements from each resource's metadata; aspects
        # do not cross a Stage boundary, so the stage adds its own.
        cdk.Aspects.of(self).add(CheckovAcknowledgements(data_key=config.data.data_key is not None))
        self.data = DataStack(
            self,
            DATA_STACK_ID,
            data_config=config.data,
            description=f"mapload {config.name}: source/staging buckets, target table, ledger",
            # Retained data deserves a second confirmation before its stack can be deleted.
            termination_protection=config.data.retain_data,
        )
        # Neptune and its VPC: the Loader's graph functions run in it (Graph deploys before Loader).
        self.graph: GraphStack | None = None
        if config.graph is not None:
            self.graph = GraphStack(
                self,
                GRAPH_STACK_ID,
                graph_config=config.graph,
                data=self.data,
                log_retention=RETENTION_DAYS[config.loader.log_retention_days],
                description=f"mapload {config.name}: VPC, Neptune cluster, bulk loader role",
                termination_protection=config.graph.retain,
            )
        self.loader = LoaderStack(
            self,
            LOADER_STACK_ID,
            graph=self.graph,
            loader_config=config.loader,
            data=self.data,
            table_key=config.data.table_key,
            description=f"mapload {config.name}: Plan/Worker/Finalize functions, state machine",
            termination_protection=config.data.retain_data,
        )
        self.monitoring = self._monitoring(config)
        for consumer in (self.graph, self.loader):
            if consumer is not None:
                _settings_revision(consumer, config)
        # The role the pipeline's smoke test assumes here (`smoke_test_from`: the pipeline's
        # account), in every account, the pipeline's own too: one path, least privilege.
        self.smoke_test: SmokeTestAccess | None = None
        if smoke_test_from is not None:
            self.smoke_test = self._smoke_test(config, smoke_test_from)

    def _smoke_test(self, config: EnvironmentConfig, pipeline_account: str) -> SmokeTestAccess:
        assert config.region is not None, "a promoted environment names its region"
        shared = self.loader.shared
        return SmokeTestAccess(
            self.loader,
            "SmokeTest",
            env_name=config.name,
            region=config.region,
            pipeline_account=pipeline_account,
            stack_names=(self.data.stack_name, self.loader.stack_name),
            source_bucket=shared.source_bucket,
            staging_bucket=shared.staging_bucket,
            state_machine=self.loader.loader.state_machine,
            data_key=shared.key,
        )

    def _monitoring(self, config: EnvironmentConfig) -> LoaderMonitoring:
        """Alarms and dashboard, in the Loader stack beside what they watch: no cross-stack
        exports for alarm metrics."""
        loader = self.loader.loader
        return LoaderMonitoring(
            self.loader,
            "Monitoring",
            env_name=config.name,
            state_machine=loader.state_machine,
            # Every function of the Loader stack, whichever jobs it grows (graph load, prepare).
            functions=[c for c in self.loader.node.find_all() if isinstance(c, lambda_.Function)],
            worker=loader.worker_function,
            monitoring_config=config.monitoring,
            retain=config.data.retain_data,
            graph_poll=loader.poll_graph_load_function,
        )
