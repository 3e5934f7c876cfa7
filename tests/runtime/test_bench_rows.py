"""The benchmark's worker rows still run against today's Worker loop (make bench is not in make
test: without this, a change to the Worker's signatures breaks the benchmark unnoticed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from servers import mapload_serve

from mapload.sample import write_csv
from mapload.tables import create_pk_sk_table

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]


def test_the_worker_memory_row_loads_every_row_of_a_small_file(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "rows.csv", 500, seed=3)
    arguments = {"file": str(source), "concurrency": 2, "table": "null"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rows.py"), "worker_memory", json.dumps(arguments)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["items"] == 500 and outcome["seconds"] > 0


def _row(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rows.py"), name, json.dumps(arguments)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_write_mode_rows_write_each_mode_and_delete_what_put_wrote(tmp_path: Path) -> None:
    # Given a small file and a table per mode, When make bench's write-mode rows run,
    # Then each mode writes the slice, and delete removes the items the put row wrote.
    source = write_csv(tmp_path / "rows.csv", 60, seed=3)
    # The server answers putIfAbsent's BatchExecuteStatement INSERTs as make bench's does
    # (`mapload serve`, the bench's server: moto_patches.PARTIQL_INSERT).
    with mapload_serve(tmp_path / "server.log") as endpoint:
        db = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        common = {"file": str(source), "concurrency": 2, "endpoint": endpoint, "slice": 40}
        counts = {}
        for mode in ("put", "putIfAbsent", "newerWins", "update"):
            table = create_pk_sk_table(db, f"bench-{mode}")
            assert _row("modes", {**common, "table": table, "mode": mode})["items"] == 40
            counts[mode] = db.scan(TableName=table, Select="COUNT")["Count"]
        assert _row("modes", {**common, "table": "bench-put", "mode": "delete"})["items"] == 40
        assert db.scan(TableName="bench-put", Select="COUNT")["Count"] == 0
    assert counts == {"put": 40, "putIfAbsent": 40, "newerWins": 40, "update": 40}


def test_the_bench_proxy_throttles_an_insert_batch_s_excess_statements_one_by_one() -> None:
    """make bench's limit as DynamoDB applies it to BatchExecuteStatement: the statements past the
    tokens left answer ProvisionedThroughputExceeded each (not written); the others are written."""
    sys.path.insert(0, str(ROOT / "bench"))
    from proxy import Proxy

    from logic.writemodes import insert_statement
    from mapload.emulator.server import serving

    with serving(0) as endpoint, Proxy(endpoint, latency=0.0, limit=40.0) as proxy:
        db = boto3.client(
            "dynamodb",
            endpoint_url=proxy.url,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        table = create_pk_sk_table(db, "limited")
        assert proxy.bucket is not None
        proxy.bucket.tokens = 3.0  # 3 units left of the burst
        proxy.bucket.rate = 1e-9  # and none come back during the test
        items = [{"pk": {"S": f"K#{n}"}, "sk": {"S": "S"}} for n in range(5)]
        answers = db.batch_execute_statement(Statements=[insert_statement(table, i) for i in items])
        codes = [a.get("Error", {}).get("Code") for a in answers["Responses"]]
        stored = db.scan(TableName=table, Select="COUNT")["Count"]
    assert codes == [None, None, None, "ProvisionedThroughputExceeded", "ProvisionedThroughputExceeded"]
    assert stored == 3
