"""Synthesized apps and template helpers shared by the infra tests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Template

import app as app_module
from stacks.stage import MaploadStage, stage_id

ROOT = Path(__file__).resolve().parents[2]

# The variant synthesized besides plain dev and prod: a table the app does not own, extra
# source buckets, and single-value overrides the way `-c mapload:<field>=...` passes them.
EXISTING_TABLE_ARN = "arn:aws:dynamodb:eu-west-2:123456789012:table/People"
# The existing table's own customer managed key (`existing_table_key`).
EXISTING_TABLE_KEY = "arn:aws:kms:eu-west-2:123456789012:key/5e5e5e5e-1111-2222-3333-444455556666"
EXTRA_BUCKETS = ("alpha-source", "beta.source.example")
SOURCE_KMS_KEY = "arn:aws:kms:eu-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
# The other tables a job may name (`tables`: a name and a prefix) and their own key (`table_keys`).
OTHER_TABLES = ("orders", "catalog-*")
OTHER_TABLES_KEY = "arn:aws:kms:eu-west-2:123456789012:key/7a7a7a7a-1111-2222-3333-444455556666"
VARIANT_CONTEXT: dict[str, Any] = {
    "env": "dev",
    "mapload:existing_table": EXISTING_TABLE_ARN,
    "mapload:existing_table_key": EXISTING_TABLE_KEY,
    "mapload:extra_source_buckets": ",".join(EXTRA_BUCKETS),
    "mapload:source_kms_keys": SOURCE_KMS_KEY,
    "mapload:tables": ",".join(OTHER_TABLES),
    "mapload:table_keys": OTHER_TABLES_KEY,
    "mapload:retry_interval_seconds": "1",
    "mapload:max_concurrency_cap": 42,
    # No Graph stack: the state machine ends at Done, as before the graph target existed.
    "mapload:graph_enabled": "false",
}


# dev as the tests synthesize it: with its Graph stack, which cdk.json leaves out of dev by default
# (~$117 a month idle), so that the Graph stack stays synthesized and checked.
GRAPH_ON: dict[str, Any] = {"mapload:graph_enabled": "true"}
DEV_CONTEXT: dict[str, Any] = {"env": "dev", **GRAPH_ON}

# Variants with a customer managed data key: created by the Data stack, or an existing one by ARN.
DATA_KEY_ARN = "arn:aws:kms:eu-west-2:123456789012:key/0f0e0d0c-1111-2222-3333-444455556666"
DATA_KEY_CREATED_CONTEXT: dict[str, Any] = {**DEV_CONTEXT, "mapload:data_key": "create"}
DATA_KEY_IMPORTED_CONTEXT: dict[str, Any] = {**DEV_CONTEXT, "mapload:data_key": DATA_KEY_ARN}


@dataclass(frozen=True)
class Synth:
    """A synthesized app and what the tests read from it."""

    app: Any  # aws_cdk.App
    stage: MaploadStage
    data: Template
    loader: Template
    outdir: Path
    graph: Template | None = None  # None when the environment has graph_enabled false

    @property
    def data_json(self) -> dict[str, Any]:
        return dict(self.data.to_json())

    @property
    def loader_json(self) -> dict[str, Any]:
        return dict(self.loader.to_json())


def synthesize(context: Mapping[str, Any], outdir: Path) -> Synth:
    app = app_module.build_app(dict(context), outdir=str(outdir))
    app.synth()  # runs cdk-nag as a validation plugin; raises on any unacknowledged finding
    stage = app.node.find_child(stage_id(str(context["env"])))
    assert isinstance(stage, MaploadStage)
    return Synth(
        app=app,
        stage=stage,
        data=Template.from_stack(stage.data),
        loader=Template.from_stack(stage.loader),
        outdir=outdir,
        graph=Template.from_stack(stage.graph) if stage.graph is not None else None,
    )


# -- template helpers -------------------------------------------------------------------------


def resources(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def only(mapping: Mapping[str, Any]) -> Any:
    assert len(mapping) == 1, f"expected exactly one, got {sorted(mapping)}"
    return next(iter(mapping.values()))


def output_target(template: Mapping[str, Any], output: str) -> str:
    """Logical id of the resource a stack output names (`Ref` or `Fn::GetAtt`)."""
    value = template["Outputs"][output]["Value"]
    if "Ref" in value:
        return str(value["Ref"])
    return str(value["Fn::GetAtt"][0])


def stack_output(stack_name: str, output_id: str) -> dict[str, Any]:
    """How a consuming stack reads another's output (Fn::GetStackOutput, never an import)."""
    return {"Fn::GetStackOutput": {"StackName": stack_name, "OutputName": output_id}}


def outputs_read(node: Any) -> set[tuple[str, str]]:
    """Every (stack name, output id) a template reads with Fn::GetStackOutput."""
    if isinstance(node, Mapping):
        read = node.get("Fn::GetStackOutput")
        found = {(str(read["StackName"]), str(read["OutputName"]))} if isinstance(read, Mapping) else set()
        return found.union(*(outputs_read(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(outputs_read(value) for value in node))
    return set()


def flat(value: Any) -> str:
    """A CloudFormation value as one string with readable placeholders for intrinsics."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ",".join(flat(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return str(sep).join(flat(p) for p in parts)
        if "Ref" in value:
            return "${Ref:" + str(value["Ref"]) + "}"
        if "Fn::GetAtt" in value:
            return "${GetAtt:" + ".".join(value["Fn::GetAtt"]) + "}"
        if "Fn::ImportValue" in value:
            return "${Import:" + flat(value["Fn::ImportValue"]) + "}"
        if "Fn::GetStackOutput" in value:
            read = value["Fn::GetStackOutput"]
            return "${Output:" + flat(read["StackName"]) + ":" + flat(read["OutputName"]) + "}"
    return json.dumps(value, sort_keys=True)


def policy_statements(template: Mapping[str, Any], role_logical_id: str) -> list[dict[str, Any]]:
    """Every Allow statement of the IAM::Policy resources attached to one role."""
    statements: list[dict[str, Any]] = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        roles = policy["Properties"].get("Roles", [])
        if {"Ref": role_logical_id} in roles:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def grants(statements: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(action, flattened resource) pairs of a list of Allow statements."""
    pairs: set[tuple[str, str]] = set()
    for statement in statements:
        assert statement["Effect"] == "Allow"
        actions = _as_list(statement["Action"])
        targets = _as_list(statement["Resource"])
        pairs.update((action, flat(target)) for action in actions for target in targets)
    return pairs


def iter_functions(template: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from resources(template, "AWS::Lambda::Function").items()


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def cfn_lint(synth: Synth) -> subprocess.CompletedProcess[str]:
    """cfn-lint over every template `synth` wrote (exactly three stacks are expected).

    W3005 is ignored: CDK adds an explicit DependsOn on each function's log group (so the group
    exists before the first invocation) although a Ref already orders them; harmless, intended.
    """
    templates = sorted(str(p) for p in Path(synth.outdir).rglob("*.template.json"))
    assert len(templates) == 3, templates
    return subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--ignore-checks", "W3005", "--", *templates],
        capture_output=True,
        text=True,
        check=False,
    )
