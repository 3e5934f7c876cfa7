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


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 12
    deadline_seconds: float = 600.0
    base_seconds: float = 0.05
    cap_seconds: float = 5.0


class BatchWriter:
    """Send batches of up to 25 low-level items; retry throttling and UnprocessedItems with
    capped full-jitter backoff until written, or fail loudly with the count not written."""

    def __init__(
        self,
        client: Any,
        table: str,
        *,
        in_flight: int,
        policy: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
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

    def submit(self, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        self._slots.acquire()
        future = self._pool.submit(self._write, items)
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

    def _write(self, items: list[dict[str, Any]]) -> None:
        pending = [{"PutRequest": {"Item": item}} for item in items]
        delays = backoff_delays(self._policy.base_seconds, self._policy.cap_seconds, self._rng)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            error: str | None = None
            try:
                response = self._client.batch_write_item(RequestItems={self._table: pending})
                with self._lock:
                    self.stats.requests += 1
                pending = response.get("UnprocessedItems", {}).get(self._table, [])
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
