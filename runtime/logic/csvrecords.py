"""Group a CSV shard's lines into RFC 4180 records (quoted fields may hold newlines), exactly as
one sequential read of the whole object would, from any byte range.

The reference (`reference_records`, one sequential definition): a record begins at a line read
outside quotes and takes the following lines while the quote count since its first byte is odd
(opening, closing and doubled quotes all toggle, so odd parity = inside a quoted field). Blank
lines and comment lines outside a record are records of their own (the caller skips them); a
comment line's quotes do not count. A record still open once its size passes `max_record`
(its lines, each counted with one "\\n") is cut: a `CutRecord` `record_too_large`, and the next line
starts outside quotes again, so one stray quote costs at most `max_record` bytes. A record open at
the end of the data is a `CutRecord` `unbalanced_quote`.

Certainty (`ShardRecords`): a record open at a line start L began at r >= L - max_record - 1 (else
it was cut), and its lines so far hold an odd number of quotes, so one of them is odd. Hence if
no line starting in the `max_record + 2` bytes before L has an odd quote count, the state at L is
certainly "outside" — whatever came before. A shard reads that look-back window (cheap: a quote
count per line) and, when certain, starts exactly; a shard within the window of the data start
simulates from the data start instead. Records belong to the shard holding their first byte;
the owner reads past its end to complete its last record.

Chain (`summarize`, `ShardSummary`, `advance`): a shard whose start state is unknown asks its
`StartChain` (the Worker's is adapters/csvchain.py, through the ledger). A shard's transfer summary
maps the state at its first owned line to the state at the next shard's: from "outside" to
`out_exit`; from "inside a record begun at r" (r unknown to the shard) to `in_exit` when that record
closes in the shard (at the first odd line) without being cut — it is cut iff `reach - r >
max_record`, `reach` being the end of its last line read still open — and to r itself when it
does not close there. A cut (a record longer than `max_record`) depends on r: that shard's lines
are then read again from the known state (`advance`). Without a chain, an unknown start state
raises `UncertainStartError` rather than guess.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Final, NamedTuple, Protocol

from logic.errors import UncertainStartError
from logic.records import BOM, iter_shard_lines
from logic.values import Line

__all__ = [
    "NEEDS_BYTES",
    "CutRecord",
    "ShardRecords",
    "ShardSummary",
    "StartChain",
    "advance",
    "lookback",
    "reference_records",
    "summarize",
]

# The state at a line start: None outside quotes, else the first byte of the record open there.
State = int | None
# What `ShardSummary.apply` returns when only the shard's bytes can tell (a record cut inside it).
NEEDS_BYTES: Final = -1


class CutRecord(NamedTuple):
    """A record that is not well formed as a whole: its lines so far, and why it was cut."""

    number: int
    offset: int
    raw: bytes
    code: str

    @property
    def reason(self) -> str:
        if self.code == "record_too_large":
            return "a quoted field is still open past csv.maxRecordBytes: parsing resumes at the next line"
        return "unbalanced quote: a quoted field opened here never closes before the end of the file"


# A shard with an odd line in its window looks this many windows back for a line the lemma makes
# certain, and reads on from there exactly: one more read, for such shards only.
FALLBACK_WINDOWS = 64


def lookback(start: int, data_start: int, max_record: int, windows: int = 1) -> int:
    """The first byte a CSV shard starting at `start` reads lines from: `windows` certainty windows
    back, or the data start when that is nearer (then the shard simulates from it, exactly). A BOM's
    line begins at byte 0 but its offset is 3: a window from bytes 1-3 would miss it."""
    first = start - windows * (max_record + 2)
    return data_start if first <= data_start + len(BOM) else first


def _joined(parts: list[Line]) -> bytes:
    """A record's text from its lines: inner line ends kept as they were ("\\n" or "\\r\\n")."""
    if len(parts) == 1:
        return parts[0].raw
    pieces: list[bytes] = []
    for line, after in itertools.pairwise(parts):
        pieces.append(line.raw)
        # iter_shard_lines strips one "\r" before "\n": the gap to the next line tells.
        pieces.append(b"\r\n" if after.offset - line.offset - len(line.raw) == 2 else b"\n")
    pieces.append(parts[-1].raw)
    return b"".join(pieces)


def _split_physical(data: bytes, base: int) -> Iterator[Line]:
    """Physical lines of a whole data region (reference only): "\\n"-split, one "\\r" stripped."""
    pos, number = 0, 0
    while pos < len(data):
        cut = data.find(b"\n", pos)
        stop = len(data) if cut < 0 else cut
        raw, offset = data[pos:stop], base + pos
        if base == 0 and pos == 0 and raw.startswith(BOM):
            raw, offset = raw[3:], 3
        number += 1
        yield Line(number, offset, raw[:-1] if raw.endswith(b"\r") else raw)
        pos = stop + 1


def reference_records(
    data: bytes, *, max_record: int, comment: bytes | None = None, base: int = 0
) -> Iterator[Line | CutRecord]:
    """The records of a data region read sequentially; `data` begins at object offset `base`
    (a line start; a BOM is stripped only at offset 0). The definition the sharded reader must equal."""
    parts: list[Line] = []
    quotes = 0
    for line in _split_physical(data, base):
        if not parts:
            if comment is not None and line.raw.startswith(comment):
                yield line
                continue
            parts, quotes = [line], line.raw.count(b'"')
        else:
            parts.append(line)
            quotes += line.raw.count(b'"')
        if quotes % 2 == 0:
            yield Line(parts[0].number, parts[0].offset, _joined(parts))
            parts = []
        elif line.offset + len(line.raw) + 1 - parts[0].offset > max_record:
            yield CutRecord(parts[0].number, parts[0].offset, _joined(parts), "record_too_large")
            parts = []
    if parts:
        yield CutRecord(parts[0].number, parts[0].offset, _joined(parts), "unbalanced_quote")


def _step(state: State, line: Line, max_record: int, comment: bytes | None) -> State:
    """The state after one line read from `state`: the reference's rule, without the record's text."""
    raw = line.raw
    odd = raw.count(b'"') % 2
    if state is None:
        if not odd or (comment is not None and raw.startswith(comment)):
            return None
        state = line.offset
    elif odd:
        return None  # the record closes
    return None if line.offset + len(raw) + 1 - state > max_record else state


def advance(lines: Iterable[Line], state: State, *, max_record: int, comment: bytes | None = None) -> State:
    """The state after consecutive physical `lines` read from `state` (at the first one's start)."""
    for line in lines:
        state = _step(state, line, max_record, comment)
    return state


class ShardSummary(NamedTuple):
    """A shard's lines as a map from the state at its first owned line (`first`) to the state at
    the next shard's first line (the module docstring). `end` is the shard's end."""

    first: int
    end: int
    out_exit: State
    reach: int
    closes: bool
    in_exit: State

    def apply(self, state: State, max_record: int) -> State:
        """The state after this shard from `state`, or NEEDS_BYTES when a record is cut inside it."""
        if state is None:
            return self.out_exit
        if self.reach - state > max_record:
            return NEEDS_BYTES
        return self.in_exit if self.closes else state


def summarize(
    lines: Iterable[Line], *, first: int, end: int, max_record: int, comment: bytes | None = None
) -> ShardSummary:
    """One pass over a shard's owned lines (quote counts only): its `ShardSummary`."""
    out_state: State = None
    reach, closes, in_state = 0, False, None
    for line in lines:
        out_state = _step(out_state, line, max_record, comment)
        if closes:
            in_state = _step(in_state, line, max_record, comment)
        elif line.raw.count(b'"') % 2:
            closes = True  # the record open at the first line closes here; outside from the next
        else:
            reach = line.offset + len(line.raw) + 1
    return ShardSummary(first, end, out_state, reach, closes, in_state)


class StartChain(Protocol):
    """Where a shard publishes what the shards after it need, and learns an unknown start state."""

    def known(self, first: int, end: int, state: State) -> None:
        """The shard's start state (at its first owned line, byte `first`) is `state`."""
        ...

    def resolve(self, first: int, end: int) -> State:
        """The shard's start state, which it cannot tell from its look-back window."""
        ...

    def empty(self, start: int, end: int) -> None:
        """The shard owns no line: its summary is the identity."""
        ...


class ShardRecords:
    """The records a shard `[start, end)` owns. `stream(first)` gives the object's bytes from byte
    `first` on, in chunks of any size; they are read lazily from the certainty window before
    `start` (`lookback`; when that window holds an odd line, again from `FALLBACK_WINDOWS` windows
    back) to `end` — and, when the last record is still open there, on from `end` (another read)
    until it closes or is cut.

    After iteration, `lines` is the number of physical lines whose first byte lies in
    `[start, end)` (the ledger's `lines`); record numbers count those lines from 1.
    """

    def __init__(
        self,
        stream: Callable[[int], Iterable[bytes]],
        *,
        start: int,
        end: int,
        object_size: int,
        data_start: int,
        max_record: int,
        comment: bytes | None = None,
        chain: StartChain | None = None,
    ) -> None:
        self._stream = stream
        self._chain = chain
        self._start, self._end, self._size, self._data_start = start, end, object_size, data_start
        self._max = max_record
        self._comment = comment
        self.lines = 0

    def _lines_from(self, first: int, end: int, number_from: int) -> Iterator[Line]:
        read_from = first - 1 if first > 0 else 0
        chunks = self._stream(read_from)
        return iter_shard_lines(chunks, read_from=read_from, start=first, end=end, number_from=number_from)

    def __iter__(self) -> Iterator[Line | CutRecord]:
        start, data_start, limit = self._start, self._data_start, self._max
        window = lookback(start, data_start, limit)
        scanned = self._scan(window)
        # With a chain, an uncertain shard asks it: cheaper than 64 windows read back in vain when
        # every window holds a quoted newline.
        if scanned is not None and not scanned[2] and window > data_start and self._chain is None:
            window = lookback(start, data_start, limit, FALLBACK_WINDOWS)
            scanned = self._scan(window)
        chain = self._chain
        if scanned is None:
            if chain is not None:
                chain.empty(start, self._end)
            return  # the shard owns no line
        lines, parts, certain, last_odd = scanned
        first = next(lines)
        lines = itertools.chain((first,), lines)
        if certain and chain is not None:
            chain.known(first.offset, self._end, parts[0].offset if parts else None)
        elif not certain and chain is not None:
            state = chain.resolve(first.offset, self._end)
            # Only the open record's first byte and odd parity matter: it is the previous shard's.
            parts = [] if state is None else [Line(0, state, b'"')]
        elif not certain:
            raise UncertainStartError(
                f"the shard's first line (byte {first.offset}) may lie inside a quoted field: a line "
                f"with an odd number of quotes starts at byte {last_odd}, within csv.maxRecordBytes "
                f"before it, and no line from byte {window} on is certainly outside quotes"
            )
        yield from self._owned(lines, parts, sum(line.raw.count(b'"') for line in parts))

    def _scan(self, window: int) -> tuple[Iterator[Line], list[Line], bool, int] | None:
        """Read the lines from `window` to the first owned one: the lines from there on, the record
        open there (its lines), whether that state is certain, and the latest odd line's offset.
        None when the shard owns no line."""
        limit, comment = self._max, self._comment
        certain = window == self._data_start  # the state at the data start is known: outside
        parts: list[Line] = []  # the open record's lines (empty: outside quotes)
        quotes = 0
        last_odd = -limit - 3  # offset of the latest window line with an odd quote count
        it = self._lines_from(window, self._end, self._start)
        for line in it:
            # The lemma at this line's start: every line in the window before it is even.
            if not certain and window <= line.offset - limit - 2 and last_odd < line.offset - limit - 2:
                certain, parts = True, []
            if line.number:  # numbered: at or after start (the first line after a BOM too)
                break
            raw = line.raw
            odd = raw.count(b'"') % 2 == 1
            if odd:
                last_odd = line.offset
            if parts:
                parts.append(line)
                quotes += odd
            elif odd and not (comment is not None and raw.startswith(comment)):
                parts, quotes = [line], 1
            if parts and (quotes % 2 == 0 or line.offset + len(raw) + 1 - parts[0].offset > limit):
                parts = []
        else:
            return None
        return itertools.chain((line,), it), parts, certain, last_odd

    def _owned(self, lines: Iterator[Line], parts: list[Line], quotes: int) -> Iterator[Line | CutRecord]:
        """From the first owned line on; `parts` is a record open there (the previous shard's)."""
        # Kept whole: the Worker's hot loop (every line passes here; no call per line on the fast path).
        limit, comment = self._max, self._comment
        theirs = bool(parts)
        for line in lines:
            raw = line.raw
            if not parts:
                if not raw.count(b'"') % 2 or (comment is not None and raw.startswith(comment)):
                    yield line
                    continue
                parts, quotes, theirs = [line], 1, False
            else:
                parts.append(line)
                quotes += raw.count(b'"')
                if not quotes % 2:
                    if not theirs:
                        yield Line(parts[0].number, parts[0].offset, _joined(parts))
                    parts = []
                    continue
            if line.offset + len(raw) + 1 - parts[0].offset > limit:
                if not theirs:
                    yield CutRecord(parts[0].number, parts[0].offset, _joined(parts), "record_too_large")
                parts = []
        self.lines = line.number
        if parts and not theirs:
            yield self._finish(parts, quotes)

    def _finish(self, parts: list[Line], quotes: int) -> Line | CutRecord:
        """The shard's last record, open at its end: read on until it closes (or is cut)."""
        for line in self._lines_from(self._end, self._size, self._end):
            parts.append(line)
            quotes += line.raw.count(b'"')
            if not quotes % 2:
                return Line(parts[0].number, parts[0].offset, _joined(parts))
            if line.offset + len(line.raw) + 1 - parts[0].offset > self._max:
                return CutRecord(parts[0].number, parts[0].offset, _joined(parts), "record_too_large")
        return CutRecord(parts[0].number, parts[0].offset, _joined(parts), "unbalanced_quote")
