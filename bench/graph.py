"""Benchmark the graph path on this machine: N-Quads lines checked and staged by the Worker's loop
(one pyoxigraph parse per line), CSV records turned into statements, and the local loader's store.

    .venv/bin/python bench/graph.py [--lines 200000]

Prints a table; nothing is asserted (performance is measured, not tested).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "runtime"), str(ROOT)]

import pyoxigraph as ox  # noqa: E402

from adapters.rdf import GraphStager  # noqa: E402
from logic.records import iter_shard_lines  # noqa: E402
from logic.spec.parse import parse_spec  # noqa: E402
from shards.records import process  # noqa: E402
from shards.rejects import RejectSink  # noqa: E402

EX = "http://example.org/"
CHUNK = 1 << 20


def nquads(lines: int) -> bytes:
    return b"".join(
        f'<{EX}s/{i}> <{EX}p/{i % 13}> "value {i} with \\"quotes\\""@en <{EX}g/{i % 5}> .\n'.encode()
        for i in range(lines)
    )


def people_csv(rows: int) -> bytes:
    return b"id,name,age\n" + b"".join(f"{i},Person {i},{20 + i % 60}\n".encode() for i in range(rows))


def stage(
    data: bytes, raw_spec: dict[str, object], header: list[str] | None, compress: bool
) -> tuple[float, int, int]:
    spec = parse_spec(
        {"source": "s3://bench-bucket/data", "jobId": "bench", **raw_spec}, table_key={"pk": "S", "sk": "S"}
    )
    start_at = data.index(b"\n") + 1 if header else 0
    read_from = max(0, start_at - 1)  # as a Worker reads: from the byte before its range
    lines = iter_shard_lines(
        [data[i : i + CHUNK] for i in range(read_from, len(data), CHUNK)],
        read_from=read_from,
        start=start_at,
        end=len(data),
    )
    staged = io.BytesIO()  # the Worker streams it to S3 in parts; the bench keeps it in memory
    stager = GraphStager(compress=compress, out=staged)
    started = time.perf_counter()
    counts = process(
        lines, spec, header, None, RejectSink("s3://bench-bucket/data", out=io.BytesIO()), stager
    )
    stager.finish()
    staged_bytes = len(staged.getvalue())
    return time.perf_counter() - started, counts["written"], staged_bytes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=200_000)
    args = parser.parse_args()
    n = args.lines
    data = nquads(n)
    statements = [
        {
            "subject": EX + "person/{id}",
            "predicate": EX + "name",
            "object": {"literal": "{name}", "language": "en"},
        },
        {
            "subject": EX + "person/{id}",
            "predicate": EX + "age",
            "object": {"literal": "{age}", "datatype": "xsd:integer"},
        },
    ]
    rows: list[tuple[str, float, int, int, int]] = []
    for compress in (False, True):
        seconds, written, size = stage(
            data, {"format": "nquads", "graph": {"gzip": compress}}, None, compress
        )
        rows.append(
            (f"N-Quads lines -> staged{' (gzip)' if compress else ''}", seconds, written, len(data), size)
        )
    csv = people_csv(n)
    seconds, written, size = stage(
        csv, {"format": "csv", "graph": {"statements": statements}}, ["id", "name", "age"], False
    )
    rows.append(("CSV records -> 2 statements each", seconds, written, len(csv), size))
    store = ox.Store()
    started = time.perf_counter()
    store.extend(ox.parse(input=data, format=ox.RdfFormat.N_QUADS))
    rows.append(
        ("local loader store (pyoxigraph extend)", time.perf_counter() - started, len(store), len(data), 0)
    )

    print(f"{'step':<42} {'seconds':>8} {'records':>9} {'records/s':>10} {'input MB':>9} {'staged MB':>10}")
    for name, seconds, count, in_bytes, out_bytes in rows:
        print(
            f"{name:<42} {seconds:>8.2f} {count:>9,} {count / seconds:>10,.0f} "
            f"{in_bytes / 1e6:>9.1f} {out_bytes / 1e6:>10.1f}"
        )


if __name__ == "__main__":
    main()
