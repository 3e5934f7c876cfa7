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
figure is the best of `REPEATS` rounds, the paths in turns.

Then the end-to-end local run with each engine (`mapload run-local`'s embedded run: the state
machine, the handlers and the emulator, whose own speed this includes: its moto table, and for
bulkPutItems its local model of the operation; not a figure for AWS), each engine's table then
compared item by item. `python bench/bulk.py [--rows N] [--e2e-rows N]` prints the tables alone.
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
# The end-to-end runs' rows (each engine once through the embedded run).
E2E_ROWS = 20_000
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


def end_to_end(rows: int) -> str:
    """Each engine's embedded run of `rows` postcode rows: seconds, what it wrote, and whether the
    two tables hold the same items."""
    from mapload.local import run_local

    tables: dict[str, dict[str, Any]] = {}
    lines = [
        f"dynamodb.engine end to end: mapload run-local on {rows:,} postcode rows (the emulator included)",
        "",
        "| engine | seconds | records written | how |",
        "|---|---:|---:|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="mapload-bench-bulk-") as tmp:
        source = sample.write_csv(Path(tmp) / "postcodes.csv", rows)
        for engine in ("lambda", "bulkPutItems"):
            scanned: dict[str, Any] = {}

            def scan(emu: Any, deployment: Any, into: dict[str, Any] = scanned) -> None:
                db = emu.client("dynamodb")
                for page in db.get_paginator("scan").paginate(TableName=deployment.output("TableName")):
                    into.update({item["pk"]["S"]: item for item in page["Items"]})

            spec = {k: v for k, v in SPEC.items() if k != "source"}
            spec = {**spec, "dynamodb": {**SPEC["dynamodb"], "engine": engine}, "shardSizeMiB": 1}
            started = time.perf_counter()
            report = run_local(
                source, spec, report_path=Path(tmp) / f"{engine}.json", quiet=True, inspect=scan
            )
            seconds = time.perf_counter() - started
            if report["status"] != "SUCCEEDED":
                raise SystemExit(f"{engine}: {report['status']}: {report.get('error')}")
            tables[engine] = scanned
            how = (
                f"{report['shards']['total']} shard(s): the Workers' BatchWriteItem"
                if engine == "lambda"
                else f"{report['bulkPut']['stagedObjects']} staged object(s), one operation "
                f"{report['bulkPut']['status']}"
            )
            lines.append(f"| {engine} | {seconds:.1f} | {report['records']['written']:,} | {how} |")
    same = tables["lambda"] == tables["bulkPutItems"]
    lines += [
        "",
        f"the two tables: {'the same items' if same else 'DIFFERENT'} ({len(tables['lambda']):,} items)",
    ]
    if not same:
        raise SystemExit("\n".join(lines))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--e2e-rows", type=int, default=E2E_ROWS, help="0: no end-to-end runs")
    args = parser.parse_args()
    print(table(args.rows))
    if args.e2e_rows:
        print()
        print(end_to_end(args.e2e_rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
