"""What planning a job needs of Plan's settings (handlers/settings.py `PlanSettings`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol


class PlanningSettings(Protocol):
    """Plan's environment as the planning service reads it; `PlanSettings` is one."""

    @property
    def source_buckets(self) -> Collection[str]: ...
    @property
    def staging_bucket(self) -> str: ...
    @property
    def table_key(self) -> Mapping[str, str]: ...
    @property
    def max_concurrency_cap(self) -> int: ...
    @property
    def graph_enabled(self) -> bool: ...
    @property
    def worker_memory_mib(self) -> int: ...
    @property
    def plan_timeout_seconds(self) -> int: ...
    @property
    def plan_memory_mib(self) -> int: ...
