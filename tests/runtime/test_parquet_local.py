"""A local Parquet source before any upload: `mapload estimate` counts its rows from the footers and
maps a sample, and `mapload start`'s check refuses what Plan would (not Parquet, a missing column)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mapload import measure
from mapload.cli import main
from mapload.ops import OpsError, check_spec

pytestmark = pytest.mark.runtime

SPEC: dict[str, Any] = {
    "format": "parquet",
    "dynamodb": {"key": {"pk": "ID#{id}", "sk": "ROW"}, "attributes": {"n": {"field": "n", "type": "N"}}},
}
KEY = {"pk": "S", "sk": "S"}


def write(path: Path, rows: int, **columns: Any) -> Path:
    data = {"id": [f"r{i}" for i in range(rows)], "n": list(range(rows)), "pad": ["x" * 40] * rows, **columns}
    pq.write_table(pa.table(data), path, row_group_size=1000)
    return path


def test_estimate_counts_a_folders_rows_from_its_footers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    write(folder / "part-0.parquet", 30_000)
    write(folder / "part-1.parquet", 12_000)
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".part-0.parquet.crc").write_bytes(b"crc")

    measured = measure.measure(folder, SPEC)

    assert (measured.rows, measured.exact, measured.rejected) == (42_000, True, 0)
    assert measured.sampled == measure.SAMPLE_ROWS
    assert 20 <= measured.item_bytes <= 40
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC))
    assert main(["estimate", "--file", str(folder), "--spec", str(spec_file)]) == 0
    assert "42,000 rows" in capsys.readouterr().out


def test_estimate_names_a_column_the_file_lacks(tmp_path: Path) -> None:
    source = write(tmp_path / "a.parquet", 10)
    with pytest.raises(measure.MeasureError, match=r"a.parquet: names column 'missing', which the object"):
        measure.measure(source, {**SPEC, "dynamodb": {**SPEC["dynamodb"], "attributes": {"m": "{missing}"}}})


def test_start_refuses_a_file_that_is_not_parquet_before_uploading(tmp_path: Path) -> None:
    source = tmp_path / "a.parquet"
    source.write_text("id,n\nr1,1\n")
    with pytest.raises(OpsError, match=r"nothing uploaded.*a.parquet is not a Parquet file"):
        check_spec(SPEC, "s3://source-bucket/a.parquet", KEY, "run-1", source)


def test_start_refuses_a_column_the_file_lacks_and_accepts_a_good_file(tmp_path: Path) -> None:
    source = write(tmp_path / "a.parquet", 10)
    check_spec(SPEC, "s3://source-bucket/a.parquet", KEY, "run-1", source)
    bad = {**SPEC, "dynamodb": {**SPEC["dynamodb"], "key": {"pk": "{nope}", "sk": "ROW"}}}
    with pytest.raises(OpsError, match=r"names column 'nope', which the object does not have"):
        check_spec(bad, "s3://source-bucket/a.parquet", KEY, "run-1", source)
