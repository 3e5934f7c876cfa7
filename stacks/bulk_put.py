"""The bulk put items hand-off of the state machine (dynamodb.engine bulkPutItems), after the Map and
before Finalize: BulkPut? → StartBulkPut → PollBulkPut → BulkPutEnded? → BulkPutWait → PollBulkPut ↺."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.graph_load import (
    GRAPH_RETRY_ATTEMPTS,
    GRAPH_RETRY_MAX_DELAY_SECONDS,
    POLL_SERVICE_RETRY_ATTEMPTS_MAX,
    POLL_THROTTLE_ATTEMPTS,
)
from stacks.lambda_tasks import (
    LAMBDA_SERVICE_ERRORS,
    LAMBDA_THROTTLE_ERRORS,
    THROTTLE_MAX_DELAY_SECONDS,
    TaskRetries,
    lambda_task,
    payload_fields,
)

# $.bulkPut: the operation as StartBulkPut and PollBulkPut answer it (runtime/logic/bulk_put.py
# `answer`), which Finalize reports.
BULK_PUT_RESULT: Final[Mapping[str, str]] = {
    "operationArn": "string",
    "status": "string",
    "pending": "string",
    "waitSeconds": "number",
    "startedAt": "number",
    "deadline": "number",
    "stagedObjects": "number",
    "counters": "object",
    "failure": "object",
    "error": "object",
}
BULK_PUT_PATH: Final[str] = "$.bulkPut"
# Where a StartBulkPut or PollBulkPut that failed for good leaves its error for Finalize.
BULK_PUT_ERROR_PATH: Final[str] = "$.bulkPutError"
# DynamoDB's concurrency quotas for bulk put items (runtime/adapters/bulk_puts.py BUSY_CODES): the
# start is tried again for hours, as a full Neptune loader queue is.
BULK_PUT_BUSY_ERRORS: Final[tuple[str, ...]] = ("BulkPutBusyError",)


class BulkPutLoop(Construct):
    """BulkPut? (Plan's `bulkPut`): StartBulkPut → PollBulkPut → BulkPutEnded? (pending:
    BulkPutWait, then poll again) → `finalize`; otherwise straight to `finalize`. A start or poll
    that failed for good goes to `finalize` with its error at $.bulkPutError. States only: no
    resource of its own. `choice` is the entry."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        start_function: lambda_.IFunction,
        poll_function: lambda_.IFunction,
        retries: TaskRetries,
        finalize: sfn.IChainable,
    ) -> None:
        super().__init__(scope, construct_id)
        start = lambda_task(
            self,
            "StartBulkPut",
            function=start_function,
            payload=sfn.TaskInput.from_object(
                {
                    "job": sfn.JsonPath.object_at("$.plan.job"),
                    "shardCount": sfn.JsonPath.number_at("$.plan.shardCount"),
                }
            ),
            retries=retries,
            result_selector=payload_fields(BULK_PUT_RESULT),
            result_path=BULK_PUT_PATH,
        )
        retries.add(start, BULK_PUT_BUSY_ERRORS, GRAPH_RETRY_ATTEMPTS, GRAPH_RETRY_MAX_DELAY_SECONDS)
        poll = self._poll(poll_function, retries)
        wait = sfn.Wait(
            self,
            "BulkPutWaitState",
            state_name="BulkPutWait",
            # Poll's own answer: the interval grows with the operation's age (runtime/logic/polling.py).
            time=sfn.WaitTime.seconds_path("$.bulkPut.waitSeconds"),
        )
        start.add_catch(finalize, errors=[sfn.Errors.ALL], result_path=BULK_PUT_ERROR_PATH)
        poll.add_catch(finalize, errors=[sfn.Errors.ALL], result_path=BULK_PUT_ERROR_PATH)
        ended = (
            sfn.Choice(self, "BulkPutEndedChoice", state_name="BulkPutEnded?")
            .when(sfn.Condition.boolean_equals("$.bulkPut.pending", True), wait.next(poll))
            .otherwise(finalize)
        )
        start.next(poll).next(ended)
        self.choice = (
            sfn.Choice(self, "BulkPutChoice", state_name="BulkPut?")
            .when(
                sfn.Condition.and_(
                    sfn.Condition.is_present("$.plan.bulkPut"),
                    sfn.Condition.boolean_equals("$.plan.bulkPut", True),
                ),
                start,
            )
            .otherwise(finalize)
        )

    def _poll(self, function: lambda_.IFunction, retries: TaskRetries) -> tasks.LambdaInvoke:
        """One round's poll: bounded retries inside the loop, as the graph load's poll."""
        poll = lambda_task(
            self,
            "PollBulkPut",
            function=function,
            payload=sfn.TaskInput.from_object({"bulkPut": sfn.JsonPath.object_at(BULK_PUT_PATH)}),
            retries=None,
            result_selector=payload_fields(BULK_PUT_RESULT),
            result_path=BULK_PUT_PATH,
        )
        retries.add(poll, LAMBDA_SERVICE_ERRORS, min(retries.max_attempts, POLL_SERVICE_RETRY_ATTEMPTS_MAX))
        retries.add(poll, LAMBDA_THROTTLE_ERRORS, POLL_THROTTLE_ATTEMPTS, THROTTLE_MAX_DELAY_SECONDS)
        return poll
