"""What finishing a job needs of Finalize's settings (handlers/settings.py `FinalizeSettings`)."""

from __future__ import annotations

from typing import Protocol


class ReportSettings(Protocol):
    """Finalize's environment as the report service reads it; `FinalizeSettings` is one."""

    @property
    def staging_bucket(self) -> str: ...
    @property
    def table_name(self) -> str: ...
    @property
    def table_arn(self) -> str: ...
    @property
    def worker_timeout_seconds(self) -> int: ...
