"""CSV parser rows of `make bench`: records/s of the Worker's read-and-split path, no writes.

Today's line path (`iter_shard_lines` + the parser per line) against the record path the Worker
uses for CSV (`csvrecords.ShardRecords` + the same parser), on one file without quoted newlines,
and the record path on a file where 10 % of records hold a newline. The paths run in turns, `REPEATS`
rounds in this process, and each figure is its best round: the two paths meet the same machine
state (other processes' load shows as noise, not as a difference between them).
`python bench/parsers.py [--rows N]` prints the table alone.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runtime"))

from logic.csvrecords import CutRecord, ShardRecords  # noqa: E402
from logic.parsing import is_skipped, make_parser  # noqa: E402
from logic.records import iter_shard_lines  # noqa: E402
from logic.spec.inputs import JobSpec  # noqa: E402
from logic.spec.parse import parse_spec  # noqa: E402

REPEATS = 7
CHUNK = 1024 * 1024
HEADER = b"postcode,latitude,longitude,note\n"


def sample_file(rows: int, *, newline_every: int = 0, seed: int = 7) -> bytes:
    """Postcode-like rows with a quoted note (a comma in it); every `newline_every`-th note holds
    a newline (0: none)."""
    rng = random.Random(seed)
    out = [HEADER]
    for i in range(rows):
        gap = "\n" if newline_every and i % newline_every == 0 else " "
        note = f'"flat {rng.randint(1, 99)},{gap}{rng.choice(("north", "south", "east"))} side"'
        postcode = f"AB{i % 90 + 10} {i % 9}{chr(65 + i % 26)}A"
        out.append(f"{postcode},{rng.uniform(49, 59):.6f},{rng.uniform(-7, 2):.6f},{note}\n".encode())
    return b"".join(out)


def _chunks(data: bytes, first: int) -> Iterator[bytes]:
    for i in range(first, len(data), CHUNK):
        yield data[i : i + CHUNK]


def _spec() -> JobSpec:
    raw = {
        "source": "s3://bench-source/k.csv",
        "jobId": "bench",
        "format": "csv",
        "dynamodb": {"key": {"pk": "{postcode}", "sk": "X"}, "attributes": "*"},
    }
    return parse_spec(raw, table_key={"pk": "S", "sk": "S"})


def line_path(data: bytes) -> int:
    """Today's parser: every "\\n"-line is a record."""
    spec = _spec()
    parse = make_parser(spec, HEADER.decode().strip().split(","))
    start = len(HEADER)
    ok = 0
    for line in iter_shard_lines(_chunks(data, start - 1), read_from=start - 1, start=start, end=len(data)):
        if not is_skipped(line.raw, spec) and isinstance(parse(line), dict):
            ok += 1
    return ok


def record_path(data: bytes) -> int:
    """The Worker's CSV path: records that may span lines."""
    spec = _spec()
    parse = make_parser(spec, HEADER.decode().strip().split(","))
    start = len(HEADER)
    # One shard from the data start, as the line path reads. A shard further on also reads (and
    # counts the quotes of) the 1 MiB before its start: 1.6 % more bytes for a 64 MiB shard.
    records = ShardRecords(
        lambda first: _chunks(data, first),
        start=start,
        end=len(data),
        object_size=len(data),
        data_start=len(HEADER),
        max_record=1024 * 1024,
    )
    ok = 0
    for record in records:
        if isinstance(record, CutRecord) or is_skipped(record.raw, spec):
            continue
        if isinstance(parse(record), dict):
            ok += 1
    return ok


def _best_in_turns(runs: list[tuple[Callable[[bytes], int], bytes]]) -> list[tuple[float, int]]:
    best = [(float("inf"), 0)] * len(runs)
    for _ in range(REPEATS):
        for i, (path, data) in enumerate(runs):
            started = time.perf_counter()
            count = path(data)
            best[i] = (min(best[i][0], time.perf_counter() - started), count)
    return best


def table(rows: int) -> str:
    plain = sample_file(rows)
    tenth = sample_file(rows, newline_every=10)
    names = (
        "today's line parser, no quoted newline",
        "record parser, no quoted newline",
        "record parser, 10 % of records hold a newline",
    )
    runs: list[tuple[Callable[[bytes], int], bytes]] = [
        (line_path, plain),
        (record_path, plain),
        (record_path, tenth),
    ]
    measured = [
        (name, seconds, count, len(data))
        for name, (seconds, count), (_, data) in zip(names, _best_in_turns(runs), runs, strict=True)
    ]
    base = measured[0][1]
    out = [
        f"CSV parsers ({rows:,} records of 4 fields, one quoted; best of {REPEATS} rounds; no writes)",
        "",
        "| parser | records | records/s | MB/s | vs today's |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, seconds, count, size in measured:
        rate, speed = count / seconds, size / seconds / 1e6
        out.append(f"| {name} | {count:,} | {rate:,.0f} | {speed:.1f} | {base / seconds:.0%} |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    print(table(parser.parse_args().rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
