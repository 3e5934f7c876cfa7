"""CSV records over byte ranges: every shard a file is cut into, at any size, reads exactly the
records the sequential reference reads (and those are csv.reader's records for RFC 4180 files)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from logic import csvrecords
from logic.csvrecords import CutRecord, ShardRecords, lookback, reference_records
from logic.errors import UncertainStartError
from logic.parsing import split_csv_line
from logic.records import BOM, iter_shard_lines
from logic.values import Line, Reject

pytestmark = pytest.mark.runtime

Record = tuple[int, int, bytes, str]  # (line number in the data, offset, raw, "" or the cut's code)


def _flat(record: Line | CutRecord, base: int = 0) -> Record:
    return (
        base + record.number,
        record.offset,
        record.raw,
        record.code if isinstance(record, CutRecord) else "",
    )


def _starts_at(record: Record, data: bytes, data_start: int) -> int:
    """The byte where a record's first line begins (a BOM's line begins at 0, not 3)."""
    return 0 if record[1] == 3 and data_start == 0 and data.startswith(BOM) else record[1]


def read_shard(
    data: bytes,
    start: int,
    end: int,
    *,
    max_record: int,
    comment: bytes | None = None,
    data_start: int = 0,
    chunk: int = 7,
    chain: csvrecords.StartChain | None = None,
    delimiter: bytes = b",",
) -> tuple[list[Line | CutRecord], int]:
    """One shard read the way the Worker reads it: its records and its owned line count."""

    def stream(first: int) -> Iterator[bytes]:
        return (data[i : i + chunk] for i in range(first, len(data), chunk))

    shard = ShardRecords(
        stream,
        start=start,
        end=end,
        object_size=len(data),
        data_start=data_start,
        max_record=max_record,
        comment=comment,
        delimiter=delimiter,
        chain=chain,
    )
    return list(shard), shard.lines


def cuts(size: int, data_start: int, shard_size: int) -> list[tuple[int, int]]:
    return [(s, min(s + shard_size, size)) for s in range(data_start, size, shard_size)]


def read_sharded(
    data: bytes,
    shard_size: int,
    *,
    max_record: int,
    comment: bytes | None = None,
    data_start: int = 0,
    delimiter: bytes = b",",
) -> tuple[list[Record], list[tuple[int, int]]]:
    """Every certain shard's records (numbered in the data), and the shards that were not certain."""
    records: list[Record] = []
    uncertain: list[tuple[int, int]] = []
    base = 0
    for start, end in cuts(len(data), data_start, shard_size):
        try:
            got, lines = read_shard(
                data,
                start,
                end,
                max_record=max_record,
                comment=comment,
                data_start=data_start,
                delimiter=delimiter,
            )
        except UncertainStartError:
            uncertain.append((start, end))
            got = []
            # The line count is the physical lines whose first byte is in the range.
            lines = sum(
                1
                for line in iter_shard_lines(
                    [data[start - 1 if start else 0 :]],
                    read_from=start - 1 if start else 0,
                    start=start,
                    end=end,
                )
            )
        records += [_flat(record, base) for record in got]
        base += lines
    return records, uncertain


def reference(
    data: bytes,
    *,
    max_record: int,
    comment: bytes | None = None,
    data_start: int = 0,
    delimiter: bytes = b",",
) -> list[Record]:
    records = reference_records(
        data[data_start:], max_record=max_record, comment=comment, base=data_start, delimiter=delimiter
    )
    return [_flat(r) for r in records]


def owned_by(
    records: Sequence[Record], shards: Sequence[tuple[int, int]], data: bytes, data_start: int
) -> list[Record]:
    return [r for r in records if not any(s <= _starts_at(r, data, data_start) < e for s, e in shards)]


# -- the reference ----------------------------------------------------------------------------


def test_reference_joins_a_quoted_newline_and_keeps_its_line_end() -> None:
    data = b'a,b\r\n1,"x\r\ny"\r\n2,"p\nq"\n3,4'
    assert reference(data, max_record=100) == [
        (1, 0, b"a,b", ""),
        (2, 5, b'1,"x\r\ny"', ""),
        (4, 15, b'2,"p\nq"', ""),
        (6, 23, b"3,4", ""),
    ]


def test_reference_cuts_an_open_record_past_max_record_and_resyncs() -> None:
    # The stray quote opens a record; past 10 bytes it is cut and the next line starts outside.
    data = b'1,"oops\n2,abcdefgh\n3,ok\n4,"open'
    assert reference(data, max_record=10) == [
        (1, 0, b'1,"oops\n2,abcdefgh', "record_too_large"),
        (3, 19, b"3,ok", ""),
        (4, 24, b'4,"open', "unbalanced_quote"),
    ]


def test_reference_comment_quotes_do_not_open_a_record() -> None:
    assert reference(b'#,"it\n1,2\n', max_record=100, comment=b"#") == [
        (1, 0, b'#,"it', ""),
        (2, 6, b"1,2", ""),
    ]


@pytest.mark.parametrize(
    ("line", "from_outside", "from_inside"),
    [
        (b'A1,5" disk,10', False, False),  # an inch mark inside an unquoted field is data
        (b'the "foo" option,2', False, False),
        (b'x,"a"b"c,"d', False, False),  # even, yet text after a closing quote ends it from both
        (b'a",,"b', True, True),  # from inside: closes, then a new field opens; from outside too
        (b'","', False, True),
        (b'1,"open', True, False),
        (b'"a""', True, False),  # "" is a literal quote: still open
        (b'"a"""', False, False),  # from inside the first quote closes: text after it
        (b"plain", False, True),
        (b"", False, True),
    ],
)
def test_a_line_ends_inside_a_quoted_field_as_csv_reader_reads_it(
    line: bytes, from_outside: bool, from_inside: bool
) -> None:
    assert csvrecords.ends_quoted(line, False) is from_outside
    assert csvrecords.ends_quoted(line, True) is from_inside
    assert csvrecords.ends_quoted(line.replace(b",", b";"), False, b";") is from_outside


def test_a_stray_quote_in_an_unquoted_field_is_data_and_swallows_no_row() -> None:
    data = b'id,n\nA1,5" disk,10\nA2,x,11\nA3,y,12\nA4,"5" disk,13\nA5,z,14\n'
    got = reference(data, max_record=1 << 20)
    assert [r[2] for r in got] == data.rstrip(b"\n").split(b"\n")
    rows = [split_csv_line(r[2].decode(), ",") for r in got]
    assert rows[1] == ["A1", '5" disk', "10"]
    assert isinstance(rows[4], Reject) and rows[4].code == "bad_quote"  # as csv.reader(strict=True)
    for size in (1, 3, 7, 20):
        assert read_sharded(data, size, max_record=8) == (reference(data, max_record=8), []), size


def test_a_bom_line_belongs_to_the_first_shard_only() -> None:
    data = BOM + b'a,"b\nc"\nd\n'
    want = reference(data, max_record=100)
    assert want[0] == (1, 3, b'a,"b\nc"', "")
    for size in range(1, len(data) + 1):
        assert read_sharded(data, size, max_record=100) == (want, []), size


# -- certainty and exactness ------------------------------------------------------------------


def test_a_shard_after_a_quoted_newline_within_the_window_is_not_certain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # At byte 45, `3,"x` may have opened a record (from outside) or ended one (from inside).
    data = b"1,2\n" * 10 + b'3,"x\ny"\n' + b"5,6\n" * 10
    monkeypatch.setattr(csvrecords, "FALLBACK_WINDOWS", 1)  # no look further back
    with pytest.raises(UncertainStartError, match="quoted field"):
        read_shard(data, 45, 60, max_record=8, data_start=0)
    # One line on, `y"` ends outside from both states: the shard at 50 is certain.
    assert read_shard(data, 50, 60, max_record=8)[0] == [Line(1, 52, b"5,6"), Line(2, 56, b"5,6")]


def test_it_looks_further_back_for_a_certain_line_and_reads_on_exactly_from_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The window before byte 88 holds the odd line `3,"x` (84); 40 bytes back, the lines are all
    # even: certain at byte 60, exact from there on — so the record from 84 is known to own `y"`.
    data = b"1,2\n" * 20 + b"4,5\n" + b'3,"x\n' + b'y"\n' + b"5,6\n" * 10
    monkeypatch.setattr(csvrecords, "FALLBACK_WINDOWS", 4)
    got, _ = read_shard(data, 88, 96, max_record=8, data_start=0)
    assert got == [Line(2, 92, b"5,6")]
    want = [r for r in reference(data, max_record=8) if 88 <= r[1] < 96]
    assert [(r.offset, r.raw) for r in got] == [(w[1], w[2]) for w in want]


def test_a_shard_with_only_even_lines_in_its_window_starts_outside() -> None:
    # The window (max_record + 2 bytes) before byte 60 holds only "5,6" lines: certain.
    data = b'0,"x\ny"\n' + b"5,6\n" * 20
    got, lines = read_shard(data, 60, 70, max_record=8)
    assert [(r.number, r.offset, r.raw) for r in got] == [(1, 60, b"5,6"), (2, 64, b"5,6"), (3, 68, b"5,6")]
    assert lines == 3


def test_the_owner_reads_past_its_end_to_complete_its_last_record() -> None:
    data = b'1,"a\nb\nc"\n2,3\n'
    assert read_shard(data, 0, 2, max_record=100)[0] == [Line(1, 0, b'1,"a\nb\nc"')]
    # The next shards own the continuation lines (counted) but not the record.
    assert read_shard(data, 2, 7, max_record=100) == ([], 1)
    assert read_shard(data, 7, 15, max_record=100) == ([Line(2, 10, b"2,3")], 2)


raw_bytes = st.lists(
    st.sampled_from([b"a", b",", b'"', b"\n", b"\r", b"\r\n", b'""', b"#", b" ", b"\xc3\xa9"]), max_size=80
).map(b"".join)


# Any bytes (stray and unclosed quotes too), with or without a BOM and a header, cut anywhere.
ANY_FILE = {
    "body": raw_bytes,
    "bom": st.booleans(),
    "shard_size": st.integers(1, 40),
    "max_record": st.integers(1, 30),
    "comment": st.sampled_from([None, b"#"]),
    "header": st.sampled_from([b"", b"h,h\n"]),
}


def any_file(body: bytes, bom: bool, header: bytes) -> tuple[bytes, int]:
    """The file and its data start."""
    return (BOM if bom else b"") + header + body, len(header) + (3 if bom and header else 0)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**ANY_FILE)
# The BOM's line (offset 3) opens a record; the shard at byte 7 must not call itself certain from a
# window starting at byte 1, after the line's first byte.
@example(body=b'aa"\na', bom=True, shard_size=1, max_record=4, comment=None, header=b"")
def test_certain_shards_read_exactly_what_the_reference_reads(
    body: bytes, bom: bool, shard_size: int, max_record: int, comment: bytes | None, header: bytes
) -> None:
    """Any bytes (stray and unclosed quotes too): a shard that does not raise reads exactly the
    reference's records it owns (numbers, offsets, text, cuts), and never a wrong one."""
    data, data_start = any_file(body, bom, header)
    got, uncertain = read_sharded(
        data, shard_size, max_record=max_record, comment=comment, data_start=data_start
    )
    want = owned_by(
        reference(data, max_record=max_record, comment=comment, data_start=data_start),
        uncertain,
        data,
        data_start,
    )
    assert got == want
    if b'"' not in body:
        assert uncertain == []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=raw_bytes,
    max_record=st.integers(1, 12),
    cut=st.tuples(st.integers(0, 80), st.integers(0, 80), st.integers(1, 80)),
)
# The tightest case: a record of exactly max_record bytes (its "\r" not counted) opens one byte
# before the window; the shard's first line closes it.
@example(body=b'"ab\r\nc"\nd\n', max_record=4, cut=(4, 5, 10))
def test_the_lemma_holds_from_any_window(body: bytes, max_record: int, cut: tuple[int, int, int]) -> None:
    """Whatever window a shard scans from, a state it calls certain is the reference's state."""
    back, start_at, size = cut
    start = min(start_at, len(body))
    window = max(0, start - back)
    shard = ShardRecords(
        lambda first: [body[first:]],
        start=start,
        end=min(start + size, len(body)),
        object_size=len(body),
        data_start=0,
        max_record=max_record,
    )
    scanned = shard._scan(window)
    if scanned is None or scanned[1] is None:
        return
    lines, parts = scanned
    got = [_flat(r) for r in shard._owned(lines, parts)]
    base = 1 + body.count(b"\n", 0, start - 1) if start else 0  # lines starting before start
    end = min(start + size, len(body))
    want = [(r[0] - base, *r[1:]) for r in reference(body, max_record=max_record) if start <= r[1] < end]
    assert got == want


# -- RFC 4180 files: csv.reader's records -----------------------------------------------------

field = st.text(st.sampled_from(list('ab,;|"\r\n é€𝄞 ')), max_size=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(2, 4).flatmap(
        lambda n: st.lists(st.lists(field, min_size=n, max_size=n), min_size=1, max_size=12)
    ),
    delimiter=st.sampled_from([",", ";", "|"]),
    terminator=st.sampled_from(["\r\n", "\n"]),
    quote_all=st.booleans(),
    bom=st.booleans(),
    shard_size=st.integers(1, 64),
)
def test_files_written_by_csv_writer_read_as_csv_reader_reads_them(
    rows: list[list[str]], delimiter: str, terminator: str, quote_all: bool, bom: bool, shard_size: int
) -> None:
    # With "\n" line ends csv.writer leaves a bare "\r" unquoted (not RFC 4180): quote everything then.
    if terminator == "\n" and any("\r" in f for row in rows for f in row):
        quote_all = True
    out = io.StringIO(newline="")
    csv.writer(
        out,
        delimiter=delimiter,
        lineterminator=terminator,
        quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL,
    ).writerows(rows)
    data = (BOM if bom else b"") + out.getvalue().encode()
    expected = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""), delimiter=delimiter))

    got, uncertain = read_sharded(data, shard_size, max_record=1 << 20, delimiter=delimiter.encode())
    assert uncertain == []
    fields = [split_csv_line(raw.decode(), delimiter) for _, _, raw, code in got if not code]
    assert [f for f in fields if not isinstance(f, Reject)] == expected
    assert len(fields) == len(got) == len(expected)


@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
def test_a_record_open_at_the_edge_of_the_window_makes_the_shard_uncertain(
    end: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvrecords, "FALLBACK_WINDOWS", 1)
    # The open record's size reaches max_record exactly at the shard's first line: not cut, still open.
    opened = b'"abcdef' + end
    data = b"1,2\n" * 5 + opened + b'x"\n' + b"3,4\n" * 5
    start = 20 + len(opened)
    assert reference(data, max_record=8)[5] == (6, 20, b'"abcdef' + end + b'x"', "")
    with pytest.raises(UncertainStartError):
        read_shard(data, start, start + 4, max_record=8)
    # One byte more and the record is cut: the next shard is certain again.
    assert reference(data, max_record=7 - (len(end) - 1))[5][3] == "record_too_large"


# -- naive files: quotes inside unquoted fields, balanced and not --------------------------------

# Fields as hand-made and naive exports hold them: quoted words, inch marks, unbalanced quotes,
# well-quoted fields (with newlines and ""), and text after a closing quote.
naive_field = st.one_of(
    st.text(st.sampled_from(list('ab "é')), max_size=6),
    st.sampled_from(['5" disk', 'the "foo" option', 'say "hi', '12"', 'x"y"z', '"5" disk', '"a"b']),
    st.text(st.sampled_from(list('ab,;"\n é')), max_size=6).map(lambda t: '"' + t.replace('"', '""') + '"'),
    st.sampled_from(['"open\nstill', '"', '""', '"""', '","']),
)


def naive_file(rows: list[list[str]], delimiter: str, terminator: str) -> bytes:
    return "".join(delimiter.join(row) + terminator for row in rows).encode()


def csv_reader_outcomes(data: bytes, delimiter: str) -> list[list[str] | str]:
    """csv.reader(strict=True) over the whole file: each record's row, or "error" (it resumes at
    the next line, as the reference's records do)."""
    reader = csv.reader(io.StringIO(data.decode(), newline=""), delimiter=delimiter, strict=True)
    outcomes: list[list[str] | str] = []
    while True:
        try:
            outcomes.append(next(reader))
        except StopIteration:
            return outcomes
        except csv.Error:
            outcomes.append("error")


naive_rows = st.integers(1, 4).flatmap(
    lambda n: st.lists(st.lists(naive_field, min_size=n, max_size=n), min_size=1, max_size=14)
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=naive_rows, delimiter=st.sampled_from([",", ";"]), terminator=st.sampled_from(["\n", "\r\n"]))
@example(rows=[["A1", '5" disk', "10"], ["A2", "x", "11"]], delimiter=",", terminator="\n")
@example(rows=[["x", '"a"b"c', '"d'], ["q", "r", "s"]], delimiter=",", terminator="\n")
def test_the_reference_reads_naive_files_as_csv_reader_reads_them(
    rows: list[list[str]], delimiter: str, terminator: str
) -> None:
    """Record for record, the reference (then split_csv_line) gives csv.reader(strict=True)'s rows
    and refuses where it refuses: a quote opens a quoted field only at the start of a field."""
    data = naive_file(rows, delimiter, terminator)
    records = reference_records(data, max_record=1 << 20, delimiter=delimiter.encode())
    got: list[list[str] | str] = []
    for record in records:
        split = "error" if isinstance(record, CutRecord) else split_csv_line(record.raw.decode(), delimiter)
        got.append("error" if isinstance(split, Reject) else split if record.raw else [])
    assert got == csv_reader_outcomes(data, delimiter)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=naive_rows,
    delimiter=st.sampled_from([",", ";"]),
    terminator=st.sampled_from(["\n", "\r\n"]),
    shard_size=st.integers(1, 48),
    max_record=st.sampled_from([4, 12, 40, 1 << 20]),
)
def test_certain_shards_of_naive_files_read_the_reference_at_any_size(
    rows: list[list[str]], delimiter: str, terminator: str, shard_size: int, max_record: int
) -> None:
    data = naive_file(rows, delimiter, terminator)
    d = delimiter.encode()
    got, uncertain = read_sharded(data, shard_size, max_record=max_record, delimiter=d)
    want = owned_by(reference(data, max_record=max_record, delimiter=d), uncertain, data, 0)
    assert got == want


@settings(max_examples=500, deadline=None)
@given(raw=st.lists(st.sampled_from([b"a", b",", b'"', b'""', b" ", b"\r"]), max_size=20).map(b"".join))
def test_a_multi_byte_delimiter_reads_lines_as_a_one_byte_one_does(raw: bytes) -> None:
    """The one-byte delimiter's whole-line match (a fast path) and the field walk every delimiter
    takes agree: "§" is two bytes in UTF-8, so it always walks."""
    section = "§".encode()
    for inside in (False, True):
        assert csvrecords.ends_quoted(raw, inside) is csvrecords.ends_quoted(
            raw.replace(b",", section), inside, section
        )


def test_a_window_without_quotes_settles_the_start_without_reading_further_back() -> None:
    """A record open at a shard's start began inside its window (else it was cut), so a window
    whose lines hold no quote settles the state: the shard reads no fallback windows and asks no
    chain (a 20,000-shard run read 64 windows back, or waited on the chain, for every shard)."""
    max_record = 200
    data = b"id,pad\n" + b"".join(b"%d,%s\n" % (i, b"x" * 40) for i in range(400))
    asked: list[int] = []

    def stream(first: int) -> Iterator[bytes]:
        asked.append(first)
        yield data[first:]

    start = 12_000
    records = list(
        ShardRecords(
            stream, start=start, end=start + 100, object_size=len(data), data_start=7, max_record=max_record
        )
    )
    assert records and min(asked) >= lookback(start, 7, max_record) - 1
