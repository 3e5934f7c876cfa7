"""Acknowledge exactly the cdk-nag findings a design needs, each with its reason."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct


def acknowledge(construct: Construct, rule: str, reason: str) -> None:
    """Acknowledge one rule (or one `Rule[finding]`) on one construct and its children."""
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))


def flatten_reference(node: Any) -> str:
    """The flat string cdk-nag 3 uses for a resolved IAM resource (utils/flatten-cfn-reference)."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, Mapping):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(flatten_reference(item) for item in items)
        if "Fn::Sub" in node:
            return flatten_reference(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{flatten_reference(resource)}.{flatten_reference(attribute)}>"
        if "Fn::ImportValue" in node:
            return flatten_reference(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{flatten_reference(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def resource_finding(scope: Construct, resource: str) -> str:
    """The AwsSolutions-IAM5 finding a wildcard resource (a string with tokens) produces."""
    return f"Resource::{flatten_reference(cdk.Stack.of(scope).resolve(resource))}"


def wildcard_findings(policy: iam.Policy) -> set[str]:
    """AwsSolutions-IAM5 findings of a policy as it stands now (Action:: and Resource:: ones)."""
    document = cdk.Stack.of(policy).resolve(policy.document)
    findings: set[str] = set()
    for statement in document.get("Statement", []):
        if statement.get("Effect") != "Allow":
            continue
        for action in _as_list(statement.get("Action")):
            if "*" in action:
                findings.add(f"Action::{action}")
        for resource in _as_list(statement.get("Resource")):
            flat = flatten_reference(resource)
            if "*" in flat:
                findings.add(f"Resource::{flat}")
    return findings


def acknowledge_wildcards(policy: iam.Policy, reasons: Mapping[str, str]) -> set[str]:
    """Acknowledge the policy's IAM5 findings that `reasons` explains; return the rest.

    Findings nobody explained stay unacknowledged, so cdk-nag fails the synth on them.
    """
    resource = policy.node.default_child
    assert isinstance(resource, cdk.CfnResource)
    findings = wildcard_findings(policy)
    for finding in sorted(findings & set(reasons)):
        acknowledge(resource, f"AwsSolutions-IAM5[{finding}]", reasons[finding])
    return findings - set(reasons)


def default_policy(role: iam.IRole | None) -> iam.Policy:
    """The DefaultPolicy CDK attaches to a role when statements are added to it."""
    assert role is not None
    policy = role.node.try_find_child("DefaultPolicy")
    assert isinstance(policy, iam.Policy), f"{role.node.path} has no DefaultPolicy"
    return policy


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
