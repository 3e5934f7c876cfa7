"""Day-2 operations for one environment: Powertools settings, a dashboard, alarms to an SNS topic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.config import MonitoringConfig

# The EMF namespace the runtime's Powertools Metrics write to; the `service` dimension (from
# POWERTOOLS_SERVICE_NAME) tells environments apart. Both names are in docs/CONTRACTS.md.
METRIC_NAMESPACE: Final[str] = "Mapload"
POWERTOOLS_SERVICE_NAME: Final[str] = "POWERTOOLS_SERVICE_NAME"
POWERTOOLS_METRICS_NAMESPACE: Final[str] = "POWERTOOLS_METRICS_NAMESPACE"
POWERTOOLS_ENV_NAMES: Final[tuple[str, ...]] = (POWERTOOLS_SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE)
# Metric names the Worker emits per shard (runtime/handlers/observability.py).
WORKER_METRICS: Final[tuple[str, ...]] = (
    "RecordsRead",
    "RecordsWritten",
    "RecordsRejected",
    "Retries",
    "Throttles",
    "Bytes",
    "ShardsCompleted",
)
# Metric names PollGraphLoad emits when a Neptune bulk load ends.
GRAPH_METRICS: Final[tuple[str, ...]] = ("GraphLoadsSucceeded", "GraphLoadsFailed")
PERIOD: Final[cdk.Duration] = cdk.Duration.minutes(5)
SUSTAINED_PERIODS: Final[int] = 3


def service_name(env_name: str) -> str:
    """The Powertools service (log field and metric dimension) of an environment's functions."""
    return f"mapload-{env_name}"


class LoaderMonitoring(Construct):
    """Alarms on what a platform team is paged for, a dashboard of a running load.

    With a graph target, a widget shows Neptune bulk loads that ended (succeeded / failed).
    Alarms: an execution failed, an execution timed out, DynamoDB throttling sustained for
    three 5-minute periods, rejected records above `alarm_rejected_percent` of records read.
    They notify a KMS-encrypted, TLS-only SNS topic with an optional e-mail subscription.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env_name: str,
        state_machine: sfn.StateMachine,
        functions: Sequence[lambda_.Function],
        worker: lambda_.Function,
        monitoring_config: MonitoringConfig,
        retain: bool,
        graph_poll: lambda_.Function | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.service = service_name(env_name)
        for function in functions:
            # Powertools reads these; the runtime's settings classes list them (contract test).
            function.add_environment(POWERTOOLS_SERVICE_NAME, self.service)
            function.add_environment(POWERTOOLS_METRICS_NAMESPACE, METRIC_NAMESPACE)

        self.key = kms.Key(
            self,
            "AlarmTopicKey",
            description=f"mapload {env_name}: encrypts the alarm topic",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
        )
        # CloudWatch publishes alarm notifications to the encrypted topic with this key.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}},
            )
        )
        self.topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"mapload {env_name} alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        if monitoring_config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(monitoring_config.alarm_email))

        def emf(name: str, statistic: str = "Sum") -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=METRIC_NAMESPACE,
                metric_name=name,
                dimensions_map={"service": self.service},
                statistic=statistic,
                period=PERIOD,
            )

        metrics = {name: emf(name) for name in WORKER_METRICS}
        one_minute = cdk.Duration.minutes(1)
        failed = state_machine.metric_failed(period=one_minute, statistic="Sum")
        timed_out = state_machine.metric_timed_out(period=one_minute, statistic="Sum")
        rejected_percent = cloudwatch.MathExpression(
            expression="IF(read > 0, 100 * rejected / read, 0)",
            using_metrics={"read": metrics["RecordsRead"], "rejected": metrics["RecordsRejected"]},
            label="rejected % of read",
            period=PERIOD,
        )
        items_per_second = cloudwatch.MathExpression(
            expression="written / PERIOD(written)",
            using_metrics={"written": metrics["RecordsWritten"]},
            label="records written / s",
            period=PERIOD,
        )

        self.alarms: dict[str, cloudwatch.Alarm] = {
            "ExecutionFailed": cloudwatch.Alarm(
                self,
                "ExecutionFailedAlarm",
                alarm_description=f"mapload {env_name}: a load execution FAILED (see its report.json)",
                metric=failed,
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "ExecutionTimedOut": cloudwatch.Alarm(
                self,
                "ExecutionTimedOutAlarm",
                alarm_description=f"mapload {env_name}: a load execution TIMED_OUT",
                metric=timed_out,
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "ThrottlingSustained": cloudwatch.Alarm(
                self,
                "ThrottlingSustainedAlarm",
                alarm_description=(
                    f"mapload {env_name}: DynamoDB throttled more than "
                    f"{monitoring_config.alarm_throttle_events} writes per 5 minutes for "
                    f"{SUSTAINED_PERIODS * 5} minutes (raise the table's capacity or lower maxConcurrency)"
                ),
                metric=metrics["Throttles"],
                threshold=monitoring_config.alarm_throttle_events,
                evaluation_periods=SUSTAINED_PERIODS,
                datapoints_to_alarm=SUSTAINED_PERIODS,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
            "RejectsAboveTolerance": cloudwatch.Alarm(
                self,
                "RejectsAboveToleranceAlarm",
                alarm_description=(
                    f"mapload {env_name}: more than {monitoring_config.alarm_rejected_percent}% of "
                    "records read were rejected in 5 minutes (see the job's rejects.jsonl)"
                ),
                metric=rejected_percent,
                threshold=monitoring_config.alarm_rejected_percent,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
        }
        action = cw_actions.SnsAction(self.topic)
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            default_interval=cdk.Duration.hours(3),
            period_override=cloudwatch.PeriodOverride.AUTO,
        )
        # Generated names (no physical names): the outputs say which dashboard and topic are this
        # environment's. At stack level, so the output ids are exactly these names.
        stack = cdk.Stack.of(self)
        cdk.CfnOutput(stack, "DashboardName", value=self.dashboard.dashboard_name)
        cdk.CfnOutput(stack, "AlarmTopicArn", value=self.topic.topic_arn)
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"# mapload {env_name}\nExecutions, shard (Map run) progress, records/s, "
                    "throttles and rejects. Per-shard counts are the Worker's EMF metrics "
                    f"(namespace `{METRIC_NAMESPACE}`, service `{self.service}`); `mapload status "
                    f"--env {env_name}` shows one job."
                ),
                width=24,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Executions",
                left=[
                    state_machine.metric_started(statistic="Sum"),
                    state_machine.metric_succeeded(statistic="Sum"),
                    state_machine.metric_failed(statistic="Sum"),
                    state_machine.metric_timed_out(statistic="Sum"),
                    state_machine.metric_aborted(statistic="Sum"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Map run progress (shards completed)",
                left=[metrics["ShardsCompleted"]],
                right=[worker.metric_invocations(statistic="Sum"), worker.metric_errors(statistic="Sum")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Records written per second",
                left=[items_per_second],
                right=[metrics["Bytes"]],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="DynamoDB throttles and retries",
                left=[metrics["Throttles"], metrics["Retries"]],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=monitoring_config.alarm_throttle_events, label="alarm threshold"
                    )
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Rejected records",
                left=[metrics["RecordsRejected"], metrics["RecordsRead"]],
                right=[rejected_percent],
                right_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=monitoring_config.alarm_rejected_percent, label="alarm threshold %"
                    )
                ],
                width=8,
            ),
            cloudwatch.AlarmStatusWidget(
                title="Alarms",
                alarms=list(self.alarms.values()),
                width=8,
            ),
        )
        if graph_poll is not None:
            # Neptune bulk loads: how many ended (PollGraphLoad's EMF metrics) and the poller's health.
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="Neptune graph load status",
                    left=[emf(name) for name in GRAPH_METRICS],
                    right=[
                        graph_poll.metric_invocations(statistic="Sum"),
                        graph_poll.metric_errors(statistic="Sum"),
                    ],
                    width=24,
                )
            )
