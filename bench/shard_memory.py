"""Peak RSS of a property graph Worker against its shard's size, on worst-case shards: the
measurement behind Plan's shardSizeMiB bound (runtime/logic/endpoints.py `worker_peak_mib`,
`max_shard_mib`).

A property graph Worker keeps every vertex id and edge endpoint of its shard in sets
(`ShardIds`) for the edge endpoint check, so its memory grows with the shard. The worst case is
the most distinct ids per byte of source: short ids, each new. Two shapes of CSV, mapped by
`graph.vertices` / `graph.edges` (format csv: two columns of `--digits` digits, default 7, so 16
bytes a record; ids count up from 1,000,000, so each is new, and a shard past ~69 MiB goes on
with 8 digits):

- "edges only": each record one edge `{a}` -> `{b}`, both ends new: 2 endpoints a record, all
  open (no vertex of the shard covers them).
- "vertices+edges": each record a vertex `{id}` and an edge from it to a new `{to}`: 1 vertex and
  2 endpoints a record, of which `{to}` is open.

Each shard runs in its own process (peak RSS from wait4, as bench/run.py measures): the Worker's
own `process_shard()` (shards/service.py: spec parsing, the CSV record reader, the property mapper, the
stager with its 8 MiB upload parts, the id files at the end) over the shard as one S3 object,
with the Worker's boto3 clients built as its handler builds them, but S3 and DynamoDB answered
by in-process fakes: the object is read from a local file in 1 MiB chunks and uploads are
counted and dropped, so no data sits in the process but what the Worker itself holds. Then a
least-squares line per shape (peak RSS = baseline + k × shard MiB) and, per shard, Plan's model
of the worst case beside the measurement. The sets make the peak a staircase: a set's table
doubles once 3/5 full and holds the old table beside the new one meanwhile, so a size just past
a doubling (19.2, 38.4, 76.8 MiB of 7-digit edges) measures far above the line through the
others; the model counts that, the line does not.

`python bench/shard_memory.py [--mib 8,16,20,32,39,64,78,96,128] [--shapes edges,vertices]
[--digits 7] [--python python3.12]` prints the table and the fit. `--ids-only` measures
`ShardIds` alone (stdlib only: runs under any Python, e.g. to compare interpreters), without the
Worker around it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runtime"))

DIGITS = 7
ROWS_PER_BLOCK = 100_000
BASELINE_MIB = 1 / 1024
SHAPES: dict[str, dict[str, Any]] = {
    "edges": {
        "name": "edges only",
        "header": "a,b",
        "graph": {"model": "property", "edges": [{"from": "{a}", "to": "{b}", "label": "L"}]},
    },
    "iri": {
        "name": "edges only, IRI ids",
        "header": "a,b",
        "graph": {
            "model": "property",
            "edges": [
                {"from": "http://example.org/node/{a}", "to": "http://example.org/node/{b}", "label": "L"}
            ],
        },
        "prefix": "http://example.org/node/",
    },
    "vertices": {
        "name": "vertices+edges",
        "header": "id,to",
        "graph": {
            "model": "property",
            "vertices": [{"id": "{id}", "label": "V"}],
            "edges": [{"from": "{id}", "to": "{to}", "label": "L"}],
        },
    },
}


def write_shard(path: Path, shape: str, size: int, digits: int = DIGITS) -> int:
    """A CSV of about `size` bytes of data (after the header) whose every id is new; its records."""
    rows = 0
    with path.open("wb") as out:
        out.write(SHAPES[shape]["header"].encode() + b"\n")
        written = 0
        next_id = 10 ** (digits - 1)
        while written < size:
            block = "".join(
                f"{i},{i + 1}\n" for i in range(next_id, next_id + 2 * ROWS_PER_BLOCK, 2)
            ).encode()
            if written + len(block) > size:
                block = block[: block.rfind(b"\n", 0, size - written) + 1]
                if not block:
                    break
            out.write(block)
            written += len(block)
            rows += block.count(b"\n")
            next_id += 2 * ROWS_PER_BLOCK
    return rows


# -- the child: one shard through the Worker ---------------------------------------------------


class _Body:
    """A ranged GET's body over a local file."""

    def __init__(self, path: str, first: int, last: int) -> None:
        self._file = open(path, "rb")  # noqa: SIM115 - closed by close(), as botocore's body is
        self._file.seek(first)
        self._left = last - first + 1

    def iter_chunks(self, size: int) -> Iterator[bytes]:
        while self._left > 0 and (chunk := self._file.read(min(size, self._left))):
            self._left -= len(chunk)
            yield chunk

    def read(self) -> bytes:
        return b"".join(self.iter_chunks(1 << 20))

    def close(self) -> None:
        self._file.close()


class LocalS3:
    """S3 as the Worker calls it: the source from a file; uploads counted, not kept."""

    def __init__(self, path: str) -> None:
        self._path = path
        self.uploaded: dict[str, int] = {}

    def get_object(self, *, Bucket: str, Key: str, Range: str, IfMatch: str) -> dict[str, Any]:
        first, last = (int(n) for n in Range.removeprefix("bytes=").split("-"))
        return {"Body": _Body(self._path, first, last)}

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, ContentType: str) -> dict[str, Any]:
        self.uploaded[Key] = self.uploaded.get(Key, 0) + len(Body)
        return {}

    def create_multipart_upload(self, **_: Any) -> dict[str, Any]:
        return {"UploadId": "u"}

    def upload_part(self, *, Key: str, Body: bytes, PartNumber: int, **_: Any) -> dict[str, Any]:
        self.uploaded[Key] = self.uploaded.get(Key, 0) + len(Body)
        return {"ETag": f"e{PartNumber}"}

    def complete_multipart_upload(self, **_: Any) -> dict[str, Any]:
        return {}

    def abort_multipart_upload(self, **_: Any) -> dict[str, Any]:
        return {}


class NullDynamoDb:
    """The ledger's DynamoDB: the shard was never done, every write succeeds."""

    def __getattr__(self, name: str) -> Any:
        return lambda **_: {}


def child_worker(shape: str, path: str) -> dict[str, Any]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "eu-west-2")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    from adapters import clients
    from adapters.ledger import Ledger
    from adapters.s3 import S3Store
    from handlers.settings import WorkerSettings
    from logic.spec.parse import parse_spec, spec_to_json
    from shards.service import process_shard

    settings = WorkerSettings.from_env(
        {
            "SOURCE_BUCKETS": "src",
            "STAGING_BUCKET": "stg",
            "LEDGER_TABLE": "ledger",
            "TABLE_NAME": "target",
            "LEDGER_TTL_DAYS": "1",
            "WRITE_CONCURRENCY": "8",
        }
    )
    # The clients the Worker's handle() builds (their memory is part of its baseline).
    pool = settings.write_concurrency + 2
    held = (clients.s3(), clients.ledger_dynamodb(), clients.batch_writes(pool), clients.dynamodb(pool))
    table_key = {"pk": "S", "sk": "S"}
    raw = {"source": "s3://src/shard.csv", "format": "csv", "graph": SHAPES[shape]["graph"]}
    spec = spec_to_json(parse_spec(raw, table_key=table_key, execution_name="bench"))
    size = os.path.getsize(path)
    header = SHAPES[shape]["header"]
    data_start = len(header) + 1
    shard = {
        "index": 0,
        "bucket": "src",
        "key": "shard.csv",
        "etag": '"e"',
        "start": data_start,
        "end": size,
        "objectSize": size,
        "dataStart": data_start,
        "header": header.split(","),
        "firstLineNumber": None,
        "lineBase": 1,
    }
    job = {"jobId": "bench", "runId": "run", "planId": "plan", "spec": spec, "tableKey": table_key}
    s3 = LocalS3(path)
    started = time.perf_counter()
    result = process_shard(shard, job, settings, S3Store(s3), Ledger(NullDynamoDb(), "ledger", 1), None)
    seconds = time.perf_counter() - started
    assert result["read"] == result["written"], result
    del held
    return {"records": result["written"], "seconds": seconds, "uploaded": s3.uploaded}


def child_ids(shape: str, path: str) -> dict[str, Any]:
    """ShardIds alone, filled from the file's columns as the stager would, then the id files."""
    from logic.endpoints import ShardIds, encode_ids

    ids = ShardIds()
    records = 0
    started = time.perf_counter()
    with open(path, encoding="utf-8") as text:
        next(text)
        for line in text:
            prefix = SHAPES[shape].get("prefix", "")
            first, second = (prefix + i for i in line.rstrip("\n").split(","))
            if shape == "vertices":
                ids.vertex(first)
            ids.edge(first, second)
            records += 1
    out = [len(encode_ids(sorted(ids.vertices))), len(encode_ids(ids.open_endpoints()))]
    return {"records": records, "seconds": time.perf_counter() - started, "uploaded": out}


# -- the parent ---------------------------------------------------------------------------------


def measure(python: str, mode: str, shape: str, path: Path) -> tuple[float, dict[str, Any]]:
    """One shard in a child process: its peak RSS (MiB) and what it reported."""
    command = [python, __file__, "--child", mode, shape, str(path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    out = process.stdout.read()
    # wait4 (not Popen.wait) for the child's own rusage; ru_maxrss is KiB on Linux.
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{shape} {path.name}: the child failed ({process.returncode})")
    return usage.ru_maxrss / 1024, json.loads(out)


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares y = a + b·x: (a, b)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    return mean_y - slope * mean_x, slope


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mib",
        default="8,16,20,32,39,64,78,96,128",
        help="shard sizes in MiB (at least 8), comma-separated",
    )
    parser.add_argument("--shapes", default="edges,vertices")
    parser.add_argument("--digits", type=int, default=DIGITS, help="the ids' digits (first id 10**(d-1))")
    parser.add_argument("--ids-only", action="store_true", help="ShardIds alone, not the Worker")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the children")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "SHAPE", "PATH"), help=argparse.SUPPRESS)
    return parser


def _shape_of(shape: str) -> Any:
    """The ids' shape Plan reads from the spec."""
    from logic.spec.checks import id_shape
    from logic.spec.parse import parse_spec

    raw = {"source": "s3://src/shard.csv", "format": "csv", "graph": SHAPES[shape]["graph"]}
    return id_shape(parse_spec(raw, table_key={"pk": "S", "sk": "S"}, execution_name="bench"))


def _shape_rows(
    args: argparse.Namespace,
    mode: str,
    shape: str,
    sizes: list[float],
    work_dir: Path,
    lines: list[str],
    above_model: list[str],
) -> list[tuple[float, float]]:
    """Measure one shape at each size: its table rows into `lines`; the fitted (MiB, RSS) points."""
    from logic.endpoints import worker_peak_mib

    points = []
    # A 1 KiB shard first: the baseline (imports, clients), not fitted; below 8 MiB the
    # staged files' 8 MiB upload parts are still filling, so the line starts there.
    for mib in [BASELINE_MIB, *sizes]:
        path = work_dir / f"{shape}-{mib:g}.csv"
        rows = write_shard(path, shape, int(mib * 2**20), args.digits)
        rss, out = measure(args.python, mode, shape, path)
        path.unlink()
        assert out["records"] == rows, (out["records"], rows)
        model = worker_peak_mib(mib, _shape_of(shape))
        if mib != BASELINE_MIB:
            points.append((mib, rss))
            if rss > model:
                above_model.append(f"{SHAPES[shape]['name']} {mib:g} MiB")
        size = "1 KiB" if mib == BASELINE_MIB else f"{mib:g}"
        lines.append(
            f"| {SHAPES[shape]['name']} | {size} | {rows:,} | {2 * rows:,} | {rss:,.0f} | "
            f"{model:,.0f} | {out['seconds']:.1f} |"
        )
        print(lines[-1], file=sys.stderr, flush=True)
    return points


def main() -> int:
    args = _parser().parse_args()
    if args.child:
        mode, shape, path = args.child
        print(json.dumps((child_ids if mode == "ids" else child_worker)(shape, path)))
        return 0
    mode = "ids" if args.ids_only else "worker"
    sizes = [float(m) for m in args.mib.split(",")]
    version = subprocess.run(
        [args.python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    lines = [
        f"Property graph Worker peak RSS against shard size "
        f"({'ShardIds alone' if args.ids_only else 'the Worker'}, Python {version}, {platform.machine()}, "
        f"ids of {args.digits} digits and up, each new)",
        "",
        "| shape | shard MiB | records | distinct ids | peak RSS MiB | Plan's model MiB | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    above_model: list[str] = []
    fits = []
    with tempfile.TemporaryDirectory(prefix="shard-memory-") as work_dir:
        for shape in args.shapes.split(","):
            points = _shape_rows(args, mode, shape, sizes, Path(work_dir), lines, above_model)
            if len(points) < 2:
                continue
            base, slope = fit(points)
            worst = max(rss - (base + slope * mib) for mib, rss in points)
            fits.append(
                f"{SHAPES[shape]['name']}: peak RSS ≈ {base:.0f} MiB + {slope:.2f} × shard MiB "
                f"(largest point above the line: {worst:+.1f} MiB)"
            )
    verdict = (
        f"above Plan's model: {', '.join(above_model)}"
        if above_model
        else "Plan's model is above every shard"
    )
    print("\n".join([*lines, "", *fits, verdict]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
