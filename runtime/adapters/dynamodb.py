"""Writes item batches to the target table with BatchWriteItem, many requests in flight, nothing dropped."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from logic.errors import ShardWriteError
from logic.ratecontrol import AimdWindow, TokenBucket
from logic.retry import backoff_delays

# Answers that mean "try again later", not "this request is wrong".
RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)


@dataclass
class WriteStats:
    requests: int = 0
    retries: int = 0
    throttles: int = 0
    unprocessed: int = 0
    # Rate control: times the AIMD window was halved, its smallest value, seconds spent waiting
    # for write budget (summed over the sending threads).
    window_decreases: int = 0
    min_window: int = 0
    budget_wait_seconds: float = 0.0


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 12
    deadline_seconds: float = 600.0
    base_seconds: float = 0.05
    cap_seconds: float = 5.0


class BatchWriter:
    """Send batches of up to 25 low-level items; retry throttling and UnprocessedItems with
    capped full-jitter backoff until written, or fail loudly with the count not written.

    Rate control (runtime/logic/ratecontrol.py): at most `in_flight` requests, fewer while
    DynamoDB throttles (an AIMD window), and no faster than `rate` write units per second when a
    rate is set (`set_rate` changes it while the writer runs: the job's budget is re-shared as
    shards start and finish).
    """

    def __init__(
        self,
        client: Any,
        table: str,
        *,
        in_flight: int,
        policy: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        rate: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._table = table
        self._policy = policy
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="batch")
        # Bounds memory: at most twice the in-flight count of batches exist at once.
        self._slots = threading.BoundedSemaphore(in_flight * 2)
        self._lock = threading.Lock()
        self._futures: list[Future[None]] = []
        self.stats = WriteStats()
        self._not_written = 0
        self._first_error: str | None = None
        self._clock = clock
        self.window = AimdWindow(in_flight)
        self._bucket = TokenBucket(rate, now=clock())
        self._gate = threading.Condition(self._lock)
        self._active = 0
        self.stats.min_window = self.window.allowed

    def set_rate(self, rate: float | None) -> None:
        """Write units per second from now on (None: as fast as DynamoDB accepts)."""
        with self._lock:
            self._bucket.set_rate(rate, now=self._clock())

    def submit(self, items: list[dict[str, Any]], units: int | None = None) -> None:
        """Queue one batch; `units` = its write units (default one per item)."""
        if not items:
            return
        self._slots.acquire()
        future = self._pool.submit(self._write, items, len(items) if units is None else units)
        future.add_done_callback(lambda _f: self._slots.release())
        self._futures.append(future)
        if len(self._futures) > 256:  # keep the list short on long shards
            self._futures = [f for f in self._futures if not f.done()]

    def close(self) -> WriteStats:
        self._pool.shutdown(wait=True)
        for future in self._futures:
            future.result()
        if self._not_written:
            raise ShardWriteError(
                f"{self._not_written} records were not written to {self._table} after retries: "
                f"{self._first_error}",
                not_written=self._not_written,
            )
        return self.stats

    def _pace(self, units: int) -> None:
        """Wait for the write budget, then for a place in the AIMD window."""
        with self._lock:
            wait = self._bucket.reserve(units, now=self._clock())
            self.stats.budget_wait_seconds += wait
        if wait > 0:
            self._sleep(wait)
        with self._gate:
            while self._active >= self.window.allowed:
                self._gate.wait()
            self._active += 1

    def _answered(self, throttled: bool) -> None:
        with self._gate:
            self._active -= 1
            if throttled:
                before = self.window.decreases
                self.window.throttled()
                self.stats.window_decreases += self.window.decreases - before
                self.stats.min_window = min(self.stats.min_window, self.window.allowed)
            else:
                self.window.accepted()
            self._gate.notify_all()

    def _write(self, items: list[dict[str, Any]], units: int) -> None:
        pending = [{"PutRequest": {"Item": item}} for item in items]
        delays = backoff_delays(self._policy.base_seconds, self._policy.cap_seconds, self._rng)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            error: str | None = None
            # A retry of some items costs their share of the batch's units.
            self._pace(max(1, -(-units * len(pending) // len(items))))
            throttled = True
            try:
                response = self._client.batch_write_item(RequestItems={self._table: pending})
                with self._lock:
                    self.stats.requests += 1
                pending = response.get("UnprocessedItems", {}).get(self._table, [])
                throttled = bool(pending)
                if not pending:
                    return
                error = f"{len(pending)} UnprocessedItems"
                with self._lock:
                    self.stats.unprocessed += len(pending)
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code not in RETRYABLE_CODES:
                    self._give_up(len(pending), f"{code}: {exc}")
                    return
                error = code
                with self._lock:
                    self.stats.throttles += 1
            except BotoCoreError as exc:  # connection reset, read timeout, endpoint unreachable
                error = f"{type(exc).__name__}: {exc}"
            finally:
                self._answered(throttled)
            elapsed = time.monotonic() - started
            if attempt >= self._policy.max_attempts or elapsed >= self._policy.deadline_seconds:
                self._give_up(len(pending), f"gave up after {attempt} attempts / {elapsed:.0f}s: {error}")
                return
            with self._lock:
                self.stats.retries += 1
            self._sleep(next(delays))

    def _give_up(self, count: int, reason: str) -> None:
        with self._lock:
            self._not_written += count
            if self._first_error is None:
                self._first_error = reason
