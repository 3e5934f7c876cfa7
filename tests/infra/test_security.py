"""Security review over EVERY template the app synthesizes (all stacks, not one by one):
IAM least privilege, encryption at rest, TLS-only buckets, no public access, log retention,
no secrets in environment variables."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.infra.support import Synth

pytestmark = pytest.mark.infra

# Actions AWS only grants on "*" (no resource-level permissions), and why each is needed.
UNSCOPED_ALLOWED = {
    # Step Functions log delivery to CloudWatch Logs is configured account-wide.
    "logs:CreateLogDelivery": "state machine logging",
    "logs:DeleteLogDelivery": "state machine logging",
    "logs:DescribeLogGroups": "state machine logging",
    "logs:DescribeResourcePolicies": "state machine logging",
    "logs:GetLogDelivery": "state machine logging",
    "logs:ListLogDeliveries": "state machine logging",
    "logs:PutResourcePolicy": "state machine logging",
    "logs:UpdateLogDelivery": "state machine logging",
    # X-Ray has no resource-level permissions.
    "xray:GetSamplingRules": "tracing",
    "xray:GetSamplingTargets": "tracing",
    "xray:PutTelemetryRecords": "tracing",
    "xray:PutTraceSegments": "tracing",
    # Lambda functions in a VPC create and delete their network interfaces.
    "ec2:CreateNetworkInterface": "functions in the VPC (Neptune loader control)",
    "ec2:DescribeNetworkInterfaces": "functions in the VPC (Neptune loader control)",
    "ec2:DescribeSubnets": "functions in the VPC (Neptune loader control)",
    "ec2:DeleteNetworkInterface": "functions in the VPC (Neptune loader control)",
    "ec2:AssignPrivateIpAddresses": "functions in the VPC (Neptune loader control)",
    "ec2:UnassignPrivateIpAddresses": "functions in the VPC (Neptune loader control)",
    # The Graph stack looks up the S3 prefix list id at deploy time (its cluster's egress rule).
    "ec2:DescribeManagedPrefixLists": "S3 prefix list lookup",
    # CloudWatch metrics have no resource-level permissions; Powertools writes EMF via logs.
    "cloudwatch:PutMetricData": "metrics",
}
SECRET_NAME = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY)", re.I)


def _templates(synth: Synth) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(Path(synth.outdir).rglob("*.template.json")):
        yield path.name, json.loads(path.read_text())


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical, res in template.get("Resources", {}).items():
        props = res.get("Properties", {})
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for statement in props["PolicyDocument"]["Statement"]:
                yield logical, statement
        elif res["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                for statement in policy["PolicyDocument"]["Statement"]:
                    yield logical, statement


def test_every_template_is_found(dev: Synth) -> None:
    names = [name for name, _ in _templates(dev)]
    assert any("Data" in n for n in names) and any("Loader" in n for n in names), names


# Every check below runs on the default synth and on the customer-managed-key variants (`data_key`).
ALL_SYNTHS = pytest.mark.parametrize("synth_name", ["dev", "data_key_created", "data_key_imported"])


@ALL_SYNTHS
def test_no_wildcard_actions_and_star_resources_only_where_aws_requires_them(
    synth_name: str, request: pytest.FixtureRequest
) -> None:
    dev: Synth = request.getfixturevalue(synth_name)
    problems = []
    for name, template in _templates(dev):
        for logical, statement in _statements(template):
            if statement.get("Effect") != "Allow":
                continue
            actions = _as_list(statement.get("Action", []))
            resources = _as_list(statement.get("Resource", []))
            for action in actions:
                if action == "*" or action.endswith(":*"):
                    problems.append(f"{name} {logical}: action {action}")
                if "*" in resources and action not in UNSCOPED_ALLOWED:
                    problems.append(f"{name} {logical}: {action} on Resource '*'")
    assert not problems, "\n".join(problems)


@ALL_SYNTHS
def test_no_managed_policies_grant_broad_access(synth_name: str, request: pytest.FixtureRequest) -> None:
    dev: Synth = request.getfixturevalue(synth_name)
    broad = ("AdministratorAccess", "PowerUserAccess", "FullAccess")
    for name, template in _templates(dev):
        for logical, res in template.get("Resources", {}).items():
            if res["Type"] != "AWS::IAM::Role":
                continue
            for arn in res["Properties"].get("ManagedPolicyArns", []):
                text = json.dumps(arn)
                assert not any(b in text for b in broad), f"{name} {logical}: {text}"


@ALL_SYNTHS
def test_every_bucket_is_encrypted_private_and_tls_only(
    synth_name: str, request: pytest.FixtureRequest
) -> None:
    dev: Synth = request.getfixturevalue(synth_name)
    for name, template in _templates(dev):
        resources = template.get("Resources", {})
        policies = {
            json.dumps(r["Properties"]["Bucket"]): r["Properties"]["PolicyDocument"]
            for r in resources.values()
            if r["Type"] == "AWS::S3::BucketPolicy"
        }
        for logical, res in resources.items():
            if res["Type"] != "AWS::S3::Bucket":
                continue
            props = res["Properties"]
            assert props.get("BucketEncryption"), f"{name} {logical}: not encrypted"
            block = props.get("PublicAccessBlockConfiguration", {})
            assert all(
                block.get(k)
                for k in ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
            ), f"{name} {logical}: public access not blocked"
            policy = policies.get(json.dumps({"Ref": logical}))
            assert policy is not None, f"{name} {logical}: no bucket policy"
            assert any(
                s["Effect"] == "Deny"
                and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
                for s in policy["Statement"]
            ), f"{name} {logical}: TLS not enforced"


@ALL_SYNTHS
def test_every_table_is_encrypted_with_point_in_time_recovery(
    synth_name: str, request: pytest.FixtureRequest
) -> None:
    dev: Synth = request.getfixturevalue(synth_name)
    for name, template in _templates(dev):
        for logical, res in template.get("Resources", {}).items():
            if res["Type"] != "AWS::DynamoDB::Table":
                continue
            props = res["Properties"]
            assert props.get("SSESpecification", {}).get("SSEEnabled"), f"{name} {logical}"
            pitr = props.get("PointInTimeRecoverySpecification", {})
            assert pitr.get("PointInTimeRecoveryEnabled"), f"{name} {logical}"


@ALL_SYNTHS
def test_every_log_group_has_a_retention(synth_name: str, request: pytest.FixtureRequest) -> None:
    dev: Synth = request.getfixturevalue(synth_name)
    for name, template in _templates(dev):
        for logical, res in template.get("Resources", {}).items():
            if res["Type"] == "AWS::Logs::LogGroup":
                assert res["Properties"].get("RetentionInDays"), f"{name} {logical}"


@ALL_SYNTHS
def test_no_secrets_in_function_environments(synth_name: str, request: pytest.FixtureRequest) -> None:
    dev: Synth = request.getfixturevalue(synth_name)
    for name, template in _templates(dev):
        for logical, res in template.get("Resources", {}).items():
            if res["Type"] != "AWS::Lambda::Function":
                continue
            variables = res["Properties"].get("Environment", {}).get("Variables", {})
            for variable in variables:
                assert not SECRET_NAME.search(variable), f"{name} {logical}: {variable}"
