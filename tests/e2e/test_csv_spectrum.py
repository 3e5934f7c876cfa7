"""The csv-spectrum conformance set through the embedded run, at shard sizes down to a few bytes:
every case loads the records its expected JSON lists, nothing else."""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mapload import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

SPECTRUM = ROOT.parent / "shared" / "testdata" / "csv-spectrum"
CASES = sorted(path.stem for path in (SPECTRUM / "csvs").glob("*.csv"))
MIB = 1024 * 1024


def _spec(key_field: str, shard_bytes: float, **csv: Any) -> dict[str, Any]:
    """Every field copied, the item keyed by one field; shards of `shard_bytes`."""
    return {
        "format": "csv",
        **({"csv": csv} if csv else {}),
        "dynamodb": {"key": {"pk": f"{{{key_field}}}", "sk": "R"}, "attributes": "*"},
        "shardSizeMiB": shard_bytes / MIB,
        "maxConcurrency": 4,
    }


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
    spec = {**_spec(first, shard_bytes), "maxRejectedPercent": 0}

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


def test_a_quoted_newline_far_from_the_data_start_loads_at_tiny_shards(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    # A quoted newline at row 40 (byte ~290); 64-byte records, 40-byte shards: the shards just
    # after it have an odd line in their window and look further back for a certain line.
    values = {f"k{i:03d}": "v" for i in range(80)}
    values["k040"] = "x\r\ny"
    rows = (f'{key},"{value}"\n' if "\n" in value else f"{key},{value}\n" for key, value in values.items())
    source = tmp_path / "quoted.csv"
    source.write_bytes(b"id,val\n" + "".join(rows).encode())
    spec = _spec("id", 40, maxRecordBytes=64)

    run = run_file(source, spec)

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    assert run.report["shards"]["total"] > 10
    assert {pk: item["val"]["S"] for (pk, _), item in run.items.items()} == values


def test_a_file_where_a_tenth_of_the_records_hold_a_newline_loads_as_csv_reader_reads_it(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    # Every tenth record holds a newline: every certainty window (256-byte records) holds an odd
    # line, so no shard more than 64 windows past the data start is certain (they failed the job
    # before): each learns its start state from the shards before it through the ledger.
    pick = random.Random(15)
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["id", "val"])
    for i in range(2000):
        value = pick.choice(["a", "b,c", 'say "hi"', "plain text"])
        if i % 10 == 3:
            value = pick.choice(["x\ny", 'p "q"\r\nr', "one\ntwo\nthree", "\n"])
        writer.writerow([f"k{i:04d}", value])
    source = tmp_path / "quoted.csv"
    source.write_bytes(out.getvalue().encode())
    spec = {**_spec("id", 1000, maxRecordBytes=256), "maxRejectedPercent": 0}

    run = run_file(source, spec)

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    assert run.report["shards"]["total"] > 20
    assert run.report["records"]["rejected"] == 0
    expected = {row[0]: row[1] for row in list(csv.reader(io.StringIO(out.getvalue(), newline="")))[1:]}
    assert {pk: item["val"]["S"] for (pk, _), item in run.items.items()} == expected
    assert run.report["records"]["written"] == len(expected) == 2000
