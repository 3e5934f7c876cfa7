"""Starting a job's bulk put items operation, once per run: the staged items checked against what
the shards recorded (a crashed attempt's leftovers deleted: the service reads every object under
the prefix), then StartBulkPutItems with the run's ClientToken, then the operation recorded on the
job in the ledger (a takeover or `mapload release` cancels it first)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from adapters.bulk_puts import BulkOperations
from adapters.ledger import Ledger
from adapters.s3 import S3Store
from bulk_puts.settings import BulkStartSettings
from logic import bulk_put, layout
from logic.errors import BulkPutInputError, SourceNotFoundError
from logic.job import PlannedJob

# How many missing objects the error names.
NAMED_KEYS = 3


def start(
    event: Mapping[str, Any],
    settings: BulkStartSettings,
    operations: BulkOperations,
    ledger: Ledger,
    store: S3Store,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Start the operation on the job's staged items (`event`: StartBulkPut's input, `job` and
    `shardCount`); the result is $.bulkPut (logic/bulk_put.py `answer`): the operation, its
    status and the poll schedule, or NOTHING_STAGED when no record was staged."""
    job = PlannedJob.parse(event["job"])
    job_id, run_id, plan_id = job.job_id, job.run_id, job.plan
    timeout = 60 * settings.bulk_put_timeout_minutes
    recorded = ledger.get_job(job_id) or {}
    if recorded.get("bulkRunId") == run_id and recorded.get("bulkOperationArn"):
        # A retried start (the Lambda timed out after the start was recorded): the same operation.
        described = operations.describe(str(recorded["bulkOperationArn"]))
        started = _started(described, now())
        objects = int(recorded.get("bulkObjects") or 0)
        return bulk_put.answer(
            described, staged_objects=objects, started_at=started, deadline=started + timeout
        )
    staged = _checked_items(event, job, ledger, store, settings.staging_bucket)
    if not staged:
        return bulk_put.answer(None, staged_objects=0, started_at=now(), deadline=now())
    request = bulk_put.start_request(
        job_id=job_id,
        run_id=run_id,
        plan_id=plan_id,
        bucket=settings.staging_bucket,
        table=job.target_table(settings.table_name),
        spec=job.spec,
        data_key_arn=settings.data_key_arn,
    )
    described = operations.start(request)
    ledger.record_bulk_operation(job_id, run_id, str(described["BulkOperationArn"]), len(staged))
    started = now()
    return bulk_put.answer(
        described, staged_objects=len(staged), started_at=started, deadline=started + timeout
    )


def _started(described: Mapping[str, Any] | None, fallback: float) -> float:
    at = (described or {}).get("StartTime")
    return at.timestamp() if isinstance(at, datetime) else fallback


def _checked_items(
    event: Mapping[str, Any], job: PlannedJob, ledger: Ledger, store: S3Store, bucket: str
) -> set[str]:
    """The staged objects the shards recorded (`bulkKeys`), once what is under the items prefix
    is exactly those: an object no shard names (a crashed attempt's part) is deleted, a recorded
    one that is missing refuses the start (BulkPutInputError)."""
    count = int(event["shardCount"])
    shards = ledger.shards(job.job_id, job.plan, count)
    unrecorded = sorted(set(range(count)) - set(shards))
    if unrecorded:
        raise BulkPutInputError(
            f"{len(unrecorded)} of {count} shards recorded no staged items (shard "
            f"{', '.join(map(str, unrecorded[:NAMED_KEYS]))}): nothing was handed off; run the job again"
        )
    recorded = {str(key) for counts in shards.values() for key in counts.get("bulkKeys") or ()}
    prefix = layout.bulk_items_prefix(job.job_id, job.plan)
    try:
        listed = {obj.key for obj in store.list(bucket, prefix)}
    except SourceNotFoundError:  # nothing under the prefix
        listed = set()
    leftovers = sorted(listed - recorded)
    if leftovers:
        failed = store.delete_keys(bucket, leftovers)
        if failed is not None:
            raise BulkPutInputError(
                f"{len(leftovers)} staged objects no shard recorded under s3://{bucket}/{prefix} could not "
                f"be deleted (the operation would load them): {failed}"
            )
    missing = sorted(recorded - listed)
    if missing:
        raise BulkPutInputError(
            f"{len(missing)} staged objects the shards recorded are missing (s3://{bucket}/"
            f'{", ".join(missing[:NAMED_KEYS])}): deleted or expired; run the job again with "reload": true'
        )
    return recorded
