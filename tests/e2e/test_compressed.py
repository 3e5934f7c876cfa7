"""Compressed sources through the synthesized state machine: Prepare → Plan → Shards → Finalize."""

from __future__ import annotations

import gzip
import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mapload.sample import postcodes

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

SPEC: dict[str, Any] = {
    "format": "csv",
    "csv": {"header": True},
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {"latitude": {"field": "latitude", "type": "N"}},
    },
    "shardSizeMiB": 0.01,
    "maxConcurrency": 4,
    "maxRejectedPercent": 10,
}


def _plain(rows: int) -> bytes:
    lines = [b"postcode,latitude,longitude"]
    lines += [f"{code},{lat},{lon}".encode() for code, lat, lon in postcodes(rows, 5)]
    lines.insert(rows // 2, b"AB1 2CF,north,-0.1")  # one reject, to see it named
    return b"\n".join(lines) + b"\n"


def test_gzip_and_zip_sources_load_with_the_plain_files_counts(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    data = _plain(2_000)
    plain, gz, zipped = tmp_path / "p.csv", tmp_path / "p.csv.gz", tmp_path / "p.zip"
    plain.write_bytes(data)
    gz.write_bytes(gzip.compress(data))
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ukpostcodes.csv", data)

    expected = run_file(plain, SPEC)
    [expected_reject] = expected.rejects()  # read now: every run writes the same report path
    assert expected.report["status"] == "SUCCEEDED"
    for path in (gz, zipped):
        run = run_file(path, SPEC)

        report = run.report
        assert report["status"] == "SUCCEEDED", report["error"]
        assert report["records"] == expected.report["records"]
        assert report["shards"]["total"] == expected.report["shards"]["total"] > 1
        assert run.items == expected.items
        [reject] = run.rejects()
        assert reject["source"].endswith(f"/{path.name}")
        assert (reject["line"], reject["offset"], reject["raw"]) == (
            expected_reject["line"],
            expected_reject["offset"],
            expected_reject["raw"],
        )
        assert reject.get("member") == ("ukpostcodes.csv" if path is zipped else None)


def test_corrupt_gzip_and_zip_sources_fail_the_execution_with_a_clear_error(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    data = _plain(500)
    truncated = tmp_path / "cut.csv.gz"
    truncated.write_bytes(gzip.compress(data)[:-100])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.csv", data)
    broken = tmp_path / "broken.zip"
    broken.write_bytes(buffer.getvalue()[:-30])  # the central directory is cut off

    for path, message in ((truncated, "truncated gzip stream"), (broken, "not a readable zip archive")):
        run = run_file(path, SPEC)

        assert run.report["status"] == "FAILED"
        assert run.report["execution"]["status"] == "FAILED"
        error = run.report["error"]
        assert (error["type"], error["where"]) == ("CorruptSourceError", "Prepare")
        assert path.name in error["message"] and message in error["message"]
        assert run.items == {}
