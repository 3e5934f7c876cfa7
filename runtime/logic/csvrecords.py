"""Group a CSV shard's lines into records as `csv.reader(strict=True)` reads them (quoted fields may
hold newlines), exactly as one sequential read of the whole object would, from any byte range.

The grammar (csv.reader's, over "\\n"-split lines): a quote opens a quoted field only at the start
of a field; anywhere else in an unquoted field it is data (`5" disk`, `the "foo" option`). Inside a
quoted field `""` is a literal quote and a lone `"` closes it; after the closing quote comes a
delimiter or the line end, and any other text (`"5" disk`) is csv.reader's strict error: the
record ends at the end of that line (where csv.reader resumes) and its parser rejects it as
`bad_quote`. So each physical line is a function of the state at its start, outside a record or
inside a quoted field (`ends_quoted`): from outside, does a field it opens stay open at its end;
from inside, does the open field stay open (a line's quote count does not tell: `x,"a"b"c,"d` is
even and ends open from neither state, `a",,"b` ends open from both).

The reference (`reference_records`, one sequential definition): a record begins at a line read
outside and takes the following lines while the line before ends inside a quoted field. Blank
lines and comment lines outside a record are records of their own (the caller skips them); a
comment line inside a quoted field is data. A record still open once its size passes
`max_record` (its lines, each counted with one "\\n") is cut: a `CutRecord` `record_too_large`, and
the next line starts outside again, so one stray quote costs at most `max_record` bytes. A record
open at the end of the data is a `CutRecord` `unbalanced_quote`.

Certainty (`ShardRecords`): the state at a line start L is "outside" or "inside the record begun at
r", and r >= L - max_record - 1 (else it was cut). A shard reads lines from a look-back window
before its start whose first line L0 has an unknown state, and follows every state it could have:
outside, inside a record begun in the window (at a known line), or inside one begun before L0 (r
unknown: it is certainly cut once a line ends more than max_record bytes past L0 - 1; until then it
may or may not be). All inside states move alike (a line's effect does not depend on r, only the
cut does), and a line whose two starting states lead to the same state merges them. The true state
is always among those followed, so when one is left at the first owned line, it is exact. A window
of `max_record + 2` bytes settles every file whose window lines do not end inside quotes (the
unknown record is cut by then); a shard within the window of the data start simulates from it.
Records belong to the shard holding their first byte; the owner reads past its end to complete
its last record.

Chain (`summarize`, `ShardSummary`, `advance`): a shard whose start state is still unknown asks its
`StartChain` (the Worker's is adapters/csvchain.py, through the ledger). A shard's transfer summary
maps the state at its first owned line to the state at the next shard's: from "outside" to
`out_exit`; from "inside a record begun at r" (r unknown to the shard) to `in_exit` when that record
ends in the shard (at the first line that, read from inside, ends outside) without being cut — it
is cut iff `reach - r > max_record`, `reach` being the end of its last line read still open — and
to r itself when it does not end there. A cut depends on r: that shard's lines are then read again
from the known state (`advance`). Without a chain, an unknown start state raises
`UncertainStartError` rather than guess.
"""

from __future__ import annotations

import functools
import itertools
import re
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
    "ends_quoted",
    "lookback",
    "reference_records",
    "summarize",
]

# The state at a line start: None outside a record, else the first byte of the record open there.
State = int | None
# What `ShardSummary.apply` returns when only the shard's bytes can tell (a record cut inside it).
NEEDS_BYTES: Final = -1
# A look-back state: inside a quoted field of a record begun before the window's first line.
_BEFORE: Final = -2

# A quoted field's text after its opening quote, up to (not including) its closing quote or the
# line end: "" is a literal quote. Unrolled (no alternation) so a long field is one linear scan.
_QUOTED = re.compile(rb'[^"]*(?:""[^"]*)*')


@functools.lru_cache(maxsize=8)
def _well_formed(delimiter: bytes) -> Callable[[bytes], re.Match[bytes] | None] | None:
    """A whole line of well-formed fields read from outside (so it ends outside), as one C-speed
    match: quoted (with "" inside) or unquoted (not starting with a quote; quotes in it are data).
    Possessive: csv pairs "" greedily too, and nothing is tried twice. None for a delimiter of
    more than one byte (a character class holds single bytes)."""
    if len(delimiter) != 1:
        return None
    d = re.escape(delimiter)
    field = rb'(?:"[^"]*+(?:""[^"]*+)*+"|[^"' + d + rb"][^" + d + rb"]*+|)"
    return re.compile(field + rb"(?:" + d + field + rb")*+").fullmatch


def ends_quoted(raw: bytes, inside: bool, delimiter: bytes = b",") -> bool:
    """Whether a line (no "\\n") read from `inside` a quoted field, or from outside a record, ends
    inside a quoted field: csv.reader's grammar (the module docstring). Text after a closing quote
    is csv.reader's strict error, after which it resumes at the next line: outside."""
    if b'"' not in raw:
        return inside
    opener = delimiter + b'"'
    if not inside:
        if raw[:1] != b'"' and opener not in raw:
            return False  # every quote is inside an unquoted field: data
        well_formed = _well_formed(delimiter)
        if well_formed is not None and well_formed(raw):
            return False  # the common case: quoted fields that close on their line
    pos, size = 0, len(raw)
    if not inside:
        if raw[:1] != b'"':
            pos = raw.find(opener) + len(delimiter)  # the first field that starts with a quote
        pos += 1
    while True:
        pos = _QUOTED.match(raw, pos).end()  # type: ignore[union-attr]  # matches the empty string
        if pos == size:
            return True  # no closing quote on this line: the field holds the line break
        pos += 1  # past the closing quote
        if pos == size or not raw.startswith(delimiter, pos):
            return False  # the record ends here (well formed, or text after the quote)
        nxt = raw.find(opener, pos)
        if nxt < 0:
            return False  # the remaining fields are unquoted
        pos = nxt + len(delimiter) + 1


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


# A shard whose window leaves its state open looks this many windows back for a line that settles
# it, and reads on exactly from there: one more read, for such shards only.
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


def _opens(raw: bytes, comment: bytes | None, delimiter: bytes) -> bool:
    """A line read outside a record begins one that goes on past it (a comment line never does)."""
    return not (comment is not None and raw.startswith(comment)) and ends_quoted(raw, False, delimiter)


def _too_large(line: Line, begun: int, max_record: int) -> bool:
    """A record begun at `begun` and still open after `line` is cut."""
    return line.offset + len(line.raw) + 1 - begun > max_record


def reference_records(
    data: bytes,
    *,
    max_record: int,
    comment: bytes | None = None,
    base: int = 0,
    delimiter: bytes = b",",
) -> Iterator[Line | CutRecord]:
    """The records of a data region read sequentially; `data` begins at object offset `base`
    (a line start; a BOM is stripped only at offset 0). The definition the sharded reader must equal."""
    parts: list[Line] = []
    for line in _split_physical(data, base):
        if not parts and comment is not None and line.raw.startswith(comment):
            yield line
            continue
        if not ends_quoted(line.raw, bool(parts), delimiter):
            parts.append(line)
            yield Line(parts[0].number, parts[0].offset, _joined(parts))
            parts = []
            continue
        parts.append(line)
        if _too_large(line, parts[0].offset, max_record):
            yield CutRecord(parts[0].number, parts[0].offset, _joined(parts), "record_too_large")
            parts = []
    if parts:
        yield CutRecord(parts[0].number, parts[0].offset, _joined(parts), "unbalanced_quote")


def _step(state: State, line: Line, max_record: int, comment: bytes | None, delimiter: bytes) -> State:
    """The state after one line read from `state`: the reference's rule, without the record's text."""
    raw = line.raw
    if state is None:
        if not _opens(raw, comment, delimiter):
            return None
        state = line.offset
    elif not ends_quoted(raw, True, delimiter):
        return None  # the record ends
    return None if _too_large(line, state, max_record) else state


def advance(
    lines: Iterable[Line],
    state: State,
    *,
    max_record: int,
    comment: bytes | None = None,
    delimiter: bytes = b",",
) -> State:
    """The state after consecutive physical `lines` read from `state` (at the first one's start)."""
    for line in lines:
        state = _step(state, line, max_record, comment, delimiter)
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
    lines: Iterable[Line],
    *,
    first: int,
    end: int,
    max_record: int,
    comment: bytes | None = None,
    delimiter: bytes = b",",
) -> ShardSummary:
    """One pass over a shard's owned lines: its `ShardSummary`."""
    out_state: State = None
    reach, closes, in_state = 0, False, None
    for line in lines:
        out_state = _step(out_state, line, max_record, comment, delimiter)
        if closes:
            in_state = _step(in_state, line, max_record, comment, delimiter)
        elif not ends_quoted(line.raw, True, delimiter):
            closes = True  # the record open at the first line ends here; outside from the next
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
    `start` (`lookback`; when that window leaves the state open, again from `FALLBACK_WINDOWS`
    windows back) to `end` — and, when the last record is still open there, on from `end` (another
    read) until it ends or is cut.

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
        delimiter: bytes = b",",
        chain: StartChain | None = None,
    ) -> None:
        self._stream = stream
        self._chain = chain
        self._start, self._end, self._size, self._data_start = start, end, object_size, data_start
        self._max = max_record
        self._comment = comment
        self._delimiter = delimiter
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
        if scanned is not None and scanned[1] is None and window > data_start and self._chain is None:
            window = lookback(start, data_start, limit, FALLBACK_WINDOWS)
            scanned = self._scan(window)
        chain = self._chain
        if scanned is None:
            if chain is not None:
                chain.empty(start, self._end)
            return  # the shard owns no line
        lines, parts = scanned
        first = next(lines)
        lines = itertools.chain((first,), lines)
        if parts is not None and chain is not None:
            chain.known(first.offset, self._end, parts[0].offset if parts else None)
        elif parts is None and chain is not None:
            state = chain.resolve(first.offset, self._end)
            # Only the open record's first byte matters: it is the previous shard's.
            parts = [] if state is None else [Line(0, state, b'"')]
        elif parts is None:
            raise UncertainStartError(
                f"the shard's first line (byte {first.offset}) may lie inside a quoted field: no line "
                f"from byte {window} on settles whether a quoted field is open there"
            )
        yield from self._owned(lines, parts)

    def _scan(self, window: int) -> tuple[Iterator[Line], list[Line] | None] | None:
        """Read the lines from `window` to the first owned one, following every state they could
        start in (the module docstring): the lines from the first owned one on, and the record open
        there (its lines; empty: outside), or None when more than one state is left. None when
        the shard owns no line."""
        limit, comment, delimiter = self._max, self._comment, self._delimiter
        # Each possible state (None: outside; a record's first byte; _BEFORE) with its lines so far.
        states: dict[int | None, list[Line]] = {None: []}
        if window != self._data_start:  # the state at the data start is known: outside
            states[_BEFORE] = []
        it = self._lines_from(window, self._end, self._start)
        for line in it:
            if line.number:  # numbered: at or after start (the first line after a BOM too)
                break
            if b'"' in line.raw:
                opens = _opens(line.raw, comment, delimiter)
                stays = ends_quoted(line.raw, True, delimiter)
            elif len(states) == 1 and None in states:
                continue  # outside, a line without a quote leaves it outside: the common case
            else:  # without a quote a line opens nothing, and a quoted field open at it stays open
                opens, stays = False, True
            after: dict[int | None, list[Line]] = {}
            for key, parts in states.items():
                if key is None:
                    if opens and not _too_large(line, line.offset, limit):
                        after[line.offset] = [line]
                    else:
                        after[None] = []
                elif not stays:
                    after[None] = []
                elif key == _BEFORE:
                    # Begun before the window's first line, so before `window` (no line starts
                    # between them): at most at window - 1. The window is max_record + 2 bytes, so
                    # no such record is still open at the shard's start.
                    if not _too_large(line, window - 1, limit):
                        after[_BEFORE] = []  # it may still be open (or cut: outside)
                    after[None] = []
                elif _too_large(line, key, limit):
                    after[None] = []
                else:
                    after[key] = [*parts, line]
            states = after
        else:
            return None
        rest = itertools.chain((line,), it)
        if len(states) == 1 and _BEFORE not in states:
            return rest, next(iter(states.values()))
        return rest, None

    def _owned(self, lines: Iterator[Line], parts: list[Line]) -> Iterator[Line | CutRecord]:
        """From the first owned line on; `parts` is a record open there (the previous shard's)."""
        # Kept whole: the Worker's hot loop (every line passes here; no call per line on the fast path).
        limit, comment, delimiter = self._max, self._comment, self._delimiter
        theirs = bool(parts)
        for line in lines:
            raw = line.raw
            if not parts:
                if (
                    b'"' not in raw
                    or (comment is not None and raw.startswith(comment))
                    or not ends_quoted(raw, False, delimiter)
                ):
                    yield line
                    continue
                parts, theirs = [line], False
            else:
                parts.append(line)
                if not ends_quoted(raw, True, delimiter):
                    if not theirs:
                        yield Line(parts[0].number, parts[0].offset, _joined(parts))
                    parts = []
                    continue
            if _too_large(line, parts[0].offset, limit):
                if not theirs:
                    yield CutRecord(parts[0].number, parts[0].offset, _joined(parts), "record_too_large")
                parts = []
        self.lines = line.number
        if parts and not theirs:
            yield self._finish(parts)

    def _finish(self, parts: list[Line]) -> Line | CutRecord:
        """The shard's last record, open at its end: read on until it ends (or is cut)."""
        for line in self._lines_from(self._end, self._size, self._end):
            parts.append(line)
            if not ends_quoted(line.raw, True, self._delimiter):
                return Line(parts[0].number, parts[0].offset, _joined(parts))
            if _too_large(line, parts[0].offset, self._max):
                return CutRecord(parts[0].number, parts[0].offset, _joined(parts), "record_too_large")
        return CutRecord(parts[0].number, parts[0].offset, _joined(parts), "unbalanced_quote")
