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


@pytest.mark.parametrize("shard_bytes", [3, 64 * MIB])
def test_an_inch_mark_in_an_unquoted_field_loads_every_row(
    tmp_path: Path, run_file: Callable[..., Any], shard_bytes: int
) -> None:
    """A quote opens a quoted field only at the start of a field, as csv.reader reads: `5" disk`
    is data and swallows none of the rows after it."""
    source = tmp_path / "disks.csv"
    source.write_bytes(
        b'id,item,qty\nA1,5" disk,10\nA2,cable,11\nA3,3.5" drive,12\nA4,the "foo" option,13\nA5,x,14\n'
    )
    spec = {**_spec("id", shard_bytes), "maxRejectedPercent": 0}

    run = run_file(source, spec)

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    assert run.report["records"] == {"read": 5, "written": 5, "skipped": 0, "rejected": 0, "duplicates": 0}
    assert run.report["lines"] == {"total": 5, "accepted": 5, "rejected": 0, "ignored": 0}
    assert run.items[("A1", "R")]["item"] == {"S": '5" disk'}
    assert run.items[("A4", "R")]["item"] == {"S": 'the "foo" option'}


def _prose(pick: random.Random, words: int) -> str:
    """Release-note text as people type it: quoted words, inch marks, unbalanced quotes, no commas."""
    vocabulary = ["the", "option", "disk", "now", "fixed", "reads", "when", "it's", "a", "an", "file"]
    quoted = ['"foo"', '5"', '3.5" drive', 'say "hi', 'the "new" flag', '12"x9"', '""', 'a"b"c', 'end"']
    out = [pick.choice(vocabulary)]  # a field never starts with a quote: it would open a quoted field
    for _ in range(words):
        out.append(pick.choice(quoted) if pick.random() < 0.4 else pick.choice(vocabulary))
    return " ".join(out)


@pytest.mark.parametrize(("shard_bytes", "max_record"), [(997, 256), (64 * MIB, 1024 * 1024)])
def test_release_notes_with_thousands_of_quotes_in_unquoted_fields_load_every_line(
    tmp_path: Path, run_file: Callable[..., Any], shard_bytes: int, max_record: int
) -> None:
    """A plain comma-separated file of prose (no quoting by its writer): about 3,000 lines holding
    some 5,000 quotes inside unquoted fields, balanced and not, and a few well-quoted fields with
    line breaks. Read as csv.reader reads it, every line loads, at small shards too (their start
    states come from the look-back window or the chain)."""
    pick = random.Random(27)
    lines = ["id,note,count"]
    for i in range(3000):
        note = _prose(pick, pick.randrange(1, 12))
        if i % 97 == 5:
            note = '"' + note.replace('"', '""') + "\n(continued, " + note.replace('"', '""') + ')"'
        lines.append(f"k{i:04d},{note},{i}")
    text = "\n".join(lines) + "\n"
    source = tmp_path / "notes.csv"
    source.write_bytes(text.encode())
    assert text.count('"') > 5000
    spec = {**_spec("id", shard_bytes, maxRecordBytes=max_record), "maxRejectedPercent": 0}

    run = run_file(source, spec)

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    expected = {row[0]: row[1] for row in list(csv.reader(io.StringIO(text, newline=""), strict=True))[1:]}
    assert len(expected) == 3000
    assert run.report["records"]["written"] == 3000 and run.report["records"]["rejected"] == 0
    assert run.report["lines"]["total"] == text.count("\n") - 1 == run.report["lines"]["accepted"]
    assert {pk: item["note"]["S"] for (pk, _), item in run.items.items()} == expected
    if shard_bytes < MIB:
        assert run.report["shards"]["total"] > 50


def test_a_300_kb_quoted_field_loads(tmp_path: Path, run_file: Callable[..., Any]) -> None:
    """csv's own field limit is 131072 characters; a field may be as long as csv.maxRecordBytes."""
    value = ('a "quoted" word, a comma\nand a line break ' * 8000)[:300_000]
    source = tmp_path / "big.csv"
    escaped = value.replace('"', '""')
    source.write_bytes(f'id,body\nbig,"{escaped}"\nsmall,x\n'.encode())

    run = run_file(source, {**_spec("id", 64 * MIB), "maxRejectedPercent": 0})

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    assert run.items[("big", "R")]["body"] == {"S": value}
    assert run.report["lines"]["accepted"] == 2 + value.count("\n")
