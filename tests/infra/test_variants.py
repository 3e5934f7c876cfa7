"""Environment-dependent synth: an existing table, extra source buckets, prod retention."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.support import (
    EXISTING_TABLE_ARN,
    EXISTING_TABLE_KEY,
    EXTRA_BUCKETS,
    OTHER_TABLES,
    OTHER_TABLES_KEY,
    SOURCE_KMS_KEY,
    Synth,
    grants,
    output_target,
    policy_statements,
    resources,
    stack_output,
)

pytestmark = pytest.mark.infra


def variables(synth: Synth, name: str) -> dict[str, object]:
    logical = output_target(synth.loader_json, f"{name}FunctionName")
    return dict(synth.loader_json["Resources"][logical]["Properties"]["Environment"]["Variables"])


def role_grants(synth: Synth, name: str) -> set[tuple[str, str]]:
    logical = output_target(synth.loader_json, f"{name}FunctionName")
    role = synth.loader_json["Resources"][logical]["Properties"]["Role"]["Fn::GetAtt"][0]
    return grants(policy_statements(synth.loader_json, role))


def test_existing_table_is_not_created_and_is_what_the_worker_writes(variant: Synth) -> None:
    tables = resources(variant.data_json, "AWS::DynamoDB::Table")
    assert len(tables) == 1  # the ledger only
    assert output_target(variant.data_json, "LedgerTableName") in tables
    assert variant.data_json["Outputs"]["TableName"]["Value"] == "People"
    assert variant.data_json["Outputs"]["TableArn"]["Value"] == EXISTING_TABLE_ARN
    for name in ("Plan", "Worker", "Finalize"):
        assert variables(variant, name)["TABLE_NAME"] == "People"
    worker = role_grants(variant, "Worker")
    on_target = {action for action, resource in worker if resource == EXISTING_TABLE_ARN}
    assert on_target == {
        "dynamodb:BatchWriteItem",
        "dynamodb:PartiQLInsert",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    }
    # Plan only describes it (dynamodb.engine bulkPutItems: ACTIVE, no index building, not global);
    # Finalize has nothing on it.
    plan = {action for action, resource in role_grants(variant, "Plan") if resource == EXISTING_TABLE_ARN}
    assert plan == {"dynamodb:DescribeTable"}
    assert not any(resource == EXISTING_TABLE_ARN for _, resource in role_grants(variant, "Finalize"))


def test_the_existing_tables_own_key_is_granted_to_the_worker_through_dynamodb_only(variant: Synth) -> None:
    statements = [
        statement
        for name in ("Prepare", "Plan", "Worker", "Finalize")
        for statement in policy_statements(
            variant.loader_json,
            variant.loader_json["Resources"][output_target(variant.loader_json, f"{name}FunctionName")][
                "Properties"
            ]["Role"]["Fn::GetAtt"][0],
        )
        if EXISTING_TABLE_KEY in json.dumps(statement.get("Resource"))
    ]
    assert len(statements) == 1
    (statement,) = statements
    # One statement for every table's own key: `existing_table_key` and `table_keys`.
    assert sorted(statement["Resource"]) == sorted([EXISTING_TABLE_KEY, OTHER_TABLES_KEY])
    assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    via = statement["Condition"]["StringEquals"]["kms:ViaService"]
    assert "dynamodb." in json.dumps(via)
    assert ("kms:Decrypt", EXISTING_TABLE_KEY) in role_grants(variant, "Worker")


def test_the_tables_a_job_may_name_are_granted_exactly(variant: Synth) -> None:
    """`tables`: the Worker writes, and Plan describes, exactly those tables (a prefix: its ARN
    pattern) besides the environment's own (Plan describes that too); no index, no read; their own
    key goes to the Worker."""
    stack = "arn:${Ref:AWS::Partition}:dynamodb:${Ref:AWS::Region}:${Ref:AWS::AccountId}:table/"
    arns = {stack + table for table in OTHER_TABLES}
    writes = {"dynamodb:BatchWriteItem", "dynamodb:PartiQLInsert", "dynamodb:PutItem", "dynamodb:UpdateItem"}
    worker = role_grants(variant, "Worker")
    others = {(a, r) for a, r in worker if ":table/" in r and r != EXISTING_TABLE_ARN and "Ledger" not in r}
    assert others == {(action, arn) for action in writes for arn in arns}
    plan = role_grants(variant, "Plan")
    # ... and a takeover cancels a bulk put items operation on any of them (and the environment's).
    operations = {f"{arn}/bulk-operation/*" for arn in {*arns, EXISTING_TABLE_ARN}}
    assert {(a, r) for a, r in plan if ":table/" in r and "Ledger" not in r} == {
        ("dynamodb:DescribeTable", arn) for arn in {*arns, EXISTING_TABLE_ARN}
    } | {
        (action, arn)
        for action in ("dynamodb:DescribeBulkOperation", "dynamodb:CancelBulkOperation")
        for arn in operations
    }
    assert variables(variant, "Plan")["TABLES"] == ",".join(OTHER_TABLES)
    assert ("kms:GenerateDataKey", OTHER_TABLES_KEY) in worker
    assert not any(r == OTHER_TABLES_KEY for _, r in role_grants(variant, "Plan"))
    assert not any(r in arns for _, r in role_grants(variant, "Finalize"))


def test_a_tables_arn_in_another_region_is_refused() -> None:
    from stacks.config import load_environment
    from stacks.settings import MaploadConfigError

    other = "arn:aws:dynamodb:us-east-1:123456789012:table/orders"
    block = {"region": "eu-west-2", "tables": [other]}
    with pytest.raises(MaploadConfigError, match=r"tables.*names a table in region us-east-1"):
        load_environment({"environments": {"dev": block}}, "dev")


def test_existing_table_by_name_gets_an_arn_in_the_stack_account() -> None:
    from stacks.config import load_environment

    config = load_environment({"environments": {"dev": {"existing_table": "People"}}}, "dev")
    assert config.data.table_existing == "People"
    assert config.data.table_existing_name == "People"


def test_extra_source_buckets_are_allowed_and_granted(variant: Synth) -> None:
    for name in ("Plan", "Worker"):
        source = variables(variant, name)["SOURCE_BUCKETS"]
        assert source == {
            "Fn::Join": [
                "",
                [stack_output("Mapload-dev-Data", "SourceBucketName"), "," + ",".join(EXTRA_BUCKETS)],
            ]
        }
    for bucket in EXTRA_BUCKETS:
        arn = "arn:${Ref:AWS::Partition}:s3:::" + bucket
        assert ("s3:ListBucket", arn) in role_grants(variant, "Plan")
        assert ("s3:GetObject", arn + "/*") in role_grants(variant, "Plan")
        assert ("s3:GetObject", arn + "/*") in role_grants(variant, "Worker")
        assert not any(bucket in resource for _, resource in role_grants(variant, "Finalize"))


def test_single_value_overrides_reach_the_template(variant: Synth) -> None:
    assert variables(variant, "Plan")["MAX_CONCURRENCY_CAP"] == "42"


def test_prod_retains_every_stateful_resource(prod: Synth) -> None:
    for kind in ("AWS::S3::Bucket", "AWS::DynamoDB::Table"):
        found = resources(prod.data_json, kind)
        assert found
        for logical, resource in found.items():
            assert resource["DeletionPolicy"] == "Retain", logical
            assert resource["UpdateReplacePolicy"] == "Retain", logical
    for table in resources(prod.data_json, "AWS::DynamoDB::Table").values():
        assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert prod.stage.data.termination_protection is True
    for group in resources(prod.loader_json, "AWS::Logs::LogGroup").values():
        assert group["DeletionPolicy"] == "Retain"
        assert group["Properties"]["RetentionInDays"] == 365


def test_dev_stacks_can_be_deleted(dev: Synth) -> None:
    assert dev.stage.data.termination_protection is False
    for group in resources(dev.loader_json, "AWS::Logs::LogGroup").values():
        assert group["DeletionPolicy"] == "Delete"


def test_prod_concurrency_cap_and_ledger_ttl(prod: Synth) -> None:
    plan = variables(prod, "Plan")
    assert plan["MAX_CONCURRENCY_CAP"] == "800"
    assert plan["LEDGER_TTL_DAYS"] == "90"
    assert json.loads(str(plan["TABLE_KEY"])) == {"pk": "S", "sk": "S"}


def _kms_statements(synth: Synth) -> list[dict[str, Any]]:
    found = []
    for policy in resources(synth.loader_json, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a.startswith("kms:Decrypt") for a in actions) and "s3" in json.dumps(statement):
                found.append(statement)
    return found


def test_sources_encrypted_with_an_allowed_customer_key_can_be_decrypted_through_s3_only(
    variant: Synth, dev: Synth
) -> None:
    statements = _kms_statements(variant)
    assert len(statements) == 3  # Prepare, Plan, Worker
    for statement in statements:
        assert statement["Action"] == "kms:Decrypt"
        assert statement["Resource"] == SOURCE_KMS_KEY
        assert "kms:ViaService" in statement["Condition"]["StringEquals"]
    assert _kms_statements(dev) == []


def test_a_source_key_that_is_not_a_key_arn_is_refused() -> None:
    from stacks.config import load_environment
    from stacks.settings import MaploadConfigError

    with pytest.raises(MaploadConfigError, match=r"source_kms_keys\[0\].*KMS key ARN"):
        load_environment({"environments": {"dev": {"source_kms_keys": ["alias/mine"]}}}, "dev")
