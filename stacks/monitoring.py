"""Day-2 operations for one environment: Powertools settings, a dashboard, alarms to an SNS topic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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

from stacks.monitoring_settings import MonitoringConfig

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


@dataclass(frozen=True)
class LoadMetrics:
    """What the alarms and the dashboard watch: the Worker's EMF metrics and the executions'."""

    emf: Mapping[str, cloudwatch.Metric]
    failed: cloudwatch.Metric
    timed_out: cloudwatch.Metric
    rejected_percent: cloudwatch.MathExpression
    items_per_second: cloudwatch.MathExpression


def emf_metric(service: str, name: str, statistic: str = "Sum") -> cloudwatch.Metric:
    """One of the runtime's Powertools metrics of this environment's service."""
    return cloudwatch.Metric(
        namespace=METRIC_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=PERIOD,
    )


def load_metrics(service: str, state_machine: sfn.StateMachine) -> LoadMetrics:
    metrics = {name: emf_metric(service, name) for name in WORKER_METRICS}
    one_minute = cdk.Duration.minutes(1)
    return LoadMetrics(
        emf=metrics,
        failed=state_machine.metric_failed(period=one_minute, statistic="Sum"),
        timed_out=state_machine.metric_timed_out(period=one_minute, statistic="Sum"),
        rejected_percent=cloudwatch.MathExpression(
            expression="IF(read > 0, 100 * rejected / read, 0)",
            using_metrics={"read": metrics["RecordsRead"], "rejected": metrics["RecordsRejected"]},
            label="rejected % of read",
            period=PERIOD,
        ),
        items_per_second=cloudwatch.MathExpression(
            expression="written / PERIOD(written)",
            using_metrics={"written": metrics["RecordsWritten"]},
            label="records written / s",
            period=PERIOD,
        ),
    )


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
        self._env_name = env_name
        self._config = monitoring_config
        self.service = service_name(env_name)
        for function in functions:
            # Powertools reads these; the runtime's settings classes list them (contract test).
            function.add_environment(POWERTOOLS_SERVICE_NAME, self.service)
            function.add_environment(POWERTOOLS_METRICS_NAMESPACE, METRIC_NAMESPACE)
        self.key, self.topic = self._alarm_topic(retain)
        metrics = load_metrics(self.service, state_machine)
        self.alarms = self._alarms(metrics)
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
        self._add_widgets(metrics, state_machine, worker, graph_poll)

    # -- the alarm topic and the alarms ------------------------------------------------------

    def _alarm_topic(self, retain: bool) -> tuple[kms.Key, sns.Topic]:
        """A KMS-encrypted, TLS-only topic, with the configured e-mail subscribed."""
        env_name = self._env_name
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description=f"mapload {env_name}: encrypts the alarm topic",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
        )
        # CloudWatch publishes alarm notifications to the encrypted topic with this key.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}},
            )
        )
        topic = sns.Topic(
            self, "AlarmTopic", display_name=f"mapload {env_name} alarms", master_key=key, enforce_ssl=True
        )
        if self._config.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(self._config.alarm_email))
        return key, topic

    def _alarm(
        self,
        name: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        *,
        above: bool = False,
        periods: int = 1,
    ) -> cloudwatch.Alarm:
        """`<name>Alarm`: `metric` at `threshold` or more (above it, with `above`) in `periods`
        consecutive periods; no data is no alarm; notifies the topic when it fires and clears."""
        comparison = cloudwatch.ComparisonOperator
        alarm = cloudwatch.Alarm(
            self,
            f"{name}Alarm",
            alarm_description=f"mapload {self._env_name}: {description}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=periods if periods > 1 else None,
            comparison_operator=comparison.GREATER_THAN_THRESHOLD
            if above
            else comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        action = cw_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        return alarm

    def _alarms(self, metrics: LoadMetrics) -> dict[str, cloudwatch.Alarm]:
        config = self._config
        alarms = {
            "ExecutionFailed": self._alarm(
                "ExecutionFailed", "a load execution FAILED (see its report.json)", metrics.failed, 1
            ),
            "ExecutionTimedOut": self._alarm(
                "ExecutionTimedOut", "a load execution TIMED_OUT", metrics.timed_out, 1
            ),
            "ThrottlingSustained": self._alarm(
                "ThrottlingSustained",
                f"DynamoDB throttled more than {config.alarm_throttle_events} writes per 5 minutes for "
                f"{SUSTAINED_PERIODS * 5} minutes (raise the table's capacity or lower maxConcurrency)",
                metrics.emf["Throttles"],
                config.alarm_throttle_events,
                above=True,
                periods=SUSTAINED_PERIODS,
            ),
            "RejectsAboveTolerance": self._alarm(
                "RejectsAboveTolerance",
                f"more than {config.alarm_rejected_percent}% of records read were rejected in 5 minutes "
                "(see the job's rejects.jsonl)",
                metrics.rejected_percent,
                config.alarm_rejected_percent,
                above=True,
            ),
        }
        return alarms

    # -- the dashboard -----------------------------------------------------------------------

    def _add_widgets(
        self,
        metrics: LoadMetrics,
        state_machine: sfn.StateMachine,
        worker: lambda_.Function,
        graph_poll: lambda_.Function | None,
    ) -> None:
        """A title row, then executions and progress, then throttles, rejects and alarms."""
        env_name, emf = self._env_name, metrics.emf
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
                left=[emf["ShardsCompleted"]],
                right=_calls(worker),
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Records written per second",
                left=[metrics.items_per_second],
                right=[emf["Bytes"]],
                width=8,
            ),
        )
        self.dashboard.add_widgets(*self._problem_widgets(metrics))
        if graph_poll is not None:
            # Neptune bulk loads: how many ended (PollGraphLoad's EMF metrics) and the poller's health.
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="Neptune graph load status",
                    left=[emf_metric(self.service, name) for name in GRAPH_METRICS],
                    right=_calls(graph_poll),
                    width=24,
                )
            )

    def _problem_widgets(self, metrics: LoadMetrics) -> list[cloudwatch.IWidget]:
        """Throttles and retries, rejects (with the alarms' thresholds), and the alarms' states."""
        emf, config = metrics.emf, self._config
        return [
            cloudwatch.GraphWidget(
                title="DynamoDB throttles and retries",
                left=[emf["Throttles"], emf["Retries"]],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=config.alarm_throttle_events, label="alarm threshold"
                    )
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Rejected records",
                left=[emf["RecordsRejected"], emf["RecordsRead"]],
                right=[metrics.rejected_percent],
                right_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=config.alarm_rejected_percent, label="alarm threshold %"
                    )
                ],
                width=8,
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=8),
        ]


def _calls(function: lambda_.Function) -> list[cloudwatch.IMetric]:
    """A function's invocations and errors (sums), the right axis of a progress widget."""
    return [function.metric_invocations(statistic="Sum"), function.metric_errors(statistic="Sum")]
