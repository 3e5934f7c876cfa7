"""A plan past the point where collected Map results broke the 256 KiB limit (~17,000 shards),
run through the synthesized definition in the embedded run (with its limits), reconciled."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("e2e")]

SHARDS = 20_000


@pytest.mark.timeout(3000)  # ~17 min on a loaded 2-core machine; the suite default is 300 s
def test_20000_shards_run_through_the_map_and_finalize_reconciles_them(tmp_path: Path) -> None:
    # One ~1 KB row per 0.001 MiB shard: trivially small shards (a dry run: no table writes).
    source = tmp_path / "rows.csv"
    pad = "x" * 1000
    with source.open("w") as out:
        out.write("id,pad\n")
        for i in range(SHARDS + SHARDS // 20):
            out.write(f"{i},{pad}\n")
    spec = {
        "format": "csv",
        "csv": {"header": True},
        "dynamodb": {"key": {"pk": "ROW#{id}", "sk": "ROW"}},
        "shardSizeMiB": 0.001,
        "maxConcurrency": 100,
        "dryRun": True,
    }
    report = run_local(source, spec, report_path=tmp_path / "report.json", quiet=True)
    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["shards"]["total"] == report["shards"]["done"] > SHARDS
    assert report["shards"]["failed"] == 0 and report["shards"]["missing"] == []
    assert report["records"]["read"] == SHARDS + SHARDS // 20
