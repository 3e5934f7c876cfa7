"""The one shape of a state machine's Lambda task: a LambdaInvoke with the retries every task shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.config import LoaderConfig

# Transient Lambda service errors every Task retries (docs/CONTRACTS.md "State machine"): AWS's
# recommended retrier, plus ClientExecutionTimeoutException and Unknown (out of memory, some
# timeouts). Retrying is safe for every function: Prepare/Plan write per-run keys, a Worker's
# shard counts once through the ledger's conditional write, Finalize and the graph functions
# are idempotent per job.
LAMBDA_SERVICE_ERRORS: Final[Sequence[str]] = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.Unknown",
)
# Throttling (reserved concurrency or the account's quota reached) waits instead of failing the
# job: capped exponential backoff with full jitter, so a throttled invocation keeps trying for
# about THROTTLE_MAX_ATTEMPTS x THROTTLE_MAX_DELAY_SECONDS / 2 (~20 minutes), not ~2 minutes.
LAMBDA_THROTTLE_ERRORS: Final[Sequence[str]] = ("Lambda.TooManyRequestsException",)
THROTTLE_MAX_ATTEMPTS: Final[int] = 40
THROTTLE_MAX_DELAY_SECONDS: Final[int] = 60


@dataclass(frozen=True)
class TaskRetries:
    """The environment's retry settings (interval, backoff, attempts), applied with full jitter."""

    interval_seconds: int
    backoff_rate: float
    max_attempts: int

    @classmethod
    def of(cls, config: LoaderConfig) -> TaskRetries:
        return cls(
            interval_seconds=config.retry_interval_seconds,
            backoff_rate=config.retry_backoff_rate,
            max_attempts=config.retry_max_attempts,
        )

    def add(
        self,
        task: tasks.LambdaInvoke,
        errors: Sequence[str],
        attempts: int,
        max_delay_seconds: int | None = None,
    ) -> None:
        """One Retrier: `errors`, up to `attempts` times, each wait at most `max_delay_seconds`."""
        task.add_retry(
            errors=list(errors),
            interval=cdk.Duration.seconds(self.interval_seconds),
            max_attempts=attempts,
            backoff_rate=self.backoff_rate,
            max_delay=cdk.Duration.seconds(max_delay_seconds) if max_delay_seconds is not None else None,
            jitter_strategy=sfn.JitterType.FULL,
        )

    def add_lambda_errors(self, task: tasks.LambdaInvoke) -> None:
        """What Lambda itself reports, on every Lambda task: service errors, then throttling."""
        self.add(task, LAMBDA_SERVICE_ERRORS, self.max_attempts)
        self.add(task, LAMBDA_THROTTLE_ERRORS, THROTTLE_MAX_ATTEMPTS, THROTTLE_MAX_DELAY_SECONDS)


def payload_fields(fields: Mapping[str, str]) -> dict[str, Any]:
    """A result selector of the function's answer: field -> "string", "number" or "object"."""
    read = {
        "string": sfn.JsonPath.string_at,
        "number": sfn.JsonPath.number_at,
        "object": sfn.JsonPath.object_at,
    }
    return {name: read[kind](f"$.Payload.{name}") for name, kind in fields.items()}


def lambda_task(
    scope: Construct,
    state_name: str,
    *,
    function: lambda_.IFunction,
    payload: sfn.TaskInput,
    retries: TaskRetries | None,
    result_selector: Mapping[str, Any] | None = None,
    result_path: str | None = None,
    task_timeout: sfn.Timeout | None = None,
) -> tasks.LambdaInvoke:
    """The state `state_name` (construct id `<state_name>Task`) invoking `function`.

    With `retries`, it retries Lambda's own errors (TaskRetries.add_lambda_errors); None leaves
    every Retrier to the caller (the poll loop bounds its own). CDK's default service-error
    retrier is always off: ours (with jitter) replaces it.
    """
    task = tasks.LambdaInvoke(
        scope,
        f"{state_name}Task",
        state_name=state_name,
        lambda_function=function,
        payload=payload,
        result_selector=dict(result_selector) if result_selector is not None else None,
        result_path=result_path,
        task_timeout=task_timeout,
        retry_on_service_exceptions=False,
    )
    if retries is not None:
        retries.add_lambda_errors(task)
    return task
