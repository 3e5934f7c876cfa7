"""The benchmark's edge endpoint rows still run mapload's check and the simple one, and agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]


def test_every_row_of_both_jobs_finds_the_same_dangling_edges_and_looks_up_the_same_ids() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "endpoints.py"), "--vertices", "2000", "--shards", "8"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in done.stdout.splitlines()
        if line.startswith("| ") and "approach |" not in line
    ]
    assert [(row[0], row[1][:2]) for row in rows] == [
        (job, row) for job in ("one file", "edges only") for row in ("1 ", "1a", "2 ", "2b")
    ]
    for job in ("one file", "edges only"):
        found = {(row[6], row[7]) for row in rows if row[0] == job}
        assert len(found) == 1, found
    # Each job has 20 dangling edges (bench/endpoints.py DANGLING); "edges only" looks up nearly
    # every vertex (4,000 endpoints drawn from 2,000), "one file" only the few outside the job.
    assert {row[7] for row in rows} == {"20"}
    looked_up = {row[0]: int(row[6].replace(",", "")) for row in rows}
    assert looked_up["one file"] < 50 < 1500 < looked_up["edges only"]
    assert "Model from the measured numbers" in done.stdout
