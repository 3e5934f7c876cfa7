"""Checkov acknowledgements: the scanner's checks that do not fit mapload, each on the resources
it concerns, with the reason, written into the template metadata checkov reads."""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import CfnResource, IAspect
from constructs import IConstruct

# Checks that do not fit a resource type anywhere in mapload, and why.
BY_TYPE: dict[str, dict[str, str]] = {
    "AWS::Lambda::Function": {
        "CKV_AWS_115": "Only the Worker, the one function that fans out, may reserve concurrency "
        "(worker_reserved_concurrency; null by default, as Lambda refuses a reservation a new account's "
        "quota cannot leave 100 unreserved beside, and max_concurrency_cap bounds its fan-out); the "
        "others run once or twice per execution (or once per deploy) and reserving for them would "
        "only take executions from the account.",
        "CKV_AWS_116": "Invoked by Step Functions, which retries and catches failures (Finalize reports "
        "them), or by CloudFormation (the Graph stack's deploy-time lookup), which fails the "
        "deployment; a DLQ would hold nothing anyone reads.",
        "CKV_AWS_173": "Environment variables hold resource names and settings only (tested: no secrets); "
        "Lambda encrypts them at rest with its service key.",
    },
}
# Customer managed key checks, acknowledged only while the environment's `data_key` is null: with
# a key configured, the log groups and created tables use it and must pass.
WITHOUT_DATA_KEY: dict[str, dict[str, str]] = {
    "AWS::Logs::LogGroup": {
        "CKV_AWS_158": "data_key is null in this environment: CloudWatch Logs encrypts log data at rest "
        "with its service keys, and the logs hold no record data (state machine execution data logging "
        "is off, Lambdas log counts and ids). Set data_key to use a customer managed key.",
    },
    "AWS::DynamoDB::Table": {
        "CKV_AWS_119": "data_key is null in this environment: encrypted at rest with the AWS managed key "
        "(SSESpecification enabled). Set data_key to use a customer managed key.",
    },
}
# Checks that do not fit one bucket (by construct id), and why.
BY_BUCKET: dict[str, dict[str, str]] = {
    "AccessLogsBucket": {
        "CKV_AWS_18": "This is the access-log target bucket; logging it to itself would loop.",
        "CKV_AWS_21": "Access logs are written once and expire by lifecycle; versions would only add cost.",
    },
    "StagingBucket": {
        "CKV_AWS_21": "Staging holds transient job files (manifests, rejects, reports, staged graph "
        "files) that each run writes once and the lifecycle rule expires.",
    },
}
# Checks that do not fit one IAM policy (by construct id), and why.
BY_POLICY: dict[str, dict[str, str]] = {
    "NetworkInterfaces": {
        "CKV_AWS_111": "Only the EC2 network-interface actions Lambda needs for a function in a VPC "
        "(stacks/loader_functions.py NETWORK_INTERFACE_ACTIONS): Lambda creates, describes and deletes "
        "the interfaces itself, under names it chooses, so their ARNs are not known to constrain to.",
    },
}

# CDK's handler that empties a bucket on `cdk destroy` (auto_delete_objects, dev and staging only).
AUTO_DELETE_PROVIDER = "Custom::S3AutoDeleteObjectsCustomResourceProvider"
AUTO_DELETE_REASONS: dict[str, str] = {
    "CKV_AWS_115": "CDK's bucket-emptying handler runs once per bucket on stack deletion only.",
    "CKV_AWS_116": "Invoked by CloudFormation for its custom resource, which reports a failure itself.",
    "CKV_AWS_117": "Calls only the S3 API (lists, deletes objects of this stack's buckets); no VPC resource.",
    "CKV_AWS_173": "No environment variables.",
}


@jsii.implements(IAspect)
class CheckovAcknowledgements:
    """Writes each resource's acknowledged checks; `data_key`: whether a customer key is configured."""

    def __init__(self, *, data_key: bool = False) -> None:
        self._data_key = data_key

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, CfnResource):
            return
        reasons = dict(BY_TYPE.get(node.cfn_resource_type, {}))
        if not self._data_key:
            reasons.update(WITHOUT_DATA_KEY.get(node.cfn_resource_type, {}))
        if node.cfn_resource_type == "AWS::Lambda::Function" and _in_vpc(node):
            pass
        elif node.cfn_resource_type == "AWS::Lambda::Function":
            reasons["CKV_AWS_117"] = (
                "Talks only to AWS APIs (S3, DynamoDB; EC2 for the Graph stack's deploy-time prefix list "
                "lookup) over TLS with IAM; no resource in a VPC (the Neptune loader-control functions "
                "do run in the VPC)."
            )
        if node.node.scope is not None and node.node.scope.node.id == AUTO_DELETE_PROVIDER:
            reasons.update(AUTO_DELETE_REASONS)
        if getattr(node, "reserved_concurrent_executions", None) is not None:
            reasons.pop("CKV_AWS_115", None)  # the Worker reserves its concurrency: checkov passes it
        if node.cfn_resource_type == "AWS::S3::Bucket" and node.node.scope is not None:
            reasons.update(BY_BUCKET.get(node.node.scope.node.id, {}))
        if node.cfn_resource_type == "AWS::IAM::Policy" and node.node.scope is not None:
            reasons.update(BY_POLICY.get(node.node.scope.node.id, {}))
        if reasons:
            node.add_metadata(
                "checkov", {"skip": [{"id": k, "comment": v} for k, v in sorted(reasons.items())]}
            )


def _in_vpc(node: CfnResource) -> bool:
    config: Any = getattr(node, "vpc_config", None)
    return config is not None
