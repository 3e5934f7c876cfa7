"""Contracts that need both sides: templates vs handlers, templates vs the embedded run."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from handlers.settings import POWERTOOLS_ENV_NAMES
from mapload.emulator.embedded import Emulator, FunctionDef
from mapload.synth import StackTemplate, synthesize

pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("e2e")]


@pytest.fixture(scope="module")
def stacks() -> list[StackTemplate]:
    return synthesize({"env": "dev", "mapload:retry_interval_seconds": 1, "mapload:graph_enabled": "true"})


def _resources(stacks: list[StackTemplate], kind: str) -> dict[str, dict[str, Any]]:
    return {
        logical: res
        for stack in stacks
        for logical, res in stack.template.get("Resources", {}).items()
        if res["Type"] == kind
    }


def test_every_function_handler_resolves_and_reads_exactly_its_template_environment(
    stacks: list[StackTemplate],
) -> None:
    functions = _resources(stacks, "AWS::Lambda::Function")
    ours = {k: v for k, v in functions.items() if "handlers" in str(v["Properties"].get("Handler", ""))}
    roles = set()
    for logical, res in ours.items():
        props = res["Properties"]
        fn = FunctionDef(logical, logical, logical, props["Handler"], {})
        module = importlib.import_module(fn.module)
        assert callable(module.lambda_handler), fn.handler
        assert callable(module.handle), fn.handler
        variables = set(props.get("Environment", {}).get("Variables", {}))
        expected = set(module.SETTINGS_CLASS.ENV_NAMES) | set(POWERTOOLS_ENV_NAMES)
        assert variables == expected, f"{logical}: {variables ^ expected}"
        roles.add(fn.role)
    # One function per handler module (stacks/loader.py HANDLER_INDEX), the graph ones included.
    assert len(roles) == len(ours)
    assert {"prepare", "plan", "worker", "finalize", "start_graph_load", "poll_graph_load"} <= roles


def _definition(machine: dict[str, Any]) -> dict[str, Any]:
    """The state machine's ASL with every CloudFormation reference replaced by a placeholder."""
    body = machine["Properties"]["DefinitionString"]
    if isinstance(body, dict) and "Fn::Join" in body:
        body = "".join(p if isinstance(p, str) else "REF" for p in body["Fn::Join"][1])
    parsed: dict[str, Any] = json.loads(body)
    return parsed


def _error_names(node: Any) -> set[str]:
    names: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "ErrorEquals":
                names.update(value)
            else:
                names |= _error_names(value)
    elif isinstance(node, list):
        for value in node:
            names |= _error_names(value)
    return names


def test_the_default_environment_plans_a_property_graph_job_at_the_default_shard_size(
    stacks: list[StackTemplate],
) -> None:
    from handlers.settings import PlanSettings
    from logic.spec.checks import check_shard_memory, fit_shard_size
    from logic.spec.parse import parse_spec

    # Given Plan's and the Worker's functions as the default dev environment synthesizes them
    functions = {
        res["Properties"]["Handler"]: res["Properties"]
        for res in _resources(stacks, "AWS::Lambda::Function").values()
        if "handlers" in str(res["Properties"].get("Handler", ""))
    }
    variables = functions["handlers.plan.lambda_handler"]["Environment"]["Variables"]
    # (values the template resolves at deploy time stand in as placeholders)
    settings = PlanSettings.from_env(
        {k: v if isinstance(v, str) else "placeholder" for k, v in variables.items()}
    )
    # Then Plan bounds a property graph shard by the Worker's own memory (one setting, both functions)
    assert settings.worker_memory_mib == functions["handlers.worker.lambda_handler"]["MemorySize"] == 1024
    # ... and accepts a property graph input at the default shardSizeMiB
    graph = {"model": "property", "vertices": [{"id": "{id}", "label": "V"}]}
    raw = {"source": "s3://source-bucket/v.csv", "format": "csv", "jobId": "v", "graph": graph}
    spec = fit_shard_size(
        parse_spec(raw, table_key=settings.table_key), worker_memory_mib=settings.worker_memory_mib
    )
    assert spec.shard_size_mib == 64
    check_shard_memory(spec, worker_memory_mib=settings.worker_memory_mib)
    # ... and one without shardSizeMiB whose ids a template makes longer, at the size chosen for it
    edges = [{"from": "person-{id}", "to": "person-{boss}", "label": "REPORTS_TO"}]
    raw = {**raw, "graph": {"model": "property", "edges": edges}}
    spec = fit_shard_size(
        parse_spec(raw, table_key=settings.table_key), worker_memory_mib=settings.worker_memory_mib
    )
    assert 0 < spec.shard_size_mib < 64
    check_shard_memory(spec, worker_memory_mib=settings.worker_memory_mib)


def test_error_names_in_retry_and_catch_exist_in_the_runtime(stacks: list[StackTemplate]) -> None:
    errors = importlib.import_module("logic.errors")
    machines = _resources(stacks, "AWS::StepFunctions::StateMachine")
    assert len(machines) == 1
    names = _error_names(_definition(next(iter(machines.values()))))
    custom = {n for n in names if not n.startswith(("States.", "Lambda.", "Sandbox."))}
    assert custom, "the state machine retries no runtime error by name"
    for name in custom:
        assert isinstance(getattr(errors, name, None), type), (
            f"Retry/Catch names {name}, which the runtime never raises"
        )


def test_the_embedded_run_creates_exactly_the_buckets_and_tables_the_templates_define(
    stacks: list[StackTemplate],
) -> None:
    with Emulator("contract") as emu:
        deployment = emu.provision(stacks)
        bucket_names = {b["Name"] for b in emu.client("s3").list_buckets()["Buckets"]}
        table_names = set(emu.client("dynamodb").list_tables()["TableNames"])
        machines = emu.client("stepfunctions").list_state_machines()["stateMachines"]
    assert set(deployment.buckets) == set(_resources(stacks, "AWS::S3::Bucket"))
    assert set(deployment.tables) == set(_resources(stacks, "AWS::DynamoDB::Table"))
    assert bucket_names == set(deployment.buckets.values())
    assert table_names == set(deployment.tables.values())
    assert len(machines) == 1
    for name in ("SourceBucketName", "StagingBucketName", "TableName", "LedgerTableName", "StateMachineArn"):
        assert deployment.output(name)


def test_the_local_ledger_s_ttl_attribute_is_the_one_the_stacks_define() -> None:
    """`mapload upload --env local` turns its ledger's TTL on without loading the CDK."""
    from mapload.tables import LEDGER_TTL_ATTRIBUTE
    from stacks.data import LEDGER_TTL_ATTRIBUTE as DEFINED

    assert LEDGER_TTL_ATTRIBUTE == DEFINED
