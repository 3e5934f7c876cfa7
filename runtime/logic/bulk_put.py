"""dynamodb.engine bulkPutItems: the hand-off of a job's staged items to DynamoDB's bulk put items
operation, as the state machine runs it after the Map (StartBulkPut, then PollBulkPut until the
operation ends or its deadline passes) and as Finalize reports it.

The one place that says whether a job uses the engine (`bulk_engine`), what is asked of the
service (`start_request`: the request's field names are botocore's, dynamodb 2012-08-10), which
statuses hold a job, and the shape of the hand-off's state (`answer`: $.bulkPut).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

from logic import layout
from logic.clipping import TEXT_BYTES, clip

ENGINE_LAMBDA: Final = "lambda"
ENGINE_BULK: Final = "bulkPutItems"
# The operation's statuses (BulkOperationStatus). Still running: the job stays held (a stopped
# execution runs no state, so a takeover or `mapload release` cancels it first).
RUNNING_STATUSES: Final[frozenset[str]] = frozenset({"IN_PROGRESS", "CANCELLING"})
# Ended with every item either written or reported in the output (ERROR, CONDITION_CHECK_FAILURE):
# the only statuses after which the report can reconcile what was written.
EXACT_STATUSES: Final[frozenset[str]] = frozenset({"COMPLETED", "COMPLETED_WITH_ERRORS"})
# Ended without saying what was written: a FAILED operation may have written some items.
INEXACT_STATUSES: Final[frozenset[str]] = frozenset({"FAILED", "CANCELLED"})
# No operation was started: nothing was staged (every record rejected, or an empty source).
NOTHING_STAGED: Final = "NOTHING_STAGED"
# The hand-off did not answer (StartBulkPut failed for good, or the Map failed before it).
NOT_STARTED: Final = "NOT_STARTED"
# The service's output types (OutputS3Configuration.OutputType): both, so Finalize can fold every
# item it did not write back into a reject or a skip.
OUTPUT_TYPES: Final[tuple[str, ...]] = ("ERROR", "CONDITION_CHECK_FAILURE")
# Staged objects: gzip DynamoDB JSON Lines (logic/layout.py bulk_items_key).
INPUT_FORMAT: Final = "DYNAMODB_JSON"
INPUT_COMPRESSION: Final = "GZIP"
DEFAULT_TIER: Final = "STANDARD"
# The service's floor for MaxWriteRequestUnits (the model's `min`); Plan refuses a lower
# writeUnitsPerSecond for this engine.
MIN_WRITE_REQUEST_UNITS: Final = 1024
# First poll interval; later ones grow with the operation's age (logic/polling.py next_wait).
POLL_SECONDS: Final = 60
# The operation's deadline when the environment sets none (bulk_put_timeout_minutes).
DEFAULT_TIMEOUT_MINUTES: Final = 1440
# The counters DescribeBulkOperation reports, as the report names them.
COUNTERS: Final[Mapping[str, str]] = {
    "processedItems": "ProcessedItemCount",
    "failedItems": "FailedItemCount",
    "processedInputBytes": "ProcessedInputBytes",
    "totalInputBytes": "TotalInputBytes",
}


def bulk_engine(spec: Any) -> bool:
    """Whether the job's items go to DynamoDB's bulk put items operation (`dynamodb.engine`),
    for a parsed spec (JobSpec) or its normalized JSON (PlannedJob.spec)."""
    dynamodb = spec.get("dynamodb") if isinstance(spec, Mapping) else getattr(spec, "dynamodb", None)
    if dynamodb is None:
        return False
    engine = dynamodb.get("engine") if isinstance(dynamodb, Mapping) else getattr(dynamodb, "engine", None)
    return (engine or ENGINE_LAMBDA) == ENGINE_BULK


def hands_off(spec: Any) -> bool:
    """Whether the state machine hands the job's staged items to the operation after the Map
    (Plan's `bulkPut`) and Finalize reports one: the engine's jobs, but a dry run (nothing staged,
    nothing written)."""
    dry_run = spec.get("dryRun") if isinstance(spec, Mapping) else getattr(spec, "dry_run", False)
    return bulk_engine(spec) and not dry_run


def performance_tier(spec: Mapping[str, Any]) -> str:
    """The job's PerformanceTier (`dynamodb.performanceTier`; STANDARD when absent)."""
    return str((spec.get("dynamodb") or {}).get("performanceTier") or DEFAULT_TIER)


def client_token(job_id: str, run_id: str) -> str:
    """StartBulkPutItems' ClientToken: one per run of a job, so a retried StartBulkPut (or a
    redriven execution) gets the operation the first attempt started, never a second. The
    model's only constraint is `^[^$]+$`; a digest keeps it short whatever the ids."""
    digest = hashlib.sha256(f"{job_id}\x00{run_id}".encode()).hexdigest()
    return f"mapload-{digest[:48]}"


def start_request(
    *,
    job_id: str,
    run_id: str,
    plan_id: str,
    bucket: str,
    table: str,
    spec: Mapping[str, Any],
    data_key_arn: str | None,
) -> dict[str, Any]:
    """The StartBulkPutItems request for the job's staged items."""
    output: dict[str, Any] = {
        "S3Bucket": bucket,
        "S3KeyPrefix": layout.bulk_output_prefix(job_id, run_id),
        "OutputType": list(OUTPUT_TYPES),
    }
    if data_key_arn:  # the staging bucket's objects are SSE-KMS with the data key: so are these
        output.update({"S3SseAlgorithm": "KMS", "S3SseKmsKeyId": data_key_arn})
    request: dict[str, Any] = {
        "ClientToken": client_token(job_id, run_id),
        "InputS3Configuration": {
            "S3Bucket": bucket,
            "S3KeyPrefix": layout.bulk_items_prefix(job_id, plan_id),
            "InputFormat": INPUT_FORMAT,
            "InputCompressionType": INPUT_COMPRESSION,
        },
        "OutputS3Configuration": output,
        "TableName": table,
        "PerformanceTier": performance_tier(spec),
    }
    units = spec.get("writeUnitsPerSecond")
    if units is not None:  # absent: the service's own pace (Plan refuses one under the floor)
        request["MaxWriteRequestUnits"] = int(units)
    return request


def answer(
    description: Mapping[str, Any] | None,
    *,
    staged_objects: int,
    started_at: float,
    deadline: float,
    wait_seconds: int = POLL_SECONDS,
    pending: bool | None = None,
    error: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """$.bulkPut: the operation (BulkOperationDescription, None when nothing was staged) as the
    state machine carries it from StartBulkPut through PollBulkPut to Finalize. Every field is
    always present (the states' result selectors read each)."""
    described = description or {}
    status = str(described.get("BulkOperationStatus") or NOTHING_STAGED)
    return {
        "operationArn": described.get("BulkOperationArn"),
        "status": status,
        "pending": status in RUNNING_STATUSES if pending is None else pending,
        "waitSeconds": wait_seconds,
        "startedAt": int(started_at),
        "deadline": int(deadline),
        "stagedObjects": staged_objects,
        "counters": {name: int(described.get(field) or 0) for name, field in COUNTERS.items()},
        # The service's reason, clipped: the state stays far below Step Functions' 256 KiB.
        "failure": (
            {
                "code": described.get("FailureCode"),
                "message": clip(str(described.get("FailureMessage") or ""), TEXT_BYTES),
            }
            if described.get("FailureCode") or described.get("FailureMessage")
            else None
        ),
        "error": dict(error) if error else None,
    }
