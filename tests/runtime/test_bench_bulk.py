"""make bench's dynamodb.engine rows run against today's Worker loop, BatchWriter and BulkStager."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]


def test_the_engine_rows_print_a_figure_for_each_path() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bulk.py"), "--rows", "300", "--e2e-rows", "400"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in done.stdout.splitlines()
        if line.startswith("| ") and "records/s" not in line and "seconds" not in line
    ][:3]
    assert [row[0].split(":")[0] for row in rows] == [
        "parse and map alone (dry run)",
        "lambda",
        "bulkPutItems",
    ]
    for _name, rate, cpu, _size in rows:
        assert float(rate.replace(",", "")) > 0 and float(cpu) > 0
    assert rows[0][3] == "-" and float(rows[1][3]) > float(rows[2][3]) > 0  # gzip beats request bodies
    # The end-to-end runs: each engine wrote every row, and the two tables hold the same items.
    assert "| lambda | " in done.stdout and "| bulkPutItems | " in done.stdout
    assert "the two tables: the same items (400 items)" in done.stdout
