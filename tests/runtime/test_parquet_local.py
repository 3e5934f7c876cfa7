"""A local Parquet source before any upload: `mapload estimate` counts its rows from the footers and
maps a sample, and `mapload start`'s check refuses what Plan would (not Parquet, a missing column)."""

from __future__ import annotations

import io
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


def spark_folder(tmp_path: Path, name: str = "out") -> Path:
    """A folder as Spark writes one: data files, `_SUCCESS`, checksums, a failed job's `_temporary/`."""
    folder = tmp_path / name
    (folder / "_temporary" / "0").mkdir(parents=True)
    write(folder / "part-00000.parquet", 20)
    write(folder / "part-00001.parquet", 5)
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".part-00000.parquet.crc").write_bytes(b"crc")
    (folder / "_temporary" / "0" / "part-00002.parquet").write_text("half written")
    return folder


def test_start_checks_every_data_file_of_a_folder_and_names_the_one_refused(tmp_path: Path) -> None:
    folder = spark_folder(tmp_path)
    check_spec(SPEC, "s3://source-bucket/uploads/out/", KEY, "run-1", folder)  # the rest is not data

    pq.write_table(pa.table({"id": ["r9"], "m": [1]}), folder / "part-00003.parquet")
    with pytest.raises(OpsError) as caught:
        check_spec(SPEC, "s3://source-bucket/uploads/out/", KEY, "run-1", folder)
    assert "\n" not in str(caught.value)
    assert "part-00003.parquet: names column 'n', which the object does not have" in str(caught.value)

    (folder / "part-00003.parquet").write_text("id,n\n")
    with pytest.raises(OpsError, match=r"nothing uploaded.*part-00003.parquet is not a Parquet file"):
        check_spec(SPEC, "s3://source-bucket/uploads/out/", KEY, "run-1", folder)


def test_start_and_estimate_refuse_a_table_formats_folder_in_one_line(tmp_path: Path) -> None:
    folder = spark_folder(tmp_path, "events")
    (folder / "_delta_log").mkdir()
    (folder / "_delta_log" / "00000000000000000000.json").write_text("{}")
    with pytest.raises(OpsError, match=r"events is a Delta Lake table \(_delta_log/\).*plain Parquet"):
        check_spec(SPEC, "s3://source-bucket/uploads/events/", KEY, "run-1", folder)
    with pytest.raises(measure.MeasureError, match=r"events is a Delta Lake table"):
        measure.measure(folder, SPEC)


def test_start_takes_a_folder_for_parquet_only(tmp_path: Path) -> None:
    folder = spark_folder(tmp_path)
    csv = {"format": "csv", "csv": {"header": True}, "dynamodb": {"key": {"pk": "{id}", "sk": "X"}}}
    with pytest.raises(OpsError, match=r"/out is a folder: .*parquet"):
        check_spec(csv, "s3://source-bucket/uploads/out/", KEY, "run-1", folder)


class RefusingStepFunctions:
    """Records the execution input, then refuses to start it (no state machine here)."""

    def __init__(self) -> None:
        self.inputs: list[dict[str, Any]] = []

    def start_execution(self, **request: Any) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        self.inputs.append(json.loads(request["input"]))
        error = {"Error": {"Code": "StateMachineDoesNotExist", "Message": "none"}}
        raise ClientError(error, "StartExecution")


def deployed(monkeypatch: pytest.MonkeyPatch, s3: Any) -> RefusingStepFunctions:
    from mapload import ops
    from mapload.environment import Environment

    sfn = RefusingStepFunctions()
    clients = type("FakeClients", (), {"s3": s3, "sfn": sfn, "region": "eu-west-1", "region_source": "test"})
    monkeypatch.setattr(ops, "Clients", lambda region=None: clients)
    outputs = {"SourceBucketName": "src", "StateMachineArn": "arn:m", "TableKey": json.dumps(KEY)}
    monkeypatch.setattr(ops, "describe_environment", lambda clients, env: Environment(env, outputs))
    return sfn


def test_start_uploads_a_folders_data_files_and_loads_that_prefix(
    aws: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mapload import ops

    sfn = deployed(monkeypatch, aws)
    folder = spark_folder(tmp_path)

    with pytest.raises(OpsError, match="cannot start an execution"):
        ops.start("dev", str(folder), SPEC, err=io.StringIO())

    assert [execution["source"] for execution in sfn.inputs] == ["s3://src/uploads/out/"]
    listed = aws.list_objects_v2(Bucket="src", Prefix="uploads/out/")["Contents"]
    assert sorted(o["Key"] for o in listed) == [f"uploads/out/part-0000{i}.parquet" for i in (0, 1)]


def test_start_refuses_a_prefix_holding_data_files_the_folder_has_not(
    aws: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mapload import ops

    sfn = deployed(monkeypatch, aws)
    folder = spark_folder(tmp_path)
    aws.put_object(Bucket="src", Key="uploads/out/part-00007.parquet", Body=b"an earlier upload")
    aws.put_object(Bucket="src", Key="uploads/out/_SUCCESS", Body=b"")  # not data: no matter

    with pytest.raises(OpsError) as caught:
        ops.start("dev", str(folder), SPEC, err=io.StringIO())

    assert "s3://src/uploads/out/ already holds part-00007.parquet" in str(caught.value)
    assert "\n" not in str(caught.value) and not sfn.inputs
    assert aws.list_objects_v2(Bucket="src", Prefix="uploads/out/")["KeyCount"] == 2  # nothing uploaded
