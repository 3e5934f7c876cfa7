"""The AIMD window's cap follows the quickest round trip measured, up to its ceiling
(max_write_concurrency), and keeps its reaction to throttling (virtual clocks throughout)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from adapters.dynamodb import BatchWriter, RetryPolicy
from logic.ratecontrol import REFERENCE_ROUND_TRIP, AimdWindow

pytestmark = pytest.mark.runtime


def grown(window: AimdWindow, answers: int = 10_000, round_trip: float | None = None) -> int:
    for _ in range(answers):
        window.accepted(round_trip)
    return window.allowed


def test_at_the_reference_round_trip_or_quicker_the_cap_is_the_write_concurrency() -> None:
    assert REFERENCE_ROUND_TRIP == 0.020
    assert grown(AimdWindow(16, ceiling=64), round_trip=0.020) == 16
    assert grown(AimdWindow(16, ceiling=64), round_trip=0.003) == 16
    assert grown(AimdWindow(16, ceiling=64)) == 16  # no round trip measured: as before


def test_a_longer_round_trip_widens_the_cap_in_proportion_up_to_the_ceiling() -> None:
    assert grown(AimdWindow(16, ceiling=64), round_trip=0.050) == 40  # 16 per 20 ms
    assert grown(AimdWindow(16, ceiling=64), round_trip=0.200) == 64  # the ceiling
    assert grown(AimdWindow(16), round_trip=0.200) == 16  # no ceiling given: write_concurrency


def test_the_quickest_round_trip_sets_the_cap_not_a_slow_answer_after_it() -> None:
    window = AimdWindow(16, ceiling=64)
    grown(window, 100, round_trip=0.050)
    assert grown(window, round_trip=0.500) == 40  # queueing does not feed the cap
    assert window.min_round_trip == 0.050
    assert grown(window, round_trip=0.025) == 20  # a quicker answer narrows it
    assert window.cap == 20


def test_the_window_grows_past_the_write_concurrency_additively_and_halves_on_throttling() -> None:
    window = AimdWindow(16, ceiling=64)
    for _ in range(16):
        window.accepted(0.05)
    assert window.allowed == 16  # one window of answers: about one more request
    assert grown(window, 2, round_trip=0.05) == 17
    grown(window, round_trip=0.05)
    for _ in range(40):  # one round of throttled answers: one decrease
        window.throttled(0.05)
    assert (window.allowed, window.decreases) == (20, 1)
    for _ in range(1000):
        window.throttled(0.05)
    assert window.allowed == 1


def test_a_ceiling_below_the_write_concurrency_is_refused() -> None:
    with pytest.raises(ValueError, match="ceiling must be at least the maximum 16"):
        AimdWindow(16, ceiling=8)


class Clock:
    """A virtual clock: each request the client answers takes `round_trip` of it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


class SlowClient:
    def __init__(self, clock: Clock, round_trip: float, throttle: bool = False) -> None:
        self.clock, self.round_trip, self.throttle, self.requests = clock, round_trip, throttle, 0

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.clock.advance(self.round_trip)
        self.requests += 1
        if self.throttle:
            (table, writes), *_ = RequestItems.items()
            return {"UnprocessedItems": {table: writes[1:]}} if len(writes) > 1 else {}
        return {}


def test_the_batch_writer_measures_its_round_trips_and_its_threads_follow_the_ceiling() -> None:
    clock = Clock()
    writer = BatchWriter(SlowClient(clock, 0.0625), "t", in_flight=4, max_in_flight=16, clock=clock)
    assert writer.threads == 16 and writer.window.allowed == 4
    for n in range(300):
        writer.submit([{"pk": {"S": f"{n}"}}])
    writer.close()
    assert writer.window.min_round_trip is not None and writer.window.min_round_trip >= 0.0625
    assert writer.window.cap == pytest.approx(12.5) and writer.window.allowed == 12  # 4 per 20 ms


def test_throttling_still_halves_a_window_grown_past_the_write_concurrency() -> None:
    clock = Clock()
    writer = BatchWriter(
        SlowClient(clock, 0.050, throttle=True),
        "t",
        in_flight=4,
        max_in_flight=16,
        clock=clock,
        sleep=lambda _s: None,
        policy=RetryPolicy(base_seconds=0, cap_seconds=0),
    )
    writer.window.window = 10.0
    for n in range(50):
        writer.submit([{"pk": {"S": f"{n}"}}, {"pk": {"S": f"{n}b"}}])
    stats = writer.close()
    assert stats.window_decreases >= 1 and stats.min_window < 10
