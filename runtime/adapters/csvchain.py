"""A CSV shard's start state through the ledger (logic/csvrecords.py `StartChain`).

Every CSV shard publishes one small ledger item as it starts on its records: START (its start
state, when its look-back window made it certain or it resolved it) or SUMMARY (its transfer
summary, when it could not tell; an empty shard's is the identity). A certain shard's START goes
out beside its first writes (a round trip less before them) and is answered before the shard is
recorded done (`published`): a shard recorded done is never redone, so its START must be there.
An uncertain shard then walks back over the items of the shards before it to the nearest START,
reads that shard's lines from its known state (unless that START, a resolved shard's, holds its
`exit` state too), applies the summaries in between, and so knows its own start state exactly. A
predecessor that has not published yet is waited for, with backoff, until `deadline`; then
`CsvStartPendingError` (retried by the state machine). Nothing is ever guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from adapters.ledger import Ledger
from logic.csvrecords import NEEDS_BYTES, ShardSummary, State, advance, summarize
from logic.errors import CsvStartPendingError
from logic.values import Line

FIRST_WAIT_SECONDS = 0.2
# Every running Worker may be walking back over one block's key (a long run of uncertain shards):
# 10,000 of them, a page of up to two units each, every 10 s stays under a partition's 3,000 read
# units a second (tests/runtime/test_ledger_keys.py).
MAX_WAIT_SECONDS = 10.0


class LedgerChain:
    """`lines_of(first, end)` gives the physical lines whose first byte lies in `[first, end)`."""

    def __init__(
        self,
        ledger: Ledger,
        job_id: str,
        plan_id: str,
        index: int,
        lines_of: Callable[[int, int], Iterable[Line]],
        *,
        max_record: int,
        comment: bytes | None,
        delimiter: bytes = b",",
        deadline: float,
        now: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self._ledger, self._job, self._plan, self._index = ledger, job_id, plan_id, index
        self._lines_of = lines_of
        self._max, self._comment, self._delimiter = max_record, comment, delimiter
        self._deadline, self._now, self._sleep = deadline, now, sleep

        self._pending: Future[None] | None = None
        self._sender: ThreadPoolExecutor | None = None

    def _put(self, kind: str, body: dict[str, Any]) -> None:
        self._ledger.put_csv_state(self._job, self._plan, self._index, kind, body)

    def known(self, first: int, end: int, state: State) -> None:
        """The START goes out on a thread of its own; `published` waits for its answer."""
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="csv-start")
        self._pending = self._sender.submit(self._put, "START", {"first": first, "end": end, "state": state})

    def published(self) -> None:
        """Wait until a START sent by `known` is stored (its error, if it failed)."""
        pending, sender, self._pending, self._sender = self._pending, self._sender, None, None
        if sender is not None:
            sender.shutdown(wait=True)
        if pending is not None:
            pending.result()

    def empty(self, start: int, end: int) -> None:
        self._put("SUMMARY", ShardSummary(start, end, None, 0, False, None)._asdict())

    def resolve(self, first: int, end: int) -> State:
        own = summarize(
            self._lines_of(first, end),
            first=first,
            end=end,
            max_record=self._max,
            comment=self._comment,
            delimiter=self._delimiter,
        )
        self._put("SUMMARY", own._asdict())
        wait = FIRST_WAIT_SECONDS
        while (found := self._walk()) is None:
            if self._now() + wait > self._deadline:
                raise CsvStartPendingError(
                    f"shard {self._index}: a shard before it has not published its CSV start state or "
                    "summary yet (it may not have started); retry"
                )
            self._sleep(wait)
            wait = min(2 * wait, MAX_WAIT_SECONDS)
        base, summaries = found
        # A resolved shard's START holds its exit state too; a certain shard's lines are read.
        state = base["exit"] if "exit" in base else self._across(base["first"], base["end"], base["state"])
        for summary in summaries:
            after = summary.apply(state, self._max)
            # NEEDS_BYTES: a record is cut inside that shard, and only its lines tell.
            state = self._across(summary.first, summary.end, state) if after == NEEDS_BYTES else after
        start: dict[str, Any] = {"first": first, "end": end, "state": state}
        after = own.apply(state, self._max)
        if after != NEEDS_BYTES:
            start["exit"] = after  # the shards after it need not read its lines
        self._put("START", start)
        return state

    def _across(self, first: int, end: int, state: State) -> State:
        """The state after the lines of `[first, end)` read from `state`."""
        lines = self._lines_of(first, end)
        return advance(lines, state, max_record=self._max, comment=self._comment, delimiter=self._delimiter)

    def _walk(self) -> tuple[dict[str, Any], list[ShardSummary]] | None:
        """The nearest START before this shard and the summaries after it (in shard order), or None
        while a shard between has published neither."""
        expected = self._index - 1  # the shard whose item comes next
        summaries: list[ShardSummary] = []
        for number, kind, body in self._ledger.csv_states_before(self._job, self._plan, self._index):
            if kind == "START" and number in (expected, expected + 1):
                if number == expected + 1:  # its SUMMARY came just before: the START supersedes it
                    summaries.pop()
                return body, summaries[::-1]
            if kind != "SUMMARY" or number != expected:
                return None  # a gap: shard `expected` has published nothing yet
            summaries.append(ShardSummary(**body))
            expected -= 1
        return None
