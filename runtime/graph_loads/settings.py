"""What starting the graph load needs of StartGraphLoad's settings (handlers/settings.py)."""

from __future__ import annotations

from typing import Protocol


class StartSettings(Protocol):
    """StartGraphLoad's environment as the service reads it; `StartGraphLoadSettings` is one."""

    @property
    def staging_bucket(self) -> str: ...
    @property
    def loader_role_arn(self) -> str: ...
    @property
    def neptune_region(self) -> str: ...
