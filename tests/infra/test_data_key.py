"""`data_key`: a customer managed KMS key for the source/staging buckets, the created tables and the
log groups, created by the Data stack or imported by ARN; each principal granted exactly its use."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

import app as app_module
from stacks.config import load_environment
from stacks.loader import HANDLER_INDEX
from stacks.pipeline import PIPELINE_STACK_ID, PipelineStack
from stacks.settings import MaploadConfigError
from tests.infra.support import (
    DATA_KEY_ARN,
    Synth,
    cfn_lint,
    flat,
    only,
    output_target,
    outputs_read,
    resources,
    stack_output,
)

pytestmark = pytest.mark.infra

CREATED_KEY_REF = stack_output("Mapload-dev-Data", "DataKeyArn")
READ = ["kms:Decrypt"]
WRITE = ["kms:Decrypt", "kms:GenerateDataKey"]
# What each principal may do with the key, by the service it goes through (kms:ViaService).
EXPECTED_FUNCTION_GRANTS: dict[str, dict[str, list[str]]] = {
    "Prepare": {"s3": WRITE},
    "Plan": {"s3": WRITE, "dynamodb": WRITE},
    "Worker": {"s3": WRITE, "dynamodb": WRITE},
    "Finalize": {"s3": WRITE, "dynamodb": WRITE},
    # The edge endpoint check reads the shards' id and edge files; it writes nothing to S3.
    "StartGraphLoad": {"s3": ["kms:Decrypt"], "dynamodb": WRITE},
    "PollGraphLoad": {"s3": WRITE, "dynamodb": WRITE},
    # Reads the staged items and writes the operation's output (the service is assumed to act with
    # its permissions) and records the operation in the ledger; PollBulkPut touches no data.
    "StartBulkPut": {"s3": WRITE, "dynamodb": WRITE},
    "PollBulkPut": {},
}
VARIANTS = ["data_key_created", "data_key_imported"]


def key_ref(name: str) -> Any:
    """How the consuming stacks name the key: the Data stack's export, or the configured ARN."""
    return CREATED_KEY_REF if name == "data_key_created" else DATA_KEY_ARN


def all_templates(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        path.name: json.loads(path.read_text())
        for path in sorted(Path(synth.outdir).rglob("*.template.json"))
    }


def function_role(template: dict[str, Any], name: str) -> str:
    stem = Path(HANDLER_INDEX[name]).stem
    (logical,) = [
        logical
        for logical, fn in resources(template, "AWS::Lambda::Function").items()
        if fn["Properties"]["Handler"].rsplit(".", 1)[0].replace("/", ".").endswith(f".{stem}")
    ]
    return str(template["Resources"][logical]["Properties"]["Role"]["Fn::GetAtt"][0])


def state_machine_role(template: dict[str, Any]) -> str:
    machine = only(resources(template, "AWS::StepFunctions::StateMachine"))
    return str(machine["Properties"]["RoleArn"]["Fn::GetAtt"][0])


def neptune_loader_role(template: dict[str, Any]) -> str:
    (logical,) = [
        logical
        for logical, role in resources(template, "AWS::IAM::Role").items()
        if "rds.amazonaws.com" in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
    ]
    return logical


def key_grants(template: dict[str, Any], role: str, key: Any) -> dict[str, list[str]]:
    """{service: actions} of the role's KMS statements; each must name exactly `key`, via one service."""
    found: dict[str, list[str]] = {}
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if not any(action.startswith("kms:") for action in actions):
                continue
            assert statement["Resource"] == key, statement
            via = flat(statement["Condition"]["StringEquals"]["kms:ViaService"])
            # The stack's region: a token, or the name an environment with a region gives it.
            assert re.fullmatch(
                r"[a-z0-9]+\.(\$\{Ref:AWS::Region\}|[a-z]{2}(-[a-z]+)+-[0-9])\.amazonaws\.com", via
            ), via
            service = via.split(".", 1)[0]
            assert service not in found, (role, service)
            found[service] = sorted(actions)
    return found


def import_names(node: Any) -> set[str]:
    """Every export name a template imports (Fn::ImportValue of a plain string)."""
    if isinstance(node, dict):
        found = {node["Fn::ImportValue"]} if isinstance(node.get("Fn::ImportValue"), str) else set()
        return found.union(*(import_names(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(import_names(value) for value in node))
    return set()


# -- configuration ------------------------------------------------------------------------------


def test_data_key_defaults_to_none_everywhere_and_accepts_create_or_a_key_arn(
    cdk_json: dict[str, Any],
) -> None:
    block = cdk_json["context"]["mapload"]
    for env in ("dev", "staging", "prod"):
        assert load_environment(block, env).data.data_key is None
    created = load_environment({"environments": {"dev": {"data_key": "create"}}}, "dev").data
    assert (created.data_key, created.data_key_arn) == ("create", None)
    imported = load_environment({"environments": {"dev": {}}}, "dev", {"data_key": DATA_KEY_ARN}).data
    assert (imported.data_key, imported.data_key_arn) == (DATA_KEY_ARN, DATA_KEY_ARN)
    assert load_environment({"environments": {"dev": {"data_key": ""}}}, "dev").data.data_key is None


@pytest.mark.parametrize(
    "value",
    [
        "alias/mapload",
        "arn:aws:kms:eu-west-2:123456789012:alias/mapload",
        "arn:aws:s3:::bucket",
        "Create",
        True,
        5,
        [DATA_KEY_ARN],
    ],
)
def test_a_bad_data_key_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(MaploadConfigError) as raised:
        load_environment({"environments": {"dev": {"data_key": value}}}, "dev")
    assert str(raised.value) == (
        'mapload.environments.dev.data_key: must be null, "create" (the Data stack creates a key) or a '
        f"KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID), got {value!r}"
    )
    # From the command line the message names the context key too.
    with pytest.raises(
        MaploadConfigError, match=r"^mapload\.environments\.dev\.data_key \(context mapload:data_key\)"
    ):
        load_environment({"environments": {"dev": {}}}, "dev", {"data_key": "not-a-key"})


def test_an_existing_key_must_be_in_the_environments_region() -> None:
    block = {"environments": {"dev": {"region": "us-east-1", "data_key": DATA_KEY_ARN}}}
    with pytest.raises(
        MaploadConfigError,
        match=r"^mapload\.environments\.dev\.data_key: must be a key in the environment's region",
    ):
        load_environment(block, "dev")


# -- the Data stack ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
def test_source_and_staging_use_the_key_with_bucket_keys_and_access_logs_stay_sse_s3(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    data = synth.data_json
    created = list(resources(data, "AWS::KMS::Key"))
    key = {"Fn::GetAtt": [*created, "Arn"]} if name == "data_key_created" else DATA_KEY_ARN
    for output in ("SourceBucketName", "StagingBucketName"):
        bucket = data["Resources"][output_target(data, output)]["Properties"]
        (rule,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule == {
            "BucketKeyEnabled": True,
            "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key},
        }, output
    logs = data["Resources"][output_target(data, "AccessLogsBucketName")]["Properties"]
    assert logs["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    tables = resources(data, "AWS::DynamoDB::Table")
    assert len(tables) == 2  # the target table and the ledger
    for logical, table in tables.items():
        assert table["Properties"]["SSESpecification"] == {
            "SSEEnabled": True,
            "SSEType": "KMS",
            "KMSMasterKeyId": key,
        }, logical


def test_without_a_key_nothing_changes(dev: Synth) -> None:
    data = dev.data_json
    assert resources(data, "AWS::KMS::Key") == {}
    assert "DataKeyArn" not in data["Outputs"]
    for bucket in resources(data, "AWS::S3::Bucket").values():
        assert bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        ]
    for table in resources(data, "AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"] == {"SSEEnabled": True}
    for template in all_templates(dev).values():
        for group in resources(template, "AWS::Logs::LogGroup").values():
            assert "KmsKeyId" not in group["Properties"]


def test_a_created_key_rotates_is_kept_like_the_data_and_lets_only_this_accounts_log_groups_use_it(
    data_key_created: Synth, prod: Synth
) -> None:
    key = only(resources(data_key_created.data_json, "AWS::KMS::Key"))
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Delete"  # dev: retain_data false
    assert "AliasName" not in json.dumps(data_key_created.data_json)  # no physical names
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    principals = [flat(s["Principal"]) for s in statements]
    assert '"*"' not in json.dumps([s["Principal"] for s in statements])
    (logs,) = [s for s in statements if "Service" in s["Principal"]]
    assert flat(logs["Principal"]["Service"]) == "logs.${Ref:AWS::Region}.amazonaws.com"
    assert logs["Condition"] == {
        "ArnLike": {
            "kms:EncryptionContext:aws:logs:arn": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":logs:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        ":log-group:*",
                    ],
                ]
            }
        }
    }
    # The other statement is CDK's default: the account administers the key through IAM.
    assert len(statements) == 2 and any(":root" in p for p in principals)
    # Prod keeps its key with its data (retain_data).
    prod_context = {"env": "prod", "mapload:data_key": "create"}
    prod_key = only(
        resources(
            Template.from_stack(
                app_module.build_app(prod_context).node.find_child("Mapload-prod").data
            ).to_json(),
            "AWS::KMS::Key",
        )
    )
    assert prod_key["DeletionPolicy"] == "Retain" and prod_key["UpdateReplacePolicy"] == "Retain"
    assert prod.data_json  # the plain prod synth has no key
    assert resources(prod.data_json, "AWS::KMS::Key") == {}


def test_an_imported_key_is_not_created(data_key_imported: Synth) -> None:
    assert resources(data_key_imported.data_json, "AWS::KMS::Key") == {}


@pytest.mark.parametrize("name", VARIANTS)
def test_the_data_stack_exports_the_key_arn_by_name_and_consumers_use_no_generated_exports(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    outputs = synth.data_json["Outputs"]
    assert outputs["DataKeyArn"]["Export"] == {"Name": "Mapload-dev-Data:DataKeyArn"}
    if name == "data_key_imported":
        assert outputs["DataKeyArn"]["Value"] == DATA_KEY_ARN
    # Every export of the Data stack is one of its named outputs, none generated by CDK.
    for output_id, output in outputs.items():
        assert not output_id.startswith("ExportsOutput"), output_id
        if "Export" in output:
            assert output["Export"]["Name"] == f"Mapload-dev-Data:{output_id}"
    # The consumers import nothing: they read the Data stack's outputs (Fn::GetStackOutput).
    assert not {name for template in all_templates(synth).values() for name in import_names(template)}
    read = {pair for template in all_templates(synth).values() for pair in outputs_read(template)}
    data_reads = {output for stack, output in read if stack == "Mapload-dev-Data"}
    assert data_reads <= set(outputs)
    # A created key reaches the consumers through its output; a configured ARN is used as it is.
    assert ("DataKeyArn" in data_reads) is (name == "data_key_created")


# -- log groups -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
def test_every_log_group_uses_the_key(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    groups = {
        (template_name, logical): group
        for template_name, template in all_templates(synth).items()
        for logical, group in resources(template, "AWS::Logs::LogGroup").items()
    }
    # Eight functions and the state machine (Loader), the VPC flow logs and the S3 prefix list
    # lookup (Graph).
    assert len(groups) == 11, sorted(groups)
    for where, group in groups.items():
        assert group["Properties"]["KmsKeyId"] == key_ref(name), where


# -- grants -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
def test_each_principal_gets_the_key_only_for_what_it_does_and_only_via_s3_or_dynamodb(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    assert synth.graph is not None
    loader, graph = synth.loader_json, synth.graph.to_json()
    key = key_ref(name)
    for function, expected in EXPECTED_FUNCTION_GRANTS.items():
        assert key_grants(loader, function_role(loader, function), key) == expected, function
    # The Distributed Map's ItemReader reads the manifest and its ResultWriter writes the results;
    # the Neptune loader reads staged files.
    assert key_grants(loader, state_machine_role(loader), key) == {"s3": WRITE}
    assert key_grants(graph, neptune_loader_role(graph), key) == {"s3": READ}


@pytest.mark.parametrize("name", VARIANTS)
def test_the_neptune_cluster_stores_its_data_under_the_key(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    assert synth.graph is not None
    props = only(resources(synth.graph.to_json(), "AWS::Neptune::DBCluster"))["Properties"]
    assert props["StorageEncrypted"] is True
    assert props["KmsKeyId"] == key_ref(name)


def test_without_a_key_the_cluster_uses_neptunes_aws_managed_key(dev: Synth) -> None:
    assert dev.graph is not None
    props = only(resources(dev.graph.to_json(), "AWS::Neptune::DBCluster"))["Properties"]
    assert props["StorageEncrypted"] is True and "KmsKeyId" not in props


def test_no_key_grants_without_a_key(dev: Synth) -> None:
    assert dev.graph is not None
    for template in (dev.loader_json, dev.graph.to_json()):
        for policy in resources(template, "AWS::IAM::Policy").values():
            assert '"kms:' not in json.dumps(policy["Properties"]["PolicyDocument"]), policy


# -- scanners ---------------------------------------------------------------------------------


def checkov_skips(template: dict[str, Any], kind: str) -> set[str]:
    skipped: set[str] = set()
    for resource in resources(template, kind).values():
        for check in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            skipped.add(check["id"])
    return skipped


def test_checkov_customer_key_checks_are_acknowledged_only_without_a_key(
    dev: Synth, data_key_created: Synth
) -> None:
    assert "CKV_AWS_119" in checkov_skips(dev.data_json, "AWS::DynamoDB::Table")
    assert "CKV_AWS_158" in checkov_skips(dev.loader_json, "AWS::Logs::LogGroup")
    for template in all_templates(data_key_created).values():
        assert "CKV_AWS_119" not in checkov_skips(template, "AWS::DynamoDB::Table")
        assert "CKV_AWS_158" not in checkov_skips(template, "AWS::Logs::LogGroup")


@pytest.mark.parametrize("name", VARIANTS)
def test_cfn_lint_passes(name: str, request: pytest.FixtureRequest) -> None:
    done = cfn_lint(request.getfixturevalue(name))
    assert done.returncode == 0, done.stdout + done.stderr


# -- the pipeline's smoke test ----------------------------------------------------------------


@pytest.mark.xdist_group("pipeline")
def test_the_smoke_test_role_may_use_the_environments_key_via_s3_only(
    cdk_json: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.infra.test_pipeline import PIPELINE_BLOCK, mapload_block

    block = mapload_block(cdk_json, {**PIPELINE_BLOCK, "smoke_test_after": ["dev", "staging"]})
    block = copy.deepcopy(block)
    block["environments"]["dev"]["data_key"] = DATA_KEY_ARN
    block["environments"]["staging"]["data_key"] = "create"
    built = app_module.build_app(
        {"mapload": block, "pipeline": "true"}, outdir=str(tmp_path_factory.mktemp("pipeline_key"))
    )
    built.synth()  # cdk-nag
    stack = built.node.find_child(PIPELINE_STACK_ID)
    assert isinstance(stack, PipelineStack)
    # The key is the tested environment's own: its role (in that stage) holds the grant, by the
    # configured ARN or the Data stack's export; the pipeline's build roles hold none.
    expected = {"dev": DATA_KEY_ARN, "staging": stack_output("Mapload-staging-Data", "DataKeyArn")}
    for env, key in expected.items():
        loader = Template.from_stack(stack.stages[env].loader).to_json()
        (role,) = [k for k in resources(loader, "AWS::IAM::Role") if "SmokeTest" in k]
        assert key_grants(loader, role, key) == {"s3": WRITE}, env
    pipeline = json.dumps(Template.from_stack(stack).to_json())
    assert DATA_KEY_ARN not in pipeline and "Mapload-staging-Data:DataKeyArn" not in pipeline
