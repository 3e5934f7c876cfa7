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

from stacks.loader_settings import LoaderConfig

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
# A CSV shard whose start state is not published yet gives its slot back within its own wait
# (runtime/shards/sources.py CSV_START_WAIT_SECONDS; a test keeps the two equal), before it writes.
CSV_START_WAIT_SECONDS: Final[int] = 20
# What one such attempt may take in all: the wait, plus the function's start and its ledger reads.
CSV_PENDING_ATTEMPT_SECONDS: Final[int] = CSV_START_WAIT_SECONDS + 10


def attempt_seconds(errors: Sequence[str], timeout_seconds: float) -> float:
    """The longest a failed attempt ending in one of `errors` may take before its retry: a throttled
    invocation is refused before the function runs; a pending CSV shard gives up after its wait;
    any other error may come at the Task's timeout."""
    if set(errors) <= set(LAMBDA_THROTTLE_ERRORS):
        return 0.0
    if set(errors) <= {"CsvStartPendingError"}:
        return float(min(CSV_PENDING_ATTEMPT_SECONDS, timeout_seconds))
    return float(timeout_seconds)


def retry_waits(retrier: Mapping[str, Any]) -> list[float]:
    """Each wait of one ASL Retrier at its longest (full jitter only shortens them), with Step
    Functions' defaults: IntervalSeconds 1, BackoffRate 2.0, MaxAttempts 3, no MaxDelaySeconds."""
    interval = float(retrier.get("IntervalSeconds", 1))
    rate = float(retrier.get("BackoffRate", 2.0))
    cap = float(retrier.get("MaxDelaySeconds", float("inf")))
    return [min(interval * rate**attempt, cap) for attempt in range(int(retrier.get("MaxAttempts", 3)))]


def worst_case_seconds(state: Mapping[str, Any]) -> float:
    """The longest an ASL Task state can run with every retry it allows: its last attempt up to
    TimeoutSeconds, and each retry of each Retrier (they count apart) a failed attempt and a wait."""
    timeout = float(state.get("TimeoutSeconds", float("inf")))
    return timeout + sum(
        attempt_seconds(retrier["ErrorEquals"], timeout) + wait
        for retrier in state.get("Retry", [])
        for wait in retry_waits(retrier)
    )


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
        if attempts < 1:
            return  # (a schedule fitted to a limit may have no room for it)
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
        for errors, attempts, max_delay in self.lambda_errors():
            self.add(task, errors, attempts, max_delay)

    def lambda_errors(self) -> list[tuple[Sequence[str], int, int | None]]:
        """(errors, attempts, max delay) of the Retriers every Lambda task has, in their order."""
        return [
            (LAMBDA_SERVICE_ERRORS, self.max_attempts, None),
            (LAMBDA_THROTTLE_ERRORS, THROTTLE_MAX_ATTEMPTS, THROTTLE_MAX_DELAY_SECONDS),
        ]

    def asl(self, errors: Sequence[str], attempts: int, max_delay_seconds: int | None) -> dict[str, Any]:
        """The Retrier `add` writes, as ASL (for `worst_case_seconds`)."""
        retrier: dict[str, Any] = {
            "ErrorEquals": list(errors),
            "IntervalSeconds": self.interval_seconds,
            "MaxAttempts": attempts,
            "BackoffRate": self.backoff_rate,
        }
        return retrier | ({"MaxDelaySeconds": max_delay_seconds} if max_delay_seconds is not None else {})

    def fitted(
        self,
        retriers: Sequence[tuple[Sequence[str], int, int | None]],
        timeout_seconds: int,
        limit_seconds: int,
        priority: Sequence[Sequence[str]],
    ) -> list[tuple[Sequence[str], int, int | None]]:
        """`retriers` with their attempts cut so that the Task's worst case (`worst_case_seconds`)
        stays within `limit_seconds`: each in `priority` order keeps as many attempts as still fit."""
        attempts = {tuple(errors): 0 for errors, _, _ in retriers}
        wanted = {tuple(errors): (count, delay) for errors, count, delay in retriers}

        def worst() -> float:
            state = {
                "TimeoutSeconds": timeout_seconds,
                "Retry": [self.asl(errors, n, wanted[errors][1]) for errors, n in attempts.items() if n],
            }
            return worst_case_seconds(state)

        for errors in map(tuple, priority):
            for count in range(wanted[errors][0], 0, -1):
                attempts[errors] = count
                if worst() <= limit_seconds:
                    break
                attempts[errors] = 0
        return [(errors, attempts[tuple(errors)], delay) for errors, _, delay in retriers]


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
