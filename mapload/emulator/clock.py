"""The embedded run's clock seam: the time its functions read and its Wait states spend.

Given a clock, the emulator's Wait states return at once, having moved the clock on by
their seconds, and the functions that read the time (their `handle` takes `now`) read this
clock: a deadline minutes away is reached after a few polls, in a fraction of a second, and the
outcome does not depend on how fast the machine is. Without one, time is real.
(moto_patches.WAIT_CLOCK is the patch that makes moto's Wait states advance it.)
"""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    """What the emulator needs of a clock (tests/virtual_clock.py has the one the tests use)."""

    def time(self) -> float:
        """Epoch seconds now."""
        ...

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass (a Wait state)."""
        ...
