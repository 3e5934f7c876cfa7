"""Parquet sources through Plan, the Workers and Finalize against moto: a Spark-like folder, the
refusals at Plan (naming the object), an undecodable page's rejects, the planned ETag pinned."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline_support import ENV, run_pipeline, scan

from adapters.s3 import ObjectInfo, S3Store
from handlers import plan, worker
from logic.errors import SourceChangedError
from logic.parquet import TAIL_PROBE_BYTES

pytestmark = pytest.mark.runtime

SPEC: dict[str, Any] = {
    "jobId": "pq",
    "format": "parquet",
    "dynamodb": {
        "key": {"pk": "ID#{id}", "sk": "ROW"},
        "attributes": {"n": {"field": "n", "type": "N"}, "name": "{name}"},
    },
    "shardSizeMiB": 0.002,
}


def table(first: int, rows: int) -> pa.Table:
    return pa.table(
        {
            "id": [f"r{i}" for i in range(first, first + rows)],
            "n": list(range(first, first + rows)),
            "name": [f"name {i}" for i in range(first, first + rows)],
            "unused": [b"u" * 64] * rows,
        }
    )


def parquet_bytes(data: pa.Table, **options: Any) -> bytes:
    out = io.BytesIO()
    pq.write_table(data, out, **options)
    return out.getvalue()


def spark_folder(s3: Any, prefix: str = "out/") -> None:
    """Two part files, Spark's marker and checksum files beside them."""
    for part in range(2):
        body = parquet_bytes(table(part * 1000, 1000), row_group_size=100)
        s3.put_object(Bucket="src", Key=f"{prefix}part-0000{part}-abc.snappy.parquet", Body=body)
        s3.put_object(Bucket="src", Key=f"{prefix}.part-0000{part}-abc.snappy.parquet.crc", Body=b"crc!")
    s3.put_object(Bucket="src", Key=f"{prefix}_SUCCESS", Body=b"")


def test_a_spark_folder_loads_every_row_of_its_part_files_by_row_group(aws: Any) -> None:
    spark_folder(aws)

    report = run_pipeline(aws, {**SPEC, "source": "s3://src/out/"})["report"]

    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["records"] == {"read": 2000, "written": 2000, "skipped": 0, "rejected": 0, "duplicates": 0}
    assert report["lines"] == {"total": 2000, "accepted": 2000, "rejected": 0, "ignored": 0}
    assert report["shards"]["total"] > 2
    items = scan()
    assert len(items) == 2000
    assert items[("ID#r1234", "ROW")]["n"] == {"N": "1234"}
    assert items[("ID#r1234", "ROW")]["name"] == {"S": "name 1234"}


def test_a_shard_is_whole_row_groups_and_reads_only_mapped_columns(aws: Any) -> None:
    spark_folder(aws)
    done = plan.handle({"input": {**SPEC, "source": "s3://src/out/"}, "execution": {"name": "r"}}, ENV)
    manifest = json.loads(aws.get_object(Bucket="stg", Key=done["manifestKey"])["Body"].read())
    assert {s["key"] for s in manifest} == {
        "out/part-00000-abc.snappy.parquet",
        "out/part-00001-abc.snappy.parquet",
    }
    for key in {s["key"] for s in manifest}:
        groups = [g for s in manifest if s["key"] == key for g in range(*s["rowGroups"])]
        assert groups == list(range(10))  # each row group in exactly one shard, in order
    assert sum(s["rows"] for s in manifest) == 2000


def corrupt_footer() -> bytes:
    data = bytearray(parquet_bytes(table(0, 10)))
    length = int.from_bytes(data[-8:-4], "little")
    data[-8 - length : -8] = b"\x07" * length
    return bytes(data)


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ({"t/_delta_log/0.json": b"{}", "t/part-0.parquet": None}, "is a Delta Lake table (_delta_log/)"),
        ({"t/metadata/v1.metadata.json": b"{}", "t/data/part-0.parquet": None}, "Apache Iceberg table"),
        (
            {"t/part-0.parquet": None, "t/part-1.parquet": b"id,n,name\n1,2,3\n"},
            "s3://src/t/part-1.parquet is not a Parquet file",
        ),
        ({"t/_SUCCESS": b""}, "no Parquet data files under s3://src/t/"),
        (
            {"t/part-0.parquet": None, "t/part-1.parquet": corrupt_footer()},
            "t/part-1.parquet is not a Parquet",
        ),
    ],
)
def test_plan_refuses_in_one_line_naming_the_object(
    aws: Any, objects: dict[str, bytes | None], message: str
) -> None:
    good = parquet_bytes(table(0, 10))
    for key, body in objects.items():
        aws.put_object(Bucket="src", Key=key, Body=good if body is None else body)

    report = run_pipeline(aws, {**SPEC, "source": "s3://src/t/"})["report"]

    assert report["status"] == "FAILED"
    assert report["error"]["where"] == "Plan"
    assert message in report["error"]["message"] and "\n" not in report["error"]["message"]


def test_a_column_missing_from_one_object_is_named_at_plan(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="t/part-0.parquet", Body=parquet_bytes(table(0, 10)))
    aws.put_object(
        Bucket="src", Key="t/part-1.parquet", Body=parquet_bytes(table(10, 10).drop_columns(["name"]))
    )

    report = run_pipeline(aws, {**SPEC, "source": "s3://src/t/"})["report"]

    assert report["status"] == "FAILED" and report["error"]["where"] == "Plan"
    assert (
        "'name'" in report["error"]["message"] and "s3://src/t/part-1.parquet" in report["error"]["message"]
    )


def test_an_undecodable_page_rejects_its_row_groups_rows_and_the_other_shards_load(aws: Any) -> None:
    data = bytearray(parquet_bytes(table(0, 300), row_group_size=100, compression="snappy"))
    meta = pq.ParquetFile(io.BytesIO(bytes(data))).metadata
    chunk = meta.row_group(1).column(1)  # column n of row group 1
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    for i in range(start + 20, start + chunk.total_compressed_size - 4):
        data[i] ^= 0x5A
    aws.put_object(Bucket="src", Key="bad.parquet", Body=bytes(data))

    report = run_pipeline(aws, {**SPEC, "source": "s3://src/bad.parquet", "maxRejectedPercent": 50})["report"]

    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["records"]["read"] == 300
    assert report["records"]["rejected"] == 100 and report["records"]["written"] == 200
    assert report["rejects"]["byReason"] == {"undecodable_page": 100}
    first = report["rejects"]["sample"][0]
    assert (first["rowGroup"], first["row"]) == (1, 100) and "row group 1" in first["reason"]
    assert len(scan()) == 200


def test_a_row_that_does_not_map_is_rejected_at_its_row_group_and_row(aws: Any) -> None:
    rows = table(0, 250).set_column(0, "id", pa.array([f"r{i}" if i != 170 else "" for i in range(250)]))
    aws.put_object(Bucket="src", Key="a.parquet", Body=parquet_bytes(rows, row_group_size=100))

    report = run_pipeline(aws, {**SPEC, "source": "s3://src/a.parquet", "maxRejectedPercent": 5})["report"]

    assert report["status"] == "SUCCEEDED", report["error"]
    [reject] = report["rejects"]["sample"]
    assert (reject["rowGroup"], reject["row"], reject["code"]) == (1, 170, "empty_key")
    assert str(json.loads(reject["raw"])["n"]) == "170"


def test_a_worker_reads_the_planned_version_only(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.parquet", Body=parquet_bytes(table(0, 100)))
    done = plan.handle({"input": {**SPEC, "source": "s3://src/a.parquet"}, "execution": {"name": "r"}}, ENV)
    manifest = json.loads(aws.get_object(Bucket="stg", Key=done["manifestKey"])["Body"].read())
    aws.put_object(Bucket="src", Key="a.parquet", Body=parquet_bytes(table(5, 100)))

    with pytest.raises(SourceChangedError, match="changed after it was planned"):
        worker.handle({"shard": manifest[0], "job": done["job"]}, ENV)


def test_ranged_file_sends_if_match(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.bin", Body=b"0123456789")
    store = S3Store(aws)
    obj = ObjectInfo("src", "a.bin", 10, '"stale"')
    from adapters.s3 import RangedFile

    with pytest.raises(SourceChangedError):
        RangedFile(store, obj).read(4)


def test_plan_reads_only_each_files_last_bytes_pinned_to_its_etag(aws: Any) -> None:
    from adapters import clients

    spark_folder(aws)
    sizes = {o["Key"]: o["Size"] for o in aws.list_objects_v2(Bucket="src", Prefix="out/")["Contents"]}
    gets: list[dict[str, Any]] = []
    clients.s3().meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_: gets.append(params)
    )

    plan.handle({"input": {**SPEC, "source": "s3://src/out/"}, "execution": {"name": "r"}}, ENV)

    source = [g for g in gets if g["Bucket"] == "src"]
    assert sorted({g["Key"] for g in source}) == [
        "out/part-00000-abc.snappy.parquet",
        "out/part-00001-abc.snappy.parquet",
    ]
    for g in source:
        first, last = (int(n) for n in g["Range"].removeprefix("bytes=").split("-"))
        assert last == sizes[g["Key"]] - 1 and g["IfMatch"]  # the tail, of the listed version
        assert first >= sizes[g["Key"]] - TAIL_PROBE_BYTES
    assert len(source) == 2  # one GET a file: its footer fits the first read


def test_plan_reads_the_footers_of_many_files(aws: Any) -> None:
    body = parquet_bytes(table(0, 3), row_group_size=1)
    for i in range(1000):
        aws.put_object(Bucket="src", Key=f"many/part-{i:05d}.parquet", Body=body)

    done = plan.handle({"input": {**SPEC, "source": "s3://src/many/"}, "execution": {"name": "r"}}, ENV)

    manifest = json.loads(aws.get_object(Bucket="stg", Key=done["manifestKey"])["Body"].read())
    assert done["job"]["objects"] == 1000 and len(manifest) == 1000  # a small file is one shard
    assert [s["key"] for s in manifest] == [f"many/part-{i:05d}.parquet" for i in range(1000)]
    assert {s["rows"] for s in manifest} == {3}
