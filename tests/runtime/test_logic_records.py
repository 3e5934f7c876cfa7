"""Shards cut anywhere, read in chunks of any size, give every line exactly once, in order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logic.planning import cut_shards
from logic.records import BOM, Line, iter_shard_lines

pytestmark = pytest.mark.runtime


def reference_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, raw) of every line, by the obvious slow method."""
    lines = []
    pos = 0
    while pos < len(data):
        newline = data.find(b"\n", pos)
        stop = len(data) if newline < 0 else newline
        raw, offset = data[pos:stop], pos
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if offset == 0 and raw.startswith(BOM):
            raw, offset = raw[3:], 3
        lines.append((offset, raw))
        pos = stop + 1
    return lines


class CountingChunks:
    """The object's bytes from `read_from`, in `size`-byte chunks, remembering how far it was read."""

    def __init__(self, data: bytes, read_from: int, size: int) -> None:
        self.data, self.read_from, self.size = data, read_from, size
        self.pulled_to = read_from

    def __iter__(self) -> Iterator[bytes]:
        for i in range(self.read_from, len(self.data), self.size):
            self.pulled_to = min(i + self.size, len(self.data))
            yield self.data[i : i + self.size]


def read_shard(data: bytes, shard: dict[str, int], chunk_size: int) -> tuple[list[Line], CountingChunks]:
    read_from = shard["start"] - 1 if shard["start"] > 0 else 0
    chunks = CountingChunks(data, read_from, chunk_size)
    lines = list(iter_shard_lines(chunks, read_from=read_from, start=shard["start"], end=shard["end"]))
    return lines, chunks


line_text = st.text(
    alphabet=st.sampled_from(["a", "b", ",", " ", "\t", '"', "é", "€", "😀", "\r"]), max_size=12
)


@st.composite
def files(draw: st.DrawFn) -> tuple[bytes, int]:
    """A file of random lines (empty ones, CRLF, multibyte UTF-8, maybe a BOM, maybe no final
    newline) and a data start on a line boundary, as after a header line."""
    texts = draw(st.lists(line_text, max_size=25))
    endings = draw(st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=len(texts), max_size=len(texts)))
    parts = [t.encode() + e for t, e in zip(texts, endings, strict=True)]
    if parts and draw(st.booleans()):
        parts[-1] = parts[-1].rstrip(b"\n")  # the last line without a newline
    data = (BOM if draw(st.booleans()) else b"") + b"".join(parts)
    boundaries = [0] + [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    return data, draw(st.sampled_from(boundaries))


@settings(max_examples=400, deadline=None)
@given(files(), st.integers(min_value=1, max_value=64), st.integers(min_value=1, max_value=40))
def test_every_line_exactly_once_in_order_with_offsets(
    file: tuple[bytes, int], shard_size: int, chunk_size: int
) -> None:
    # Given a file cut into shards after its data start
    data, data_start = file
    shards = cut_shards(
        [
            {
                "bucket": "b",
                "key": "k",
                "size": len(data),
                "etag": "e",
                "header": None,
                "data_start": data_start,
            }
        ],
        shard_size,
    )

    # When every shard is read on its own, in chunks
    seen: list[tuple[int, bytes]] = []
    for shard in shards:
        lines, chunks = read_shard(data, shard, chunk_size)
        # Then numbers are 1..n within the shard, each line starts inside the shard
        assert [line.number for line in lines] == list(range(1, len(lines) + 1))
        for line in lines:
            first_byte = 0 if line.offset == 3 and data.startswith(BOM) else line.offset
            assert shard["start"] <= first_byte < shard["end"]
        # and reading stopped within a chunk of the first line the shard does not own
        starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
        stop = min([s for s in starts if s >= shard["end"]] + [len(data)])
        assert chunks.pulled_to <= stop + chunk_size
        seen.extend((line.offset, line.raw) for line in lines)

    # Then all shards together hold every line after the data start exactly once, in order
    assert seen == [(o, raw) for o, raw in reference_lines(data) if o >= data_start]


def test_a_line_starting_right_at_the_shard_start_is_owned_by_that_shard() -> None:
    data = b"aaa\nbbb\nccc\n"
    lines, _ = read_shard(data, {"start": 4, "end": 8}, 100)
    assert lines == [Line(1, 4, b"bbb")]


def test_a_shard_inside_one_long_line_owns_nothing() -> None:
    data = b"x" * 100 + b"\nnext\n"
    assert read_shard(data, {"start": 10, "end": 50}, 7)[0] == []


def test_the_line_crossing_the_end_is_read_whole_by_its_shard() -> None:
    data = b"one\ntwo-is-long\nthree\n"
    lines, _ = read_shard(data, {"start": 0, "end": 6}, 3)
    assert [line.raw for line in lines] == [b"one", b"two-is-long"]


def test_crlf_blank_lines_and_a_last_line_without_newline() -> None:
    data = b"a\r\n\r\n\nb\r\nlast"
    lines, _ = read_shard(data, {"start": 0, "end": len(data)}, 2)
    assert lines == [
        Line(1, 0, b"a"),
        Line(2, 3, b""),
        Line(3, 5, b""),
        Line(4, 6, b"b"),
        Line(5, 9, b"last"),
    ]


def test_a_bom_at_offset_zero_is_removed_even_when_split_across_chunks() -> None:
    data = BOM + b"id\n1\n"
    lines, _ = read_shard(data, {"start": 0, "end": len(data)}, 1)
    assert lines == [Line(1, 3, b"id"), Line(2, 6, b"1")]


def test_a_bom_elsewhere_is_data() -> None:
    data = b"a\n" + BOM + b"b\n"
    lines, _ = read_shard(data, {"start": 0, "end": len(data)}, 4)
    assert lines[1] == Line(2, 2, BOM + b"b")


def test_owned_lines_are_counted_by_the_last_number() -> None:
    data = b"a\n\n# c\nd\n"
    lines, _ = read_shard(data, {"start": 0, "end": len(data)}, 3)
    assert lines[-1].number == 4


def test_nothing_is_pulled_when_the_shard_is_empty() -> None:
    def chunks() -> Iterator[bytes]:
        raise AssertionError("no chunk should be read")
        yield b""  # pragma: no cover

    assert list(iter_shard_lines(chunks(), read_from=4, start=5, end=5)) == []


def test_read_from_must_not_pass_the_byte_before_start() -> None:
    with pytest.raises(ValueError, match="read_from"):
        list(iter_shard_lines([b"abc\n"], read_from=5, start=5, end=10))
    with pytest.raises(ValueError, match="read_from"):
        list(iter_shard_lines([b"abc\n"], read_from=1, start=0, end=10))


def test_an_earlier_read_from_is_accepted() -> None:
    data = b"abc\ndef\n"
    lines = list(iter_shard_lines([data], read_from=0, start=2, end=len(data)))
    assert lines == [Line(1, 4, b"def")]
