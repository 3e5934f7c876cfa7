"""A test double: a clock whose time passes only when the embedded run's Wait states wait."""

from __future__ import annotations

import threading
import time


class VirtualClock:
    """Epoch seconds, frozen but for `advance` (mapload/emulator/clock.py's Clock): a deadline minutes
    away is reached after a few polls, however fast or slow the machine is."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, seconds)
