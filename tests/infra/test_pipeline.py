"""The promotion pipeline (-c pipeline=true): stage order, approval, smoke test, config errors.

Synthesized without Docker (bundling skipped, as everywhere in the tests) and with cdk-nag: the
fixture's `app.synth()` raises on any unacknowledged finding.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

import app as app_module
from stacks.pipeline import PIPELINE_STACK_ID, PipelineStack
from stacks.pipeline_settings import load_pipeline
from stacks.settings import MaploadConfigError
from tests.infra.support import ROOT, grants, only, resources, stack_output

# One worker synthesizes the pipeline once (a module fixture would run once per xdist worker).
pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("pipeline")]

PIPELINE_ACCOUNT = "111111111111"
# Staging in its own account: the case the smoke test must pass (promotion across accounts).
STAGING_ACCOUNT = "222222222222"
PROD_ACCOUNT = "333333333333"
ACCOUNTS = {"dev": PIPELINE_ACCOUNT, "staging": STAGING_ACCOUNT, "prod": PROD_ACCOUNT}
REGION = "eu-west-2"
CONNECTION = (
    f"arn:aws:codeconnections:{REGION}:{PIPELINE_ACCOUNT}:connection/0a1b2c3d-1111-2222-3333-444455556666"
)
STAGING_ORDERS = f"arn:aws:dynamodb:{REGION}:{STAGING_ACCOUNT}:table/orders"
PIPELINE_BLOCK = {
    "account": PIPELINE_ACCOUNT,
    "region": REGION,
    "connection_arn": CONNECTION,
    "repository": "example-org/mapload",
    "branch": "release",
}


def mapload_block(cdk_json: dict[str, Any], pipeline: dict[str, Any] | None = None) -> dict[str, Any]:
    block = copy.deepcopy(cdk_json["context"]["mapload"])
    block["pipeline"] = {
        **block.get("pipeline", {}),
        **(pipeline if pipeline is not None else PIPELINE_BLOCK),
    }
    for name, env in block["environments"].items():
        env["account"] = ACCOUNTS[name]
        env["region"] = REGION
    # Each stage carries its own `tables`: staging may load an orders table, by its ARN.
    block["environments"]["staging"]["tables"] = [STAGING_ORDERS]
    return block


@pytest.fixture(scope="module")
def pipeline(cdk_json: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> PipelineStack:
    built = app_module.build_app(
        {"mapload": mapload_block(cdk_json), "pipeline": "true"},
        outdir=str(tmp_path_factory.mktemp("pipeline")),
    )
    built.synth()  # cdk-nag runs here and raises on any unacknowledged finding
    stack = built.node.find_child(PIPELINE_STACK_ID)
    assert isinstance(stack, PipelineStack)
    return stack


@pytest.fixture(scope="module")
def template(pipeline: PipelineStack) -> dict[str, Any]:
    return dict(Template.from_stack(pipeline).to_json())


def stages(template: dict[str, Any]) -> list[dict[str, Any]]:
    codepipeline = only(resources(template, "AWS::CodePipeline::Pipeline"))["Properties"]
    assert codepipeline["PipelineType"] == "V2"
    return list(codepipeline["Stages"])


def stage(template: dict[str, Any], name: str) -> list[dict[str, Any]]:
    found = [s for s in stages(template) if s["Name"] == name]
    assert len(found) == 1, [s["Name"] for s in stages(template)]
    return sorted(found[0]["Actions"], key=lambda action: action["RunOrder"])


def test_stages_run_source_build_self_update_then_dev_staging_prod(template: dict[str, Any]) -> None:
    names = [s["Name"] for s in stages(template)]
    assert names[:3] == ["Source", "Build", "UpdatePipeline"]
    deploys = [name for name in names if name.startswith("Mapload-")]
    assert deploys == ["Mapload-dev", "Mapload-staging", "Mapload-prod"]
    assert names.index("UpdatePipeline") < names.index("Mapload-dev")


def test_source_is_the_configured_connection_repository_and_branch(template: dict[str, Any]) -> None:
    (action,) = stage(template, "Source")
    assert action["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    assert action["Configuration"]["ConnectionArn"] == CONNECTION
    assert action["Configuration"]["FullRepositoryId"] == "example-org/mapload"
    assert action["Configuration"]["BranchName"] == "release"


def test_synth_bundles_the_lambda_packages_without_docker(template: dict[str, Any]) -> None:
    projects = resources(template, "AWS::CodeBuild::Project")
    synth = only({k: v for k, v in projects.items() if "Synth" in k})["Properties"]
    # No Docker daemon (privileged mode) and no emulation: pip fetches the Lambda platform's wheels.
    assert synth["Environment"].get("PrivilegedMode") in (None, False)
    assert synth["Environment"]["Type"] == "LINUX_CONTAINER"  # x86_64 CodeBuild builds arm64 too
    spec = synth["Source"]["BuildSpec"]
    assert "node_modules/.bin/cdk synth -c pipeline=true" in spec
    assert ".venv/bin/pip install --quiet -r requirements.txt -c constraints.txt" in spec
    assert "docker" not in spec.lower() and "qemu" not in spec.lower() and "CDK_BUNDLE" not in spec


def test_prod_waits_for_a_manual_approval_before_anything_deploys(template: dict[str, Any]) -> None:
    actions = stage(template, "Mapload-prod")
    first, rest = actions[0], actions[1:]
    assert first["ActionTypeId"] == {
        "Category": "Approval",
        "Owner": "AWS",
        "Provider": "Manual",
        "Version": "1",
    }
    assert first["Name"] == "PromoteToProd"
    assert rest and all(a["ActionTypeId"]["Category"] == "Deploy" for a in rest)
    assert all(a["RunOrder"] > first["RunOrder"] for a in rest)
    for name in ("Mapload-dev", "Mapload-staging"):
        assert all(a["ActionTypeId"]["Category"] != "Approval" for a in stage(template, name)), name


def test_each_environment_deploys_to_its_own_account(template: dict[str, Any]) -> None:
    for name, account in (
        ("Mapload-dev", PIPELINE_ACCOUNT),
        ("Mapload-staging", STAGING_ACCOUNT),
        ("Mapload-prod", PROD_ACCOUNT),
    ):
        deploys = [a for a in stage(template, name) if a["ActionTypeId"]["Category"] == "Deploy"]
        stack_names = {a["Configuration"]["StackName"] for a in deploys}
        assert {f"{name}-Data", f"{name}-Loader"} <= stack_names
        for action in deploys:
            assert f":{account}:role/cdk-" in json.dumps(action["RoleArn"]), (name, action["Name"])
    # Cross-account deploys need the artifact bucket's customer key, rotated.
    key = only(resources(template, "AWS::KMS::Key"))["Properties"]
    assert key["EnableKeyRotation"] is True


def test_prod_stacks_are_termination_protected_and_dev_stacks_are_not(pipeline: PipelineStack) -> None:
    assert pipeline.termination_protection
    for stack in (pipeline.stages["prod"].data, pipeline.stages["prod"].loader):
        assert stack.termination_protection, stack.stack_name
    for stack in (pipeline.stages["dev"].data, pipeline.stages["dev"].loader):
        assert not stack.termination_protection, stack.stack_name
    prod_data = Template.from_stack(pipeline.stages["prod"].data).to_json()
    assert {r.get("DeletionPolicy") for r in resources(prod_data, "AWS::DynamoDB::Table").values()} == {
        "Retain"
    }
    dev_data = Template.from_stack(pipeline.stages["dev"].data).to_json()
    assert {r.get("DeletionPolicy") for r in resources(dev_data, "AWS::DynamoDB::Table").values()} == {
        "Delete"
    }


def test_each_stage_carries_its_own_tables(pipeline: PipelineStack) -> None:
    for name, tables in (("dev", ""), ("staging", "orders"), ("prod", "")):
        loader = Template.from_stack(pipeline.stages[name].loader).to_json()
        plans = [
            fn["Properties"]["Environment"]["Variables"]
            for fn in resources(loader, "AWS::Lambda::Function").values()
            if fn["Properties"]["Handler"] == "handlers.plan.lambda_handler"
        ]
        assert [variables["TABLES"] for variables in plans] == [tables], name
    staging = Template.from_stack(pipeline.stages["staging"].loader).to_json()
    statements = [
        statement
        for policy in resources(staging, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert sorted(a for a, r in grants(statements) if r == STAGING_ORDERS) == [
        "dynamodb:BatchWriteItem",
        "dynamodb:DescribeTable",
        "dynamodb:PartiQLInsert",
        "dynamodb:PutItem",
        "dynamodb:StartBulkPutItems",  # StartBulkPut: a bulkPutItems job naming the table
        "dynamodb:UpdateItem",
    ]


def test_a_stage_whose_tables_name_a_table_in_another_account_is_refused(cdk_json: dict[str, Any]) -> None:
    block = mapload_block(cdk_json)
    block["environments"]["prod"]["tables"] = [STAGING_ORDERS]  # staging's account, not prod's
    with pytest.raises(
        MaploadConfigError,
        match=rf"^mapload\.environments\.prod\.tables: {STAGING_ORDERS}: names a table in account "
        rf"{STAGING_ACCOUNT}, but the environment deploys to account {PROD_ACCOUNT}",
    ):
        app_module.build_app({"mapload": block, "pipeline": "true"})


def test_smoke_test_runs_after_staging_deploys_and_runs_mapload_start(template: dict[str, Any]) -> None:
    actions = stage(template, "Mapload-staging")
    smoke = actions[-1]
    assert smoke["Name"] == "SmokeTestStaging"
    assert smoke["ActionTypeId"]["Provider"] == "CodeBuild"
    assert all(a["RunOrder"] < smoke["RunOrder"] for a in actions[:-1])
    assert [a["Name"] for a in actions[:-1] if a["Name"].endswith("Loader.Deploy")]
    # Its input is the source checkout (the mapload command and the example spec).
    (source,) = stage(template, "Source")
    assert smoke["InputArtifacts"] == [{"Name": source["OutputArtifacts"][0]["Name"]}]
    project_id = smoke["Configuration"]["ProjectName"]["Ref"]
    project = template["Resources"][project_id]["Properties"]
    spec = json.loads(project["Source"]["BuildSpec"])
    commands = " && ".join(spec["phases"]["build"]["commands"])
    assert "mapload sample smoke.csv --rows 2000" in commands
    assert (
        f".venv/bin/mapload start --env staging --region {REGION} smoke.csv --key-prefix smoke/" in commands
    )
    assert "--spec examples/postcodes.spec.json" in commands
    assert project["Environment"]["PrivilegedMode"] is False
    assert Path(app_module.ROOT / "examples" / "postcodes.spec.json").is_file()
    for name in ("Mapload-dev", "Mapload-prod"):
        assert "SmokeTest" not in json.dumps(stage(template, name)), name


SMOKE_ROLE = f"arn:aws:iam::{STAGING_ACCOUNT}:role/mapload-staging-{REGION}-smoke"
SMOKE_BUILD_ROLE = f"arn:aws:iam::{PIPELINE_ACCOUNT}:role/mapload-staging-{REGION}-smoke-build"


def smoke_project(template: dict[str, Any]) -> dict[str, Any]:
    project_id = stage(template, "Mapload-staging")[-1]["Configuration"]["ProjectName"]["Ref"]
    return dict(template["Resources"][project_id]["Properties"])


def role_statements(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_smoke_test_runs_mapload_start_as_the_role_the_staged_environment_created(
    template: dict[str, Any],
) -> None:
    # CloudFormation and Step Functions have no resource policies: in staging's own account only
    # a role of that account can DescribeStacks, StartExecution and DescribeExecution there.
    project = smoke_project(template)
    variables = {v["Name"]: v["Value"] for v in project["Environment"]["EnvironmentVariables"]}
    assert flat_arn(variables["MAPLOAD_SMOKE_ROLE_ARN"]) == SMOKE_ROLE
    commands = json.loads(project["Source"]["BuildSpec"])["phases"]["build"]["commands"]
    assert 'aws configure set profile.mapload-smoke.role_arn "$MAPLOAD_SMOKE_ROLE_ARN"' in commands
    assert "aws configure set profile.mapload-smoke.credential_source EcsContainer" in commands
    (start,) = [c for c in commands if "mapload start" in c]
    assert start.startswith("AWS_PROFILE=mapload-smoke .venv/bin/mapload start --env staging")
    # The build role is the one the staged role trusts, and may only assume that role.
    role_id = project["ServiceRole"]["Fn::GetAtt"][0]
    assert template["Resources"][role_id]["Properties"]["RoleName"] == SMOKE_BUILD_ROLE.rsplit("/", 1)[1]
    statements = role_statements(template, role_id)
    ours = {s["Sid"]: s for s in statements if "Sid" in s}
    assert {sid: (s["Action"], flat_arn(s["Resource"])) for sid, s in ours.items()} == {
        "AssumeSmokeTestRole": ("sts:AssumeRole", SMOKE_ROLE)
    }
    actions_granted = json.dumps([s["Action"] for s in statements])
    # (Its other grants are CDK Pipelines': logs, reports, the artifact bucket and its key.)
    for forbidden in ("cloudformation:", "states:", "dynamodb:"):
        assert forbidden not in actions_granted, forbidden


def flat_arn(node: Any) -> str:
    """An ARN built with the partition token, as text with `aws` in its place."""
    if isinstance(node, dict) and "Fn::Join" in node:
        return "".join(
            "aws" if part == {"Ref": "AWS::Partition"} else flat_arn(part) for part in node["Fn::Join"][1]
        )
    assert isinstance(node, str), node
    return node


def test_the_staged_environment_creates_the_smoke_role_trusting_only_the_pipelines_build_role(
    pipeline: PipelineStack,
) -> None:
    loader = Template.from_stack(pipeline.stages["staging"].loader).to_json()
    (role_id, role) = only_item(
        {k: v for k, v in resources(loader, "AWS::IAM::Role").items() if "SmokeTest" in k}
    )
    props = role["Properties"]
    assert props["RoleName"] == SMOKE_ROLE.rsplit("/", 1)[1]
    (trust,) = props["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRole"
    assert flat_arn(trust["Principal"]["AWS"]) == f"arn:aws:iam::{PIPELINE_ACCOUNT}:root"
    assert trust["Condition"] == {"ArnEquals": {"aws:PrincipalArn": SMOKE_BUILD_ROLE}}
    ours = {s["Sid"]: s for s in role_statements(loader, role_id)}
    machine = only_item(resources(loader, "AWS::StepFunctions::StateMachine"))[0]
    name = {"Fn::GetAtt": [machine, "Name"]}
    scope = f"{REGION}:{STAGING_ACCOUNT}"

    def states(kind: str, tail: str) -> str:
        return json.dumps({"Fn::Join": ["", [f"arn:aws:states:{scope}:{kind}:", name, tail]]})

    assert {sid: s["Action"] for sid, s in ours.items()} == {
        "ReadStackOutputs": "cloudformation:DescribeStacks",
        "UploadSample": "s3:PutObject",
        "ReadReport": "s3:GetObject",
        "StartExecution": "states:StartExecution",
        "WatchExecution": ["states:DescribeExecution", "states:ListMapRuns"],
        "WatchMapRun": "states:DescribeMapRun",
    }
    # This environment's own resources: its two stacks, its buckets (by their exports), its machine.
    assert ours["ReadStackOutputs"]["Resource"] == [
        f"arn:aws:cloudformation:{scope}:stack/Mapload-staging-{stack_id}/*"
        for stack_id in ("Data", "Loader")
    ]
    assert json.dumps(ours["UploadSample"]["Resource"]) == json.dumps(
        {"Fn::Join": ["", [stack_output("Mapload-staging-Data", "SourceBucketArn"), "/smoke/*"]]}
    )
    assert json.dumps(ours["ReadReport"]["Resource"]) == json.dumps(
        {
            "Fn::Join": [
                "",
                [stack_output("Mapload-staging-Data", "StagingBucketArn"), "/jobs/*/*/report.json"],
            ]
        }
    )
    assert ours["StartExecution"]["Resource"] == {"Ref": machine}
    assert json.dumps(ours["WatchExecution"]["Resource"]) == states("execution", ":*")
    assert json.dumps(ours["WatchMapRun"]["Resource"]) == states("mapRun", "/*")
    # Environments without a smoke test after them have no such role.
    for env in ("dev", "prod"):
        other = Template.from_stack(pipeline.stages[env].loader).to_json()
        assert not [k for k in resources(other, "AWS::IAM::Role") if "SmokeTest" in k], env


def only_item(mapping: dict[str, Any]) -> tuple[str, Any]:
    assert len(mapping) == 1, sorted(mapping)
    return next(iter(mapping.items()))


def test_the_pipeline_needs_its_source_connection_and_names_what_is_missing(cdk_json: dict[str, Any]) -> None:
    names = ["dev", "staging", "prod"]
    with pytest.raises(MaploadConfigError, match=r"^mapload\.pipeline: is required with -c pipeline=true"):
        load_pipeline({"environments": {}}, names)
    for field in ("account", "region", "connection_arn", "repository"):
        block = {"pipeline": {**PIPELINE_BLOCK, field: None}}
        with pytest.raises(
            MaploadConfigError, match=rf"^mapload\.pipeline\.{field}: is required for the pipeline"
        ):
            load_pipeline(block, names)
    with pytest.raises(MaploadConfigError, match=r"^mapload\.pipeline\.connection_arn: must be the ARN"):
        load_pipeline({"pipeline": {**PIPELINE_BLOCK, "connection_arn": "my-connection"}}, names)
    with pytest.raises(MaploadConfigError, match=r"^mapload\.pipeline\.stages: names 'qa'"):
        load_pipeline({"pipeline": {**PIPELINE_BLOCK, "stages": ["dev", "qa"]}}, names)
    with pytest.raises(
        MaploadConfigError, match=r"^mapload\.pipeline\.approval_before: names 'prod', which is not"
    ):
        load_pipeline({"pipeline": {**PIPELINE_BLOCK, "stages": ["dev", "staging"]}}, names)
    with pytest.raises(MaploadConfigError, match=r"^mapload\.pipeline\.branchh: unknown setting"):
        load_pipeline({"pipeline": {**PIPELINE_BLOCK, "branchh": "x"}}, names)
    # cdk.json as shipped: the pipeline is not configured yet, and the synth says where.
    with pytest.raises(MaploadConfigError, match=r"^mapload\.pipeline\.account: is required"):
        app_module.build_app({"pipeline": "true"})


def test_a_promoted_environment_must_name_its_account_and_region(cdk_json: dict[str, Any]) -> None:
    block = mapload_block(cdk_json)
    block["environments"]["staging"]["region"] = None
    with pytest.raises(
        MaploadConfigError, match=r"^mapload\.environments\.staging\.region: is required when"
    ):
        app_module.build_app({"mapload": block, "pipeline": "true"})


def test_under_the_cli_a_missing_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def build_app(*args: Any, **kwargs: Any) -> Any:
        raise MaploadConfigError("mapload.pipeline.account", "is required for the pipeline")

    monkeypatch.setattr(app_module, "build_app", build_app)
    assert app_module.main() == 2
    assert capsys.readouterr().err == (
        "mapload: cdk.json / -c setting: mapload.pipeline.account: is required for the pipeline\n"
    )


def test_cli_synth_of_the_pipeline_needs_no_aws_credentials(cdk_json: dict[str, Any], tmp_path: Path) -> None:
    """`npx cdk synth -c pipeline=true` with every account and region filled in, as docs/DEPLOY.md
    says, and no credentials anywhere: no context lookup (the Graph stacks' AZs come from
    Fn::GetAZs at deploy time), and every stage's Lambda package is bundled without Docker."""
    settings = copy.deepcopy(cdk_json)
    settings["context"]["mapload"] = mapload_block(cdk_json)
    settings["app"] = f"{ROOT / '.venv' / 'bin' / 'python'} {ROOT / 'app.py'}"
    (tmp_path / "cdk.json").write_text(json.dumps(settings), encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "CDK_")) and key != "HOME"
    }
    env.update(
        HOME=str(tmp_path),  # no ~/.aws either
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(tmp_path / "absent-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "absent-credentials"),
    )
    done = subprocess.run(
        [str(ROOT / "node_modules" / ".bin" / "cdk"), "synth", "-c", "pipeline=true", "-o", "out", "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Need to perform AWS calls" not in done.stderr
    assert not (tmp_path / "cdk.context.json").exists()  # nothing was looked up
    # Each stage's Loader stack got a built package (sizes printed), never runtime/ as is.
    for name in ("dev", "staging", "prod"):
        assert re.search(rf"Mapload-Pipeline/Mapload-{name}/Loader Lambda package asset\.\w+: ", done.stderr)
    graph = json.loads(
        next(
            (tmp_path / "out").glob("assembly-Mapload-Pipeline-Mapload-prod/*Graph*.template.json")
        ).read_text()
    )
    zones = [r["Properties"]["AvailabilityZone"] for r in resources(graph, "AWS::EC2::Subnet").values()]
    assert zones == [{"Fn::Select": [i, {"Fn::GetAZs": ""}]} for i in range(2)]
