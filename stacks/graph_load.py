"""The graph load loop of the state machine: StartGraphLoad → PollGraphLoad → GraphLoaded? → GraphWait."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.lambda_tasks import (
    LAMBDA_SERVICE_ERRORS,
    LAMBDA_THROTTLE_ERRORS,
    THROTTLE_MAX_DELAY_SECONDS,
    TaskRetries,
    lambda_task,
    payload_fields,
)

# The loader client's own retries are exhausted (its queue of 64 loads is full, or it is
# unavailable): the state machine tries again, for hours rather than ~1.5 minutes, since a full
# queue empties only as other loads finish. Capped at 5 minutes between attempts, 60 attempts
# (~4.5 h at most; ~300 history events).
GRAPH_RETRY_ERRORS: Final[Sequence[str]] = ("GraphLoaderBusyError",)
GRAPH_RETRY_ATTEMPTS: Final[int] = 60
GRAPH_RETRY_MAX_DELAY_SECONDS: Final[int] = 300

# The loader refused the functions' signed request (HTTP 403): Neptune applies IAM changes within
# up to 10 minutes, so a first load right after a deploy may meet a grant not in force yet. A
# minute apart, 11 times (11 minutes, 33 history events), then the error is real and fails the run.
GRAPH_IAM_RETRY_ERRORS: Final[Sequence[str]] = ("GraphLoaderAccessDeniedError",)
GRAPH_IAM_RETRY_ATTEMPTS: Final[int] = 11
GRAPH_IAM_RETRY_INTERVAL_SECONDS: Final[int] = 60

# PollGraphLoad runs once per round of the poll loop, so its retries are paid every round: they
# stay within the round's share of the 25,000-event history that runtime/logic/polling.py's
# POLL_ROUND_EVENTS assumes (Wait 2 + Choice 2 + Task 5 + 3 per retry <= 50; tests/infra/
# test_history.py checks the synthesized definition). A poll that still fails goes to
# GraphLoadError, which has the full retries: it runs once.
POLL_SERVICE_RETRY_ATTEMPTS_MAX: Final[int] = 6
POLL_THROTTLE_ATTEMPTS: Final[int] = 4
POLL_BUSY_ATTEMPTS: Final[int] = 3


# Finalize's result shape with the report finished, plus whether to poll again and when, and the
# load being polled (StartGraphLoad's answer, less the edge endpoint check: that is in the report).
POLL_RESULT: Final[Mapping[str, str]] = {
    **{
        name: "string"
        for name in ("status", "jobId", "reportUri", "error", "cause", "graphLoad", "graphStatus")
    },
    "report": "object",
    "pending": "string",
    "waitSeconds": "number",
    "load": "object",
}
# Where StartGraphLoad's answer goes: into the result PollGraphLoad is given and returns, so the
# first poll can move the edge endpoint check into the report and drop it from the load, and the
# state carries the check once (it can be ~11 KB: ten edges of clipped ids).
LOAD_PATH: Final[str] = "$.result.load"


class GraphLoadLoop(Construct):
    """StartGraphLoad → PollGraphLoad → GraphLoaded? (pending: GraphWait, then poll again).

    Polling happens in the state machine, never by sleeping in a Lambda. Poll returns Finalize's
    result shape with the report finished, so `succeeded`/`failed` serve both paths. States only:
    no resource of its own, so its construct path names no logical id. `start` is the entry.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        start_function: lambda_.IFunction,
        poll_function: lambda_.IFunction,
        retries: TaskRetries,
        execution: Mapping[str, Any],
        succeeded: sfn.Succeed,
        failed: sfn.Fail,
    ) -> None:
        super().__init__(scope, construct_id)
        start = self._start(start_function, retries, execution)
        wait = sfn.Wait(
            self,
            "GraphWaitState",
            state_name="GraphWait",
            # Poll's own answer: the interval grows with the load's age (runtime/logic/polling.py).
            time=sfn.WaitTime.seconds_path("$.result.waitSeconds"),
        )
        poll = self._poll(poll_function, retries)
        # A start or poll that failed for good still finishes the report (status FAILED, the error).
        record_error = lambda_task(
            self,
            "GraphLoadError",
            function=poll_function,
            payload=sfn.TaskInput.from_object(
                {
                    "error": sfn.JsonPath.object_at("$.graphError"),
                    "result": sfn.JsonPath.object_at("$.result"),
                }
            ),
            retries=retries,
            result_selector=payload_fields(POLL_RESULT),
            result_path="$.result",
        )
        start.add_catch(record_error, errors=[sfn.Errors.ALL], result_path="$.graphError")
        poll.add_catch(record_error, errors=[sfn.Errors.ALL], result_path="$.graphError")
        loaded = (
            sfn.Choice(self, "GraphLoadedChoice", state_name="GraphLoaded")
            .when(sfn.Condition.boolean_equals("$.result.pending", True), wait)
            .when(sfn.Condition.string_equals("$.result.status", "SUCCEEDED"), succeeded)
            .otherwise(failed)
        )
        record_error.next(loaded)
        # The first poll right after the start; each later one after the wait Poll asked for.
        wait.next(poll)
        self.start: sfn.IChainable = start.next(poll).next(loaded)

    def _start(
        self, function: lambda_.IFunction, retries: TaskRetries, execution: Mapping[str, Any]
    ) -> tasks.LambdaInvoke:
        """Start the Neptune bulk load of the job's staged graph files (or adopt a started one)."""
        start = lambda_task(
            self,
            "StartGraphLoad",
            function=function,
            payload=sfn.TaskInput.from_object(
                {
                    "job": sfn.JsonPath.object_at("$.plan.job"),
                    "execution": execution,
                    # The edge endpoint check reads each shard's id files and weighs the dangling
                    # edges against the staged ones (the report's graph section).
                    "shardCount": sfn.JsonPath.number_at("$.plan.shardCount"),
                    "graph": sfn.JsonPath.object_at("$.result.report.graph"),
                }
            ),
            retries=retries,
            result_selector=payload_fields(
                {
                    "loadId": "string",
                    "source": "string",
                    "waitSeconds": "number",
                    "startedAt": "number",
                    "deadline": "number",
                    "danglingEdges": "object",
                }
            ),
            result_path=LOAD_PATH,
        )
        retries.add(start, GRAPH_RETRY_ERRORS, GRAPH_RETRY_ATTEMPTS, GRAPH_RETRY_MAX_DELAY_SECONDS)
        # A fixed schedule, not the environment's backoff: the bound is Neptune's 10 minutes.
        start.add_retry(
            errors=list(GRAPH_IAM_RETRY_ERRORS),
            interval=cdk.Duration.seconds(GRAPH_IAM_RETRY_INTERVAL_SECONDS),
            max_attempts=GRAPH_IAM_RETRY_ATTEMPTS,
            backoff_rate=1,
        )
        return start

    def _poll(self, function: lambda_.IFunction, retries: TaskRetries) -> tasks.LambdaInvoke:
        """One round's poll: bounded retries inside the loop (see POLL_SERVICE_RETRY_ATTEMPTS_MAX)."""
        poll = lambda_task(
            self,
            "PollGraphLoad",
            function=function,
            payload=sfn.TaskInput.from_object({"result": sfn.JsonPath.object_at("$.result")}),
            retries=None,
            result_selector=payload_fields(POLL_RESULT),
            result_path="$.result",
        )
        retries.add(poll, LAMBDA_SERVICE_ERRORS, min(retries.max_attempts, POLL_SERVICE_RETRY_ATTEMPTS_MAX))
        retries.add(poll, LAMBDA_THROTTLE_ERRORS, POLL_THROTTLE_ATTEMPTS, THROTTLE_MAX_DELAY_SECONDS)
        retries.add(poll, GRAPH_RETRY_ERRORS, POLL_BUSY_ATTEMPTS, GRAPH_RETRY_MAX_DELAY_SECONDS)
        return poll
