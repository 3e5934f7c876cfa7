"""Dashboard, alarms, the encrypted alarm topic and Powertools settings of each environment."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stacks.config import load_environment
from stacks.monitoring import METRIC_NAMESPACE, service_name
from stacks.settings import MaploadConfigError
from tests.infra.support import Synth, flat, only, resources

pytestmark = pytest.mark.infra


def alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    """Alarm properties by logical id."""
    found = resources(synth.loader_json, "AWS::CloudWatch::Alarm")
    return {logical: alarm["Properties"] for logical, alarm in found.items()}


def alarm(synth: Synth, logical_prefix: str) -> dict[str, Any]:
    return only({k: v for k, v in alarms(synth).items() if logical_prefix in k})


def test_every_function_gets_the_powertools_service_and_namespace(dev: Synth, prod: Synth) -> None:
    for synth, env in ((dev, "dev"), (prod, "prod")):
        functions = resources(synth.loader_json, "AWS::Lambda::Function")
        handlers = {fn["Properties"]["Handler"].split(".")[1] for fn in functions.values()}
        assert {"prepare", "plan", "worker", "finalize"} <= handlers
        for fn in functions.values():
            variables = fn["Properties"]["Environment"]["Variables"]
            assert variables["POWERTOOLS_SERVICE_NAME"] == service_name(env) == f"mapload-{env}"
            assert variables["POWERTOOLS_METRICS_NAMESPACE"] == METRIC_NAMESPACE


def test_execution_failed_and_timed_out_alarm_on_the_state_machine_and_notify_the_topic(dev: Synth) -> None:
    topic_id = only({k: k for k in resources(dev.loader_json, "AWS::SNS::Topic")})
    for prefix, metric in (
        ("ExecutionFailed", "ExecutionsFailed"),
        ("ExecutionTimedOut", "ExecutionsTimedOut"),
    ):
        props = alarm(dev, prefix)
        assert props["Namespace"] == "AWS/States"
        assert props["MetricName"] == metric
        assert [d["Name"] for d in props["Dimensions"]] == ["StateMachineArn"]
        assert "Ref" in props["Dimensions"][0]["Value"]
        assert (props["Threshold"], props["EvaluationPeriods"]) == (1, 1)
        assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert props["TreatMissingData"] == "notBreaching"
        assert props["AlarmActions"] == [{"Ref": topic_id}]
        assert props["OKActions"] == props["AlarmActions"]


def test_sustained_throttling_is_three_periods_of_the_workers_emf_metric(dev: Synth) -> None:
    props = alarm(dev, "ThrottlingSustained")
    assert props["Namespace"] == METRIC_NAMESPACE
    assert props["MetricName"] == "Throttles"
    assert props["Dimensions"] == [{"Name": "service", "Value": "mapload-dev"}]
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"], props["Period"]) == (3, 3, 300)
    assert props["Threshold"] == 1000


def test_rejects_alarm_is_a_percentage_of_records_read(dev: Synth) -> None:
    props = alarm(dev, "RejectsAboveTolerance")
    assert props["Threshold"] == 1
    expression = only({m["Id"]: m for m in props["Metrics"] if "Expression" in m})
    assert "100 * rejected / read" in expression["Expression"]
    stats = {m["Id"]: m["MetricStat"]["Metric"]["MetricName"] for m in props["Metrics"] if "MetricStat" in m}
    assert stats == {"read": "RecordsRead", "rejected": "RecordsRejected"}


def test_alarm_topic_is_encrypted_tls_only_and_the_key_lets_cloudwatch_publish(dev: Synth) -> None:
    topic = only(resources(dev.loader_json, "AWS::SNS::Topic"))["Properties"]
    key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key = dev.loader_json["Resources"][key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    cloudwatch = [
        s
        for s in key["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert cloudwatch and set(cloudwatch[0]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    policy = only(resources(dev.loader_json, "AWS::SNS::TopicPolicy"))["Properties"]["PolicyDocument"]
    denies = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert denies and denies[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    # No address configured for dev: no subscription.
    assert resources(dev.loader_json, "AWS::SNS::Subscription") == {}


def test_dashboard_shows_executions_progress_rate_throttles_rejects_and_alarms(dev: Synth) -> None:
    dashboard = only(resources(dev.loader_json, "AWS::CloudWatch::Dashboard"))["Properties"]
    assert "DashboardName" not in dashboard  # no physical names
    body = flat(dashboard["DashboardBody"])
    for title in (
        "Executions",
        "Map run progress",
        "Records written per second",
        "DynamoDB throttles",
        "Rejected records",
        "Alarms",
    ):
        assert f'"title":"{title}' in body, title
    for metric in ("ExecutionsStarted", "ShardsCompleted", "RecordsWritten", "Throttles", "RecordsRejected"):
        assert metric in body, metric


def test_prod_keeps_the_alarm_key_and_protects_every_stack(prod: Synth, dev: Synth) -> None:
    key = only(resources(prod.loader_json, "AWS::KMS::Key"))
    assert key["DeletionPolicy"] == "Retain"
    assert only(resources(dev.loader_json, "AWS::KMS::Key"))["DeletionPolicy"] == "Delete"
    assert prod.stage.data.termination_protection and prod.stage.loader.termination_protection
    assert not dev.stage.data.termination_protection and not dev.stage.loader.termination_protection


def test_alarm_email_and_thresholds_come_from_config() -> None:
    config = load_environment(
        {"environments": {"dev": {"alarm_email": "ops@example.com", "alarm_rejected_percent": "2.5"}}}, "dev"
    )
    assert config.monitoring.alarm_email == "ops@example.com"
    assert config.monitoring.alarm_rejected_percent == 2.5
    with pytest.raises(
        MaploadConfigError, match=r"mapload\.environments\.dev\.alarm_email: must be an e-mail"
    ):
        load_environment({"environments": {"dev": {"alarm_email": "ops"}}}, "dev")
    with pytest.raises(MaploadConfigError, match=r"alarm_throttle_events"):
        load_environment({"environments": {"dev": {"alarm_throttle_events": 0}}}, "dev")


def test_an_email_subscription_is_created_when_configured(tmp_path: Any) -> None:
    from aws_cdk.assertions import Template

    import app as app_module
    from stacks.stage import MaploadStage, stage_id

    built = app_module.build_app(
        {"env": "dev", "mapload:alarm_email": "ops@example.com"}, outdir=str(tmp_path)
    )
    stage = built.node.find_child(stage_id("dev"))
    assert isinstance(stage, MaploadStage)
    template = Template.from_stack(stage.loader).to_json()
    subscription = only(resources(template, "AWS::SNS::Subscription"))["Properties"]
    assert (subscription["Protocol"], subscription["Endpoint"]) == ("email", "ops@example.com")
    assert json.dumps(subscription["TopicArn"]).count("Ref") == 1


def test_loader_outputs_name_the_dashboard_and_the_alarm_topic(dev: Synth) -> None:
    outputs = dev.loader_json["Outputs"]
    dashboard = only({k: k for k in resources(dev.loader_json, "AWS::CloudWatch::Dashboard")})
    topic = only({k: k for k in resources(dev.loader_json, "AWS::SNS::Topic")})
    assert outputs["DashboardName"]["Value"] == {"Ref": dashboard}
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": topic}


def test_with_a_graph_target_the_dashboard_shows_neptune_load_status(dev: Synth, variant: Synth) -> None:
    assert dev.graph is not None and variant.graph is None
    with_graph = flat(
        only(resources(dev.loader_json, "AWS::CloudWatch::Dashboard"))["Properties"]["DashboardBody"]
    )
    assert '"title":"Neptune graph load status' in with_graph
    assert "GraphLoadsSucceeded" in with_graph and "GraphLoadsFailed" in with_graph
    without = flat(
        only(resources(variant.loader_json, "AWS::CloudWatch::Dashboard"))["Properties"]["DashboardBody"]
    )
    assert "Neptune" not in without
