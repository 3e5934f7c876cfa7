"""The Data stack: buckets and tables are private, encrypted, lifecycled and recoverable."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from tests.infra.support import Synth, output_target, outputs_read, resources

pytestmark = pytest.mark.infra

BUCKET_OUTPUTS = ("SourceBucketName", "StagingBucketName", "AccessLogsBucketName")


def bucket(synth: Synth, output: str) -> dict[str, Any]:
    return dict(synth.data_json["Resources"][output_target(synth.data_json, output)])


def test_three_buckets_each_named_by_an_output(dev: Synth) -> None:
    dev.data.resource_count_is("AWS::S3::Bucket", 3)
    targets = {output_target(dev.data_json, output) for output in BUCKET_OUTPUTS}
    assert targets == set(resources(dev.data_json, "AWS::S3::Bucket"))


def test_every_bucket_is_encrypted_private_and_owner_enforced(dev: Synth) -> None:
    dev.data.all_resources_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        },
    )


def test_every_bucket_policy_denies_plain_http_and_old_tls(dev: Synth) -> None:
    policies = resources(dev.data_json, "AWS::S3::BucketPolicy")
    covered = {policy["Properties"]["Bucket"]["Ref"] for policy in policies.values()}
    assert covered == set(resources(dev.data_json, "AWS::S3::Bucket"))
    dev.data.all_resources_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Principal": {"AWS": "*"},
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        ),
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}},
                            }
                        ),
                    ]
                )
            }
        },
    )


def test_every_bucket_aborts_incomplete_multipart_uploads(dev: Synth) -> None:
    for output in BUCKET_OUTPUTS:
        rules = bucket(dev, output)["Properties"]["LifecycleConfiguration"]["Rules"]
        assert any(
            rule.get("AbortIncompleteMultipartUpload") == {"DaysAfterInitiation": 1}
            and "Prefix" not in rule
            and rule["Status"] == "Enabled"
            for rule in rules
        ), output


def test_staging_jobs_expire_and_staging_is_not_versioned(dev: Synth) -> None:
    staging = bucket(dev, "StagingBucketName")["Properties"]
    assert {"Id": "ExpireJobs", "Prefix": "jobs/", "ExpirationInDays": 14, "Status": "Enabled"} in (
        staging["LifecycleConfiguration"]["Rules"]
    )
    assert "VersioningConfiguration" not in staging


def test_source_is_versioned_and_old_versions_expire(dev: Synth) -> None:
    source = bucket(dev, "SourceBucketName")["Properties"]
    assert source["VersioningConfiguration"] == {"Status": "Enabled"}
    assert any(
        rule.get("NoncurrentVersionExpiration") == {"NoncurrentDays": 7}
        for rule in source["LifecycleConfiguration"]["Rules"]
    )


def test_source_and_staging_log_to_the_access_log_bucket(dev: Synth) -> None:
    log_bucket = output_target(dev.data_json, "AccessLogsBucketName")
    for output, prefix in (("SourceBucketName", "source/"), ("StagingBucketName", "staging/")):
        logging = bucket(dev, output)["Properties"]["LoggingConfiguration"]
        assert logging == {"DestinationBucketName": {"Ref": log_bucket}, "LogFilePrefix": prefix}
    logs = bucket(dev, "AccessLogsBucketName")["Properties"]
    assert "LoggingConfiguration" not in logs
    assert any(rule.get("ExpirationInDays") == 90 for rule in logs["LifecycleConfiguration"]["Rules"])


def test_tables_are_on_demand_recoverable_and_encrypted(dev: Synth) -> None:
    dev.data.resource_count_is("AWS::DynamoDB::Table", 2)
    dev.data.all_resources_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )


def test_target_table_key_schema_comes_from_config(dev: Synth) -> None:
    table = dev.data_json["Resources"][output_target(dev.data_json, "TableName")]["Properties"]
    assert table["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert "TimeToLiveSpecification" not in table


def test_ledger_has_generic_key_and_ttl(dev: Synth) -> None:
    ledger = dev.data_json["Resources"][output_target(dev.data_json, "LedgerTableName")]["Properties"]
    assert ledger["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert {"AttributeName": "pk", "AttributeType": "S"} in ledger["AttributeDefinitions"]
    assert {"AttributeName": "sk", "AttributeType": "S"} in ledger["AttributeDefinitions"]
    assert ledger["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}


def auto_deleted_buckets(template: dict[str, Any]) -> set[str]:
    """Logical ids of the buckets a Custom::S3AutoDeleteObjects resource empties before deletion."""
    return {
        resource["Properties"]["BucketName"]["Ref"]
        for resource in template["Resources"].values()
        if resource["Type"] == "Custom::S3AutoDeleteObjects"
    }


def test_cdk_destroy_of_dev_deletes_every_bucket_even_holding_objects(dev: Synth) -> None:
    template = dev.data_json
    buckets = resources(template, "AWS::S3::Bucket")
    assert len(buckets) == 3  # source (versioned), staging, access logs
    for kind in ("AWS::S3::Bucket", "AWS::DynamoDB::Table"):
        for logical, resource in resources(template, kind).items():
            assert resource["DeletionPolicy"] == "Delete", logical
            assert resource.get("Properties", {}).get("DeletionProtectionEnabled") in (None, False), logical
    # Every bucket, access logs and the versioned source included, is emptied first (all versions).
    assert auto_deleted_buckets(template) == set(buckets)
    for logical in buckets:
        empties = [
            r
            for r in template["Resources"].values()
            if r["Type"] == "Custom::S3AutoDeleteObjects"
            and r["Properties"]["BucketName"] == {"Ref": logical}
        ]
        # The custom resource depends on the bucket policy letting its handler delete objects.
        assert empties[0]["DeletionPolicy"] == "Delete"
        assert empties[0]["DependsOn"], logical
    # Nothing in any dev stack outlives `cdk destroy`.
    for template_json in (dev.data_json, dev.loader_json, dev.graph.to_json() if dev.graph else {}):
        for logical, resource in template_json.get("Resources", {}).items():
            assert resource.get("DeletionPolicy", "Delete") == "Delete", logical
    assert dev.stage.data.termination_protection is False
    assert dev.stage.loader.termination_protection is False
    if dev.graph is not None:
        for cluster in resources(dev.graph.to_json(), "AWS::Neptune::DBCluster").values():
            assert cluster["Properties"]["DeletionProtection"] is False


def test_every_stack_reading_another_stacks_outputs_depends_on_it(dev: Synth) -> None:
    # Deploys run producers first (the consumer reads their outputs at its deploy), and `cdk
    # destroy 'Mapload-dev/*'` deletes consumers first. Nothing imports an export: an export in
    # use could neither change nor go (tests/infra/test_exports.py).
    stacks = [s for s in (dev.stage.data, dev.stage.graph, dev.stage.loader) if s is not None]
    by_name = {stack.stack_name: stack for stack in stacks}
    for stack in stacks:
        template = Template.from_stack(stack).to_json()
        assert "Fn::ImportValue" not in json.dumps(template), stack.node.path
        read = outputs_read(template)
        depends_on = {dependency.node.path for dependency in stack.dependencies}
        for producer, output in read:
            assert output in Template.from_stack(by_name[producer]).to_json()["Outputs"], (producer, output)
            assert by_name[producer].node.path in depends_on, (stack.node.path, producer)
        assert bool(read) == (stack is not dev.stage.data), stack.node.path


def test_prod_buckets_are_never_emptied_by_cdk(prod: Synth) -> None:
    assert auto_deleted_buckets(prod.data_json) == set()
    kinds = {resource["Type"] for resource in prod.data_json["Resources"].values()}
    assert not any(kind.startswith("Custom::") for kind in kinds)
    assert "AWS::Lambda::Function" not in kinds


def test_data_outputs_name_every_bucket_and_table(dev: Synth) -> None:
    outputs = dev.data_json["Outputs"]
    for name in (*BUCKET_OUTPUTS, "TableName", "LedgerTableName", "TableArn", "LedgerTableArn"):
        assert name in outputs
    # The Loader imports these by name; the names are part of the stacks' contract.
    exported = {name: output["Export"]["Name"] for name, output in outputs.items() if "Export" in output}
    assert exported == {
        name: f"Mapload-dev-Data:{name}"
        for name in (
            "SourceBucketName",
            "SourceBucketArn",
            "StagingBucketName",
            "StagingBucketArn",
            "TableName",
            "LedgerTableName",
        )
    }
