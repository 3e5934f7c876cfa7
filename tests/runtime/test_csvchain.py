"""CSV shards that cannot tell their start state learn it through the ledger (adapters/csvchain.py):
their transfer summaries equal the reference's states, and every shard of any file, run in any
order, reads exactly the reference's records it owns."""

from __future__ import annotations

import csv
import io
import random
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_support import REGION
from test_logic_csvrecords import (
    ANY_FILE,
    Record,
    _flat,
    any_file,
    csv_reader_outcomes,
    cuts,
    naive_file,
    naive_rows,
    owned_by,
    raw_bytes,
    read_shard,
    reference,
)

from adapters.csvchain import MAX_WAIT_SECONDS, LedgerChain
from adapters.ledger import Ledger
from logic.csvrecords import NEEDS_BYTES, State, advance, reference_records, summarize
from logic.errors import CsvStartPendingError
from logic.parsing import split_csv_line
from logic.records import iter_shard_lines
from logic.values import Line

pytestmark = pytest.mark.runtime


def lines_of(data: bytes, first: int, end: int) -> Iterator[Line]:
    read_from = first - 1 if first > 0 else 0
    return iter_shard_lines([data[read_from:]], read_from=read_from, start=first, end=end)


def reference_state(
    data: bytes, at: int, *, max_record: int, comment: bytes | None, data_start: int
) -> State:
    """The state at line start `at` by the reference: the first byte of the record spanning it."""
    for record in reference_records(
        data[data_start:], max_record=max_record, comment=comment, base=data_start
    ):
        # Its lines start in (offset, offset + len(raw)]: the last may be empty; the next line
        # starts after the last one's line end.
        if record.offset < at <= record.offset + len(record.raw):
            return record.offset
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=raw_bytes,
    max_record=st.integers(1, 30),
    comment=st.sampled_from([None, b"#"]),
    cut=st.tuples(st.integers(0, 80), st.integers(1, 40)),
)
def test_a_summary_applied_to_the_reference_state_gives_the_reference_state_after_it(
    body: bytes, max_record: int, comment: bytes | None, cut: tuple[int, int]
) -> None:
    start = min(cut[0], len(body))
    end = min(start + cut[1], len(body))
    owned = list(lines_of(body, start, end))
    if not owned:
        return
    nxt = next(lines_of(body, end, len(body)), None)
    if nxt is None:
        return  # no shard after it: the state at the end of the data is no shard's start
    first, after = owned[0].offset, nxt.offset
    before = reference_state(body, first, max_record=max_record, comment=comment, data_start=0)
    want = reference_state(body, after, max_record=max_record, comment=comment, data_start=0)
    summary = summarize(owned, first=first, end=end, max_record=max_record, comment=comment)
    got = summary.apply(before, max_record)
    assert got in (want, NEEDS_BYTES)
    assert advance(owned, before, max_record=max_record, comment=comment) == want
    if got == NEEDS_BYTES:  # only a record cut inside the shard needs its bytes
        assert before is not None and summary.reach - before > max_record


class FakeLedger:
    """The ledger's CSV items in memory; a re-put must store the same body (idempotent retries)."""

    def __init__(self) -> None:
        self.items: dict[tuple[int, str], dict[str, Any]] = {}

    def put_csv_state(self, job_id: str, plan_id: str, index: int, kind: str, body: dict[str, Any]) -> None:
        assert self.items.setdefault((index, kind), body) == body
        self.items[(index, kind)] = body

    def csv_states_before(
        self, job_id: str, plan_id: str, index: int
    ) -> Iterator[tuple[int, str, dict[str, Any]]]:
        for key in sorted((k for k in self.items if k[0] < index), reverse=True):
            yield key[0], key[1], dict(self.items[key])


def run_shards(
    data: bytes,
    shard_size: int,
    order: random.Random,
    *,
    max_record: int,
    comment: bytes | None,
    data_start: int,
    delimiter: bytes = b",",
) -> list[Record]:
    """Every shard through a LedgerChain, started in a random order: a shard that waits lets the next
    one in that order run (and wait in turn), as concurrent Workers would."""
    shards = cuts(len(data), data_start, shard_size)
    ledger = FakeLedger()
    pending = list(range(len(shards)))
    order.shuffle(pending)
    results: dict[int, tuple[list[Line | Any], int]] = {}

    def run(index: int) -> None:
        start, end = shards[index]
        chain = LedgerChain(
            ledger,  # type: ignore[arg-type]
            "job",
            "plan",
            index,
            lambda first, stop: lines_of(data, first, stop),
            max_record=max_record,
            comment=comment,
            delimiter=delimiter,
            deadline=1e9,
            now=lambda: 0.0,
            sleep=lambda _: (
                run(pending.pop()) if pending else pytest.fail("waits for a shard that never runs")
            ),
        )
        results[index] = read_shard(
            data,
            start,
            end,
            max_record=max_record,
            comment=comment,
            data_start=data_start,
            chain=chain,
            delimiter=delimiter,
        )
        chain.published()  # as the Worker does before it records the shard done

    while pending:
        run(pending.pop())
    # A retried shard publishes the same items and reads the same records (FakeLedger checks the puts).
    again = order.randrange(len(shards)) if shards else None
    if again is not None:
        before = results[again]
        run(again)
        assert results[again] == before
    records: list[Record] = []
    base = 0
    for index in range(len(shards)):
        got, lines = results[index]
        records += [_flat(record, base) for record in got]
        base += lines
    return records


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**ANY_FILE, seed=st.integers(0, 2**32))
def test_every_shard_of_any_bytes_reads_the_reference_records_in_any_order(
    body: bytes, bom: bool, shard_size: int, max_record: int, comment: bytes | None, header: bytes, seed: int
) -> None:
    data, data_start = any_file(body, bom, header)
    got = run_shards(
        data, shard_size, random.Random(seed), max_record=max_record, comment=comment, data_start=data_start
    )
    want = owned_by(
        reference(data, max_record=max_record, comment=comment, data_start=data_start), [], data, data_start
    )
    assert got == want


field = st.text(st.sampled_from(list('ab,"\r\n é')), max_size=10)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.lists(field, min_size=3, max_size=3), min_size=1, max_size=30),
    shard_size=st.integers(1, 64),
    max_record=st.sampled_from([8, 16, 64, 1 << 20]),
    seed=st.integers(0, 2**32),
)
def test_csv_writer_files_with_many_newline_fields_read_as_the_reference_at_any_cut(
    rows: list[list[str]], shard_size: int, max_record: int, seed: int
) -> None:
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    data = out.getvalue().encode()
    got = run_shards(data, shard_size, random.Random(seed), max_record=max_record, comment=None, data_start=0)
    assert got == reference(data, max_record=max_record)
    if max_record == 1 << 20:
        expected = list(csv.reader(io.StringIO(data.decode(), newline="")))
        assert [next(csv.reader(io.StringIO(r[2].decode(), newline=""))) for r in got if r[2]] == [
            row for row in expected if row
        ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=naive_rows,
    delimiter=st.sampled_from([",", ";"]),
    terminator=st.sampled_from(["\n", "\r\n"]),
    shard_size=st.integers(1, 48),
    max_record=st.sampled_from([4, 12, 40, 1 << 20]),
    seed=st.integers(0, 2**32),
)
def test_naive_files_read_as_the_reference_and_csv_reader_at_any_cut(
    rows: list[list[str]], delimiter: str, terminator: str, shard_size: int, max_record: int, seed: int
) -> None:
    """Quotes inside unquoted fields (balanced and not), quoted newlines, "" and text after a closing
    quote: every shard, run in any order, reads the reference's records; with no record cut, those
    are csv.reader(strict=True)'s rows and refusals."""
    data = naive_file(rows, delimiter, terminator)
    d = delimiter.encode()
    got = run_shards(
        data, shard_size, random.Random(seed), max_record=max_record, comment=None, data_start=0, delimiter=d
    )
    assert got == reference(data, max_record=max_record, delimiter=d)
    if max_record == 1 << 20:
        outcomes = [
            "error" if code else split_csv_line(raw.decode(), delimiter) if raw else []
            for _, _, raw, code in got
        ]
        assert [o if isinstance(o, (list, str)) else "error" for o in outcomes] == csv_reader_outcomes(
            data, delimiter
        )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=naive_rows,
    max_record=st.integers(1, 30),
    cut=st.tuples(st.integers(0, 120), st.integers(1, 40)),
)
def test_a_summary_of_a_naive_file_gives_the_reference_state_after_it(
    rows: list[list[str]], max_record: int, cut: tuple[int, int]
) -> None:
    body = naive_file(rows, ",", "\n")
    start = min(cut[0], len(body))
    end = min(start + cut[1], len(body))
    owned = list(lines_of(body, start, end))
    nxt = next(lines_of(body, end, len(body)), None)
    if not owned or nxt is None:
        return
    before = reference_state(body, owned[0].offset, max_record=max_record, comment=None, data_start=0)
    want = reference_state(body, nxt.offset, max_record=max_record, comment=None, data_start=0)
    summary = summarize(owned, first=owned[0].offset, end=end, max_record=max_record)
    assert summary.apply(before, max_record) in (want, NEEDS_BYTES)
    assert advance(owned, before, max_record=max_record) == want


def test_a_predecessor_that_never_publishes_is_waited_for_until_the_deadline() -> None:
    clock = [0.0]
    waits: list[float] = []
    data = b'1,"a\nb"\n' * 4

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock[0] += seconds

    chain = LedgerChain(
        FakeLedger(),  # type: ignore[arg-type]
        "job",
        "plan",
        3,
        lambda first, stop: lines_of(data, first, stop),
        max_record=4,
        comment=None,
        deadline=30.0,
        now=lambda: clock[0],
        sleep=sleep,
    )
    with pytest.raises(CsvStartPendingError, match="shard 3"):
        chain.resolve(8, 16)
    assert waits[:3] == [0.2, 0.4, 0.8] and max(waits) == MAX_WAIT_SECONDS
    assert clock[0] <= 30.0


def test_the_ledger_lists_csv_items_nearest_first_summary_before_start(aws: Any) -> None:
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 1)
    for index, kind in [(0, "START"), (1, "SUMMARY"), (2, "SUMMARY"), (2, "START"), (5, "SUMMARY")]:
        ledger.put_csv_state("job", "plan", index, kind, {"i": index})
    ledger.put_csv_state("job", "other", 1, "START", {"i": -1})
    ledger.put_csv_state("job", "plan", 2, "START", {"i": 2})  # a retry: the same item again
    got = [(index, kind) for index, kind, _ in ledger.csv_states_before("job", "plan", 5)]
    assert got == [(2, "SUMMARY"), (2, "START"), (1, "SUMMARY"), (0, "START")]


def test_a_start_goes_out_beside_the_records_and_the_shard_waits_for_its_answer() -> None:
    """`known` returns before the ledger answers (the records are read meanwhile); `published`
    waits for the put, and fails when it failed."""
    answer = threading.Event()
    puts: list[tuple[int, str]] = []

    class SlowLedger(FakeLedger):
        def put_csv_state(self, job: str, plan: str, index: int, kind: str, body: dict[str, Any]) -> None:
            assert answer.wait(10), "the START was waited for before the records were read"
            if index == 2:
                raise RuntimeError("ProvisionedThroughputExceededException")
            puts.append((index, kind))
            super().put_csv_state(job, plan, index, kind, body)

    ledger = SlowLedger()

    def chain(index: int) -> LedgerChain:
        return LedgerChain(
            ledger,  # type: ignore[arg-type]
            "job",
            "plan",
            index,
            lambda first, stop: iter(()),
            max_record=4,
            comment=None,
            deadline=0.0,
            now=lambda: 0.0,
            sleep=lambda _: None,
        )

    first, failing = chain(1), chain(2)
    first.known(8, 16, None)
    failing.known(16, 24, None)
    assert puts == []  # both returned while their puts wait
    answer.set()
    first.published()
    assert puts == [(1, "START")] and ledger.items[(1, "START")]["first"] == 8
    with pytest.raises(RuntimeError, match="ProvisionedThroughput"):
        failing.published()
    first.published()  # nothing left to wait for
