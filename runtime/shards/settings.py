"""What processing a shard needs of the Worker's settings (handlers/settings.py `WorkerSettings`)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol


class ShardSettings(Protocol):
    """The Worker's environment as the shard service reads it; `WorkerSettings` is one."""

    @property
    def source_buckets(self) -> Collection[str]: ...
    @property
    def staging_bucket(self) -> str: ...
    @property
    def table_name(self) -> str: ...
    @property
    def ledger_ttl_days(self) -> int: ...
    @property
    def write_concurrency(self) -> int: ...
    @property
    def write_ceiling(self) -> int: ...
