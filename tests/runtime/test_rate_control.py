"""Rate control: the AIMD window, the write-unit bucket, the shared budget and writeUnitsPerSecond."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from adapters.budget import HeartbeatBoard, SharedBudget, phase
from adapters.dynamodb import BatchWriter, RetryPolicy
from logic.errors import InputValidationError
from logic.ratecontrol import AimdWindow, TokenBucket, budget_share, write_units
from logic.spec.parse import parse_spec, spec_to_json
from mapload.tables import create_pk_sk_table

pytestmark = pytest.mark.runtime

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "input.schema.json").read_text())
BASE: dict[str, Any] = {
    "source": "s3://source-bucket/data.jsonl",
    "format": "jsonl",
    "dynamodb": {"key": {"pk": "ITEM#{id}", "sk": "V1"}, "attributes": "*"},
}
TABLE_KEY = {"pk": "S", "sk": "S"}


# -- logic ---------------------------------------------------------------------------------


def test_write_units_are_one_per_started_kilobyte() -> None:
    assert write_units([1, 1024, 1025, 400 * 1024]) == 1 + 1 + 2 + 400
    assert write_units([]) == 0


def test_aimd_halves_once_per_window_and_grows_back_by_one_per_window() -> None:
    window = AimdWindow(16)
    assert window.allowed == 16
    for _ in range(16):  # one round of throttled answers: one decrease, not sixteen
        window.throttled()
    assert window.allowed == 8 and window.decreases == 1
    for _ in range(8):  # one window of accepted answers widens it by about one request
        window.accepted()
    assert window.allowed == 8 or window.allowed == 9
    for _ in range(10_000):
        window.accepted()
    assert window.allowed == 16  # never above the configured concurrency


def test_aimd_never_drops_below_one_request() -> None:
    window = AimdWindow(4)
    for _ in range(1000):
        window.throttled()
    assert window.allowed == 1 and window.window >= 1.0
    with pytest.raises(ValueError, match="at least 1"):
        AimdWindow(0)


def test_token_bucket_spaces_requests_at_its_rate() -> None:
    bucket = TokenBucket(100.0, now=0.0, burst_seconds=0.0)
    waits = [bucket.reserve(25, now=0.0) for _ in range(4)]
    assert waits == pytest.approx([0.25, 0.5, 0.75, 1.0])  # 100 units/s, booked in order
    assert TokenBucket(None, now=0.0).reserve(10**9, now=0.0) == 0.0


def test_token_bucket_rate_can_change_while_running() -> None:
    bucket = TokenBucket(10.0, now=0.0, burst_seconds=0.0)
    bucket.set_rate(1000.0, now=10.0)
    assert bucket.reserve(100, now=10.0) == pytest.approx(0.1)
    bucket.set_rate(None, now=20.0)
    assert bucket.reserve(100, now=20.0) == 0.0
    with pytest.raises(ValueError, match="positive"):
        bucket.set_rate(0, now=0.0)


def test_budget_is_shared_by_the_running_shards() -> None:
    assert budget_share(None, 5) is None
    assert budget_share(1000.0, 4) == 250.0
    assert budget_share(1000.0, 0) == 1000.0


# -- spec ----------------------------------------------------------------------------------


def test_write_units_per_second_is_optional_and_round_trips() -> None:
    assert parse_spec(BASE, table_key=TABLE_KEY, execution_name="j").write_units_per_second is None
    spec = parse_spec({**BASE, "writeUnitsPerSecond": 1500}, table_key=TABLE_KEY, execution_name="j")
    assert spec.write_units_per_second == 1500.0
    normalized = spec_to_json(spec)
    assert normalized["writeUnitsPerSecond"] == 1500.0
    assert parse_spec(normalized, table_key=TABLE_KEY) == spec
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(normalized)


@pytest.mark.parametrize("value", [0, -1, "100", True, 10**8])
def test_a_bad_write_budget_names_the_field(value: Any) -> None:
    raw = {**BASE, "writeUnitsPerSecond": value}
    with pytest.raises(InputValidationError) as caught:
        parse_spec(raw, table_key=TABLE_KEY, execution_name="j")
    assert caught.value.field == "writeUnitsPerSecond"
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid({**raw, "jobId": "j"})


# -- the batch writer under throttling -----------------------------------------------------


class ThrottlingTable:
    """Accepts `capacity` items per call window; throttles whole requests now and then."""

    def __init__(self, *, throttle_every: int = 0, unprocessed_every: int = 0) -> None:
        self.items: dict[str, Any] = {}
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._throttle_every = throttle_every
        self._unprocessed_every = unprocessed_every

    def batch_write_item(self, RequestItems: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            call = self.calls
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            requests = RequestItems["t"]
            if self._throttle_every and call % self._throttle_every == 0:
                raise ClientError(
                    {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                    "BatchWriteItem",
                )
            keep, back = requests, []
            if self._unprocessed_every and call % self._unprocessed_every == 0:
                keep, back = requests[: len(requests) // 2], requests[len(requests) // 2 :]
            with self._lock:
                for request in keep:
                    item = request["PutRequest"]["Item"]
                    self.items[item["pk"]["S"]] = item
            return {"UnprocessedItems": {"t": back}} if back else {}
        finally:
            with self._lock:
                self.in_flight -= 1


def _batches(n: int) -> list[list[dict[str, Any]]]:
    items = [{"pk": {"S": f"P#{i}"}} for i in range(n)]
    return [items[i : i + 25] for i in range(0, n, 25)]


def test_throttling_narrows_the_window_and_nothing_is_lost() -> None:
    table = ThrottlingTable(throttle_every=3, unprocessed_every=4)
    writer = BatchWriter(
        table, "t", in_flight=8, sleep=lambda _s: None, policy=RetryPolicy(max_attempts=50, base_seconds=0)
    )
    for batch in _batches(5000):
        writer.submit(batch)
    stats = writer.close()
    assert len(table.items) == 5000
    assert stats.window_decreases >= 1
    assert stats.min_window < 8
    assert stats.throttles > 0 and stats.unprocessed > 0


def test_the_window_caps_requests_in_flight() -> None:
    table = ThrottlingTable()
    writer = BatchWriter(table, "t", in_flight=3, sleep=lambda _s: None)
    for batch in _batches(2000):
        writer.submit(batch)
    writer.close()
    assert table.max_in_flight <= 3
    assert len(table.items) == 2000


def test_a_rate_makes_the_writer_wait_for_its_write_units() -> None:
    slept: list[float] = []
    lock = threading.Lock()

    def sleep(seconds: float) -> None:
        with lock:
            slept.append(seconds)

    clock_value = [0.0]
    writer = BatchWriter(
        ThrottlingTable(), "t", in_flight=1, sleep=sleep, rate=100.0, clock=lambda: clock_value[0]
    )
    for batch in _batches(100):  # 4 batches of 25 units at 100 units/s on a frozen clock
        writer.submit(batch, units=25)
    stats = writer.close()
    assert sum(slept) == pytest.approx(stats.budget_wait_seconds)
    assert stats.budget_wait_seconds >= 0.25 + 0.5 + 0.75 - 1e-9  # the burst covers at most the first


# -- the shared budget through the ledger --------------------------------------------------


class RecordingWriter:
    def __init__(self) -> None:
        self.rates: list[float | None] = []

    def set_rate(self, rate: float | None) -> None:
        self.rates.append(rate)


@pytest.fixture
def ledger_client() -> Any:
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "ledger")
        yield db


def test_running_shards_share_the_budget_and_a_finished_one_hands_its_share_back(ledger_client: Any) -> None:
    now = [1000.0]  # window 100 of 10 s
    board = HeartbeatBoard(ledger_client, "ledger", "job", "run-1")
    HeartbeatBoard(ledger_client, "ledger", "job", "run-0").beat(9, 99)  # another run's beat does not count
    writers = [RecordingWriter() for _ in range(4)]
    # refresh() is what the daemon thread calls once per window; here the test moves the clock.
    budgets = [SharedBudget(board, i, 1000.0, writers[i], clock=lambda: now[0]) for i in range(4)]
    for budget in budgets:
        budget.refresh()
    # Started together: none sees the others yet (the documented first-window overshoot).
    assert [w.rates[-1] for w in writers] == [1000.0] * 4
    budgets[0].refresh()  # twice in one window: one beat
    now[0] += 10
    for budget in budgets:
        budget.refresh()
    assert [w.rates[-1] for w in writers] == [250.0] * 4
    # Shards 0 and 1 end (they stop beating).
    now[0] += 10
    budgets[2].refresh()  # the window before still holds the two that ended
    assert writers[2].rates[-1] == 250.0
    budgets[3].refresh()
    now[0] += 10
    budgets[2].refresh()
    assert writers[2].rates[-1] == 500.0
    assert board.count(102) == 2
    assert board.count(99) == 0


class CountingBoard:
    """The heartbeat counters in memory: the beats of each window."""

    def __init__(self) -> None:
        self.beats: dict[int, int] = {}

    def beat(self, index: int, window: int) -> None:
        self.beats[window] = self.beats.get(window, 0) + 1

    def count(self, window: int) -> int:
        return self.beats.get(window, 0)


def test_workers_starting_a_job_take_no_more_than_budget_over_the_workers_that_can_run() -> None:
    # When a job starts nobody has beaten: the count alone gave each starting Worker the whole
    # budget, maxConcurrency times the budget in all until the next window.
    board, now = CountingBoard(), [1000.0]
    writers = [RecordingWriter() for _ in range(4)]
    budgets = [
        SharedBudget(board, i, 1000.0, writers[i], workers=4, clock=lambda: now[0])  # type: ignore[arg-type]
        for i in range(4)
    ]
    for budget in budgets:
        with budget:
            assert writers[budget._index].rates[-1] == 250.0
    assert board.beats == {}  # entering beats nothing: the first beat comes at the worker's phase
    for budget in budgets:
        budget.refresh()  # the previous window has no beats
    assert [w.rates[-1] for w in writers] == [250.0] * 4
    now[0] += 10
    budgets[0].refresh()  # only one beat seen: still a quarter, never the whole budget
    assert writers[0].rates[-1] == 250.0
    board.beats[101] = 9  # a retried beat counted twice, say: the count wins when larger
    now[0] += 10
    budgets[0].refresh()
    assert budgets[0].running == 9


def test_a_workers_first_beat_waits_for_its_phase_in_the_window_it_starts() -> None:
    board, now = CountingBoard(), [1000.0]  # the start of window 100
    budget = SharedBudget(board, 7, 100.0, RecordingWriter(), workers=2, clock=lambda: now[0])  # type: ignore[arg-type]
    assert budget._next_beat() == pytest.approx(phase(7, 10.0))
    now[0] += phase(7, 10.0)
    budget.refresh()
    assert budget._next_beat() == pytest.approx(10.0)  # beaten in this window: the next one's phase


def test_a_count_backs_off_between_tries_and_is_refused_when_counters_stay_unprocessed() -> None:
    # Counting the unprocessed counters as 0 made the Worker see fewer running and over-use.
    from adapters.budget import COUNT_BACKOFF_CAP_SECONDS, COUNT_TRIES, CountUnavailableError

    class Throttled:
        def __init__(self, throttled_tries: int) -> None:
            self.left = throttled_tries

        def update_item(self, **request: Any) -> dict[str, Any]:
            return {}

        def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
            keys = RequestItems["ledger"]["Keys"]
            if self.left > 0:
                self.left -= 1
                done, rest = [], keys
            else:
                done, rest = keys, []
            return {
                "Responses": {"ledger": [{"beats": {"N": "3"}} for _ in done]},
                "UnprocessedKeys": {"ledger": {"Keys": rest}} if rest else {},
            }

    slept: list[float] = []
    board = HeartbeatBoard(Throttled(2), "ledger", "job", "run", sleep=slept.append)
    assert board.count(5) == 12
    assert len(slept) == 2 and slept[0] > 0 and all(s <= COUNT_BACKOFF_CAP_SECONDS for s in slept)
    slept.clear()
    board = HeartbeatBoard(Throttled(100), "ledger", "job", "run", sleep=slept.append)
    with pytest.raises(CountUnavailableError, match="unprocessed"):
        board.count(5)
    assert len(slept) == COUNT_TRIES - 1

    # The worker keeps its old share when a count fails.
    writer, now = RecordingWriter(), [1000.0]
    shared = SharedBudget(board, 0, 100.0, writer, workers=2, clock=lambda: now[0])
    with pytest.raises(CountUnavailableError):
        shared.refresh()
    assert writer.rates == []


def test_a_worker_that_missed_a_window_counts_itself() -> None:
    class Board:
        def __init__(self) -> None:
            self.beats: dict[int, int] = {}

        def beat(self, index: int, window: int) -> None:
            self.beats[window] = self.beats.get(window, 0) + 1

        def count(self, window: int) -> int:
            return self.beats.get(window, 0)

    board, writer, now = Board(), RecordingWriter(), [100.0]
    budget = SharedBudget(board, 0, 900.0, writer, clock=lambda: now[0])  # type: ignore[arg-type]
    board.beats[10] = 2  # two others beat in window 10
    now[0] = 115.0  # window 11: this worker did not beat in window 10
    budget.refresh()
    assert budget.running == 3 and writer.rates[-1] == 300.0


def test_a_worker_beats_in_the_first_half_of_each_window_at_a_phase_spread_by_its_index() -> None:
    phases = [phase(index, 10.0) for index in range(1000)]
    assert all(0 <= p < 5.0 for p in phases)
    assert {int(p * 10) for p in phases} == set(range(50))  # every tenth of the half window is used
