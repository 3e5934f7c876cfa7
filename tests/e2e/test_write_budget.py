"""The write budget through the synthesized state machine: shards share it via heartbeat counters."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from adapters import budget
from adapters.budget import BUCKETS
from mapload.emulator.embedded import Deployment, Emulator
from mapload.local import run_local
from mapload.sample import write_csv

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

SPEC: dict[str, Any] = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {"latitude": {"field": "latitude", "type": "N"}},
    },
    "shardSizeMiB": 0.02,
    "maxConcurrency": 3,
    "writeUnitsPerSecond": 50_000,
}


def test_a_budgeted_job_writes_everything_and_every_shard_beats_without_a_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Worker's first beat waits for its phase in the window (up to 15 s away); these shards last
    # well under a second, so the phase is made to fall a millisecond after each one starts.
    monkeypatch.setattr(budget, "phase", lambda index, interval: time.time() % interval + 0.001)
    source = write_csv(tmp_path / "postcodes.csv", 2000)
    seen: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        db = emu.client("dynamodb")
        seen["count"] = db.scan(TableName=deployment.output("TableName"), Select="COUNT")["Count"]
        items = db.scan(TableName=deployment.output("LedgerTableName"))["Items"]
        seen["leases"] = [i for i in items if i["sk"]["S"].startswith("LEASE#")]
        seen["beats"] = [i for i in items if i["pk"]["S"].startswith("BEAT#")]

    report = run_local(source, SPEC, report_path=tmp_path / "r.json", quiet=True, inspect=inspect)
    assert report["status"] == "SUCCEEDED", report.get("error")
    assert report["records"]["written"] == 2000 == seen["count"]
    shards = report["shards"]["total"]
    assert shards >= 2
    assert seen["leases"] == []  # no item per shard to Query (adapters/budget.py)
    # Each shard beat once at least; at most BUCKETS counters a window.
    assert sum(int(beat["beats"]["N"]) for beat in seen["beats"]) >= shards
    windows = {beat["pk"]["S"].rsplit("#", 2)[1] for beat in seen["beats"]}
    assert len(seen["beats"]) <= BUCKETS * len(windows)
