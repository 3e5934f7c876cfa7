"""The write budget through the synthesized state machine: shards share it via ledger leases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mapload.emulator.embedded import Deployment, Emulator
from mapload.emulator.local import run_local
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


def test_a_budgeted_job_writes_everything_and_every_shard_ends_its_lease(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "postcodes.csv", 2000)
    seen: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        db = emu.client("dynamodb")
        seen["count"] = db.scan(TableName=deployment.output("TableName"), Select="COUNT")["Count"]
        items = db.scan(TableName=deployment.output("LedgerTableName"))["Items"]
        seen["leases"] = [i for i in items if i["sk"]["S"].startswith("LEASE#")]

    report = run_local(source, SPEC, report_path=tmp_path / "r.json", quiet=True, inspect=inspect)
    assert report["status"] == "SUCCEEDED", report.get("error")
    assert report["records"]["written"] == 2000 == seen["count"]
    shards = report["shards"]["total"]
    assert shards >= 2
    assert len(seen["leases"]) == shards
    assert all(float(lease["until"]["N"]) == 0 for lease in seen["leases"])  # every share handed back
