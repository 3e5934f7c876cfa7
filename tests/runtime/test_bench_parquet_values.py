"""The benchmark's Parquet value rows run against today's batch_fields and mapper."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]


def test_the_parquet_value_rows_print_a_figure_for_each_column() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "parquet_values.py"), "--rows", "200"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [
        line.split("|") for line in done.stdout.splitlines() if line.startswith("| ") and "µs" not in line
    ]
    assert [row[1].strip().split(" (")[0] for row in rows][:2] == ["10 columns", "id + name"]
    assert len(rows) == 10 and all(float(row[2]) > 0 and float(row[3]) > 0 for row in rows)
