"""What preparing a job's sources needs of Prepare's settings (handlers/settings.py `PrepareSettings`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol


class PrepareServiceSettings(Protocol):
    """Prepare's environment as the service reads it; `PrepareSettings` is one."""

    @property
    def source_buckets(self) -> Collection[str]: ...
    @property
    def staging_bucket(self) -> str: ...
    @property
    def table_key(self) -> Mapping[str, str]: ...
