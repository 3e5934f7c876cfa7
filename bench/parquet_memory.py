"""Peak RSS of a Parquet Worker reading one large row group, against the row group's size: the
measurement behind "memory bounded by a batch of rows" (shards/sources.py `parquet_rows`).

Each case writes a Parquet file of ONE row group of `--rows` rows (a key, a number, a 100-byte text
and an unmapped 200-byte blob; snappy), then in a fresh process reads it as the Worker does: the
Worker's own `parquet_rows()` (ranged reads through `RangedFile`, only the mapped columns, batches
of `logic.parquet.BATCH_ROWS` rows, pre_buffer off, a buffered stream) over a store that answers
each ranged GET from the local file, every row mapped to its DynamoDB item and dropped. Beside it,
the same row group read whole by pyarrow (`read_row_group`, the mapped columns): what a reader that
holds the row group would need. Peak RSS is the child's VmHWM (Linux).

`python bench/parquet_memory.py [--rows 200000,1000000,2000000]` prints the table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runtime"))

SPEC: dict[str, Any] = {
    "source": "s3://bench/t.parquet",
    "jobId": "bench",
    "format": "parquet",
    "dynamodb": {
        "key": {"pk": "ID#{id}", "sk": "ROW"},
        "attributes": {"n": {"field": "n", "type": "N"}, "text": "{text}"},
    },
}


def write(path: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": pa.array([f"id-{i:09d}" for i in range(rows)]),
            "n": pa.array(range(rows), pa.int64()),
            "text": pa.array([f"{i:09d}" * 11 for i in range(rows)]),
            "blob": pa.array([f"{i:010d}".encode() * 20 for i in range(rows)]),
        }
    )
    pq.write_table(table, path, row_group_size=rows, compression="snappy")


def _peak_mib() -> float:
    """This process's peak RSS (VmHWM: its own, not inherited from the parent across fork and exec
    as getrusage's ru_maxrss is)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def child(path: str, mode: str) -> dict[str, Any]:
    """Runs in its own process: read the file's one row group; peak RSS in MiB."""
    import pyarrow.parquet as pq

    from adapters.s3 import ObjectInfo
    from logic import parquet
    from logic.mapping import make_mapper
    from logic.spec.parse import parse_spec
    from shards.sources import parquet_rows

    spec = parse_spec(SPEC, table_key={"pk": "S", "sk": "S"})
    size = Path(path).stat().st_size
    before = _peak_mib()
    rows = 0
    if mode == "worker":

        class FileStore:
            def __init__(self) -> None:
                self.handle = open(path, "rb")  # noqa: SIM115 - closed with the process
                self.read = 0

            def read_range(self, obj: ObjectInfo, first: int, last: int) -> bytes:
                self.handle.seek(first)
                self.read += last - first + 1
                return self.handle.read(last - first + 1)

        store = FileStore()
        to_item = make_mapper(spec)
        obj = ObjectInfo("bench", "t.parquet", size, '"e"')
        shard = {"rowGroups": [0, 1], "firstRow": 0}
        for row in parquet_rows(store, obj, spec, shard):  # type: ignore[arg-type]
            to_item(row.fields)  # type: ignore[arg-type]
            rows += 1
        read = store.read
    else:
        source = pq.ParquetFile(path)
        columns = parquet.columns_read(spec, source.schema_arrow.names)
        rows = source.read_row_group(0, columns=columns).num_rows
        read = size
    peak = _peak_mib()
    return {"rows": rows, "peak_mib": peak, "import_mib": before, "read_bytes": read, "file_bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="200000,1000000,2000000")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--write", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:  # in its own process too: the table's memory stays out of the parent
        write(Path(args.write[0]), int(args.write[1]))
        return
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    import pyarrow.parquet as pq

    print(
        "| rows in the row group | row group MiB (mapped columns, uncompressed) | file MiB | "
        "Worker peak RSS MiB | bytes read / file | whole row group read, peak RSS MiB |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for rows in (int(r) for r in args.rows.split(",")):
            path = Path(folder) / f"rg-{rows}.parquet"
            subprocess.run([sys.executable, __file__, "--write", str(path), str(rows)], check=True)
            group = pq.ParquetFile(path).metadata.row_group(0)
            mapped = sum(group.column(c).total_uncompressed_size for c in range(3)) / 2**20
            results = {}
            for mode in ("worker", "whole"):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(path), mode],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                results[mode] = json.loads(out.stdout)
            worker, whole = results["worker"], results["whole"]
            assert worker["rows"] == rows
            print(
                f"| {rows:,} | {mapped:,.0f} | {worker['file_bytes'] / 2**20:,.0f} | "
                f"{worker['peak_mib']:,.0f} | {worker['read_bytes'] / worker['file_bytes']:.2f} | "
                f"{whole['peak_mib']:,.0f} |"
            )


if __name__ == "__main__":
    main()
