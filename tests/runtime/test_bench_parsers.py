"""The benchmark's CSV parser rows still run against today's parsers and count every record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]


def test_the_parser_rows_read_every_record_of_both_files() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "parsers.py"), "--rows", "300"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [
        line.split("|")
        for line in done.stdout.splitlines()
        if line.startswith("| ") and "parser |" not in line
    ]
    assert [row[2].strip() for row in rows] == ["300", "300", "300"]
