"""Split a shard's byte stream into the newline-delimited lines the shard owns.

Ownership rule: a line belongs to the shard in which its first byte lies, so shards cut at any
byte offsets read every line exactly once. The caller streams the object from
`read_from = start - 1 if start > 0 else 0` to (at most) its end, lazily: iteration stops pulling
chunks as soon as the next line would begin at or after `end`, so a shard reads only its range
plus the tail of its last line.

Counting owned lines (the ledger's `lines`): `Line.number` is 1-based and consecutive, so the
number of the last line yielded is the count (0 when none), blank and comment lines included.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from logic.values import Line

__all__ = ["BOM", "Line", "iter_shard_lines"]

BOM = b"\xef\xbb\xbf"


def iter_shard_lines(
    chunks: Iterable[bytes], *, read_from: int, start: int, end: int, number_from: int = 0
) -> Iterator[Line]:
    """Yield every line whose first byte lies in `[start, end)` of the object.

    `chunks` is the object's content from byte `read_from` on, in pieces of any size. When
    `start > 0`, the bytes up to and including the first "\\n" at or after `start - 1` belong to
    the previous shard's last line (if byte `start - 1` is itself "\\n", the line at `start` is
    ours). A last line without "\\n" is a line. Memory stays within one chunk plus the longest line.
    Lines starting before `number_from` are numbered 0; numbering starts at 1 from the first line
    at or after it (a CSV shard reads lines before its start: logic/csvrecords.py).

    Kept whole: one generator over the chunk loop, the worker's hottest path (every byte of a
    shard passes here); helpers per line or chunk would add a call per line for no clarity.
    """
    if start > 0 and not 0 <= read_from <= start - 1:
        raise ValueError(f"read_from must be in [0, start - 1] = [0, {start - 1}], got {read_from}")
    if start <= 0 and read_from != 0:
        raise ValueError(f"a shard starting at 0 is read from 0, got read_from={read_from}")
    if start >= end:
        return

    it = iter(chunks)
    pos = read_from  # object offset of the first byte of the next chunk
    first: bytes = b""
    if start > 0:
        # Skip the previous shard's last line: up to and including the first "\n" at >= start - 1.
        for chunk in it:
            i = chunk.find(b"\n", max(0, start - 1 - pos))
            if i >= 0:
                first = chunk[i + 1 :]
                pos += i + 1
                break
            pos += len(chunk)
        else:
            return
    line_start = pos  # object offset of the line being assembled
    if line_start >= end:
        return

    number = 0
    check_bom = start == 0
    carry: list[bytes] = []  # pieces of the unfinished line that began at `line_start`

    def pending() -> Iterator[bytes]:
        if first:
            yield first
        yield from it

    for chunk in pending():
        if not chunk:
            continue
        pieces = chunk.split(b"\n")
        tail = pieces.pop()  # bytes after the chunk's last "\n" (maybe empty): an unfinished line
        if not pieces:
            carry.append(tail)
            continue
        if carry:
            carry.append(pieces[0])
            pieces[0] = b"".join(carry)
            carry = []
        for raw in pieces:
            if line_start >= end:
                return
            next_start = line_start + len(raw) + 1
            number = number + 1 if line_start >= number_from else 0
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if check_bom:
                check_bom = False
                if raw.startswith(BOM):
                    yield Line(number, 3, raw[3:])
                    line_start = next_start
                    continue
            yield Line(number, line_start, raw)
            line_start = next_start
        if line_start >= end:
            return  # the next line is the next shard's: do not pull another chunk
        if tail:
            carry.append(tail)

    if carry and line_start < end:
        raw = b"".join(carry)
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        number = number + 1 if line_start >= number_from else 0
        if check_bom and raw.startswith(BOM):
            yield Line(number, 3, raw[3:])
        else:
            yield Line(number, line_start, raw)
