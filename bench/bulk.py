"""dynamodb.engine rows of `make bench`: the Worker's per-record loop (shards/records.py `process`) on
the postcode sample, three ways, in this process and without moto:

- parse and map alone (a dry run: no writer), the floor both engines share;
- the lambda engine's write loop: BatchWriteItem requests of 25 built and sent through the
  BatchWriter to a stub client that only serializes each request body (adapters/dynamodb_wire.py
  `encode`, what the Worker's client sends) — the emulator's speed is not measured;
- engine bulkPutItems: each item staged by the BulkStager, then the shard's objects made (hash
  order, parts, gzip DynamoDB JSON Lines, the sidecars) — everything but the S3 PUTs.

Records/s is wall time, CPU µs a record is the process's CPU time (every thread) over the records;
bytes a record: the request bodies (lambda), or the gzip objects and their sidecars (bulk). Each
figure is the best of `REPEATS` rounds, the paths in turns. `python bench/bulk.py [--rows N]`
prints the table alone.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runtime"))

from adapters.dynamodb import BatchWriter  # noqa: E402
from adapters.dynamodb_wire import encode  # noqa: E402
from logic.csvrecords import ShardRecords  # noqa: E402
from logic.spec.inputs import JobSpec  # noqa: E402
from logic.spec.parse import parse_spec  # noqa: E402
from mapload import sample  # noqa: E402
from shards.bulk_staging import BulkStager  # noqa: E402
from shards.records import process  # noqa: E402
from shards.rejects import RejectSink  # noqa: E402

REPEATS = 3
# The Worker's default write_concurrency (BatchWriteItem requests in flight).
IN_FLIGHT = 4
SPEC: dict[str, Any] = {
    "source": "s3://bench/postcodes.csv",
    "format": "csv",
    "jobId": "bench",
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {
            "latitude": {"field": "latitude", "type": "N"},
            "longitude": {"field": "longitude", "type": "N"},
        },
    },
}


class SerializingClient:
    """A DynamoDB client that only serializes each BatchWriteItem body (and counts its bytes)."""

    def __init__(self) -> None:
        self.bytes = 0

    def batch_write_item(self, RequestItems: dict[str, Any], **fields: Any) -> dict[str, Any]:
        self.bytes += len(encode(RequestItems, **fields))
        return {"UnprocessedItems": {}}


def _spec(engine: str) -> JobSpec:
    raw = {**SPEC, "dynamodb": {**SPEC["dynamodb"], "engine": engine}}
    return parse_spec(raw, table_key={"pk": "S", "sk": "S"})


def _loop(data: bytes, spec: JobSpec, writer: Any) -> int:
    """The Worker's per-record loop over the whole file as one shard; the records accepted."""
    header_end = data.index(b"\n") + 1
    records = ShardRecords(
        lambda first: iter((data[first:],)),
        start=header_end,
        end=len(data),
        object_size=len(data),
        data_start=header_end,
        max_record=1024 * 1024,
    )
    header = data[: header_end - 1].decode().split(",")
    rejects = RejectSink("s3://bench/postcodes.csv", out=io.BytesIO())
    counts = process(records, spec, header, writer, rejects)
    return int(counts["written"])


def dry_run(data: bytes) -> tuple[int, int]:
    return _loop(data, _spec("lambda"), None), 0


def lambda_engine(data: bytes) -> tuple[int, int]:
    client = SerializingClient()
    writer = BatchWriter(client, "postcodes", in_flight=IN_FLIGHT)
    try:
        records = _loop(data, _spec("lambda"), writer)
    finally:
        writer.close()
    return records, client.bytes


def bulk_engine(data: bytes) -> tuple[int, int]:
    stager = BulkStager()
    _loop(data, _spec("bulkPutItems"), stager)
    objects = stager.objects("bench", "plan", 0, len(data), "s3://bench/postcodes.csv", None)
    return stager.staged, sum(len(o.body) + len(o.sidecar) for o in objects)


PATHS: tuple[tuple[str, Callable[[bytes], tuple[int, int]]], ...] = (
    ("parse and map alone (dry run)", dry_run),
    ("lambda: BatchWriteItem bodies, stub client", lambda_engine),
    ("bulkPutItems: staged gzip DynamoDB JSON + sidecar", bulk_engine),
)


def measure(data: bytes) -> list[dict[str, float]]:
    """Each path's best round (least CPU): records, seconds, CPU seconds, bytes."""
    best: list[dict[str, float]] = [{"cpu": float("inf")} for _ in PATHS]
    for _ in range(REPEATS):
        for i, (_name, path) in enumerate(PATHS):
            wall, cpu = time.perf_counter(), time.process_time()
            records, size = path(data)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            if cpu < best[i]["cpu"]:
                best[i] = {"records": records, "seconds": wall, "cpu": cpu, "bytes": size}
    return best


def table(rows: int) -> str:
    with tempfile.TemporaryDirectory(prefix="mapload-bench-bulk-") as tmp:
        data = sample.write_csv(Path(tmp) / "postcodes.csv", rows).read_bytes()
    results = measure(data)
    lines = [
        f"dynamodb.engine: the Worker's loop on {rows:,} postcode rows ({len(data) / rows:.0f} source bytes "
        "a row), no network",
        "",
        "| path | records/s | CPU µs/record | bytes/record |",
        "|---|---:|---:|---:|",
    ]
    for (name, _), result in zip(PATHS, results, strict=True):
        records = max(1, int(result["records"]))
        per = f"{result['bytes'] / records:.1f}" if result["bytes"] else "-"
        lines.append(
            f"| {name} | {records / result['seconds']:,.0f} | {result['cpu'] / records * 1e6:.1f} | {per} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    print(table(parser.parse_args().rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
