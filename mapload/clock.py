"""The embedded run's clock seam: the time its functions read and its Wait states spend.

Given a clock, the emulator's Wait states return at once, having moved the clock on by
their seconds, and the functions that read the time (their `handle` takes `now`) read this
clock: a deadline minutes away is reached after a few polls, in a fraction of a second, and the
outcome does not depend on how fast the machine is. Without one, time is real.
"""

from __future__ import annotations

from typing import Any, Protocol

# moto's one place where a Wait state (Seconds, SecondsPath, Timestamp, TimestampPath) waits.
_SAVED: dict[str, Any] = {}


class Clock(Protocol):
    """What the emulator needs of a clock (tests/virtual_clock.py has the one the tests use)."""

    def time(self) -> float:
        """Epoch seconds now."""
        ...

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass (a Wait state)."""
        ...


def install(clock: Clock) -> None:
    """Make moto's Wait states advance `clock` instead of sleeping (uninstall() restores them)."""
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

    if "_wait_interval" not in _SAVED:
        _SAVED["_wait_interval"] = WaitFunction._wait_interval

    def wait_interval(self: Any, env: Any, wait_seconds: int) -> None:
        clock.advance(wait_seconds)

    WaitFunction._wait_interval = wait_interval  # type: ignore[method-assign]


def uninstall() -> None:
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

    if "_wait_interval" in _SAVED:
        WaitFunction._wait_interval = _SAVED.pop("_wait_interval")  # type: ignore[method-assign]
