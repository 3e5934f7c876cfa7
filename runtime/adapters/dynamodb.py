"""Writes items to the target table, many requests in flight, nothing dropped: batches with BatchWriteItem, or
single-item PutItem/UpdateItem/DeleteItem for a conditional or update write mode (a marked
TransactWriteItems for an update with a numeric ADD)."""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from adapters.ledger import MARKED_IN_FLIGHT, Markers
from logic.errors import ShardWriteError
from logic.ratecontrol import AimdWindow, TokenBucket
from logic.retry import backoff_delays
from logic.writemodes import (
    MARKER_UNITS,
    MAX_COUNTED_RECORDS,
    WritePlan,
    combined,
    counted_update,
    single_item_requests,
    written_by_us,
)

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
# Why a part of a cancelled transaction failed, when trying again may succeed.
# Server errors among them: the request may have been applied although it failed.
AMBIGUOUS_CODES = frozenset({"InternalServerError", "ServiceUnavailable"})
RETRYABLE_CANCELLATIONS = frozenset(
    {"TransactionConflict", "ProvisionedThroughputExceeded", "ThrottlingError"}
)
# DynamoDB refusing one record's single-item request (or its statement, or its part of a
# transaction) for what the record is: the item it would make is past 400 KB, its key or a value
# is not what the table takes. No retry mends it and no other record shares it: the record is
# rejected with DynamoDB's words (REFUSED_CODE), the others are written.
REFUSED_CODES = frozenset({"ValidationException", "ValidationError"})
REFUSED_CODE = "dynamodb_refused"


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
    # Single-item writes: records whose condition was not met (logic/writemodes.py); of them, those
    # a redone range (`replayed`) found stored with another item, whose writer it cannot tell.
    skipped: int = 0
    uncertain: int = 0


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 12
    deadline_seconds: float = 600.0
    base_seconds: float = 0.05
    cap_seconds: float = 5.0


class Contended(str):
    """Why an attempt failed, when the only reason was another writer's transaction on the same
    item (TransactionConflict): that writer is making progress, so the attempt is retried with
    backoff until the policy's deadline, not counted against its attempts."""


def _unfinished(futures: list[Future[None]]) -> list[Future[None]]:
    """The futures not done yet; a done one that failed raises its error here (a batch that raised
    must fail the shard even when its future is dropped from the list before close())."""
    for future in futures:
        if future.done():
            future.result()
    return [f for f in futures if not f.done()]


class _PacedWriter:
    """What both writers share: a pool of sending threads, rate control (at most `in_flight`
    requests, fewer while DynamoDB throttles: an AIMD window, whose cap grows with the quickest
    round trip measured up to `max_in_flight`: logic/ratecontrol.py; no faster than `rate` write
    units per second when one is set, changed by `set_rate` while the writer runs), and each
    request retried with capped full-jitter backoff until done, or counted as not written."""

    def __init__(
        self,
        table: str,
        *,
        in_flight: int,
        policy: RetryPolicy,
        sleep: Callable[[float], None],
        rng: random.Random | None,
        rate: float | None,
        clock: Callable[[], float],
        max_in_flight: int | None = None,
    ) -> None:
        self._table = table
        self._policy = policy
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self.stats = WriteStats()
        self._not_written = 0
        self._first_error: str | None = None
        # Records DynamoDB refused (REFUSED_CODES): what `submit` was given for each, and why.
        self._refused: list[tuple[Any, str]] = []
        self._clock = clock
        self.window = AimdWindow(in_flight, ceiling=max(in_flight, max_in_flight or in_flight))
        # Sending threads: as many as the window may ever allow.
        self.threads = int(self.window.ceiling)
        self._bucket = TokenBucket(rate, now=clock())
        self._gate = threading.Condition(self._lock)
        self._active = 0
        self.stats.min_window = self.window.allowed
        # The records are a range an earlier attempt of this run started and did not finish (the
        # shard service's attempt marker): a refused condition may be that attempt's own write.
        self.replayed = False

    def set_rate(self, rate: float | None) -> None:
        """Write units per second from now on (None: as fast as DynamoDB accepts)."""
        with self._lock:
            self._bucket.set_rate(rate, now=self._clock())

    def _raise_if_not_written(self) -> WriteStats:
        if self._not_written:
            raise ShardWriteError(
                f"{self._not_written} records were not written to {self._table} after retries: "
                f"{self._first_error}",
                not_written=self._not_written,
            )
        return self.stats

    def _pace(self, units: int) -> float:
        """Wait for the write budget, then for a place in the AIMD window; the time (the
        writer's clock) it got the place, for `_answered`'s round trip."""
        with self._lock:
            wait = self._bucket.reserve(units, now=self._clock())
            self.stats.budget_wait_seconds += wait
        if wait > 0:
            self._sleep(wait)
        with self._gate:
            while self._active >= self.window.allowed:
                self._gate.wait()
            self._active += 1
        return self._clock()

    def _answered(self, throttled: bool, sent: float | None = None) -> None:
        """One request answered (`sent`: when, by `_pace`, it was sent: its round trip)."""
        round_trip = None if sent is None else self._clock() - sent
        with self._gate:
            self._active -= 1
            allowed = self.window.allowed
            if throttled:
                before = self.window.decreases
                self.window.throttled(round_trip)
                self.stats.window_decreases += self.window.decreases - before
                self.stats.min_window = min(self.stats.min_window, self.window.allowed)
            else:
                self.window.accepted(round_trip)
            # One place freed: one waiting sender; more only when the window widened.
            self._gate.notify(1 + max(0, self.window.allowed - allowed))

    def _retrying(self, attempt_once: Callable[[int], tuple[int, str | None]]) -> None:
        """Call `attempt_once(attempt)` until it leaves nothing pending. It paces itself and
        returns (records still pending, why); a non-retryable answer is given up inside. A failure
        only of contention (why: Contended) is retried until the deadline, not counted as one of
        `max_attempts`."""
        delays = backoff_delays(self._policy.base_seconds, self._policy.cap_seconds, self._rng)
        started = time.monotonic()
        attempt = counted = 0
        while True:
            attempt += 1
            pending, error = attempt_once(attempt)
            if not pending:
                return
            counted += not isinstance(error, Contended)
            elapsed = time.monotonic() - started
            if counted >= self._policy.max_attempts or elapsed >= self._policy.deadline_seconds:
                self._give_up(pending, f"gave up after {attempt} attempts / {elapsed:.0f}s: {error}")
                return
            with self._lock:
                self.stats.retries += 1
            self._sleep(next(delays))

    def _retryable(self, exc: ClientError, count: int) -> str | None:
        """The error code of a retryable refusal (counted as a throttle); None after giving up."""
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code not in RETRYABLE_CODES:
            self._give_up(count, f"{code}: {exc}")
            return None
        with self._lock:
            self.stats.throttles += 1
        return Contended(code) if code == "TransactionConflictException" else code

    def take_refused(self) -> list[tuple[Any, str]]:
        """The records DynamoDB refused since the last call (each as `submit` was given it, and
        DynamoDB's words), for the caller to reject; empty for a writer that never refuses one."""
        with self._lock:
            refused, self._refused = self._refused, []
        return refused

    def _refuse(self, record: Any, code: str, message: str) -> None:
        with self._lock:
            self._refused.append((record, f"DynamoDB refused the write: {code}: {message}"))

    def _give_up(self, count: int, reason: str) -> None:
        with self._lock:
            self._not_written += count
            if self._first_error is None:
                self._first_error = reason


class BatchWriter(_PacedWriter):
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
        max_in_flight: int | None = None,
    ) -> None:
        super().__init__(
            table,
            in_flight=in_flight,
            policy=policy,
            sleep=sleep,
            rng=rng,
            rate=rate,
            clock=clock,
            max_in_flight=max_in_flight,
        )
        self._client = client
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="batch")
        # Bounds memory: at most twice the most requests in flight of batches exist at once.
        self._slots = threading.BoundedSemaphore(self.threads * 2)
        self._futures: list[Future[None]] = []

    def submit(self, items: list[dict[str, Any]], units: int | None = None) -> None:
        """Queue one batch; `units` = its write units (default one per item)."""
        self._submit([{"PutRequest": {"Item": item}} for item in items], units)

    def submit_deletes(self, keys: list[dict[str, Any]], units: int | None = None) -> None:
        """Queue one batch of DeleteRequests by key (writeMode sync's removed keys)."""
        self._submit([{"DeleteRequest": {"Key": key}} for key in keys], units)

    def _submit(self, requests: list[dict[str, Any]], units: int | None) -> None:
        if not requests:
            return
        self._slots.acquire()
        future = self._pool.submit(self._write, requests, len(requests) if units is None else units)
        future.add_done_callback(lambda _f: self._slots.release())
        self._futures.append(future)
        if len(self._futures) > 256:  # keep the list short on long shards
            self._futures = _unfinished(self._futures)

    def close(self) -> WriteStats:
        self._pool.shutdown(wait=True)
        for future in self._futures:
            future.result()
        return self._raise_if_not_written()

    def _write(self, requests: list[dict[str, Any]], units: int) -> None:
        pending, items = requests, requests

        def attempt_once(_attempt: int) -> tuple[int, str | None]:
            nonlocal pending
            # A retry of some items costs their share of the batch's units.
            sent: float | None = self._pace(max(1, -(-units * len(pending) // len(items))))
            throttled = True
            try:
                response = self._client.batch_write_item(RequestItems={self._table: pending})
                with self._lock:
                    self.stats.requests += 1
                pending = response.get("UnprocessedItems", {}).get(self._table, [])
                throttled = bool(pending)
                if not pending:
                    return 0, None
                with self._lock:
                    self.stats.unprocessed += len(pending)
                return len(pending), f"{len(pending)} UnprocessedItems"
            except ClientError as exc:
                code = self._retryable(exc, len(pending))
                return (len(pending), code) if code else (0, None)
            except BotoCoreError as exc:  # connection reset, read timeout, endpoint unreachable
                sent = None  # no answer: no round trip
                return len(pending), f"{type(exc).__name__}: {exc}"
            finally:
                self._answered(throttled, sent)

        self._retrying(attempt_once)


# What _cancelled answers for records to send one at a time (a refused combined update).
_ALONE: Final = Contended("each record on its own")

# What ItemWriter's queue carries: a record's key values, item, write units, byte offset and what
# the caller knows it by (handed back when DynamoDB refuses it: take_refused).
_Entry = tuple[tuple[Any, ...], dict[str, Any], int, int, Any]


class ItemWriter(_PacedWriter):
    """Single-item writes for a conditional or update write mode (logic/writemodes.py): PutItem,
    UpdateItem or DeleteItem, under the same rate control, retries and bounds as BatchWriter.

    Its sending threads (lanes: as many as the window may allow) take the records in submission
    order, except that a record whose key has an earlier record queued or in flight waits for it:
    the records of one key are written in the order they were submitted (file order), one at a
    time, while any free lane takes the next record of another key (no lane waits behind a busy
    one). At most two records per lane wait at once (`records_bound`; MARKED_IN_FLIGHT in all when
    counting: the records of one key waiting behind each other go in one transaction, so every
    record waiting may be in flight, and the marker keys' bound is per record). A refused
    condition counts the record in `stats.skipped` (its key in `skipped_keys`, up to `sample` of
    them), unless the stored item is the one this request writes: then an earlier attempt whose
    answer was lost wrote it. An update with a numeric ADD (`plan.counters`) sends each record in a
    TransactWriteItems with its marker from `markers` (keyed by the record's byte offset, given to
    `submit`; the records of a key waiting behind each other in one: `_write_counted`): a marker
    already stored means an earlier shard attempt or run applied the record, which is skipped.
    """

    def __init__(
        self,
        client: Any,
        table: str,
        plan: WritePlan,
        *,
        in_flight: int,
        policy: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        rate: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sample: int = 10,
        markers: Markers | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        if plan.counters and markers is None:
            raise ValueError(f"adding numbers to {', '.join(plan.counters)} exactly once needs markers")
        if plan.counters:  # each a transaction with a marker: the marker keys bound the rate
            in_flight = min(in_flight, MARKED_IN_FLIGHT)
            max_in_flight = min(max_in_flight or in_flight, MARKED_IN_FLIGHT)
        super().__init__(
            table,
            in_flight=in_flight,
            policy=policy,
            sleep=sleep,
            rng=rng,
            rate=rate,
            clock=clock,
            max_in_flight=max_in_flight,
        )
        self._client = client
        self._plan = plan
        self._sample = sample
        self._markers = markers
        self.skipped_keys: list[tuple[Any, ...]] = []
        # Records a lane may take (the first of their key), records behind an earlier one of
        # their key (by key; a key is in `_behind` while one of its records is queued or in
        # flight), how many records wait in all (at most 2 a lane: bounded memory), and closing.
        self._ready: collections.deque[_Entry] = collections.deque()
        self._behind: dict[tuple[Any, ...], collections.deque[_Entry]] = {}
        self._queued = 0
        self._closing = False
        queue_lock = threading.Lock()
        self._work = threading.Condition(queue_lock)  # a record is ready, or closing
        self._space = threading.Condition(queue_lock)  # fewer records wait than the bound
        # Records queued or in flight at once (submit waits beyond): bounded memory, and, when
        # counting, the markers in flight (a transaction carries those of its key's waiting records).
        self.records_bound = MARKED_IN_FLIGHT if plan.counters else 2 * self.threads
        self._lanes = [
            threading.Thread(target=self._serve, name=f"item-{i}", daemon=True) for i in range(self.threads)
        ]
        self._failure: BaseException | None = None
        for thread in self._lanes:
            thread.start()

    @property
    def plan(self) -> WritePlan:
        return self._plan

    def units(self, item_size: int) -> int:
        """Write units one record's request costs (the write budget's price: WritePlan.units)."""
        return self._plan.units(item_size)

    def submit(
        self, key: tuple[Any, ...], item: dict[str, Any], units: int = 1, offset: int = -1, record: Any = None
    ) -> None:
        """Queue one item (low-level form) whose key values are `key`; `offset`: the record's byte
        offset in its object (what its marker is keyed by, when the plan has counters); `record`:
        what `take_refused` hands back if DynamoDB refuses it."""
        entry = (key, item, units, offset, record)
        with self._space:
            while self._queued >= self.records_bound:
                self._space.wait()
            self._queued += 1
            waiting = self._behind.get(key)
            if waiting is not None:  # an earlier record of the key is queued or in flight
                waiting.append(entry)
                return
            self._behind[key] = collections.deque()
            self._ready.append(entry)
            self._work.notify()

    def close(self) -> WriteStats:
        with self._work:
            self._closing = True
            self._work.notify_all()
        for thread in self._lanes:
            thread.join()
        if self._failure is not None:
            raise self._failure
        return self._raise_if_not_written()

    def _serve(self) -> None:
        while True:
            with self._work:
                while not self._ready and not (self._closing and not self._queued):
                    self._work.wait()
                if not self._ready:
                    return  # closing, nothing queued or in flight
                entry = self._ready.popleft()
                group = [entry]
                if self._counts(entry[1]):  # the records of its key waiting behind it go along
                    waiting = self._behind[entry[0]]
                    while waiting and len(group) < MAX_COUNTED_RECORDS and self._counts(waiting[0][1]):
                        group.append(waiting.popleft())
            try:
                if self._counts(entry[1]):
                    self._write_counted(group)
                else:
                    self._write(*entry)
            except BaseException as error:  # surfaced by close(); the lane keeps draining
                with self._lock:
                    self._failure = self._failure or error
            finally:
                self._done(entry[0], len(group))

    def _counts(self, item: dict[str, Any]) -> bool:
        """Whether `item`'s update adds a number (or set) to a counter: a marked transaction."""
        return self._markers is not None and any(name in item for name in self._plan.counters)

    def _done(self, key: tuple[Any, ...], records: int = 1) -> None:
        """`records` of `key` were written (or given up): the next of its key, if any, may go."""
        with self._work:
            self._queued -= records
            self._space.notify(records)
            waiting = self._behind[key]
            if waiting:
                self._ready.append(waiting.popleft())
                self._work.notify()
            else:
                del self._behind[key]
            if self._closing and not self._queued:
                self._work.notify_all()  # every lane may stop

    def _requests(self, item: dict[str, Any]) -> list[tuple[Callable[..., Any], dict[str, Any]]]:
        """The client calls and their arguments that write `item`, one after another (several
        for an update past DynamoDB's expression limits: logic/writemodes.py update_requests)."""
        return [
            (getattr(self._client, method), {"TableName": self._table, **arguments})
            for method, arguments in single_item_requests(self._plan, item)
        ]

    def _write(
        self, key: tuple[Any, ...], item: dict[str, Any], units: int, offset: int, record: Any
    ) -> None:
        """Send the record's requests in order, each paced at the record's units (an UpdateItem
        costs the item's size); after a give-up (here, or in another lane: the shard fails
        either way) or a refusal the rest stay unsent, so a record counts once in those not
        written or refused."""
        for call, arguments in self._requests(item):
            with self._lock:
                given_up, refused = self._not_written, len(self._refused)
            self._send(key, item, units, call, arguments, record)
            with self._lock:
                if self._not_written > given_up or len(self._refused) > refused:
                    return

    def _send(
        self,
        key: tuple[Any, ...],
        item: dict[str, Any],
        units: int,
        call: Callable[..., Any],
        arguments: dict[str, Any],
        record: Any = None,
    ) -> None:
        # Whether an earlier attempt may have been applied although its answer was lost.
        unanswered = False

        def attempt_once(attempt: int) -> tuple[int, str | None]:
            nonlocal unanswered
            sent: float | None = self._pace(units)
            throttled = False
            try:
                call(**arguments)
                with self._lock:
                    self.stats.requests += 1
                return 0, None
            except ClientError as exc:
                with self._lock:
                    self.stats.requests += 1
                code = exc.response.get("Error", {}).get("Code")
                if code == "ConditionalCheckFailedException":
                    stored = exc.response.get("Item")
                    if not ((attempt > 1 or self.replayed) and written_by_us(item, stored)):
                        self._skipped(key, uncertain=self.replayed)
                    return 0, None
                if code in REFUSED_CODES:
                    self._refuse(record, str(code), str(exc.response.get("Error", {}).get("Message", "")))
                    return 0, None
                throttled = True
                # A 5xx answer says nothing of whether the request was applied.
                unanswered = unanswered or code in AMBIGUOUS_CODES
                retryable = self._retryable(exc, 1)
                return (1, retryable) if retryable else (0, None)
            except BotoCoreError as exc:  # connection reset, read timeout, endpoint unreachable
                throttled = unanswered = True
                sent = None  # no answer: no round trip
                return 1, f"{type(exc).__name__}: {exc}"
            finally:
                self._answered(throttled, sent)

        self._retrying(attempt_once)

    def _write_counted(self, group: list[_Entry]) -> None:
        """Records of one key that add to a counter, in file order: as few transactions as
        `combined` allows (each one update and every record's marker), one after another."""
        while group:
            merged, take = group[0][1], 1
            while take < len(group):
                merged_next = combined(self._plan, merged, group[take][1])
                if merged_next is None:
                    break
                merged, take = merged_next, take + 1
            self._send_counted(group[:take])
            group = group[take:]

    def _send_counted(self, entries: list[_Entry]) -> None:
        """One transaction: the records' combined update with each record's marker. A marker found
        stored (an earlier shard attempt or run applied that record) drops its record, skipped, and
        the rest go again; a refused update is sent again record by record, so that only the
        record DynamoDB refuses is rejected; conflicts and throttling are retried (conflicts
        until the deadline: Contended)."""
        assert self._markers is not None
        markers = self._markers
        key = entries[0][0]
        pending = list(entries)
        alone: list[_Entry] = []
        unanswered = False  # an earlier attempt may have been applied although its answer was lost

        def attempt_once(_attempt: int) -> tuple[int, str | None]:
            nonlocal pending, alone, unanswered
            item: dict[str, Any] | None = pending[0][1]
            for entry in pending[1:]:
                item = None if item is None else combined(self._plan, item, entry[1])
            if item is None:  # what is left no longer combines: one at a time
                alone, pending = pending, []
                return 0, None
            arguments = counted_update(
                self._plan, item, self._table, markers.table, [markers.item(e[3]) for e in pending]
            )
            # One update (the largest record's units) and a marker per record, transactional.
            units = max(e[2] for e in pending) + 2 * MARKER_UNITS * (len(pending) - 1)
            sent: float | None = self._pace(units)
            throttled = False
            try:
                self._client.transact_write_items(**arguments)
                with self._lock:
                    self.stats.requests += 1
                return 0, None
            except ClientError as exc:
                with self._lock:
                    self.stats.requests += 1
                code = exc.response.get("Error", {}).get("Code")
                if code == "TransactionCanceledException":
                    left, why = self._cancelled(exc, key, pending, applied_before=not unanswered)
                    if why is _ALONE:
                        alone, pending = left, []
                        return 0, None
                    pending = left
                    throttled = bool(pending)
                    return len(pending), why
                throttled = True
                unanswered = unanswered or code in AMBIGUOUS_CODES
                retryable = self._retryable(exc, len(pending))
                return (len(pending), retryable) if retryable else (0, None)
            except BotoCoreError as exc:  # connection reset, read timeout, endpoint unreachable
                throttled = unanswered = True
                sent = None
                return len(pending), f"{type(exc).__name__}: {exc}"
            finally:
                self._answered(throttled, sent)

        self._retrying(attempt_once)
        for entry in alone:
            self._send_counted([entry])

    def _cancelled(
        self, exc: ClientError, key: tuple[Any, ...], entries: list[_Entry], *, applied_before: bool
    ) -> tuple[list[_Entry], str | None]:
        """A counted transaction (an update and the records' markers) cancelled: the records still
        to send and why (None: none to retry; _ALONE: each on its own). A record whose marker is
        stored was applied: by an earlier run (the marker names another run: skipped) or by this
        run (its own: an unanswered attempt, or an attempt of this run that crashed, whose counts
        were never recorded: written); a marker naming no run (stored before markers named one)
        is skipped when `applied_before` (no attempt of this one may have applied it). A refused
        update is the record's when it is alone, else each is sent alone to find it; the reasons
        that allow it are retried, else the records given up."""
        cancelled = exc.response.get("CancellationReasons", [])
        reasons = [r.get("Code") for r in cancelled]
        found = {i for i, reason in enumerate(reasons[1:]) if reason == "ConditionalCheckFailed"}
        if found:
            run_id = self._markers.run_id if self._markers is not None else ""
            for i in found:
                stored = cancelled[i + 1].get("Item", {}).get("runId", {}).get("S")
                if (stored != run_id) if stored else applied_before:
                    self._skipped(key)
            left = [e for i, e in enumerate(entries) if i not in found]
            return left, (Contended("the other records' markers were stored: sent again") if left else None)
        if reasons[:1] == ["ValidationError"]:  # the update, not a marker
            if len(entries) > 1:
                return entries, _ALONE
            self._refuse(entries[0][4], "ValidationError", str(cancelled[0].get("Message", "")))
            return [], None
        why = f"TransactionCanceledException: {reasons}"
        if not RETRYABLE_CANCELLATIONS.intersection(reasons):
            self._give_up(len(entries), why)
            return [], None
        with self._lock:
            self.stats.throttles += 1
        # Only conflicts: another writer's transaction on one of its items is going through.
        conflicts = {str(r) for r in reasons} <= {"TransactionConflict", "None"}
        return entries, (Contended(why) if conflicts else why)

    def _skipped(self, key: tuple[Any, ...], *, uncertain: bool = False) -> None:
        with self._lock:
            self.stats.skipped += 1
            self.stats.uncertain += int(uncertain)
            if len(self.skipped_keys) < self._sample:
                self.skipped_keys.append(key)
