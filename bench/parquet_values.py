"""Parquet value rows of the benchmark: microseconds a row to turn record batches into Fields
(logic/parquet_values.batch_fields) and then into items (`"attributes": "*"`), on a 10-column
table, and per column type alone. Each figure is the best of `REPEATS` rounds in this process.
`python bench/parquet_values.py [--rows N]` prints the table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runtime"))

import pyarrow as pa  # noqa: E402

from logic.mapping import make_mapper  # noqa: E402
from logic.parquet_values import batch_fields  # noqa: E402
from logic.spec.inputs import FORMATS  # noqa: E402
from logic.spec.parse import parse_spec  # noqa: E402

REPEATS = 5
BATCH_ROWS = 10_000


def columns(rows: int) -> dict[str, pa.Array]:
    """Ten columns of the types a data-lake table holds."""
    return {
        "id": pa.array(range(rows), pa.int64()),
        "name": pa.array([f"name-{i}" for i in range(rows)]),
        "price": pa.array([Decimal(i) / 100 for i in range(rows)], pa.decimal128(12, 2)),
        "ratio": pa.array([i / 7 for i in range(rows)], pa.float64()),
        "score": pa.array([i / 3 for i in range(rows)], pa.float32()),
        "flag": pa.array([i % 2 == 0 for i in range(rows)]),
        "day": pa.array(range(rows), pa.date32()),
        "at": pa.array(range(rows), pa.timestamp("us", tz="UTC")),
        "blob": pa.array([i.to_bytes(8, "big") for i in range(rows)]),
        "tags": pa.array([["a", "b"] if i % 3 else [] for i in range(rows)], pa.list_(pa.string())),
    }


def _best(run: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _spec() -> Any:
    raw = {
        "source": "s3://bench-source/part-0.parquet",
        "jobId": "bench",
        "format": "parquet",
        "dynamodb": {"key": {"pk": "{id}", "sk": "X"}, "attributes": "*"},
    }
    if "parquet" in FORMATS:
        return parse_spec(raw, table_key={"pk": "S", "sk": "S"})
    spec = parse_spec({**raw, "format": "jsonl"}, table_key={"pk": "S", "sk": "S"})
    return spec.model_copy(update={"format": "parquet"})


def table(rows: int) -> str:
    data = columns(rows)
    batches = pa.table(data).to_batches(max_chunksize=BATCH_ROWS)
    to_item = make_mapper(_spec())
    fields = [row for batch in batches for row in batch_fields(batch)]
    assert len(fields) == rows
    lines = ["| Parquet values (µs a row) | batch_fields | batch_fields + item |", "|---|---:|---:|"]
    whole = _best(lambda: [row for batch in batches for row in batch_fields(batch)])
    mapped = _best(lambda: [to_item(row) for batch in batches for row in batch_fields(batch)])
    lines.append(f"| 10 columns | {whole / rows * 1e6:.2f} | {mapped / rows * 1e6:.2f} |")
    for name, array in data.items():
        if name == "id":
            continue
        one = pa.table({"id": data["id"], name: array}).to_batches(max_chunksize=BATCH_ROWS)
        alone = _best(lambda one=one: [row for batch in one for row in batch_fields(batch)])
        with_item = _best(lambda one=one: [to_item(row) for batch in one for row in batch_fields(batch)])
        lines.append(
            f"| id + {name} ({array.type}) | {alone / rows * 1e6:.2f} | {with_item / rows * 1e6:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    print(table(parser.parse_args().rows))


if __name__ == "__main__":
    main()
