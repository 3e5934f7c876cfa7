"""The benchmark's worker rows still run against today's Worker loop (make bench is not in make
test: without this, a change to the Worker's signatures breaks the benchmark unnoticed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mapload.sample import write_csv

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
