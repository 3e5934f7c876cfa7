"""The loader's exception classes; their names are matched by the state machine's Retry/Catch."""

from __future__ import annotations


class MaploadError(Exception):
    """Base of every error the loader raises on purpose."""


class InputValidationError(MaploadError):
    """The execution input (or a source object's header) is not acceptable; `field` names where."""

    def __init__(self, field: str, message: str) -> None:
        # args keeps both parts so the exception survives pickling and copying unchanged.
        super().__init__(field, message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class SourceNotAllowedError(MaploadError):
    """The source names a bucket this loader may not read."""


class SourceNotFoundError(MaploadError):
    """The source object or prefix does not exist (or holds no objects)."""


class SourceReadError(MaploadError):
    """A source object could not be read to its end, even after resuming the broken stream."""


class SourceChangedError(MaploadError):
    """The source object changed (ETag) between planning and reading a shard."""


class JobAlreadyRunningError(MaploadError):
    """Another run of the same jobId is still RUNNING."""


class JobAlreadyLoadedError(MaploadError):
    """Every shard of this plan (same objects and spec) is already recorded for the jobId: a re-run
    would write nothing and report an earlier run's counts. `"reload": true` runs it again."""


class JobTakenOverError(MaploadError):
    """Another run took this run's jobId over (a redriven execution of a displaced run)."""


class ShardWriteError(MaploadError):
    """Some items of a shard could not be written; `not_written` says how many."""

    def __init__(self, message: str, not_written: int) -> None:
        super().__init__(message, not_written)
        self.message = message
        self.not_written = not_written

    def __str__(self) -> str:
        return self.message


class ReconciliationError(MaploadError):
    """The ledger does not account for every planned shard, or its counts do not add up."""


class PartMismatchError(MaploadError):
    """A part's checksum or size differs from the one already recorded for the same part number."""


class UploadConflictError(MaploadError):
    """The multipart upload in progress for a key was started for another part set (other N)."""


class UploadGoneError(MaploadError):
    """The ledger names a multipart upload that S3 no longer has (aborted or expired)."""


class CorruptSourceError(MaploadError):
    """A compressed source (gzip or zip) is corrupt, truncated or uses an unsupported method."""


class PartSetError(MaploadError):
    """A part set cannot become one S3 object (names, numbering, S3's part limits); says which part."""


class GraphLoaderError(MaploadError):
    """The Neptune loader refused a request or could not be reached; `status`/`code` say how."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message, status, code)
        self.message = message
        self.status = status
        self.code = code

    def __str__(self) -> str:
        return self.message


class GraphLoaderBusyError(GraphLoaderError):
    """The loader stayed throttled, unavailable or at its concurrent-load limit through every retry."""


class GraphLoaderAccessDeniedError(GraphLoaderError):
    """The loader answered HTTP 403: the function's neptune-db grant does not hold (yet). Neptune
    applies IAM changes within up to 10 minutes, so right after a deploy the state machine retries
    this a bounded number of times (stacks/graph_load.py GRAPH_IAM_RETRY_*) before it fails."""


class GraphLoadFailedError(MaploadError):
    """The Neptune bulk load ended in a status other than LOAD_COMPLETED (or than LOAD_FAILED for
    the dangling edges the endpoint check tolerated alone)."""


class StagedFileGoneError(MaploadError):
    """A file an earlier shard staged is no longer in the staging bucket (expired by its
    lifecycle rule while the ledger still records the shard done): the graph would load in part."""


class EndpointCheckLimitError(MaploadError):
    """A property graph's edges end at more ids found nowhere than the edge endpoint check can hold
    while a tolerance could still let the load start."""


class DanglingEdgesError(MaploadError):
    """More of a property graph's edges than graph.maxDanglingPercent end at a vertex that is
    neither of the job nor in the graph: the load was not started."""


class GraphLoadTimeoutError(MaploadError):
    """The graph load was still pending at the input's `graph.timeoutMinutes` deadline."""


class UncertainStartError(MaploadError):
    """A CSV shard cannot tell whether its first line lies inside a quoted field (a quoted newline
    within csv.maxRecordBytes before it): it writes nothing rather than guess."""


class CsvStartPendingError(MaploadError):
    """A CSV shard that needs the summaries of the shards before it (adapters/csvchain.py) found one
    still missing at its deadline: retried by the state machine."""


# Where in its shard the record being processed when an error was raised lies: set on the error
# by the record loop (shards/records.py), read by the failure the Worker records
# (logic/report.py shard_failure). An attribute, not a wrapper: the error keeps its name, which
# the state machine's Retry matches.
_AT_RECORD = "mapload_record"


def mark_record(error: BaseException, where: dict[str, int]) -> None:
    """Say on `error` which record it was raised at (`shardLine` and `offset`, or a Parquet row's
    `rowGroup` and `row`), unless an inner loop already did."""
    if getattr(error, _AT_RECORD, None) is None:
        setattr(error, _AT_RECORD, dict(where))


def record_of(error: BaseException) -> dict[str, int] | None:
    """The record `error` was raised at (mark_record), or None."""
    where = getattr(error, _AT_RECORD, None)
    return dict(where) if isinstance(where, dict) else None


class BulkPutBusyError(MaploadError):
    """DynamoDB refused to start a bulk put items operation for now (its concurrency quotas): the
    state machine tries again."""


class BulkPutRefusedError(MaploadError):
    """DynamoDB refused a job's bulk put items operation (the table's state, the request)."""


class BulkPutInputError(MaploadError):
    """The staged items of a bulk put items job are not what its shards recorded."""


class BulkPutFailedError(MaploadError):
    """A job's bulk put items operation ended FAILED or CANCELLED, or was still running at its
    deadline."""
