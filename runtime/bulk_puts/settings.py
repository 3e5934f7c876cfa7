"""What the hand-off needs of StartBulkPut's settings (handlers/settings.py `StartBulkPutSettings`)."""

from __future__ import annotations

from typing import Protocol


class BulkStartSettings(Protocol):
    """StartBulkPut's environment as the service reads it."""

    @property
    def staging_bucket(self) -> str: ...
    @property
    def table_name(self) -> str: ...
    # The staging bucket's customer managed key (`data_key`), which the operation's output uses too.
    @property
    def data_key_arn(self) -> str | None: ...
    # The operation's deadline: PollBulkPut cancels an operation still running this long after its start.
    @property
    def bulk_put_timeout_minutes(self) -> int: ...
