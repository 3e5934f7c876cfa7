"""The Graph stack (VPC, Neptune, loader role, security groups), the graph-load functions and the
Wait/Poll/Choice loop, read back from the synthesized templates; cfn-lint on every template."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from logic import compression, layout
from stacks.data import STAGING_GRAPH_EDGE_FILES, STAGING_GRAPH_ID_FILES, STAGING_REPORTS
from tests.infra.support import (
    DEV_CONTEXT,
    Synth,
    cfn_lint,
    flat,
    grants,
    only,
    policy_statements,
    resources,
    synthesize,
)
from tests.infra.test_state_machine import (
    LAMBDA_ERRORS,
    THROTTLE_RETRIER,
    definition,
    lambda_retriers,
    longest_wait_seconds,
    retrier,
)

pytestmark = pytest.mark.infra

GRAPH_IMPORT = "${Output:Mapload-dev-Graph:"
STAGING_ARN = "${Output:Mapload-dev-Data:StagingBucketArn}"


def graph_json(synth: Synth) -> dict[str, Any]:
    assert synth.graph is not None, "this environment has no Graph stack"
    return dict(synth.graph.to_json())


def cluster(synth: Synth) -> dict[str, Any]:
    return dict(only(resources(graph_json(synth), "AWS::Neptune::DBCluster")))


def loader_function(synth: Synth, name: str) -> tuple[str, dict[str, Any]]:
    for logical, fn in resources(synth.loader_json, "AWS::Lambda::Function").items():
        if fn["Properties"]["Handler"] == f"handlers.{name}.lambda_handler":
            return logical, fn
    raise AssertionError(f"no function with handler {name}")


def arn_of(synth: Synth, name: str) -> str:
    return "${GetAtt:" + loader_function(synth, name)[0] + ".Arn}"


def test_vpc_has_isolated_subnets_in_two_azs_and_gateway_endpoints(dev: Synth) -> None:
    template = graph_json(dev)
    subnets = resources(template, "AWS::EC2::Subnet")
    assert len(subnets) == 2
    zones = {json.dumps(s["Properties"]["AvailabilityZone"], sort_keys=True) for s in subnets.values()}
    assert len(zones) == 2
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())
    for kind in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::EIP"):
        assert not resources(template, kind), kind
    endpoints = {
        flat(e["Properties"]["ServiceName"]).rsplit(".", 1)[-1]: e["Properties"]
        for e in resources(template, "AWS::EC2::VPCEndpoint").values()
    }
    assert set(endpoints) == {"s3", "dynamodb"}
    assert {e["VpcEndpointType"] for e in endpoints.values()} == {"Gateway"}
    # Every isolated subnet's route table reaches S3 (the Neptune loader reads through it).
    assert len(endpoints["s3"]["RouteTableIds"]) == 2
    flow = only(resources(template, "AWS::EC2::FlowLog"))["Properties"]
    assert flow["ResourceType"] == "VPC"


def test_by_default_the_subnets_are_in_the_regions_first_two_azs_picked_at_deploy(dev: Synth) -> None:
    zones = sorted(
        json.dumps(s["Properties"]["AvailabilityZone"], sort_keys=True)
        for s in resources(graph_json(dev), "AWS::EC2::Subnet").values()
    )
    assert zones == [json.dumps({"Fn::Select": [i, {"Fn::GetAZs": ""}]}, sort_keys=True) for i in (0, 1)]


ZONES = ("eu-west-2a", "eu-west-2c")


@pytest.fixture(scope="module")
def chosen_zones(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    context = {**DEV_CONTEXT, "mapload:graph_availability_zones": ",".join(ZONES)}
    return synthesize(context, tmp_path_factory.mktemp("zones"))


def test_the_subnets_azs_are_a_setting_and_the_graph_functions_run_in_them(chosen_zones: Synth) -> None:
    # Lambda refuses some AZ ids in some regions (a function's VPC subnet there fails to create):
    # graph_availability_zones picks the VPC's AZs; the cluster and the functions use its subnets.
    subnets = resources(graph_json(chosen_zones), "AWS::EC2::Subnet")
    assert sorted(s["Properties"]["AvailabilityZone"] for s in subnets.values()) == list(ZONES)
    subnet_group = only(resources(graph_json(chosen_zones), "AWS::Neptune::DBSubnetGroup"))
    assert len(subnet_group["Properties"]["SubnetIds"]) == len(ZONES)
    _, start = loader_function(chosen_zones, "start_graph_load")
    assert len(start["Properties"]["VpcConfig"]["SubnetIds"]) == len(ZONES)


def test_the_azs_setting_is_refused_unless_two_or_more_distinct_zones_of_the_region() -> None:
    from stacks.config import load_environment
    from stacks.settings import MaploadConfigError

    block = {"environments": {"dev": {"region": "eu-west-2", "graph_enabled": True}}}
    assert load_environment(block, "dev").graph.availability_zones == ()  # type: ignore[union-attr]
    chosen = load_environment(block, "dev", {"graph_availability_zones": "eu-west-2b, eu-west-2c"})
    assert chosen.graph.availability_zones == ("eu-west-2b", "eu-west-2c")  # type: ignore[union-attr]
    for zones in ("eu-west-2a", "eu-west-2a,eu-west-2a", "us-east-1a,us-east-1b", "euw2-az1,euw2-az2"):
        with pytest.raises(MaploadConfigError) as caught:
            load_environment(block, "dev", {"graph_availability_zones": zones})
        assert "graph_availability_zones" in caught.value.field, caught.value


def test_cluster_is_iam_authenticated_encrypted_backed_up_and_audited(dev: Synth) -> None:
    props = cluster(dev)["Properties"]
    assert props["IamAuthEnabled"] is True
    assert props["StorageEncrypted"] is True
    assert props["BackupRetentionPeriod"] == 7
    assert props["EnableCloudwatchLogsExports"] == ["audit"]
    assert props["DBPort"] == 8182
    assert props["DeletionProtection"] is False
    assert props["ServerlessScalingConfiguration"] == {"MinCapacity": 1, "MaxCapacity": 8}
    parameters = only(resources(graph_json(dev), "AWS::Neptune::DBClusterParameterGroup"))["Properties"]
    # The audit log export is empty unless the engine writes the audit log.
    assert parameters["Parameters"] == {"neptune_enable_audit_log": 1}
    assert parameters["Family"] == "neptune1.4"
    assert props["DBClusterParameterGroupName"] == {
        "Ref": only({k: k for k in resources(graph_json(dev), "AWS::Neptune::DBClusterParameterGroup")})
    }
    instance = only(resources(graph_json(dev), "AWS::Neptune::DBInstance"))["Properties"]
    assert instance["DBInstanceClass"] == "db.serverless"
    assert instance["AutoMinorVersionUpgrade"] is True


def test_prod_cluster_is_protected_retained_and_has_a_second_instance(prod: Synth) -> None:
    resource = cluster(prod)
    assert resource["Properties"]["DeletionProtection"] is True
    assert resource["DeletionPolicy"] == "Snapshot"
    assert resource["Properties"]["BackupRetentionPeriod"] == 35
    assert len(resources(graph_json(prod), "AWS::Neptune::DBInstance")) == 2
    assert prod.stage.graph is not None and prod.stage.graph.termination_protection


def test_loader_role_is_trusted_by_rds_reads_only_the_graph_prefix_and_is_associated(dev: Synth) -> None:
    template = graph_json(dev)
    roles = {k: v for k, v in resources(template, "AWS::IAM::Role").items() if "LoaderRole" in k}
    logical, role = next(iter(roles.items()))
    assert len(roles) == 1
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "rds.amazonaws.com"}]
    assert "ManagedPolicyArns" not in role["Properties"]
    statements = policy_statements(template, logical)
    assert grants(statements) == {
        ("s3:GetObject", f"{STAGING_ARN}/jobs/*/graph/*"),
        ("s3:ListBucket", STAGING_ARN),
    }
    # Neptune's documentation (checked 2026-12-02): the loader role needs "Read and List access to
    # the bucket" (User Guide, "Using the Amazon Neptune bulk loader to ingest data", step 2), and
    # Neptune's S3 policies state "s3:ListBucket: Required to verify bucket existence and list
    # contents" on the bucket ARN. Checking that a bucket exists (HeadBucket) is a ListBucket with
    # no prefix, which an s3:prefix condition refuses: the listing is unconditioned. No page asks
    # for s3:GetBucketLocation (the load request names the region), so it is not granted.
    listing = next(s for s in statements if s["Action"] == "s3:ListBucket")
    assert "Condition" not in listing
    assert cluster(dev)["Properties"]["AssociatedRoles"] == [{"RoleArn": {"Fn::GetAtt": [logical, "Arn"]}}]


def test_only_the_loader_control_group_reaches_port_8182(dev: Synth) -> None:
    template = graph_json(dev)
    groups = resources(template, "AWS::EC2::SecurityGroup")
    database = next(k for k in groups if "DatabaseSecurityGroup" in k)
    control = next(k for k in groups if "LoaderControlSecurityGroup" in k)
    assert cluster(dev)["Properties"]["VpcSecurityGroupIds"] == [{"Fn::GetAtt": [database, "GroupId"]}]
    database_id = {"Fn::GetAtt": [database, "GroupId"]}
    ingress = [g["Properties"] for g in resources(template, "AWS::EC2::SecurityGroupIngress").values()]
    assert ingress == [
        {
            "Description": "Neptune loader API from the loader-control functions",
            "FromPort": 8182,
            "ToPort": 8182,
            "IpProtocol": "tcp",
            "GroupId": {"Fn::GetAtt": [database, "GroupId"]},
            "SourceSecurityGroupId": {"Fn::GetAtt": [control, "GroupId"]},
        }
    ]
    for group in groups.values():
        assert "SecurityGroupIngress" not in group["Properties"]
    # The database reaches only S3 (the bulk loader, through the gateway endpoint); the functions
    # only Neptune and HTTPS.
    assert "SecurityGroupEgress" not in groups[database]["Properties"]
    egress = [e["Properties"] for e in resources(template, "AWS::EC2::SecurityGroupEgress").values()]
    assert [
        (e["FromPort"], e["DestinationSecurityGroupId"]) for e in egress if e["GroupId"] != database_id
    ] == [(8182, {"Fn::GetAtt": [database, "GroupId"]})]
    assert [(e["FromPort"], e["ToPort"]) for e in groups[control]["Properties"]["SecurityGroupEgress"]] == [
        (443, 443)
    ]


def test_the_cluster_may_reach_s3_on_443_through_the_prefix_list_and_nothing_else(dev: Synth) -> None:
    """The bulk loader reads S3 from the cluster's interfaces (through the gateway endpoint); without
    this rule it answers HTTP 500 "Unable to connect to S3 endpoint"."""
    template = graph_json(dev)
    groups = resources(template, "AWS::EC2::SecurityGroup")
    database = next(k for k in groups if "DatabaseSecurityGroup" in k)
    egress = [
        e["Properties"]
        for e in resources(template, "AWS::EC2::SecurityGroupEgress").values()
        if e["Properties"]["GroupId"] == {"Fn::GetAtt": [database, "GroupId"]}
    ]
    lookups = resources(template, "Custom::AWS")
    [lookup] = [
        k for k, v in lookups.items() if "describeManagedPrefixLists" in flat(v["Properties"]["Create"])
    ]
    assert egress == [
        {
            "Description": "Neptune bulk loader to S3 through the gateway endpoint",
            "IpProtocol": "tcp",
            "FromPort": 443,
            "ToPort": 443,
            "GroupId": {"Fn::GetAtt": [database, "GroupId"]},
            "DestinationPrefixListId": {"Fn::GetAtt": [lookup, "PrefixLists.0.PrefixListId"]},
        }
    ]
    # The id is looked up when CloudFormation deploys, in the stack's own region: no synth-time
    # credentials or context, no table of ids per region.
    call = json.loads(flat(lookups[lookup]["Properties"]["Create"]))
    assert call["service"] == "EC2" and call["action"] == "describeManagedPrefixLists"
    assert call["parameters"] == {
        "Filters": [{"Name": "prefix-list-name", "Values": ["com.amazonaws.${Ref:AWS::Region}.s3"]}]
    }
    assert lookups[lookup]["Properties"]["Update"] == lookups[lookup]["Properties"]["Create"]
    assert lookups[lookup]["Properties"]["InstallLatestAwsSdk"] is False
    # Its function may make that one read-only call and write its own log group, nothing more.
    [provider] = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "index.handler"
    ]
    role = provider["Properties"]["Role"]["Fn::GetAtt"][0]
    actions = {a for a, _ in grants(policy_statements(template, role))}
    assert actions == {"ec2:DescribeManagedPrefixLists", "logs:CreateLogStream", "logs:PutLogEvents"}
    assert "ManagedPolicyArns" not in template["Resources"][role]["Properties"]


def test_graph_functions_run_in_the_vpc_with_exactly_the_loader_actions(dev: Synth) -> None:
    account = "${Ref:AWS::Partition}:neptune-db:${Ref:AWS::Region}:${Ref:AWS::AccountId}"
    neptune = f"arn:{account}:{GRAPH_IMPORT}GraphClusterResourceId}}/*"
    expected = {
        "start_graph_load": {
            ("neptune-db:StartLoaderJob", neptune),
            ("neptune-db:ListLoaderJobs", neptune),
            ("neptune-db:GetLoaderJobStatus", neptune),
            # The edge endpoint check's one read-only openCypher query.
            ("neptune-db:ReadDataViaQuery", neptune),
        },
        "poll_graph_load": {
            ("neptune-db:GetLoaderJobStatus", neptune),
            ("neptune-db:CancelLoaderJob", neptune),
        },
    }
    for name, neptune_grants in expected.items():
        _, fn = loader_function(dev, name)
        props = fn["Properties"]
        vpc = props["VpcConfig"]
        assert len(vpc["SubnetIds"]) == 2
        assert len(vpc["SecurityGroupIds"]) == 1
        assert "LoaderControlSecurityGroup" in flat(vpc["SecurityGroupIds"][0])
        variables = props["Environment"]["Variables"]
        assert flat(variables["NEPTUNE_ENDPOINT"]) == GRAPH_IMPORT + "GraphClusterEndpoint}"
        assert flat(variables["NEPTUNE_PORT"]) == GRAPH_IMPORT + "GraphClusterPort}"
        role = props["Role"]["Fn::GetAtt"][0]
        pairs = grants(policy_statements(dev.loader_json, role))
        assert {p for p in pairs if p[0].startswith("neptune-db:")} == neptune_grants
        assert "ManagedPolicyArns" not in dev.loader_json["Resources"][role]["Properties"]
    start_env = loader_function(dev, "start_graph_load")[1]["Properties"]["Environment"]["Variables"]
    assert flat(start_env["LOADER_ROLE_ARN"]) == GRAPH_IMPORT + "GraphLoaderRoleArn}"
    # Poll finishes the report and closes the job; Start records the load id once.
    poll_role = loader_function(dev, "poll_graph_load")[1]["Properties"]["Role"]["Fn::GetAtt"][0]
    poll = grants(policy_statements(dev.loader_json, poll_role))
    # Poll writes the run's report (one PutObject), nothing else in staging.
    assert {p for p in poll if p[0].startswith("s3:")} == {
        ("s3:PutObject", f"{STAGING_ARN}/jobs/*/*/report.json")
    }
    assert {a for a, _ in poll if a.startswith("dynamodb:")} == {"dynamodb:UpdateItem"}
    start_role = loader_function(dev, "start_graph_load")[1]["Properties"]["Role"]["Fn::GetAtt"][0]
    start = grants(policy_statements(dev.loader_json, start_role))
    # The query in openCypher only (Neptune's neptune-db:QueryLanguage); the loader actions, whose
    # requests carry no query language, in a statement without the condition.
    neptune_statements = [
        s for s in policy_statements(dev.loader_json, start_role) if "neptune-db:" in json.dumps(s["Action"])
    ]
    assert [(s["Action"], s.get("Condition")) for s in neptune_statements] == [
        (["neptune-db:GetLoaderJobStatus", "neptune-db:ListLoaderJobs", "neptune-db:StartLoaderJob"], None),
        ("neptune-db:ReadDataViaQuery", {"StringEquals": {"neptune-db:QueryLanguage": "OpenCypher"}}),
    ]
    # Start claims the job (GetItem/PutItem) and records the load id (UpdateItem).
    assert {a for a, _ in start if a.startswith("dynamodb:")} == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    }
    # The edge endpoint check reads the shards' id and edge files, nothing else; it writes nothing.
    assert {p for p in start if p[0].startswith("s3:")} == {
        ("s3:GetObject", f"{STAGING_ARN}/jobs/*/*/graph-ids/*"),
        ("s3:GetObject", f"{STAGING_ARN}/jobs/*/*/graph/edges/*"),
    }


def iam_matches(pattern: str, key: str) -> bool:
    """IAM's resource wildcard: `*` is any run of characters, slashes included."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), key) is not None


def test_the_endpoint_checks_read_grant_is_exactly_the_id_and_edge_files_layout_makes() -> None:
    """StartGraphLoad's s3:GetObject patterns (stacks/data.py) against runtime/logic/layout.py: every
    key check_edges reads matches one, no other key a job writes to staging matches any."""
    patterns = (STAGING_GRAPH_ID_FILES, STAGING_GRAPH_EDGE_FILES)
    job, plan, run = "people-2024.v1_a", "people-20240101T000000-a1b2c3", "people-20240102T000000-d4e5f6"
    read = [
        *layout.graph_ids_keys(job, plan, 7),
        layout.property_graph_keys(job, plan, 7, compressed=False)[1],
        layout.property_graph_keys(job, plan, 123456, compressed=True)[1],
    ]
    for key in read:
        assert sum(iam_matches(p, key) for p in patterns) == 1, key
    not_read = [
        layout.manifest_key(job, run),
        layout.shard_rejects_key(job, run, 7),
        layout.rejects_key(job, run),
        layout.report_key(job, run),
        layout.map_results_prefix(job, run) + "/map-run/manifest.json",
        layout.map_results_prefix(job, run) + "/map-run/SUCCEEDED_0.json",
        layout.property_graph_keys(job, plan, 7, compressed=True)[0],
        layout.graph_file_key(job, plan, 7, compressed=True),
        compression.prepared_key(job, run, 0, "people.csv"),
        compression.prepared_list_key(job, run),
    ]
    for key in not_read:
        assert not any(iam_matches(p, key) for p in patterns), key


def test_start_wait_poll_choice_loop(dev: Synth) -> None:
    states = definition(dev)["States"]
    start = states["StartGraphLoad"]
    assert start["Parameters"]["FunctionName"] == arn_of(dev, "start_graph_load")
    assert start["Parameters"]["Payload"]["job.$"] == "$.plan.job"
    # Into the result Poll is given and returns: the first poll moves the edge endpoint check into
    # the report, so the state never holds it twice (tests/infra/test_state_payloads.py).
    assert start["ResultPath"] == "$.result.load"
    # The first poll right after the start; GraphWait only between polls.
    assert start["Next"] == "PollGraphLoad"
    # A full loader queue (64 loads) waits for hours, 5 minutes apart at most, not ~1.5 minutes.
    busy = {**retrier(["GraphLoaderBusyError"], 60), "MaxDelaySeconds": 300}
    # Neptune applies IAM changes within up to 10 minutes: a 403 right after a deploy is retried,
    # a minute apart, for more than 10 minutes and no longer (then it is a real misconfiguration).
    iam_pending = {
        "ErrorEquals": ["GraphLoaderAccessDeniedError"],
        "IntervalSeconds": 60,
        "MaxAttempts": 11,
        "BackoffRate": 1,
    }
    assert start["Retry"] == [*lambda_retriers(), busy, iam_pending]
    assert longest_wait_seconds(busy) >= 4 * 3600
    assert 600 < iam_pending["IntervalSeconds"] * iam_pending["MaxAttempts"] <= 900
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.graphError", "Next": "GraphLoadError"}]
    assert start["Catch"] == catch
    # Wait seconds come from the last poll: graph.pollSeconds, growing with the load's age
    # (runtime/logic/polling.py), so the loop fits the execution history.
    assert states["GraphWait"] == {
        "Type": "Wait",
        "SecondsPath": "$.result.waitSeconds",
        "Next": "PollGraphLoad",
    }
    poll = states["PollGraphLoad"]
    assert poll["Parameters"]["FunctionName"] == arn_of(dev, "poll_graph_load")
    assert poll["Parameters"]["Payload"] == {"result.$": "$.result"}
    assert poll["ResultPath"] == "$.result"
    assert poll["ResultSelector"]["load.$"] == "$.Payload.load"  # the load, poll to poll
    assert poll["Catch"] == catch
    # Inside the loop every retry is paid each round: few, so a round stays within the history
    # budget (tests/infra/test_history.py); GraphLoadError, run once, keeps the full retries.
    assert poll["Retry"] == [
        retrier(LAMBDA_ERRORS, 6),
        {**THROTTLE_RETRIER, "MaxAttempts": 4},
        {**retrier(["GraphLoaderBusyError"], 3), "MaxDelaySeconds": 300},
    ]
    assert poll["Next"] == "GraphLoaded"
    assert states["GraphLoaded"] == {
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.result.pending", "BooleanEquals": True, "Next": "GraphWait"},
            {"Variable": "$.result.status", "StringEquals": "SUCCEEDED", "Next": "Succeeded"},
        ],
        "Default": "Failed",
    }
    # A start or poll that failed for good still finishes the report, then fails the execution.
    assert states["GraphLoadError"]["Parameters"]["Payload"] == {
        "error.$": "$.graphError",
        "result.$": "$.result",
    }
    assert states["GraphLoadError"]["Next"] == "GraphLoaded"


def test_no_graph_stack_when_graph_is_disabled(variant: Synth) -> None:
    assert variant.graph is None and variant.stage.graph is None
    handlers = {
        fn["Properties"]["Handler"] for fn in resources(variant.loader_json, "AWS::Lambda::Function").values()
    }
    assert not {h for h in handlers if "graph" in h}


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_cfn_lint_passes_on_every_template(name: str, request: pytest.FixtureRequest) -> None:
    done = cfn_lint(request.getfixturevalue(name))
    assert done.returncode == 0, done.stdout + done.stderr


def test_graph_settings_are_validated_with_the_field_named() -> None:
    from stacks.config import load_environment
    from stacks.settings import MaploadConfigError

    block = {"environments": {"dev": {"graph_enabled": True}, "prod": {}}}
    dev = load_environment(block, "dev")
    assert dev.graph is not None and dev.graph.serverless and not dev.graph.retain
    assert load_environment(block, "prod").graph.retain  # type: ignore[union-attr]
    assert load_environment(block, "dev", {"graph_enabled": "false"}).graph is None
    provisioned = load_environment(block, "dev", {"graph_instance_class": "db.r6g.large"}).graph
    assert provisioned is not None and not provisioned.serverless
    for overrides, field in (
        ({"graph_instance_class": "r6g.large"}, "graph_instance_class"),
        (
            {"graph_serverless_min_capacity": 10, "graph_serverless_max_capacity": 4},
            "graph_serverless_min_capacity",
        ),
        ({"graph_backup_retention_days": 36}, "graph_backup_retention_days"),
        ({"graph_engine_version": "latest"}, "graph_engine_version"),
    ):
        with pytest.raises(MaploadConfigError) as caught:
            load_environment(block, "dev", overrides)
        assert field in caught.value.field


def test_settings_page_lists_every_graph_setting() -> None:
    from stacks.config import SETTING_NAMES

    text = (Path(__file__).resolve().parents[2] / "docs" / "SETTINGS.md").read_text()
    names = [name for name in SETTING_NAMES if name.startswith("graph_")]
    assert len(names) == 8
    for name in names:
        assert f"`{name}`" in text, name


def test_polls_write_grant_is_exactly_the_report_layout_makes() -> None:
    """PollGraphLoad's s3:PutObject pattern against layout.py: the report, no other staged key."""
    job, run = "people-2024.v1_a", "people-20240101T000000-a1b2c3"
    assert iam_matches(STAGING_REPORTS, layout.report_key(job, run))
    for key in (
        layout.manifest_key(job, run),
        layout.rejects_key(job, run),
        layout.shard_rejects_key(job, run, 7),
        layout.map_results_prefix(job, run) + "/map-run/manifest.json",
        *layout.graph_ids_keys(job, run, 7),
        *layout.property_graph_keys(job, run, 7, compressed=True),
    ):
        assert not iam_matches(STAGING_REPORTS, key), key


# AWSLambdaVPCAccessExecutionRole v3's EC2 actions (its logs actions are granted on the group).
ENI_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
}


@pytest.mark.parametrize("name", ["start_graph_load", "poll_graph_load"])
def test_vpc_functions_get_only_the_network_interface_actions_on_star_and_logs_on_their_own_group(
    dev: Synth, name: str
) -> None:
    """Not AWSLambdaVPCAccessExecutionRole, whose logs actions are on `*`: one inline policy with the
    EC2 network-interface actions Lambda needs (which take no narrower resource), created before the
    function (Lambda checks them at CreateFunction), and logs only on the function's own group."""
    _, fn = loader_function(dev, name)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    assert "ManagedPolicyArns" not in dev.loader_json["Resources"][role]["Properties"]
    statements = policy_statements(dev.loader_json, role)
    on_star = {(a, r) for a, r in grants(statements) if r == "*"}
    assert on_star == {(action, "*") for action in ENI_ACTIONS}
    (eni_policy,) = [
        policy
        for policy, res in resources(dev.loader_json, "AWS::IAM::Policy").items()
        if {"Ref": role} in res["Properties"]["Roles"]
        and {s.get("Sid") for s in res["Properties"]["PolicyDocument"]["Statement"]}
        == {"LambdaVpcNetworkInterfaces"}
    ]
    assert eni_policy in fn["DependsOn"]
    log_group = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    logs = {(a, r) for a, r in grants(statements) if a.startswith("logs:")}
    assert logs and all(r == "${GetAtt:" + log_group + ".Arn}" for _, r in logs), logs
