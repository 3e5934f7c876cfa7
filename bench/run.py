"""`make bench`: load one generated postcode CSV five ways against one latency-adding endpoint and
print one table (items/s, CPU µs per item, peak memory, items lost, ratio to boto3's batch_writer);
then each write mode through the Worker's loop and the embedded pipeline at the same round trip
and a write limit moto serves single-item writes at (`--mode-limit`), and an update with a numeric
add through the pipeline (`--add-slice`: a TransactWriteItems a record), beside the rate
`mapload estimate` models for each; then batch_writer and the embedded pipeline at a long round
trip (`--long-latency-ms`); then, in this process and without moto, the CSV parsers
(bench/parsers.py), the engines' per-record cost (bench/bulk.py: staging for bulk put items
against the put loop) and the edge endpoint check (bench/endpoints.py).

`mapload serve` (a subprocess: moto with the emulator's patches) holds the data; bench/proxy.py
in this process adds the round trip and, for the limited rows, a write-unit budget. Each row runs
in its own subprocess (bench/rows.py): its CPU time is measured inside it around the load (imports
excluded), its peak RSS comes from wait4. Items lost = items the row sent minus items counted in
its table after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "runtime"))

from proxy import Proxy  # noqa: E402

from logic.spec.dynamodb import WRITE_MODES, write_mode_type  # noqa: E402
from mapload import sample  # noqa: E402
from mapload.estimate import (  # noqa: E402
    BENCH_ROUND_TRIP_MS,
    BENCH_WRITE_CONCURRENCY,
    units_per_record,
    worker_rate,
)
from mapload.tables import create_pk_sk_table  # noqa: E402

PYTHON = sys.executable
# Rows whose load is the embedded pipeline (run-local): it makes its own table.
PIPELINE_ROWS = frozenset({"pipeline", "modes_pipeline", "long_pipeline", "add_pipeline"})


@dataclass
class Result:
    name: str
    items: int
    seconds: float
    cpu: float
    rss_mib: float
    lost: int | None
    note: str = ""
    limit: float | None = None
    requests: int = 0  # write requests the row's writer sent (worker rows)
    server_cpu: float = 0.0  # CPU seconds the moto server spent during the row

    @property
    def server_cpu_us(self) -> float:
        return self.server_cpu / self.items * 1e6 if self.items else 0.0

    @property
    def rate(self) -> float:
        return self.items / self.seconds if self.seconds else 0.0

    @property
    def cpu_us(self) -> float:
        return self.cpu / self.items * 1e6 if self.items else 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.moto_url = f"http://127.0.0.1:{_free_port()}"
        self.db = boto3.client("dynamodb", endpoint_url=self.moto_url, region_name="us-east-1")
        self.moto_pid = 0
        self._server: subprocess.Popen[bytes] | None = None

    def start_server(self) -> None:
        """A new `mapload serve` on the bench's port, holding nothing yet (the one before it stopped).

        Each section of the table starts with its own: one server kept through the whole run ended
        it holding every earlier row's items (700,000 and more), and its CPU per item for the last
        rows grew by half (moto's 50 ms rows: 167 µs an item after the other sections, 98-107 µs
        alone), so where a row stood in the run moved its figure."""
        self.stop_server()
        self._server = subprocess.Popen(
            [PYTHON, "-m", "mapload.cli", "serve", "--port", self.moto_url.rsplit(":", 1)[1]],
            stdout=subprocess.DEVNULL,  # `mapload serve`, as users run it
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            env={
                **os.environ,
                "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'runtime'}",
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
            },
        )
        self.moto_pid = self._server.pid
        _wait_for(self.moto_url)

    def stop_server(self) -> None:
        if self._server is not None:
            self._server.terminate()
            self._server.wait()
            self._server = None

    def server_cpu(self) -> float:
        """The moto server's CPU seconds so far (user + system, from /proc; 0 where there is none)."""
        try:
            fields = Path(f"/proc/{self.moto_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def table(self, name: str) -> str:
        return create_pk_sk_table(self.db, name)

    def count(self, table: str) -> int:
        total = 0
        for page in self.db.get_paginator("scan").paginate(TableName=table, Select="COUNT"):
            total += int(page["Count"])
        return total

    def run_row(self, row: str, args: dict[str, Any]) -> tuple[dict[str, Any], float, str]:
        """Run one row in a child process; its result, peak RSS (MiB) and stderr."""
        out_path, err_path = self.workdir / f"{row}.out", self.workdir / f"{row}.err"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                [PYTHON, str(ROOT / "bench" / "rows.py"), row, json.dumps(args)],
                stdout=out,
                stderr=err,
                env={**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"},
            )
            # wait4 (not Popen.wait) to get this child's own rusage; ru_maxrss is KiB on Linux.
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            raise RuntimeError(f"row {row} failed ({process.returncode}):\n{err_path.read_text()[-3000:]}")
        result = json.loads(out_path.read_text().strip().splitlines()[-1])
        return result, usage.ru_maxrss / 1024, err_path.read_text()


def _pipeline_tables(bench: Bench) -> list[str]:
    names = bench.db.list_tables()["TableNames"]
    return [n for n in names if n.startswith("mapload-dev-") and "Ledger" not in n]


def _parser() -> argparse.ArgumentParser:
    """`make bench`'s options (BENCH_ARGS)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument(
        "--latency-ms", type=float, default=BENCH_ROUND_TRIP_MS, help="round trip the proxy adds"
    )
    parser.add_argument(
        "--limit", type=float, default=2000.0, help="write units/s for the limited rows (0: skip them)"
    )
    parser.add_argument("--putitem-slice", type=int, default=1000, help="records row 1 really sends")
    parser.add_argument(
        "--concurrency", type=int, default=BENCH_WRITE_CONCURRENCY, help="worker write_concurrency"
    )
    parser.add_argument(
        "--mode-slice", type=int, default=10_000, help="records each write-mode row sends (0: skip them)"
    )
    parser.add_argument(
        "--mode-limit",
        type=float,
        default=300.0,
        help="write units/s of the write-mode rows (0: none); the moto server spends 1.7-3.1 ms of CPU "
        "a single-item write (the table's moto CPU column), so it serves about 300/s on this 2-core "
        "machine beside the writers",
    )
    parser.add_argument(
        "--add-slice",
        type=int,
        default=2000,
        help="records of the numeric-add row (0: skip it): a TransactWriteItems a record, 4 write units "
        "(item and marker, twice), so 2,000 take ~27 s at the write-mode limit",
    )
    parser.add_argument(
        "--long-latency-ms", type=float, default=50.0, help="round trip of the long-round-trip rows"
    )
    parser.add_argument(
        "--long-rows", type=int, default=20_000, help="rows of the long-round-trip rows (0: skip them)"
    )
    parser.add_argument("--shards", type=int, default=4, help="shards (and maxConcurrency) of row 5")
    parser.add_argument("--small-mib", type=int, default=10)
    parser.add_argument("--big-mib", type=int, default=1024, help="0 skips the large-shard memory row")
    parser.add_argument(
        "--graph-vertices",
        type=int,
        default=1_000_000,
        help="vertices of the edge endpoint check's jobs (bench/endpoints.py; 2 edges each)",
    )
    parser.add_argument("--only", default="", help="comma-separated row kinds to run (for profiling)")
    return parser


def _options() -> argparse.Namespace:
    """The command line's options, refused with the parser's usage when out of range."""
    parser = _parser()
    options = parser.parse_args()
    if options.limit < 0:
        parser.error(f"--limit must be 0 (no limited rows) or more, got {options.limit:g}")
    if options.graph_vertices < 64:
        parser.error(f"--graph-vertices must be at least 64 (one a shard), got {options.graph_vertices}")
    if options.rows < 1:
        parser.error(f"--rows must be at least 1, got {options.rows}")
    return options


def main() -> int:
    options = _options()
    # A stopped benchmark still stops its moto server and removes its temporary files.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    latency = options.latency_ms / 1000
    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench")):
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

    with tempfile.TemporaryDirectory(prefix="mapload-bench-") as tmp:
        workdir = Path(tmp)
        bench = Bench(options, workdir)
        csv_path = sample.write_csv(workdir / "postcodes.csv", options.rows)
        size = csv_path.stat().st_size
        try:
            bench.start_server()
            results, limited, modes, long = _measure(bench, options, csv_path, size, latency)
            memory = _memory(bench, options, workdir)
        finally:
            bench.stop_server()
        plan_seconds, plan_shards = _plan_100gb()
    print(_render(options, results, limited, memory, plan_seconds, plan_shards, size))
    if modes:
        print(_render_modes(options, modes))
    if long:
        print(_render_long(options, long))
    _print_sections(options)
    return 0


def _print_sections(options: argparse.Namespace) -> None:
    """The tables measured in this process, without moto (each unless `--only` leaves it out)."""
    if not options.only or "parsers" in options.only.split(","):
        import parsers  # bench/parsers.py: the CSV parser rows (no moto)

        print("\n" + parsers.table(options.rows))
    if not options.only or "bulk" in options.only.split(","):
        import bulk  # bench/bulk.py: dynamodb.engine, staging for bulk put items vs the put loop

        print("\n" + bulk.table(options.rows))
        print("\n" + bulk.end_to_end(min(options.rows, bulk.E2E_ROWS)))
    if not options.only or "endpoints" in options.only.split(","):
        import endpoints  # bench/endpoints.py: the edge endpoint check rows (no moto)

        print("\n" + endpoints.table(options.graph_vertices))
    if not options.only or "parquet" in options.only.split(","):
        import parquet  # bench/parquet.py: the same rows as Parquet and CSV, Plan's footer reads

        print("\n" + parquet.section(options.rows))
    if not options.only or "upload" in options.only.split(","):
        import upload  # bench/upload.py: `mapload upload` vs boto3's upload_file (UPLOAD_MIB=512)

        print("\n" + upload.table())


def _head(csv_path: Path, rows: int) -> Path:
    """The header and the first `rows` rows of the CSV, as a file of its own."""
    path = csv_path.with_name(f"head-{rows}.csv")
    with csv_path.open("rb") as source, path.open("wb") as out:
        for _ in range(rows + 1):
            out.write(source.readline())
    return path


def _measure(
    bench: Bench, options: argparse.Namespace, csv_path: Path, size: int, latency: float
) -> tuple[list[Result], list[Result], list[Result], list[Result]]:
    from mapload.local import LOCAL_CONTEXT
    from mapload.synth import synthesize

    shard_mib = size / options.shards / 2**20 * 1.01
    context = {"mapload:write_concurrency": options.concurrency}
    synthesize({"env": "dev", **LOCAL_CONTEXT, **context})  # warm the cache: no synth inside a row
    common = {"file": str(csv_path), "concurrency": options.concurrency}
    pipeline_args = {
        **common,
        "spec": {"shardSizeMiB": shard_mib, "maxConcurrency": options.shards},
        "context": context,
        "report": str(bench.workdir / "report.json"),
    }
    with Proxy(bench.moto_url, latency=latency, limit=None) as proxy:
        rows = _Rows(bench, options, proxy, common, pipeline_args)
        rows.unlimited()
        if options.limit > 0:  # 0: no limited rows
            rows.limited_rows()
        if options.mode_slice > 0:
            rows.write_modes(csv_path)
        if options.add_slice > 0:
            rows.numeric_add(csv_path)
        if options.long_rows > 0:
            rows.long_round_trip(csv_path, latency)
    return rows.results, rows.limited, rows.modes, rows.long


@dataclass
class _Rows:
    """The write rows, each run through one proxy, each Result into its table's list."""

    bench: Bench
    options: argparse.Namespace
    proxy: Proxy
    common: dict[str, Any]
    pipeline_args: dict[str, Any]
    results: list[Result] = field(default_factory=list)
    limited: list[Result] = field(default_factory=list)
    modes: list[Result] = field(default_factory=list)
    long: list[Result] = field(default_factory=list)

    def _args(self, row: str, extra: dict[str, Any]) -> dict[str, Any]:
        """The row's arguments; a pipeline row makes its own table, any other gets a new one."""
        if row in PIPELINE_ROWS:
            if extra.get("mode") != "delete":  # delete deletes what the put row wrote
                for table in _pipeline_tables(self.bench):
                    self.bench.db.delete_table(TableName=table)
            return {**self.common, **extra, "endpoint": self.proxy.url}
        return {
            **self.common,
            **extra,
            "endpoint": self.proxy.url,
            "table": extra.get("table")
            or self.bench.table(f"bench-{len(self.results) + len(self.limited) + len(self.modes)}"),
        }

    def run(
        self,
        name: str,
        row: str,
        extra: dict[str, Any],
        expected: int,
        *,
        into: list[Result],
        limit: float | None = None,
        note: str = "",
    ) -> str:
        """Run the row; the table it wrote (`extra["table"]` if given, else a new one)."""
        if self.options.only and row not in self.options.only.split(","):
            return ""
        self.proxy.set_limit(limit)
        args = self._args(row, extra)
        throttled_before = self.proxy.throttled
        server_before = self.bench.server_cpu()
        outcome, rss, err = self.bench.run_row(row, args)
        server_cpu = self.bench.server_cpu() - server_before
        table = _pipeline_tables(self.bench)[0] if row in PIPELINE_ROWS else args["table"]
        counted = self.bench.count(table)
        if self.proxy.throttled > throttled_before:
            note = (
                note + "; " if note else ""
            ) + f"{self.proxy.throttled - throttled_before} requests throttled"
        into.append(
            Result(
                name,
                outcome["items"],
                outcome["seconds"],
                outcome["cpu"],
                rss,
                expected - counted,
                note,
                limit,
                _requests(err),
                server_cpu,
            )
        )
        print(f"  {name}: {outcome['items']} items in {outcome['seconds']:.1f}s", file=sys.stderr)
        return str(table)

    def unlimited(self) -> None:
        """Rows 1 to 5 of the first table: the five ways, no write limit."""
        options, rows, into = self.options, self.options.rows, self.results
        n = min(options.putitem_slice, rows)
        self.run(
            "1 PutItem per record",
            "putitem",
            {"slice": n},
            n,
            into=into,
            note=f"{n:,} of {rows:,} rows sent (all {rows:,}: ≈ {{full}} at this rate)",
        )
        self.run("2 boto3 Table.batch_writer(), 1 thread", "batch_writer", {}, rows, into=into)
        self.run(
            "3 awswrangler wr.dynamodb.put_df",
            "wrangler",
            {},
            rows,
            into=into,
            note="includes pandas.read_csv and column shaping",
        )
        self.run(f"4 mapload worker, 1 shard, {options.concurrency} in flight", "worker", {}, rows, into=into)
        self.run(
            f"5 embedded pipeline, {options.shards} shards",
            "pipeline",
            self.pipeline_args,
            rows,
            into=into,
            note="items/s over the execution (Plan to Finalize); CPU includes the in-process emulator",
        )

    def limited_rows(self) -> None:
        """Rows 2, 4 and 5 under a write-unit limit (`--limit`)."""
        self.bench.start_server()  # each section on a server of its own (Bench.start_server)
        rows, limit, spec = self.options.rows, self.options.limit, self.pipeline_args["spec"]
        self.run("2 batch_writer", "batch_writer", {}, rows, into=self.limited, limit=limit)
        self.run("4 mapload worker, 1 shard", "worker", {}, rows, into=self.limited, limit=limit)
        self.run(
            f"5 embedded pipeline, {self.options.shards} shards",
            "pipeline",
            {**self.pipeline_args, "spec": {**spec, "writeUnitsPerSecond": limit}},
            rows,
            into=self.limited,
            limit=limit,
            note="writeUnitsPerSecond = limit",
        )

    def write_modes(self, csv_path: Path) -> None:
        """Each write mode through the Worker's loop, then through the embedded pipeline."""
        self.bench.start_server()
        # Each mode on its own table, except delete: it deletes what the put row wrote.
        n = min(self.options.mode_slice, self.options.rows)
        mode_limit = self.options.mode_limit or None
        head = _head(csv_path, n)
        put_table = ""
        for mode in WRITE_MODES:
            if write_mode_type(mode).staged:  # its Worker stages, the Sync Map writes: pipeline only
                continue
            on = {"table": put_table} if mode == "delete" and put_table else {}
            table = self.run(
                mode,
                "modes",
                {"slice": n, "mode": mode, **on},
                0 if mode == "delete" and put_table else n,
                into=self.modes,
                limit=mode_limit,
                note="deletes the put row's items" if on else "",
            )
            put_table = table if mode == "put" else put_table
        for mode in WRITE_MODES:
            budget = {"writeUnitsPerSecond": mode_limit} if mode_limit else {}
            self.run(
                f"{mode} (pipeline)",
                "modes_pipeline",
                {
                    **self.pipeline_args,
                    "file": str(head),
                    "mode": mode,
                    "spec": {
                        "shardSizeMiB": head.stat().st_size / 2**20 * 1.01,
                        "maxConcurrency": 1,
                        **budget,
                    },
                },
                0 if mode == "delete" else n,
                into=self.modes,
                limit=mode_limit,
                note="1 shard" + ("; deletes the put row's items" if mode == "delete" else ""),
            )

    def numeric_add(self, csv_path: Path) -> None:
        """An update with a numeric add through the pipeline (`--add-slice`)."""
        self.bench.start_server()
        n = min(self.options.add_slice, self.options.rows)
        head = _head(csv_path, n)
        mode_limit = self.options.mode_limit or None
        self.run(
            "update, numeric add (pipeline)",
            "add_pipeline",
            {
                **self.pipeline_args,
                "file": str(head),
                "mode": "update+add",
                "spec": {
                    "shardSizeMiB": head.stat().st_size / 2**20 * 1.01,
                    "maxConcurrency": 1,
                    **({"writeUnitsPerSecond": mode_limit} if mode_limit else {}),
                },
            },
            n,
            into=self.modes,
            limit=mode_limit,
            note="1 shard; a TransactWriteItems a record (its UpdateItem and a ledger marker's Put, "
            f"exactly once): {units_per_record(1, numeric_add=True)} write units, botocore's client",
        )

    def long_round_trip(self, csv_path: Path, latency: float) -> None:
        """batch_writer and the embedded pipeline at `--long-latency-ms`; then back to `latency`."""
        self.bench.start_server()
        n = min(self.options.long_rows, self.options.rows)
        head = _head(csv_path, n)
        self.proxy.latency = self.options.long_latency_ms / 1000
        self.run("2 boto3 Table.batch_writer(), 1 thread", "long", {"file": str(head)}, n, into=self.long)
        self.run(
            f"5 embedded pipeline, {self.options.shards} shards",
            "long_pipeline",
            {
                **self.pipeline_args,
                "file": str(head),
                "spec": {
                    "shardSizeMiB": head.stat().st_size / self.options.shards / 2**20 * 1.01,
                    "maxConcurrency": self.options.shards,
                },
            },
            n,
            into=self.long,
            note="items/s over the execution (Plan to Finalize)",
        )
        self.proxy.latency = latency


def _requests(err: str) -> int:
    """Write requests a worker row sent (the writer's stats it prints on stderr), else 0."""
    for line in reversed(err.splitlines()):
        if line.startswith('{"stats"'):
            return int(json.loads(line)["stats"]["requests"])
    return 0


def _render_modes(options: argparse.Namespace, modes: list[Result]) -> str:
    """The write-mode table: measured items/s beside the rate mapload estimate models, CPU per
    item beside put's (the Worker's loop rows; the pipeline rows' CPU includes the emulator)."""
    limit = options.mode_limit or None
    put = {r.name.endswith("(pipeline)"): r.cpu_us for r in modes if r.name.split()[0] == "put"}
    lines = [
        "",
        f"Write modes: the Worker's loop (row 4) and the embedded pipeline (row 5, 1 shard) on the first "
        f"{max(r.items for r in modes):,} rows, {options.concurrency} in flight, "
        f"{options.latency_ms:g} ms round trip"
        + (f", write-unit limit {limit:,.0f}/s:" if limit else ", no write-unit limit:"),
        "",
        "| writeMode | requests | items/s | mapload estimate's model | achieved ÷ limit | CPU µs/item "
        "| × put CPU/item | moto CPU µs/item | items lost | note |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in modes:
        mode = r.name.split()[0].rstrip(",")
        numeric_add = "numeric add" in r.name
        units = units_per_record(1, numeric_add)  # the benchmark's items are under 1 KB
        model = worker_rate(
            mode, in_flight=options.concurrency, round_trip_ms=options.latency_ms, numeric_add=numeric_add
        )
        if limit:
            model = min(model, limit / units)
        share = f"{r.rate * units / limit:.0%}" if limit else "—"
        base = put.get(r.name.endswith("(pipeline)"))
        ratio = f"{r.cpu_us / base:.1f}" if base else "—"
        requests = f"{r.requests:,}" if r.requests else "—"
        lines.append(
            f"| {r.name} | {requests} | {r.rate:,.0f} | {model:,.0f} | {share} | {r.cpu_us:,.0f} | {ratio} "
            f"| {r.server_cpu_us:,.0f} | {r.lost:,} | {r.note} |"
        )
    return "\n".join(lines)


def _render_long(options: argparse.Namespace, long: list[Result]) -> str:
    """The long round trip: the embedded pipeline against boto3's batch_writer, same rows, same run."""
    base = long[0]
    lines = [
        "",
        f"Long round trip: {options.long_latency_ms:g} ms added to every request, the first "
        f"{base.items:,} rows, no write-unit limit (`write_concurrency` {options.concurrency}, "
        "`max_write_concurrency` at its default):",
        "",
        "| approach | items/s | × batch_writer items/s | CPU µs/item | moto CPU µs/item | items lost "
        "| note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in long:
        lines.append(
            f"| {r.name} | {r.rate:,.0f} | {r.rate / base.rate:.1f} | {r.cpu_us:,.0f} "
            f"| {r.server_cpu_us:,.0f} | {r.lost:,} | {r.note} |"
        )
    return "\n".join(lines)


def _memory(bench: Bench, options: argparse.Namespace, workdir: Path) -> list[tuple[int, float, float, int]]:
    """(shard MiB, peak RSS MiB, items/s, items) of the worker loop on a small and a large shard."""
    out = []
    for mib in (options.small_mib, options.big_mib):
        if not mib or (options.only and "worker_memory" not in options.only):
            continue
        path = _sized_csv(workdir / f"shard-{mib}.csv", mib * 2**20)
        outcome, rss, _ = bench.run_row(
            "worker_memory", {"file": str(path), "concurrency": options.concurrency, "table": "null"}
        )
        out.append((mib, rss, outcome["items"] / outcome["seconds"], outcome["items"]))
        path.unlink()
    return out


def _sized_csv(path: Path, size: int) -> Path:
    """A postcode CSV of about `size` bytes: 10 MB of distinct rows, repeated (later rows overwrite)."""
    seed = path.with_suffix(".seed")
    sample.write_csv(seed, 300_000, header=False)
    block = seed.read_bytes()
    seed.unlink()
    with path.open("wb") as out:
        out.write(b"postcode,latitude,longitude\n")
        written = 0
        while written < size:
            piece = block[: size - written] if size - written < len(block) else block
            if len(piece) < len(block):
                piece = piece[: piece.rfind(b"\n") + 1] or block[: block.find(b"\n") + 1]
            out.write(piece)
            written += len(piece)
    return path


def _plan_100gb() -> tuple[float, int]:
    from logic import planning

    started = time.perf_counter()
    shards = planning.cut_shards(
        [
            {
                "bucket": "b",
                "key": "k.csv",
                "size": 100 * 10**9,
                "etag": '"e"',
                "header": ["a"],
                "data_start": 2,
            }
        ],
        64 * 2**20,
    )
    return time.perf_counter() - started, len(shards)


def _render(
    options: argparse.Namespace,
    results: list[Result],
    limited: list[Result],
    memory: list[tuple[int, float, float, int]],
    plan_seconds: float,
    plan_shards: int,
    size: int,
) -> str:
    base = next((r for r in results if r.name.startswith("2 ")), results[0] if results else None)
    cpu_model = "unknown"
    with contextlib.suppress(OSError, StopIteration):
        cpu_model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    lines = [
        f"mapload bench: {options.rows:,} postcode rows ({size / 2**20:.1f} MiB), "
        f"{options.latency_ms:g} ms added round trip; moto server, Python {platform.python_version()}",
        f"command: python bench/run.py {' '.join(sys.argv[1:])}".rstrip(),
        f"machine: {os.cpu_count()} CPUs ({cpu_model}), {platform.system()} {platform.machine()}",
        "",
        "| approach | items/s | CPU µs/item | peak RSS MiB | items lost "
        "| × row 2 items/s | × row 2 CPU/item | note |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        assert base is not None
        if "{full}" in r.note:
            r.note = r.note.replace("{full}", f"{options.rows / r.rate / 60:,.0f} min")
        lines.append(
            f"| {r.name} | {r.rate:,.0f} | {r.cpu_us:,.0f} | {r.rss_mib:,.0f} | {r.lost:,} | "
            f"{r.rate / base.rate:.2f} | {r.cpu_us / base.cpu_us:.2f} | {r.note} |"
        )
    lines += _limited_lines(options, limited) + _memory_lines(memory)
    lines += [
        "",
        f"Plan of one 100 GB object (sizes only, 64 MiB shards): {plan_shards:,} shards in "
        f"{plan_seconds * 1000:.1f} ms",
    ]
    return "\n".join(lines)


def _limited_lines(options: argparse.Namespace, limited: list[Result]) -> list[str]:
    """The limited rows' table (`--limit`), or nothing without them."""
    if not limited:
        return []
    lines = [
        "",
        f"With a write-unit limit of {options.limit:,.0f}/s (token bucket in the proxy):",
        "",
        "| approach | items/s | achieved ÷ limit | CPU µs/item | items lost | note |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in limited:
        assert r.limit
        lines.append(
            f"| {r.name} | {r.rate:,.0f} | {r.rate / r.limit:.0%} | {r.cpu_us:,.0f} | {r.lost:,} | {r.note} |"
        )
    return lines


def _memory_lines(memory: list[tuple[int, float, float, int]]) -> list[str]:
    """The worker's memory by shard size, or nothing without it."""
    if not memory:
        return []
    lines = [
        "",
        "| worker shard | peak RSS MiB | items/s (no network) | items |",
        "|---:|---:|---:|---:|",
    ]
    for mib, rss, rate, items in memory:
        lines.append(f"| {mib:,} MiB | {rss:,.0f} | {rate:,.0f} | {items:,} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
