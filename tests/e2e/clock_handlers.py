"""A Lambda handler for tests/e2e/test_clock.py: it reads the time the emulator gives it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def handle(event: Any, env: Mapping[str, str], now: Callable[[], float]) -> dict[str, float]:
    return {"now": now()}
