"""How fast a worker may write: an AIMD window of requests in flight and a write-unit token bucket.

Pure logic (no clock of its own, no threads): the batch writer asks and reports, and passes the
time in. Two controls, both needed:
- `AimdWindow` reacts to throttling the way TCP reacts to loss: each fully accepted request
  widens the window by 1/window (about one more request in flight per round trip), a throttled
  one halves it — at most once per window's worth of answers, since the requests already in
  flight saw the same congestion. The window never drops below one request, and never exceeds
  its cap: the configured write concurrency, sized for a round trip of REFERENCE_ROUND_TRIP; when
  the quickest round trip measured is longer, the cap grows in proportion (the same requests
  per second in flight, by Little's law) up to the explicit ceiling (`max_write_concurrency`).
  The quickest, not the average, round trip: the path's own delay, not the queueing that more
  requests in flight (or a busy process) add, so the cap does not feed on itself.
- `TokenBucket` holds a worker to its share of a job-wide write budget (`writeUnitsPerSecond`
  divided by the shards running): a request waits until its write units are covered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# DynamoDB charges one write unit per started KB of item size (a standard table, PutItem or a
# BatchWriteItem put).
WRITE_UNIT_BYTES = 1024
# The round trip `write_concurrency` is sized for (docs/SETTINGS.md: 8-16 keep a worker busy at
# 20 ms); a longer one widens the window's cap in proportion, up to its ceiling.
REFERENCE_ROUND_TRIP = 0.020


def write_units(item_sizes: Iterable[int]) -> int:
    """Write units a batch of items of these (estimated) sizes consumes: ceil(size / 1 KB) each."""
    return sum(max(1, math.ceil(size / WRITE_UNIT_BYTES)) for size in item_sizes)


class AimdWindow:
    """Requests a worker may have in flight: additive increase, multiplicative decrease."""

    def __init__(
        self,
        maximum: int,
        *,
        start: float | None = None,
        minimum: float = 1.0,
        ceiling: int | None = None,
        reference: float = REFERENCE_ROUND_TRIP,
    ) -> None:
        if maximum < 1:
            raise ValueError(f"maximum must be at least 1, got {maximum}")
        if ceiling is not None and ceiling < maximum:
            raise ValueError(f"ceiling must be at least the maximum {maximum}, got {ceiling}")
        self.maximum = float(maximum)
        self.ceiling = float(maximum if ceiling is None else ceiling)
        self.reference = reference
        # The quickest round trip answered so far (seconds); None before the first answer.
        self.min_round_trip: float | None = None
        self.cap = self.maximum
        self.minimum = min(minimum, self.maximum)
        self.window = self.maximum if start is None else max(self.minimum, min(start, self.maximum))
        self.decreases = 0
        self._since_decrease = math.inf
        # Answers to wait for after a decrease: the requests that were in flight when it happened.
        self._guard = 0.0

    @property
    def allowed(self) -> int:
        """Whole requests that may be in flight now."""
        return max(1, int(self.window))

    def accepted(self, round_trip: float | None = None) -> None:
        """A request was fully accepted (`round_trip`: seconds from send to answer): widen by
        1/window, up to the cap the quickest round trip allows."""
        self._since_decrease += 1
        self._measured(round_trip)
        self.window = min(self.cap, self.window + 1.0 / self.window)

    def throttled(self, round_trip: float | None = None) -> None:
        """A request was throttled or partly unprocessed: halve, once per window of answers."""
        self._since_decrease += 1
        self._measured(round_trip)
        if self._since_decrease < self._guard:
            return
        self._guard = self.window
        self.window = max(self.minimum, self.window / 2)
        self._since_decrease = 0
        self.decreases += 1

    def _measured(self, round_trip: float | None) -> None:
        if round_trip is None or round_trip <= 0:
            return
        if self.min_round_trip is None or round_trip < self.min_round_trip:
            self.min_round_trip = round_trip
            scaled = self.maximum * round_trip / self.reference
            self.cap = min(self.ceiling, max(self.maximum, scaled))


class TokenBucket:
    """A rate in write units per second with a small burst; `None` rate means unlimited.

    `reserve(units, now)` books the units and returns how long to wait before sending them.
    Booking ahead (the balance may go negative) keeps concurrent senders fair and in order.
    """

    def __init__(self, rate: float | None, *, now: float, burst_seconds: float = 0.2) -> None:
        self._burst_seconds = burst_seconds
        self.rate: float | None = None
        self._tokens = 0.0
        self._stamp = now
        self.set_rate(rate, now=now)

    def set_rate(self, rate: float | None, *, now: float) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be positive or None, got {rate}")
        self._refill(now)
        self.rate = rate
        if rate is not None:
            self._tokens = min(self._tokens, rate * self._burst_seconds)

    def reserve(self, units: int, *, now: float) -> float:
        if self.rate is None:
            return 0.0
        self._refill(now)
        self._tokens -= units
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def _refill(self, now: float) -> None:
        if self.rate is not None:
            capacity = self.rate * self._burst_seconds
            self._tokens = min(capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now


def budget_share(budget: float | None, running: int) -> float | None:
    """One worker's part of the job-wide budget: budget / shards running (itself included)."""
    if budget is None:
        return None
    return budget / max(1, running)
