"""DynamoDB's bulk put items operations (StartBulkPutItems, DescribeBulkOperation,
CancelBulkOperation) as the hand-off calls them: the service's answers as plain dicts, its
refusals as mapload's errors (one line each), and `settle`, which a takeover of a job or
`mapload release` calls first: a job stays held while its operation runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from logic.bulk_put import RUNNING_STATUSES
from logic.errors import BulkPutBusyError, BulkPutRefusedError, JobAlreadyRunningError

# The service's own limits (concurrent operations, operations per table): retried by the state
# machine (stacks/bulk_put.py), as a full Neptune loader queue is.
BUSY_CODES = frozenset({"LimitExceededException"})
# Refusals no retry changes: the table is not ACTIVE or builds an index, the token was reused
# with other parameters, the table or an input is not there, the request is invalid.
REFUSED_CODES = frozenset(
    {
        "ResourceInUseException",
        "IdempotentParameterMismatchException",
        "ResourceNotFoundException",
        "ValidationException",
    }
)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code") or "")


class BulkOperations:
    def __init__(self, client: Any) -> None:
        self._db = client

    def start(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """StartBulkPutItems; the operation's description."""
        try:
            answer = self._db.start_bulk_put_items(**request)
        except ClientError as error:
            code, message = _code(error), error.response.get("Error", {}).get("Message") or str(error)
            where = f"StartBulkPutItems on table {request.get('TableName')}"
            if code in BUSY_CODES:
                raise BulkPutBusyError(f"{where}: {code}: {message}") from None
            if code in REFUSED_CODES:
                raise BulkPutRefusedError(f"{where} refused: {code}: {message}") from None
            raise
        return dict(answer["BulkOperationDescription"])

    def describe(self, arn: str) -> dict[str, Any] | None:
        """DescribeBulkOperation; None when the service has no such operation."""
        try:
            answer = self._db.describe_bulk_operation(BulkOperationArn=arn)
        except ClientError as error:
            if _code(error) == "ResourceNotFoundException":
                return None
            raise
        return dict(answer["BulkOperationDescription"])

    def cancel(self, arn: str) -> str | None:
        """CancelBulkOperation; the status it answers (CANCELLING), None when there is no such
        operation."""
        try:
            answer = self._db.cancel_bulk_operation(BulkOperationArn=arn)
        except ClientError as error:
            if _code(error) == "ResourceNotFoundException":
                return None
            raise
        return str(answer["BulkOperationStatus"])

    def settle(self, job: Mapping[str, Any]) -> None:
        """Before a job held by an ended execution is taken over or released: its bulk put
        operation (the ledger's `bulkOperationArn`), if still running, is asked to cancel, and the
        job stays held (JobAlreadyRunningError) until the operation has ended."""
        arn = job.get("bulkOperationArn")
        if not arn:
            return
        described = self.describe(str(arn))
        status = str((described or {}).get("BulkOperationStatus") or "")
        if status == "IN_PROGRESS":
            status = self.cancel(str(arn)) or ""
        if status in RUNNING_STATUSES:
            job_id = str(job.get("pk", "")).removeprefix("JOB#")
            raise JobAlreadyRunningError(
                f"jobId {job_id!r} is held by bulk put operation {arn}, {status} (its cancel was asked): "
                "try again once it is CANCELLED"
            )
