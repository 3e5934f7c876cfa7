"""cdk-nag (AwsSolutions) passes on every synth, and each acknowledgement is narrow and reasoned."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from tests.infra.support import Synth

pytestmark = pytest.mark.infra


def walk(node: IConstruct) -> Iterator[IConstruct]:
    yield node
    for child in node.node.children:
        yield from walk(child)


def acknowledgements(app: Any) -> list[tuple[IConstruct, str, str]]:
    key = cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    found: list[tuple[IConstruct, str, str]] = []
    for node in walk(app):
        for entry in node.node.metadata:
            if entry.type == key:
                # CDK stores an acknowledged id as "Annotation::<id>"; cdk-nag strips the prefix.
                found.extend(
                    (node, rule.split("::", 1)[1] if rule.startswith("Annotation::") else rule, reason)
                    for rule, reason in dict(entry.data).items()
                    # CDK's own Vpc acknowledges its template lint rule W3010 (literal AZs) on the stack.
                    if not rule.startswith("CloudFormation-Validate::")
                )
    return found


@pytest.mark.parametrize("name", ["dev", "prod", "variant", "data_key_created", "data_key_imported"])
def test_no_unacknowledged_findings(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    report = AwsSolutionsChecks().validate_scope(synth.app)
    assert [(v.rule_name, [r.construct_path for r in v.violating_resources]) for v in report.violations] == []
    assert report.success
    # The same plugin ran inside app.synth() (which would have raised); its report says so.
    written = json.loads((synth.outdir / "validation-report.json").read_text())
    assert all(plugin.get("conclusion") != "failure" for plugin in written["pluginReports"])


def test_acknowledgements_are_single_findings_on_single_resources(dev: Synth) -> None:
    found = acknowledgements(dev.app)
    assert found, "expected the design's known acknowledgements"
    for node, rule, reason in found:
        # On a CloudFormation resource, not a stack or a construct with many children.
        assert isinstance(node, cdk.CfnResource), (node.node.path, rule)
        assert rule.startswith("AwsSolutions-"), rule
        if rule.startswith("AwsSolutions-IAM5"):
            assert rule.startswith("AwsSolutions-IAM5[Resource::"), rule
            assert rule != "AwsSolutions-IAM5[Resource::*]" or node.node.path.endswith(
                (
                    "StateMachine/Role/DefaultPolicy/Resource",
                    "S3PrefixListLookup/CustomResourcePolicy/Resource",
                    "GraphLoad/NetworkInterfaces/Resource",
                )
            ), node.node.path
        assert len(reason) > 40, (rule, reason)
    rules = sorted({rule.split("[")[0] for _, rule, _ in found})
    # No IAM4: no AWS managed policy anywhere (the VPC functions' ENI actions are inline); N1: a
    # one-instance dev cluster.
    assert rules == [
        "AwsSolutions-IAM5",
        "AwsSolutions-L1",
        "AwsSolutions-N1",
        "AwsSolutions-S1",
    ]


def test_the_plugin_does_flag_what_is_not_acknowledged() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Scratch")
    s3.Bucket(stack, "Plain")
    report = AwsSolutionsChecks().validate_scope(app)
    flagged = {violation.rule_name for violation in report.violations}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= flagged
    assert not report.success
