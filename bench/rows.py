"""One benchmark row, run in its own process so that its CPU time and peak memory are its own.

`python bench/rows.py ROW '{json args}'` loads the postcode CSV one way and prints one JSON line:
{"items": sent, "seconds": wall time of the load, "cpu": process CPU seconds of the load}.
The orchestrator (bench/run.py) reads the process's peak RSS from wait4 and counts the table.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runtime"))

SPEC_FILE = ROOT / "examples" / "postcodes.spec.json"


def _records(path: str, limit: int | None = None) -> Iterator[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8") as handle:
        for n, row in enumerate(csv.DictReader(handle)):
            if limit is not None and n >= limit:
                return
            yield {
                "pk": f"POSTCODE#{row['postcode']}",
                "sk": "LOCATION",
                "latitude": Decimal(row["latitude"]),
                "longitude": Decimal(row["longitude"]),
            }


def _table(args: dict[str, Any]) -> Any:
    import boto3

    return boto3.resource("dynamodb", endpoint_url=args["endpoint"]).Table(args["table"])


def row_putitem(args: dict[str, Any]) -> int:
    """The 52-hour approach: one PutItem per record (on a slice of the file)."""
    table = _table(args)
    sent = 0
    for record in _records(args["file"], args.get("slice")):
        table.put_item(Item=record)
        sent += 1
    return sent


def row_batch_writer(args: dict[str, Any]) -> int:
    """boto3's Table.batch_writer(): batches of 25, one request in flight."""
    table = _table(args)
    sent = 0
    with table.batch_writer() as writer:
        for record in _records(args["file"]):
            writer.put_item(Item=record)
            sent += 1
    return sent


def row_wrangler(args: dict[str, Any]) -> int:
    """awswrangler: read the CSV with pandas, shape the key columns, wr.dynamodb.put_df."""
    import awswrangler as wr
    import boto3
    import pandas as pd

    wr.config.dynamodb_endpoint_url = args["endpoint"]
    frame = pd.read_csv(args["file"], dtype={"latitude": str, "longitude": str})
    frame["pk"] = "POSTCODE#" + frame["postcode"]
    frame["sk"] = "LOCATION"
    frame["latitude"] = frame["latitude"].map(Decimal)
    frame["longitude"] = frame["longitude"].map(Decimal)
    frame = frame.drop(columns=["postcode"])
    wr.dynamodb.put_df(df=frame, table_name=args["table"], boto3_session=boto3.Session())
    return len(frame)


class NullClient:
    """A DynamoDB client that accepts every batch at once (memory rows: no network, no server)."""

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        return {}


def _mode_spec(mode: str) -> dict[str, Any]:
    """The postcode spec in write mode `mode` (newerWins orders by latitude, the only numbers the
    rows have; delete maps the key alone, as that mode requires)."""
    raw = json.loads(SPEC_FILE.read_text())
    raw["dynamodb"]["writeMode"] = mode
    if mode == "newerWins":
        raw["dynamodb"]["version"] = "latitude"
    if mode == "delete":
        del raw["dynamodb"]["attributes"]
    if mode == "sync":  # a first sync of the dataset "bench": every item put
        raw["dynamodb"]["dataset"] = "bench"
    if mode == "update+add":  # latitude ADDed: each record a TransactWriteItems with its marker
        raw["dynamodb"]["writeMode"] = "update"
        raw["dynamodb"]["attributes"]["latitude"]["update"] = "add"
    return raw


def _worker(args: dict[str, Any], client: Any, item_client: Any = None) -> int:
    """The Worker's loop over the file with the writer its handler picks for the spec's write mode:
    BatchWriter (put), KeyedBatchWriter (delete, putIfAbsent: batches to `client`) or ItemWriter
    (another mode, single-item calls to `item_client`)."""
    from adapters.dynamodb import BatchWriter, ItemWriter
    from adapters.keyed_batches import KeyedBatchWriter
    from logic.records import iter_shard_lines
    from logic.spec.parse import parse_spec
    from logic.writemodes import write_plan
    from shards.records import process
    from shards.rejects import RejectSink

    spec = parse_spec(
        {**_mode_spec(args.get("mode", "put")), "source": "s3://bench/x.csv"},
        table_key={"pk": "S", "sk": "S"},
        execution_name="b",
    )
    assert spec.dynamodb is not None
    path = args["file"]
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        header_line = handle.readline()
        start = len(header_line)
        handle.seek(start - 1)

        def chunks() -> Iterator[bytes]:
            while block := handle.read(1 << 20):
                yield block

        lines = iter_shard_lines(chunks(), read_from=start - 1, start=start, end=size)
        end = args.get("slice")
        if end is not None:
            lines = itertools.islice(lines, int(end))
        plan = write_plan(spec.dynamodb)
        in_flight = int(args["concurrency"])
        writer: BatchWriter | ItemWriter | KeyedBatchWriter = (
            BatchWriter(client, args["table"], in_flight=in_flight)
            if plan is None
            else KeyedBatchWriter(client, item_client, args["table"], plan, in_flight=in_flight)
            if plan.mode.batched
            else ItemWriter(item_client, args["table"], plan, in_flight=in_flight)
        )
        rejects = RejectSink(path, out=io.BytesIO())  # none expected: the file is clean
        counts = process(lines, spec, header_line.decode().strip().split(","), writer, rejects)
        stats = writer.close()
    if rejects.count:
        raise SystemExit(f"unexpected rejects: {rejects.by_reason}")
    print(json.dumps({"stats": stats.__dict__}), file=sys.stderr)
    return counts["written"]


def row_worker(args: dict[str, Any]) -> int:
    """The mapload worker's loop on one shard (the whole file, or its first `slice` records) in
    write mode `mode` (default put), with the Worker's own client settings."""
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = args["endpoint"]
    from adapters import clients

    pool = int(args["concurrency"]) + 2
    wire = clients.batch_writes(pool)  # BatchWriteItem and the single-item writes, as the Worker sends them
    return _worker(args, wire, wire)


def row_worker_memory(args: dict[str, Any]) -> int:
    """The worker's loop on a large shard against a client that answers at once."""
    return _worker(args, NullClient())


def row_pipeline(args: dict[str, Any]) -> tuple[int, float]:
    """The whole embedded run (synthesized state machine in moto), DynamoDB through the proxy."""
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = args["endpoint"]
    from mapload.local import run_local

    spec = _mode_spec(args["mode"]) if "mode" in args else json.loads(SPEC_FILE.read_text())
    spec.update(args["spec"])
    report = run_local(
        Path(args["file"]),
        spec,
        report_path=Path(args["report"]),
        quiet=True,
        context=args["context"],
    )
    if report["status"] != "SUCCEEDED":
        raise SystemExit(f"pipeline {report['status']}: {report.get('error')}")
    print(json.dumps({"dynamodb": report["dynamodb"], "shards": report["shards"]["total"]}), file=sys.stderr)
    # The execution's own time (Plan to Finalize), without starting the emulator around it.
    return int(report["records"]["written"]), float(report["seconds"])


ROWS: dict[str, Callable[[dict[str, Any]], int | tuple[int, float]]] = {
    "putitem": row_putitem,
    "batch_writer": row_batch_writer,
    "wrangler": row_wrangler,
    "worker": row_worker,
    "modes": row_worker,  # with a "mode": make bench's write-mode table
    "worker_memory": row_worker_memory,
    "pipeline": row_pipeline,
    "modes_pipeline": row_pipeline,  # with a "mode": the write-mode table's embedded rows
    "long": row_batch_writer,  # the long round trip's rows
    "long_pipeline": row_pipeline,
    "add_pipeline": row_pipeline,  # with mode "update+add": the numeric add's row
}


def main() -> None:
    name, args = sys.argv[1], json.loads(sys.argv[2])
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    if name in ("wrangler",):  # its import is heavy; keep it out of the measured interval
        import awswrangler  # noqa: F401
    wall, cpu = time.perf_counter(), time.process_time()
    outcome = ROWS[name](args)
    seconds, cpu = time.perf_counter() - wall, time.process_time() - cpu
    items = outcome if isinstance(outcome, int) else outcome[0]
    if not isinstance(outcome, int):
        seconds = outcome[1]
    result = {"items": items, "seconds": seconds, "cpu": cpu}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
