"""The csv-spectrum conformance set through the embedded run, at shard sizes down to a few bytes:
every case loads the records its expected JSON lists, nothing else."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from mapload import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

SPECTRUM = ROOT.parent / "shared" / "testdata" / "csv-spectrum"
CASES = sorted(path.stem for path in (SPECTRUM / "csvs").glob("*.csv"))
MIB = 1024 * 1024


def test_the_conformance_set_is_there() -> None:
    assert len(CASES) == 11, SPECTRUM


# Shards of a few bytes for every case; more sizes where a quoted field holds a newline.
RUNS = [
    (case, size) for case in CASES for size in ((2, 5, 11, 64 * MIB) if "newlines" in case else (3, 64 * MIB))
]


@pytest.mark.parametrize(("case", "shard_bytes"), RUNS)
def test_every_case_loads_as_expected_at_any_shard_size(
    case: str, shard_bytes: int, run_file: Callable[..., Any]
) -> None:
    source = SPECTRUM / "csvs" / f"{case}.csv"
    expected: list[dict[str, str]] = json.loads((SPECTRUM / "json" / f"{case}.json").read_text("utf-8"))
    first = source.read_bytes().split(b",", 1)[0].decode()  # the first column names each record
    spec = {
        "format": "csv",
        "dynamodb": {"key": {"pk": f"{{{first}}}", "sk": "R"}, "attributes": "*"},
        "shardSizeMiB": shard_bytes / MIB,
        "maxConcurrency": 4,
        "maxRejectedPercent": 0,
    }

    run = run_file(source, spec)

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    assert run.report["records"]["rejected"] == 0
    got = sorted(
        (
            {name: value["S"] for name, value in item.items() if name not in ("pk", "sk")}
            for item in run.items.values()
        ),
        key=lambda record: record[first],
    )
    assert got == sorted(expected, key=lambda record: record[first])
    assert run.report["records"]["written"] == len(expected)
