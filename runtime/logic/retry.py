"""Retry delays: capped exponential backoff with full jitter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

__all__ = ["backoff_delays"]


class RandomSource(Protocol):
    def random(self) -> float: ...


def backoff_delays(base: float, cap: float, rng: RandomSource) -> Iterator[float]:
    """Endless delays in seconds: attempt n waits uniformly in [0, min(cap, base * 2**n)).

    Full jitter spreads the retries of many workers throttled at once; callers bound the number
    of attempts and the total time themselves (e.g. with itertools.islice).
    """
    if base < 0 or cap < 0:
        raise ValueError(f"base and cap must not be negative, got {base}, {cap}")
    ceiling = min(cap, base)
    while True:
        yield ceiling * rng.random()
        # Doubling stops at the cap, so the ceiling never overflows however long the caller retries.
        ceiling = min(cap, ceiling * 2)
