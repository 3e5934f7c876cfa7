"""make bench's Parquet section still runs against today's Worker and Plan (make bench is not in make
test: without this, a change to their signatures breaks the benchmark unnoticed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]


def test_the_parquet_section_runs_on_tiny_sizes() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "parquet.py"),
            *("--rows", "3000", "--plan-objects", "12", "--plan-latency-ms", "1", "--values-rows", "100"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {
        (cells[0], cells[1]): [float(cell.replace(",", "")) for cell in cells[2:]]
        for cells in (line.strip("| ").split(" | ") for line in done.stdout.splitlines())
        if len(cells) == 7 and cells[1] in ("CSV", "Parquet")
    }
    assert len(rows) == 4 and all(value > 0 for figures in rows.values() for value in figures[1:])
    wide = "postcodes + an unmapped 200-byte column"
    # Bytes read from S3 a record: the Worker reads only the mapped columns of a Parquet file.
    assert rows[(wide, "Parquet")][3] < rows[(wide, "CSV")][3] / 3
    plan = re.search(r"Plan over 12 Parquet objects .*: (\d+) requests .*, 12 shards in", done.stdout)
    assert plan is not None and int(plan.group(1)) >= 12, done.stdout
    assert "| 10 columns |" in done.stdout
