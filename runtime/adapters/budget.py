"""A job-wide write budget shared by the running shards, through heartbeat counters in the ledger.

Time is cut into windows of `interval` seconds (10 s). Once per window each running worker adds 1
to a counter of the window (UpdateItem ADD: one write unit), one of BUCKETS counter items chosen
by its shard index (`pk=BEAT#<jobId>#<runId>#<window>#<bucket>`, `sk=BEAT`). It then reads the
previous window's BUCKETS counters (one eventually consistent BatchGetItem: half a read unit
each) — every worker that ran through that window added to them — and sets its writer to budget /
that count (plus itself, if it did not beat in that window), but never to more than budget / the
Workers that can run at once (min(maxConcurrency, shards): Plan puts it in the job as `workers`).
That floor is what keeps a job's first windows under the budget: when a job starts nobody has
beaten yet, and the count alone would give every starting worker the whole budget. A worker beats
at a fixed phase of the window, in its first half and set by its index — its first beat too, so
10,000 Workers started at once do not all beat in the same second — and the previous window's
beats are at least half a window old when it reads them (eventual consistency settles in about a
second). Until its first beat it writes at budget / workers.

Why counters and not leases: a Query of every lease, by every worker, every 10 s reads on the order
of 10^5 units a second at 10,000 workers, on one key. Here each key takes at most
`max workers / BUCKETS` writes and `max workers` half-unit reads per half window
(tests/runtime/test_ledger_keys.py computes them at the largest run), and a worker's cost is one
write and BUCKETS half reads per window, whatever the number of shards.

A worker that ends or crashes simply stops beating: the others take its share back within two
windows, down to the floor. They under-use the budget, never over-use it: while fewer Workers
run than can (the job's last shards), each keeps budget / workers; a beat whose answer was lost
and was retried counts twice (a smaller share); a count whose keys stay unprocessed after a few
backed-off tries keeps the old share; and the split is equal, not by the work each shard has left.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from logic.ratecontrol import budget_share

# Counter items per window. Bound: 10,000 workers' beats in half a window over this many keys stay
# under 1,000 write units a second; every worker reads all of them (see the module docstring).
BUCKETS: Final = 4
# Seconds a window lasts: each worker beats and re-reads the count once per window.
INTERVAL_SECONDS: Final = 10.0
# A worker's beat falls in the first PHASE_SPAN of its window (see `phase`).
PHASE_SPAN: Final = 0.5
_GOLDEN = 0.6180339887498949
# BatchGetItem tries for one count, and the capped, jittered backoff between them (seconds).
COUNT_TRIES: Final = 5
COUNT_BACKOFF_SECONDS: Final = 0.05
COUNT_BACKOFF_CAP_SECONDS: Final = 0.5


class CountUnavailableError(Exception):
    """Some heartbeat counters stayed unprocessed: the count would be short (keep the old share)."""


class RateSetter(Protocol):
    def set_rate(self, rate: float | None) -> None: ...


def phase(index: int, interval: float) -> float:
    """Seconds into each window at which shard `index` beats: spread over the window's first half."""
    return (index * _GOLDEN) % 1.0 * PHASE_SPAN * interval


class HeartbeatBoard:
    """The heartbeat counters of one run in the ledger table."""

    def __init__(
        self,
        client: Any,
        table: str,
        job_id: str,
        run_id: str,
        ttl_seconds: int = 86_400,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._db = client
        self._sleep = sleep
        self._table = table
        self._prefix = f"BEAT#{job_id}#{run_id}#"
        self._ttl_seconds = ttl_seconds

    def key(self, window: int, bucket: int) -> dict[str, dict[str, str]]:
        return {"pk": {"S": f"{self._prefix}{window}#{bucket}"}, "sk": {"S": "BEAT"}}

    def beat(self, index: int, window: int) -> None:
        self._db.update_item(
            TableName=self._table,
            Key=self.key(window, index % BUCKETS),
            UpdateExpression="ADD beats :one SET expiresAt = if_not_exists(expiresAt, :expires)",
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":expires": {"N": str(int(time.time()) + self._ttl_seconds)},
            },
        )

    def count(self, window: int) -> int:
        """The beats of `window`: the workers that ran through it. Unprocessed keys (throttled) are
        asked again after a capped, jittered backoff; CountUnavailableError if some remain, since
        a short count would make the worker over-use the budget."""
        keys: list[dict[str, Any]] = [self.key(window, bucket) for bucket in range(BUCKETS)]
        total = 0
        for attempt in range(COUNT_TRIES):
            if attempt:
                ceiling = min(COUNT_BACKOFF_CAP_SECONDS, COUNT_BACKOFF_SECONDS * 2**attempt)
                self._sleep(random.uniform(ceiling / 2, ceiling))
            answer = self._db.batch_get_item(
                RequestItems={self._table: {"Keys": keys, "ProjectionExpression": "beats"}}
            )
            total += sum(int(item["beats"]["N"]) for item in answer["Responses"].get(self._table, []))
            keys = (answer.get("UnprocessedKeys") or {}).get(self._table, {}).get("Keys", [])
            if not keys:
                return total
        raise CountUnavailableError(
            f"{len(keys)} of {BUCKETS} heartbeat counters unprocessed after {COUNT_TRIES} tries"
        )


class SharedBudget:
    """Keeps one writer at budget / running shards while the shard runs (a daemon thread)."""

    def __init__(
        self,
        board: HeartbeatBoard,
        index: int,
        budget: float,
        writer: RateSetter,
        *,
        workers: int = 1,
        interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._board = board
        self._index = index
        self._budget = budget
        self._workers = max(1, workers)  # the Workers that can run at once: the share's floor
        self._writer = writer
        self._interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="write-budget", daemon=True)
        self._beaten: tuple[int, ...] = ()  # the last two windows this worker beat in
        self.running = 1
        self.rate: float | None = None

    def __enter__(self) -> SharedBudget:
        # No ledger call here: the first beat comes at this worker's phase, like every other.
        self.running = self._workers
        self.rate = budget_share(self._budget, self.running)
        self._writer.set_rate(self.rate)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # Nothing to hand back: the counters of the windows to come will not hold this worker.
        self._stop.set()
        self._thread.join()

    def refresh(self) -> None:
        window = int(self._clock() // self._interval)
        if window not in self._beaten:  # one beat per window, however often it is called
            self._board.beat(self._index, window)
            self._beaten = (*self._beaten[-1:], window)
        # The previous window's count holds this worker only if it beat then.
        itself = 0 if window - 1 in self._beaten else 1
        self.running = max(self._workers, self._board.count(window - 1) + itself)
        self.rate = budget_share(self._budget, self.running)
        self._writer.set_rate(self.rate)

    def _next_beat(self) -> float:
        """Seconds until this worker's next phase: in this window if it is ahead and the worker has
        not beaten in it yet, else in the next."""
        now = self._clock()
        window = int(now // self._interval)
        at = window * self._interval + phase(self._index, self._interval)
        if at <= now or window in self._beaten:
            at += self._interval
        return max(0.0, at - now)

    def _loop(self) -> None:
        while not self._stop.wait(self._next_beat()):
            try:
                self.refresh()
            except (
                Exception
            ):  # a missed beat or count only keeps the old share (a missed beat counts it out once)
                continue
