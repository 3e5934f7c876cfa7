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


class SourceChangedError(MaploadError):
    """The source object changed (ETag) between planning and reading a shard."""


class JobAlreadyRunningError(MaploadError):
    """Another run of the same jobId is still RUNNING."""


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
