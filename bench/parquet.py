"""`make bench`'s Parquet section: the same rows as Parquet and as CSV through one Worker, Plan
reading thousands of footers, and the cost of Parquet values.

1. The Worker, per format: the postcode rows (`mapload.sample`) as CSV and as Parquet (pyarrow's
   defaults: snappy, the file one row group up to 1M rows), and the same rows with an unmapped
   200-byte column (a wide table, where the Worker's column projection shows). Each file is one
   shard through the Worker's own `process_shard()`, in its own process, with
   bench/shard_memory.py's fakes (S3 answered from the local file, the ledger's writes dropped)
   and bench/rows.py's DynamoDB that accepts every batch at once: records/s of one Worker without
   network, its CPU µs and the bytes it read from S3 a record, its peak RSS (VmHWM, as
   bench/parquet_memory.py reads it).
2. Plan: `--plan-objects` small Parquet objects under one prefix of a moto server, Plan's own
   handler over them with every request (S3 and the ledger) through bench/proxy.py, which adds
   `--plan-latency-ms`: its requests, its seconds, and the objects its timeout allows at that rate.
3. bench/parquet_values.py's table: µs a row to turn record batches into Fields and items.

`python bench/parquet.py [--rows N] [--plan-objects N] [--plan-latency-ms MS]` prints the
section; bench/run.py prints `section(rows)`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "bench", ROOT / "runtime"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

PLAN_OBJECTS = 2000
PLAN_LATENCY_MS = 20.0
# The value rows' table size: its figure is per row, and more rows only take longer.
VALUES_ROWS = 20_000
PAD_BYTES = 200
TABLE_KEY = {"pk": "S", "sk": "S"}
MAPPING = json.loads((ROOT / "examples" / "postcodes.spec.json").read_text())["dynamodb"]
ENV = {
    "SOURCE_BUCKETS": "src",
    "STAGING_BUCKET": "stg",
    "LEDGER_TABLE": "ledger",
    "LEDGER_TTL_DAYS": "1",
    "TABLE_NAME": "target",
    "TABLE_KEY": json.dumps(TABLE_KEY),
    "WRITE_CONCURRENCY": "8",
    "MAX_CONCURRENCY_CAP": "1000",
    "WORKER_MEMORY_MIB": "1024",
    "WORKER_TIMEOUT_SECONDS": "900",
    # Plan's own timeout and memory, as the stack gives them at the defaults (stacks/loader_settings.py
    # control_timeout_seconds, control_memory_mib): the objects it accepts follow from them.
    "PLAN_TIMEOUT_SECONDS": "300",
    "PLAN_MEMORY_MIB": "512",
}
CASES = (
    ("postcodes (3 columns, all mapped)", "postcodes"),
    (f"postcodes + an unmapped {PAD_BYTES}-byte column", "wide"),
)


def _spec(fmt: str) -> dict[str, Any]:
    raw: dict[str, Any] = {"source": "s3://src/rows", "format": fmt, "dynamodb": MAPPING}
    return raw | ({"csv": {"header": True}} if fmt == "csv" else {})


def write_sources(folder: Path, rows: int) -> dict[tuple[str, str], Path]:
    """Each case's rows as CSV and as Parquet (read from that CSV by pyarrow, so the same rows)."""
    import pyarrow.csv as pc
    import pyarrow.parquet as pq

    from mapload import sample

    postcodes = sample.write_csv(folder / "postcodes.csv", rows)
    wide = folder / "wide.csv"
    with postcodes.open(encoding="utf-8") as source, wide.open("w", encoding="utf-8") as out:
        out.write(next(source).rstrip("\n") + ",notes\n")
        for n, line in enumerate(source):  # text as incompressible as a description is
            pad = "".join(hashlib.sha256(b"%d/%d" % (n, i)).hexdigest() for i in range(PAD_BYTES // 64 + 1))
            out.write(f"{line.rstrip()},{pad[:PAD_BYTES]}\n")
    paths = {}
    for case, csv_path in (("postcodes", postcodes), ("wide", wide)):
        parquet_path = csv_path.with_suffix(".parquet")
        pq.write_table(pc.read_csv(csv_path), parquet_path)
        paths[(case, "csv")], paths[(case, "parquet")] = csv_path, parquet_path
    return paths


# -- the child: one shard through the Worker ---------------------------------------------------


def _shard(fmt: str, path: Path) -> dict[str, Any]:
    """The file as one shard item, as Plan cuts it."""
    size = path.stat().st_size
    where = {"index": 0, "bucket": "src", "key": path.name, "etag": '"e"', "objectSize": size}
    if fmt == "csv":
        with path.open("rb") as handle:
            header = handle.readline()
        start = len(header)
        return where | {
            "start": start,
            "end": size,
            "dataStart": start,
            "header": header.decode().strip().split(","),
            "firstLineNumber": None,
            "lineBase": 1,
        }
    from logic import parquet

    with path.open("rb") as handle:

        def read_range(first: int, last: int) -> bytes:
            handle.seek(first)
            return handle.read(last - first + 1)

        meta = parquet.read_footer(read_range, size, path.name)
    found = parquet.ParquetObject("src", path.name, size, '"e"', parquet.row_groups(meta))
    (shard,) = parquet.cut_row_groups([found], size + 1, max_shards=1)
    return shard


def child_worker(fmt: str, path: str) -> dict[str, Any]:
    """Runs in its own process: the file through the Worker; its figures."""
    for name, value in (("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ACCESS_KEY_ID", "bench")):
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    from parquet_memory import _peak_mib
    from rows import NullClient
    from shard_memory import LocalS3, NullDynamoDb

    from adapters.ledger import Ledger
    from adapters.s3 import S3Store
    from handlers.settings import WorkerSettings
    from logic.spec.parse import parse_spec, spec_to_json
    from shards.service import process_shard

    class CountingS3(LocalS3):
        read = 0

        def get_object(self, *, Bucket: str, Key: str, Range: str, IfMatch: str) -> dict[str, Any]:
            first, last = (int(n) for n in Range.removeprefix("bytes=").split("-"))
            self.read += last - first + 1
            return super().get_object(Bucket=Bucket, Key=Key, Range=Range, IfMatch=IfMatch)

    settings = WorkerSettings.from_env(ENV)
    spec = spec_to_json(parse_spec(_spec(fmt), table_key=TABLE_KEY, execution_name="bench"))
    job = {"jobId": "bench", "runId": "run", "planId": "plan", "spec": spec, "tableKey": TABLE_KEY}
    shard = _shard(fmt, Path(path))
    if fmt == "parquet":
        import pyarrow.parquet  # noqa: F401 - imported at a Worker's start too: not the loop's cost
    s3 = CountingS3(path)
    ledger = Ledger(NullDynamoDb(), "ledger", 1)
    wall, cpu = time.perf_counter(), time.process_time()
    result = process_shard(shard, job, settings, S3Store(s3), ledger, NullClient())
    seconds, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert result["read"] == result["written"], result
    return {
        "records": result["written"],
        "seconds": seconds,
        "cpu": cpu,
        "read": s3.read,
        "peak": _peak_mib(),
    }


# -- the child: Plan over many objects ---------------------------------------------------------


def child_plan(objects: int) -> dict[str, Any]:
    """Runs in its own process, its endpoints the proxy's: Plan's handler over the prefix."""
    from handlers import plan

    spec = {**_spec("parquet"), "source": "s3://src/many/", "jobId": "bench-plan"}
    started, cpu = time.perf_counter(), time.process_time()
    done = plan.handle({"input": spec, "execution": {"name": "bench-plan"}}, ENV)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert done["job"]["objects"] == objects, done["job"]
    return {"seconds": seconds, "cpu": cpu, "shards": done["shardCount"]}


# -- the parent --------------------------------------------------------------------------------


def _child(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if done.returncode:
        raise RuntimeError(f"bench/parquet.py --child {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def worker_table(rows: int) -> str:
    lines = [
        f"The same {rows:,} rows as CSV and as Parquet, one shard through one Worker (no network: "
        "S3 read from the file, DynamoDB accepting every batch at once):",
        "",
        "| rows | format | file MiB | records/s | CPU µs/record | bytes read from S3/record | peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory(prefix="mapload-bench-parquet-") as folder:
        paths = write_sources(Path(folder), rows)
        for title, case in CASES:
            for fmt in ("csv", "parquet"):
                path = paths[(case, fmt)]
                got = _child("worker", fmt, str(path))
                assert got["records"] == rows, got
                shown = "CSV" if fmt == "csv" else "Parquet"
                lines.append(
                    f"| {title} | {shown} | {path.stat().st_size / 2**20:,.1f} | "
                    f"{got['records'] / got['seconds']:,.0f} | {got['cpu'] / rows * 1e6:,.1f} | "
                    f"{got['read'] / rows:,.1f} | {got['peak']:,.0f} |"
                )
    return "\n".join(lines)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _moto(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.terminate()
    raise RuntimeError(f"the moto server did not listen on {port}")


def plan_line(objects: int, latency_ms: float) -> str:
    import io

    import boto3
    import pyarrow as pa
    import pyarrow.parquet as pq
    from proxy import Proxy

    from mapload.tables import create_pk_sk_table
    from plans.reads import READS_IN_FLIGHT
    from stacks.loader_settings import LoaderConfig

    timeout = int(LoaderConfig.model_fields["control_timeout_seconds"].default)
    memory = int(LoaderConfig.model_fields["control_memory_mib"].default)
    body = io.BytesIO()
    pq.write_table(
        pa.table({"postcode": ["AB1 2CD"] * 10, "latitude": [1.5] * 10, "longitude": [2.5] * 10}), body
    )
    credentials = {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in credentials.items():
        os.environ.setdefault(name, value)
    port = _free_port()
    moto_url = f"http://127.0.0.1:{port}"
    server = _moto(port)
    try:
        s3 = boto3.client("s3", endpoint_url=moto_url)
        for bucket in ("src", "stg"):
            s3.create_bucket(Bucket=bucket)
        create_pk_sk_table(boto3.client("dynamodb", endpoint_url=moto_url), "ledger")
        with ThreadPoolExecutor(16) as pool:
            keys = [f"many/part-{i:05d}.snappy.parquet" for i in range(objects)]
            list(pool.map(lambda key: s3.put_object(Bucket="src", Key=key, Body=body.getvalue()), keys))
        with Proxy(moto_url, latency=latency_ms / 1000, limit=None) as proxy:
            endpoints = {"AWS_ENDPOINT_URL_S3": proxy.url, "AWS_ENDPOINT_URL_DYNAMODB": proxy.url}
            got = _child("plan", str(objects), env={**credentials, **endpoints})
            requests = proxy.requests
    finally:
        server.terminate()
        server.wait()
    # Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB.
    share = min(1.0, memory / 1769)
    lambda_cpu = got["cpu"] / share
    fits = objects * timeout / max(got["seconds"], lambda_cpu)
    return (
        f"Plan over {objects:,} Parquet objects under one prefix, {latency_ms:g} ms added to every request, "
        f"{READS_IN_FLIGHT} footer reads in flight: {requests:,} requests (a footer GET an object, "
        f"the listing, the ledger, the manifest), {got['shards']:,} shards in {got['seconds']:.1f} s, "
        f"CPU {got['cpu']:.1f} s ({got['cpu'] / objects * 1000:.1f} ms an object). Plan's timeout is "
        f"{timeout} s; at its {memory} MiB ({share:.2f} of a vCPU) that CPU takes ~{lambda_cpu:.0f} s, "
        f"so ~{fits:,.0f} objects fit in it."
    )


def section(
    rows: int,
    *,
    plan_objects: int = PLAN_OBJECTS,
    latency_ms: float = PLAN_LATENCY_MS,
    values_rows: int = VALUES_ROWS,
) -> str:
    """The section's text: the Worker table, Plan's line, the value table."""
    import parquet_values

    return "\n\n".join(
        [
            worker_table(rows),
            plan_line(plan_objects, latency_ms),
            parquet_values.table(min(rows, values_rows)),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--plan-objects", type=int, default=PLAN_OBJECTS)
    parser.add_argument("--plan-latency-ms", type=float, default=PLAN_LATENCY_MS)
    parser.add_argument("--values-rows", type=int, default=VALUES_ROWS)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        print(json.dumps(child_worker(*rest) if kind == "worker" else child_plan(int(rest[0]))))
        return
    print(
        section(
            args.rows,
            plan_objects=args.plan_objects,
            latency_ms=args.plan_latency_ms,
            values_rows=args.values_rows,
        )
    )


if __name__ == "__main__":
    main()
