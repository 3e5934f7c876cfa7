"""delete and putIfAbsent in batches of 25, records of one key in file order.

`delete`: BatchWriteItem with DeleteRequests; `putIfAbsent`: PartiQL INSERTs in one
BatchExecuteStatement (logic/writemodes.py insert_statement: what AWS documents and this relies
on). Both under the same rate control, write budget, retries and bounds as BatchWriter
(adapters/dynamodb.py _PacedWriter).

Order per key. A batch never holds one key twice (DynamoDB refuses a BatchWriteItem that does, and
two INSERTs of one key would race): a record whose key is in the open batch closes it and opens the
next. And a batch waits to be sent while an earlier batch with one of its keys is unanswered, so
the records of one key reach DynamoDB in file order: the first INSERT of a key wins, the later ones
answer DuplicateItem and are skipped, as one conditional PutItem after another would.

Answers. A DeleteRequest left in UnprocessedItems is sent again. An INSERT answers alone (its
statement's Error.Code): DuplicateItem or ConditionalCheckFailed (the key is stored) skips the
record; a throttled or failed statement is sent again alone, in the next attempt's batch; a
ValidationError (its key or an attribute DynamoDB refuses, its size) hands the record back to be
rejected (take_refused); another code that retrying cannot mend counts it not written. A lost answer
(a connection error or a 5xx, for the whole request or one statement) may have been applied: a
later DuplicateItem then does not tell whose item is stored, so the record is settled by a
conditional PutItem that returns the stored item, which is counted written if it is the record's
own (logic/writemodes.py written_by_us), as ItemWriter does. An INSERT past PartiQL's statement
size (8,192 characters: a great many attribute names) goes that way too, as one conditional
PutItem.

Write units. A delete consumes the units of the item it deletes (1 per KB, 1 when there is
none), which the record does not tell: each DeleteRequest is booked at the record's own units
(its key: 1), and what DynamoDB reports (ReturnConsumedCapacity TOTAL) beyond that is charged to
the write budget after the answer, so the next requests wait for it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from adapters.dynamodb import (
    AMBIGUOUS_CODES,
    REFUSED_CODES,
    RetryPolicy,
    WriteStats,
    _PacedWriter,
    _unfinished,
)
from logic.batching import BATCH_ITEMS
from logic.writemodes import (
    MAX_STATEMENT_CHARS,
    WritePlan,
    insert_statement,
    single_item_request,
    written_by_us,
)

# A statement's Error.Code (BatchStatementError) that trying again may mend; the server errors
# among them may have been applied.
RETRYABLE_STATEMENT_CODES = frozenset(
    {
        "ProvisionedThroughputExceeded",
        "ThrottlingError",
        "RequestLimitExceeded",
        "TransactionConflict",
        "InternalServerError",
    }
)
AMBIGUOUS_STATEMENT_CODES = frozenset({"InternalServerError"})
# What an INSERT whose key is stored answers: DuplicateItem, or ConditionalCheckFailed (both
# documented BatchStatementError codes; which one DynamoDB gives is not specified): the key exists.
KEY_EXISTS_CODES = frozenset({"DuplicateItem", "ConditionalCheckFailed"})

DEFAULT_POLICY = RetryPolicy()
Key = tuple[Any, ...]
# A batch: each record's key -> its item (low-level form), write units and what the caller knows
# the record by (handed back by take_refused when DynamoDB refuses it), in file order.
Batch = dict[Key, tuple[dict[str, Any], int, Any]]


class KeyedBatchWriter(_PacedWriter):
    """Writes `plan.mode` delete or putIfAbsent records in batches of up to 25 distinct keys through
    `client` (BatchWriteItem / BatchExecuteStatement), each key's records in the order submitted;
    `item_client` sends the conditional PutItem that settles an INSERT whose answer was lost. A
    skipped record counts in `stats.skipped` (its key in `skipped_keys`, up to `sample`)."""

    def __init__(
        self,
        client: Any,
        item_client: Any,
        table: str,
        plan: WritePlan,
        *,
        in_flight: int,
        policy: RetryPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        rate: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sample: int = 10,
        max_in_flight: int | None = None,
    ) -> None:
        if not plan.mode.batched:
            raise ValueError(f"write mode {plan.mode.name!r} has no batch form here")
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
        self._item_client = item_client
        self._plan = plan
        self._sample = sample
        self.skipped_keys: list[Key] = []
        self._open: Batch = {}
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="keyed-batch")
        # Bounds memory: at most twice the in-flight count of batches exist at once.
        self._slots = threading.BoundedSemaphore(self.threads * 2)
        self._busy: set[Key] = set()  # keys of the batches sent and not yet answered
        self._freed = threading.Condition(self._lock)
        self._futures: list[Future[None]] = []

    @property
    def plan(self) -> WritePlan:
        return self._plan

    def units(self, item_size: int) -> int:
        """Write units booked for one record (a delete's real units are charged after its answer)."""
        return self._plan.units(item_size)

    def submit(self, key: Key, item: dict[str, Any], units: int = 1, record: Any = None) -> None:
        """Queue one record (low-level item, key attributes included) whose key values are `key`;
        `record`: what `take_refused` hands back if DynamoDB refuses it."""
        if key in self._open:
            self._dispatch()
        self._open[key] = (item, units, record)
        if len(self._open) >= BATCH_ITEMS:
            self._dispatch()

    def close(self) -> WriteStats:
        self._dispatch()
        self._pool.shutdown(wait=True)
        for future in self._futures:
            future.result()
        return self._raise_if_not_written()

    def _dispatch(self) -> None:
        batch, self._open = self._open, {}
        if not batch:
            return
        self._slots.acquire()
        with self._freed:
            while not self._busy.isdisjoint(batch):
                self._freed.wait()
            self._busy.update(batch)
        future = self._pool.submit(
            self._delete if self._plan.mode.operation == "DeleteItem" else self._insert, batch
        )
        future.add_done_callback(lambda _f: self._answered_batch(batch))
        self._futures.append(future)
        if len(self._futures) > 256:  # keep the list short on long shards
            self._futures = _unfinished(self._futures)

    def _answered_batch(self, batch: Batch) -> None:
        with self._freed:
            self._busy.difference_update(batch)
            self._freed.notify_all()
        self._slots.release()

    def _charge(self, units: float) -> None:
        """Book units DynamoDB reports beyond those paced: the next requests wait for them."""
        if units > 0:
            with self._lock:
                self._bucket.reserve(int(units + 0.999999), now=self._clock())

    # -- delete ------------------------------------------------------------------------------

    def _delete(self, batch: Batch) -> None:
        key_names = self._plan.key
        pending = [
            {"DeleteRequest": {"Key": {name: entry[0][name] for name in key_names}}}
            for entry in batch.values()
        ]
        units = sum(u for _, u, _ in batch.values())
        total = len(pending)

        def attempt_once(_attempt: int) -> tuple[int, str | None]:
            nonlocal pending
            booked = max(1, -(-units * len(pending) // total))
            sent: float | None = self._pace(booked)
            throttled = True
            try:
                response = self._client.batch_write_item(
                    RequestItems={self._table: pending}, ReturnConsumedCapacity="TOTAL"
                )
                with self._lock:
                    self.stats.requests += 1
                self._charge(_consumed(response, self._table) - booked)
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
            except BotoCoreError as exc:  # a repeated delete is harmless: send it again
                sent = None  # no answer: no round trip
                return len(pending), f"{type(exc).__name__}: {exc}"
            finally:
                self._answered(throttled, sent)

        self._retrying(attempt_once)

    # -- putIfAbsent -------------------------------------------------------------------------

    def _insert(self, batch: Batch) -> None:
        """Send the batch's INSERTs until each has its answer. Kept whole: one attempt's closure
        reads and narrows `pending`, `ambiguous` and `settle`, which the settling after the retries
        reads; split, they would travel as shared state between methods."""
        statements = {key: insert_statement(self._table, item) for key, (item, _, _) in batch.items()}
        oversized = [key for key, s in statements.items() if len(s["Statement"]) > MAX_STATEMENT_CHARS]
        pending: Batch = {key: entry for key, entry in batch.items() if key not in oversized}
        ambiguous: set[Key] = set()  # keys whose earlier attempt may have been applied
        settle: list[Key] = []  # keys to settle with a conditional PutItem, in file order

        def attempt_once(_attempt: int) -> tuple[int, str | None]:
            nonlocal pending
            if not pending:
                return 0, None
            sent: float | None = self._pace(sum(u for _, u, _ in pending.values()))
            throttled = False
            try:
                response = self._client.batch_execute_statement(Statements=[statements[k] for k in pending])
                with self._lock:
                    self.stats.requests += 1
                # One answer per statement, in the order sent (BatchStatementResponse).
                answers = response.get("Responses", [])
                still: Batch = {}
                error: str | None = None
                for (key, entry), answer in zip(pending.items(), answers, strict=True):
                    failed = answer.get("Error")
                    if not failed:
                        continue
                    code = str(failed.get("Code", ""))
                    if code in KEY_EXISTS_CODES:
                        if key in ambiguous or self.replayed:
                            settle.append(key)
                        else:
                            self._skipped(key)
                    elif code in RETRYABLE_STATEMENT_CODES:
                        throttled = True
                        still[key] = entry
                        error = f"{code}: {failed.get('Message', '')}"
                        if code in AMBIGUOUS_STATEMENT_CODES:
                            ambiguous.add(key)
                        with self._lock:
                            self.stats.throttles += 1
                    elif code in REFUSED_CODES:  # this record: its key or an attribute, its size
                        self._refuse(entry[2], code, str(failed.get("Message", "")))
                    else:
                        self._give_up(1, f"{code}: {failed.get('Message', '')}")
                pending = still
                return len(pending), error
            except ClientError as exc:
                throttled = True
                if exc.response.get("Error", {}).get("Code") in AMBIGUOUS_CODES:
                    ambiguous.update(pending)
                retryable = self._retryable(exc, len(pending))
                return (len(pending), retryable) if retryable else (0, None)
            except BotoCoreError as exc:  # connection reset, read timeout: maybe applied
                throttled = True
                sent = None  # no answer: no round trip
                ambiguous.update(pending)
                return len(pending), f"{type(exc).__name__}: {exc}"
            finally:
                self._answered(throttled, sent)

        self._retrying(attempt_once)
        for key in [*oversized, *settle]:
            item, units, record = batch[key]
            self._settle(key, item, units, record, ambiguous=key in ambiguous or self.replayed)

    def _settle(self, key: Key, item: dict[str, Any], units: int, record: Any, *, ambiguous: bool) -> None:
        """One conditional PutItem of the record (logic/writemodes.py): written, or skipped unless
        the stored item is its own and an earlier attempt may have written it."""
        method, arguments = single_item_request(self._plan, item)
        call = getattr(self._item_client, method)
        maybe_ours = ambiguous

        def attempt_once(_attempt: int) -> tuple[int, str | None]:
            nonlocal maybe_ours
            sent: float | None = self._pace(units)
            throttled = False
            try:
                call(TableName=self._table, **arguments)
                with self._lock:
                    self.stats.requests += 1
                return 0, None
            except ClientError as exc:
                with self._lock:
                    self.stats.requests += 1
                code = exc.response.get("Error", {}).get("Code")
                if code == "ConditionalCheckFailedException":
                    if not (maybe_ours and written_by_us(item, exc.response.get("Item"))):
                        self._skipped(key)
                    return 0, None
                if code in REFUSED_CODES:
                    self._refuse(record, str(code), str(exc.response.get("Error", {}).get("Message", "")))
                    return 0, None
                throttled = True
                maybe_ours = maybe_ours or code in AMBIGUOUS_CODES
                retryable = self._retryable(exc, 1)
                return (1, retryable) if retryable else (0, None)
            except BotoCoreError as exc:
                throttled = maybe_ours = True
                sent = None  # no answer: no round trip
                return 1, f"{type(exc).__name__}: {exc}"
            finally:
                self._answered(throttled, sent)

        self._retrying(attempt_once)

    def _skipped(self, key: Key) -> None:
        with self._lock:
            self.stats.skipped += 1
            if len(self.skipped_keys) < self._sample:
                self.skipped_keys.append(key)


def _consumed(response: dict[str, Any], table: str) -> float:
    """The write units a response reports for `table` (0 when it reports none)."""
    return sum(
        float(c.get("CapacityUnits") or 0)
        for c in response.get("ConsumedCapacity") or []
        if c.get("TableName") == table
    )
