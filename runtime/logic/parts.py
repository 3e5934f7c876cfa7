"""Multipart part sets: part-file names, S3's part limits, and the plan of one upload's parts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from logic.errors import PartSetError

MIB = 1024 * 1024
# S3's multipart limits (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html).
MIN_PART_BYTES = 5 * MIB  # every part but the last
MAX_PART_BYTES = 5 * 1024 * MIB
MAX_PARTS = 10_000
# s3transfer's and the AWS CLI's default too; 8 in flight hold 64 MiB. A big file's parts grow
# (part_size_for) to stay within MAX_PARTS: 8 MiB parts cover 78 GiB.
DEFAULT_PART_BYTES = 8 * MIB
# A stream of unknown length (stream_part_size) sizes its next part as if the object will end at
# this many times what it has sent: parts stay 8 MiB up to ~10 GB sent, then grow by 1/1,250th
# each, so 10,000 parts cover S3's largest object (5 TiB) while one part stays under a
# thousandth of what was sent (80 MiB at 100 GiB).
STREAM_SIZE_FACTOR = 8

# `<name>_<i>_<N>`, matched from the right so that <name> may itself hold underscores.
_PART_NAME = re.compile(r"^(?P<name>.+)_(?P<i>[0-9]+)_(?P<n>[0-9]+)$")


@dataclass(frozen=True)
class PartName:
    name: str
    index: int
    total: int


@dataclass(frozen=True)
class Part:
    """One S3 part: its 1-based number and where its bytes are (`path`, `[offset, offset+size)`)."""

    number: int
    path: str
    offset: int
    size: int


@dataclass(frozen=True)
class PartPlan:
    """The parts this process uploads, out of `total` parts of one object."""

    total: int
    parts: tuple[Part, ...]
    name: str

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def complete(self) -> bool:
        return len(self.parts) == self.total


def parse_part_name(filename: str) -> PartName | None:
    """`data_v2.csv_3_10` -> PartName("data_v2.csv", 3, 10); None for a name without the suffix."""
    match = _PART_NAME.match(filename)
    if match is None:
        return None
    return PartName(match["name"], int(match["i"]), int(match["n"]))


def check_part_sizes(
    sizes: Iterable[tuple[int, int]],
    total: int,
    *,
    min_part: int = MIN_PART_BYTES,
    max_part: int = MAX_PART_BYTES,
    where: str = "part",
) -> None:
    """(number, size) pairs against S3's limits: every part but the last at least `min_part`,
    none above `max_part` or empty (unless it is the only part), at most 10,000 parts."""
    if total > MAX_PARTS:
        raise PartSetError(f"{total:,} parts: S3 allows at most {MAX_PARTS:,} parts in one object")
    for number, size in sizes:
        if size > max_part:
            raise PartSetError(
                f"{where} {number} of {total} is {size:,} bytes: S3 allows at most {max_part:,} bytes a part"
            )
        if number < total and size < min_part:
            raise PartSetError(
                f"{where} {number} of {total} is {size:,} bytes: every part but the last must be at "
                f"least {min_part:,} bytes (S3's minimum part size)"
            )
        if size == 0 and total > 1:
            raise PartSetError(f"{where} {number} of {total} is empty")


def part_size_for(size: int, part_size: int = DEFAULT_PART_BYTES) -> int:
    """`part_size`, or the smallest whole number of MiB above it that holds `size` bytes in
    MAX_PARTS parts (so a terabyte file still fits in 10,000 parts)."""
    needed = -(-size // MAX_PARTS)
    return -(-needed // MIB) * MIB if needed > part_size else part_size


def stream_part_size(sent: int, part_size: int = DEFAULT_PART_BYTES) -> int:
    """The next part of a stream of unknown length that has sent `sent` bytes in parts: the file
    rule (`part_size_for`) for STREAM_SIZE_FACTOR times that, at most S3's largest part."""
    return min(MAX_PART_BYTES, part_size_for(sent * STREAM_SIZE_FACTOR, part_size))


def plan_file(
    path: str,
    size: int,
    *,
    part_size: int = DEFAULT_PART_BYTES,
    min_part: int = MIN_PART_BYTES,
    max_part: int = MAX_PART_BYTES,
) -> PartPlan:
    """Cut one file into parts of `part_size` bytes, grown when needed to stay within 10,000 parts."""
    if part_size < min_part:
        raise PartSetError(f"part size {part_size:,} bytes is below S3's minimum of {min_part:,} bytes")
    if part_size > max_part:
        raise PartSetError(f"part size {part_size:,} bytes is above S3's maximum of {max_part:,} bytes")
    if size > max_part * MAX_PARTS:
        raise PartSetError(f"{path} is {size:,} bytes: larger than S3's largest object (5 TiB)")
    part_size = part_size_for(size, part_size)
    count = max(1, -(-size // part_size))
    parts = tuple(
        Part(i + 1, path, i * part_size, min(part_size, size - i * part_size)) for i in range(count)
    )
    return PartPlan(count, parts, path.rsplit("/", 1)[-1])


def plan_part_files(
    files: Sequence[tuple[str, int]],
    *,
    require_all: bool = True,
    min_part: int = MIN_PART_BYTES,
    max_part: int = MAX_PART_BYTES,
) -> PartPlan:
    """A folder's part files `(path, size)`, one file one part, checked as one object's parts.

    Errors: a file not named `<name>_<i>_<N>`, two names, two N, i outside 1..N, two files
    claiming the same i, sizes S3 refuses, and (with `require_all`) any missing i."""
    if not files:
        raise PartSetError("no part files: expected files named <name>_<i>_<N>")
    named: list[tuple[PartName, str, int]] = []
    for path, size in files:
        base = path.rsplit("/", 1)[-1]
        parsed = parse_part_name(base)
        if parsed is None:
            raise PartSetError(f"{base}: not a part file; expected <name>_<i>_<N> (part i of N, i from 1)")
        named.append((parsed, path, size))
    names = sorted({p.name for p, _, _ in named})
    if len(names) > 1:
        raise PartSetError(f"part files of different objects in one set: {', '.join(names)}")
    totals = sorted({p.total for p, _, _ in named})
    if len(totals) > 1:
        examples = ", ".join(
            next(path.rsplit("/", 1)[-1] for p, path, _ in named if p.total == n) for n in totals
        )
        raise PartSetError(f"part files disagree on the number of parts N: {totals} ({examples})")
    total = totals[0]
    if total < 1:
        raise PartSetError("N (the number of parts) must be at least 1")
    by_index: dict[int, str] = {}
    parts: list[Part] = []
    for parsed, path, size in sorted(named, key=lambda t: (t[0].index, t[1])):
        base = path.rsplit("/", 1)[-1]
        if not 1 <= parsed.index <= total:
            raise PartSetError(f"{base}: part {parsed.index} is outside 1..{total}")
        if parsed.index in by_index:
            raise PartSetError(f"two files claim part {parsed.index}: {by_index[parsed.index]} and {base}")
        by_index[parsed.index] = base
        parts.append(Part(parsed.index, path, 0, size))
    missing = [i for i in range(1, total + 1) if i not in by_index]
    if missing and require_all:
        raise PartSetError(
            f"missing part{'s' if len(missing) > 1 else ''} {_ranges(missing)} of {total} "
            f"(expected {names[0]}_<i>_{total}); with --partial, other hosts upload them"
        )
    check_part_sizes(
        ((p.number, p.size) for p in parts), total, min_part=min_part, max_part=max_part, where="part"
    )
    return PartPlan(total, tuple(parts), names[0])


def _ranges(numbers: Sequence[int], limit: int = 20) -> str:
    """[1, 2, 3, 7] -> '1-3, 7' (at most `limit` ranges shown)."""
    spans: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    shown = ", ".join(spans[:limit])
    return shown + (f" and {len(spans) - limit} more ranges" if len(spans) > limit else "")


def describe_missing(total: int, done: Iterable[int]) -> str:
    have = set(done)
    missing = [i for i in range(1, total + 1) if i not in have]
    return _ranges(missing) if missing else ""
