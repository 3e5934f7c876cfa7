"""Setting changes CloudFormation would refuse through cross-stack exports: "Export ... cannot be
updated as it is in use by ...". An export a consumer imports can neither change its value nor
go away, and the producer deploys first (Data → Graph → Loader): a change of the table's key, a
switch to `existing_table`, dropping `data_key` or new VPC subnets would fail there. Each change
is synthesized before and after; no export a consumer imports before may change in the after
template, by value or by the replacement of the resource it names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.infra.support import DEV_CONTEXT, Synth, synthesize

pytestmark = pytest.mark.infra

# Properties whose change replaces the resource (CloudFormation's "Update requires: Replacement"),
# for the resource types whose names or ids the stacks share.
REPLACED_BY: dict[str, tuple[str, ...]] = {
    "AWS::DynamoDB::Table": ("KeySchema", "TableName"),
    "AWS::S3::Bucket": ("BucketName",),
    "AWS::KMS::Key": (),
    "AWS::EC2::VPC": ("CidrBlock", "InstanceTenancy"),
    "AWS::EC2::Subnet": ("AvailabilityZone", "AvailabilityZoneId", "CidrBlock", "VpcId"),
    "AWS::EC2::SecurityGroup": ("GroupDescription", "GroupName", "VpcId"),
    "AWS::Neptune::DBCluster": ("KmsKeyId", "StorageEncrypted", "DBSubnetGroupName"),
    "AWS::IAM::Role": ("RoleName", "Path"),
}

# Each change: the synthesized app before and after (fixtures).
CHANGES = {
    "the table's key": ("dev", "key_changed"),
    "existing_table set": ("dev", "variant"),
    "data_key dropped": ("data_key_created", "dev"),
    "data_key created -> an existing key's ARN": ("data_key_created", "data_key_imported"),
    "graph_availability_zones set": ("dev", "zones_chosen"),
}


@pytest.fixture(scope="module")
def key_changed(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    context = {**DEV_CONTEXT, "mapload:partition_key": '{"name": "id", "type": "S"}'}
    return synthesize(context, tmp_path_factory.mktemp("key_changed"))


@pytest.fixture(scope="module")
def zones_chosen(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    context = {**DEV_CONTEXT, "mapload:graph_availability_zones": "eu-west-2a,eu-west-2b"}
    return synthesize(context, tmp_path_factory.mktemp("zones_chosen"))


def templates(synth: Synth) -> dict[str, dict[str, Any]]:
    stacks = [synth.stage.data, synth.stage.loader, *([synth.stage.graph] if synth.stage.graph else [])]
    return {stack.stack_name: dict(Template.from_stack(stack).to_json()) for stack in stacks}


def imports(node: Any) -> set[str]:
    """Every export name a template imports (Fn::ImportValue of a plain string)."""
    if isinstance(node, dict):
        found = {node["Fn::ImportValue"]} if isinstance(node.get("Fn::ImportValue"), str) else set()
        return found.union(*(imports(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(imports(value) for value in node))
    return set()


def exports(all_templates: dict[str, dict[str, Any]]) -> dict[str, tuple[str, Any]]:
    """Export name -> (producing stack, value)."""
    return {
        output["Export"]["Name"]: (stack, output["Value"])
        for stack, template in all_templates.items()
        for output in template.get("Outputs", {}).values()
        if isinstance(output.get("Export", {}).get("Name"), str)
    }


def referenced(value: Any) -> set[str]:
    """The logical ids a value refers to (Ref, GetAtt)."""
    if isinstance(value, dict):
        own = set()
        if isinstance(value.get("Ref"), str) and not value["Ref"].startswith("AWS::"):
            own.add(value["Ref"])
        if isinstance(value.get("Fn::GetAtt"), list):
            own.add(value["Fn::GetAtt"][0])
        return own.union(*(referenced(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(referenced(v) for v in value))
    return set()


def replacement_key(template: dict[str, Any], logical_id: str) -> str:
    resource = template["Resources"].get(logical_id)
    if resource is None:
        return "absent"
    props = resource.get("Properties", {})
    keep = REPLACED_BY.get(resource["Type"], ())
    return json.dumps([resource["Type"], {k: props.get(k) for k in keep}], sort_keys=True)


def refused_exports(before: Synth, after: Synth) -> list[str]:
    """The exports imported before that the after templates would change or remove."""
    old, new = templates(before), templates(after)
    old_exports, new_exports = exports(old), exports(new)
    refused = []
    for consumer, template in old.items():
        for name in sorted(imports(template)):
            stack, value = old_exports[name]
            if name not in new_exports:
                refused.append(f"{name} (imported by {consumer}): deleted")
            elif json.dumps(new_exports[name][1], sort_keys=True) != json.dumps(value, sort_keys=True):
                refused.append(f"{name} (imported by {consumer}): a new value")
            elif any(
                replacement_key(old[stack], logical)
                != replacement_key(new.get(stack, {"Resources": {}}), logical)
                for logical in referenced(value)
            ):
                refused.append(f"{name} (imported by {consumer}): its resource is replaced")
    return refused


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_no_setting_change_alters_an_export_a_consumer_imports(
    change: str, request: pytest.FixtureRequest
) -> None:
    before, after = (request.getfixturevalue(name) for name in CHANGES[change])
    assert refused_exports(before, after) == []


def reads_outputs(node: Any) -> bool:
    """Whether a template reads another stack's outputs (Fn::GetStackOutput)."""
    if isinstance(node, dict):
        return "Fn::GetStackOutput" in node or any(reads_outputs(value) for value in node.values())
    if isinstance(node, list):
        return any(reads_outputs(value) for value in node)
    return False


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_setting_change_updates_every_stack_that_reads_outputs(
    change: str, request: pytest.FixtureRequest
) -> None:
    """`Fn::GetStackOutput` is a weak reference, read when the consuming stack is created or
    updated; `cdk deploy` skips a stack whose template did not change ("no changes"). So every
    setting change must change each consumer's template too, or a consumer would keep a replaced
    table's or subnet's old value."""
    before, after = (templates(request.getfixturevalue(name)) for name in CHANGES[change])
    stale = [
        stack
        for stack, template in before.items()
        if reads_outputs(template) and stack in after and after[stack] == template
    ]
    assert stale == []
