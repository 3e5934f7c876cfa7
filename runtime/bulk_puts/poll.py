"""Polling a job's bulk put items operation: DescribeBulkOperation until it ends; past its deadline
it is cancelled and the job fails naming it (Finalize then reports what is known)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters.bulk_puts import BulkOperations
from logic import bulk_put, polling
from logic.errors import BulkPutFailedError


def poll(
    event: Mapping[str, Any], operations: BulkOperations, now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """`event`: PollBulkPut's input, `bulkPut` (StartBulkPut's or the last poll's answer); the
    result is the same shape with the operation's status and counters now, `pending` while it
    runs (the state machine waits `waitSeconds` and polls again)."""
    bulk = dict(event["bulkPut"])
    arn = bulk.get("operationArn")
    if not arn:  # nothing was staged: no operation
        return {**bulk, "pending": False}
    schedule = {"staged_objects": int(bulk["stagedObjects"]), "started_at": bulk["startedAt"]}
    deadline = float(bulk["deadline"])
    described = operations.describe(str(arn))
    if described is None:
        error = {
            "type": BulkPutFailedError.__name__,
            "message": f"bulk put operation {arn} is gone (DescribeBulkOperation: not found)",
        }
        return {**bulk, "pending": False, "error": error}
    status = str(described.get("BulkOperationStatus"))
    if status not in bulk_put.RUNNING_STATUSES:
        return bulk_put.answer(described, deadline=deadline, pending=False, **schedule)
    if now() < deadline:
        wait = polling.next_wait(now() - float(bulk["startedAt"]), bulk_put.POLL_SECONDS, deadline - now())
        return bulk_put.answer(described, deadline=deadline, wait_seconds=wait, pending=True, **schedule)
    # Past the deadline: cancelled rather than left running unobserved. The job stays held until
    # the operation has ended (a takeover or `mapload release` checks it: adapters/bulk_puts.py).
    cancelled = operations.cancel(str(arn)) if status == "IN_PROGRESS" else status
    message = (
        f"bulk put operation {arn} was still {status} at its deadline (bulk_put_timeout_minutes after "
        f"its start): {'its cancel was asked' if cancelled else 'it ended meanwhile'}"
    )
    if cancelled:
        described = {**described, "BulkOperationStatus": cancelled}
    error = {"type": BulkPutFailedError.__name__, "message": message}
    return bulk_put.answer(described, deadline=deadline, pending=False, error=error, **schedule)
