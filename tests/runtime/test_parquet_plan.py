"""Parquet sources without AWS: which keys are data, footers read from an object's last bytes,
shards of whole row groups, and the Worker's rows of a shard (every row once, none lost)."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.s3 import ObjectInfo
from logic import parquet
from logic.errors import InputValidationError
from logic.mapping import make_mapper
from logic.parquet_values import batch_fields, check_schema
from logic.spec.parse import parse_spec
from shards.sources import parquet_rows

pytestmark = pytest.mark.runtime

TABLE_KEY = {"pk": "S", "sk": "S"}
SPEC = parse_spec(
    {
        "source": "s3://src/t/",
        "jobId": "j",
        "format": "parquet",
        "dynamodb": {"key": {"pk": "ID#{id}", "sk": "X"}, "attributes": {"n": {"field": "n", "type": "N"}}},
    },
    table_key=TABLE_KEY,
)


def parquet_bytes(table: pa.Table, **options: Any) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **options)
    return out.getvalue()


class BytesStore:
    """S3Store's ranged reads over objects held in memory; counts the bytes asked for."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects
        self.read = 0

    def read_range(self, obj: ObjectInfo, first: int, last: int) -> bytes:
        self.read += last - first + 1
        return self.objects[obj.key][first : last + 1]


def footer_of(data: bytes, key: str = "t.parquet") -> parquet.ParquetObject:
    meta = parquet.read_footer(lambda first, last: data[first : last + 1], len(data), f"s3://src/{key}")
    return parquet.ParquetObject("src", key, len(data), '"e"', parquet.row_groups(meta))


def test_names_starting_with_an_underscore_or_a_dot_below_the_prefix_are_not_data() -> None:
    data = ["out/part-00000.parquet", "out/year=2026/part-1.snappy.parquet", "_tmp/out/part-2.parquet"]
    not_data = [
        "out/_SUCCESS",
        "out/.part-00000.parquet.crc",
        "out/_committed_123",
        "out/_temporary/0/x.parquet",
    ]
    assert all(parquet.is_data(key, "out/") for key in data[:2])
    assert parquet.is_data(data[2], "_tmp/out/")  # the prefix itself may start with one
    assert not any(parquet.is_data(key, "out/") for key in not_data)


@pytest.mark.parametrize(
    ("key", "named"),
    [
        ("t/_delta_log/00000000000000000000.json", "Delta Lake"),
        ("t/metadata/v1.metadata.json", "Iceberg"),
        ("t/.hoodie/hoodie.properties", "Hudi"),
    ],
)
def test_a_table_format_folder_is_recognized_by_its_log(key: str, named: str) -> None:
    found = parquet.table_format(["t/part-0.parquet", key], "t/")
    assert found is not None and named in found
    assert parquet.table_format(["t/part-0.parquet", "t/metadata/readme.txt"], "t/") is None


def test_a_footer_is_read_from_the_objects_last_bytes_only() -> None:
    data = parquet_bytes(pa.table({"id": [str(i) for i in range(5000)]}), row_group_size=1000)
    asked: list[tuple[int, int]] = []

    def read(first: int, last: int) -> bytes:
        asked.append((first, last))
        return data[first : last + 1]

    meta = parquet.read_footer(read, len(data), "s3://src/t.parquet")

    assert meta.num_rows == 5000 and meta.num_row_groups == 5
    assert all(first >= len(data) - parquet.TAIL_PROBE_BYTES for first, _ in asked)
    assert len(asked) == 1


def test_a_footer_longer_than_the_probe_costs_one_more_read() -> None:
    wide = pa.table({f"column_{i:04d}_with_a_long_name": [1] for i in range(1500)})
    data = parquet_bytes(wide)
    asked: list[tuple[int, int]] = []

    def read(first: int, last: int) -> bytes:
        asked.append((first, last))
        return data[first : last + 1]

    assert parquet.read_footer(read, len(data), "s3://src/w.parquet").num_columns == 1500
    assert len(asked) == 2


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"id,name\n1,a\n" * 10, "does not end with the Parquet magic bytes PAR1"),
        (b"PAR1", "smaller than the smallest Parquet file"),
        (b"PAR1" + b"x" * 20 + (10**6).to_bytes(4, "little") + b"PAR1", "does not fit"),
    ],
)
def test_an_object_that_is_not_parquet_is_refused_naming_it(data: bytes, why: str) -> None:
    with pytest.raises(InputValidationError) as refused:
        parquet.read_footer(lambda first, last: data[first : last + 1], len(data), "s3://src/x.parquet")
    assert "s3://src/x.parquet is not a Parquet file" in str(refused.value) and why in str(refused.value)
    assert refused.value.field == "source"


def test_a_corrupt_footer_is_refused_naming_the_object() -> None:
    data = bytearray(parquet_bytes(pa.table({"id": ["a", "b"]})))
    length = int.from_bytes(data[-8:-4], "little")
    data[-8 - length : -8] = b"\xff" * length  # the footer's Thrift bytes, garbled

    with pytest.raises(InputValidationError, match=r"s3://src/x.parquet .*corrupt footer"):
        parquet.read_footer(
            lambda first, last: bytes(data[first : last + 1]), len(data), "s3://src/x.parquet"
        )


def group(index: int, size: int, rows: int = 10) -> parquet.RowGroup:
    return parquet.RowGroup(index, rows, index * rows, 4 + index * 1000, 4 + index * 1000 + size, size * 3)


def test_row_groups_fill_a_shard_up_to_its_size_and_a_larger_one_is_a_shard_alone() -> None:
    sizes = [300, 300, 300, 2500, 100, 900, 50]
    obj = parquet.ParquetObject("src", "a", 10_000, '"e"', tuple(group(i, s) for i, s in enumerate(sizes)))

    shards = parquet.cut_row_groups([obj], 1000, max_shards=100)

    assert [s["rowGroups"] for s in shards] == [[0, 3], [3, 4], [4, 6], [6, 7]]
    assert [s["firstRow"] for s in shards] == [0, 30, 40, 60]
    assert [s["rows"] for s in shards] == [30, 10, 20, 10]
    assert [s["index"] for s in shards] == [0, 1, 2, 3]


def test_shards_never_span_objects_and_an_object_without_row_groups_gives_none() -> None:
    a = parquet.ParquetObject("src", "a", 100, '"a"', (group(0, 10),))
    empty = parquet.ParquetObject("src", "empty", 100, '"b"', ())
    b = parquet.ParquetObject("src", "b", 100, '"c"', (group(0, 10),))
    shards = parquet.cut_row_groups([a, empty, b], 10**6, max_shards=100)
    assert [(s["key"], s["rowGroups"]) for s in shards] == [("a", [0, 1]), ("b", [0, 1])]
    with pytest.raises(InputValidationError, match="more than 1 shards"):
        parquet.cut_row_groups([a, b], 10**6, max_shards=1)


def test_the_worker_reads_only_the_columns_the_mapping_names() -> None:
    assert parquet.columns_read(SPEC, ["id", "n", "blob", "name"]) == ["id", "n"]
    nested = parse_spec(
        {
            "source": "s3://src/t/",
            "jobId": "j",
            "format": "parquet",
            "dynamodb": {"key": {"pk": "{address.city}", "sk": "X"}, "attributes": "*"},
        },
        table_key=TABLE_KEY,
    )
    assert parquet.columns_read(nested, ["id", "address"]) is None  # "*" reads every column


def test_a_column_named_with_a_dot_beside_a_struct_is_read_as_itself() -> None:
    # pandas writes a flattened column `a.b` beside the struct `a` it came from (json_normalize).
    table = pa.table(
        {
            "id": ["1", "2"],
            "a.b": ["flat-1", "flat-2"],
            "a": [{"b": "nested-1", "c": 10}, {"b": "nested-2", "c": 20}],
            "z": [b"unmapped"] * 2,
        }
    )
    data = parquet_bytes(table, row_group_size=1)
    obj = footer_of(data)
    spec = parse_spec(
        {
            "source": "s3://src/t/",
            "jobId": "j",
            "format": "parquet",
            "dynamodb": {
                "key": {"pk": "ID#{id}", "sk": "{a.b}"},
                "attributes": {"c": {"field": "a.c", "type": "N"}},
            },
        },
        table_key=TABLE_KEY,
    )
    names = table.schema.names
    check_schema(table.schema, spec, "s3://src/t.parquet")
    assert parquet.columns_read(spec, names) == ["id", "a.b", "a"]
    assert parquet.columns_read(spec, ["id", "a"]) == ["id", "a"]  # `a.b` is then the struct's field

    info = ObjectInfo(obj.bucket, obj.key, obj.size, obj.etag)
    shards = parquet.cut_row_groups([obj], 1, max_shards=10)
    rows = [row for shard in shards for row in parquet_rows(BytesStore({obj.key: data}), info, spec, shard)]  # type: ignore[arg-type]
    items = [make_mapper(spec)(row.fields) for row in rows]

    assert [(item.attributes["sk"], item.attributes["c"]) for item in items] == [  # type: ignore[union-attr]
        ({"S": "flat-1"}, {"N": "10"}),
        ({"S": "flat-2"}, {"N": "20"}),
    ]


def test_a_wide_column_named_with_a_dot_counts_in_the_workers_memory() -> None:
    rows = 2 * parquet.BATCH_ROWS
    table = pa.table(
        {
            "id": [str(i) for i in range(rows)],
            "a.b": [b"%06d" % i * 700 for i in range(rows)],
            "a": [{"b": "x"}] * rows,
        }
    )
    meta = pq.ParquetFile(io.BytesIO(parquet_bytes(table, compression="zstd"))).metadata
    parquet.check_row_group_memory(meta, ["id", "a"], worker_memory_mib=256, where="s3://src/w.parquet")
    with pytest.raises(InputValidationError, match=r"s3://src/w.parquet row group 0 .*256 MiB"):
        parquet.check_row_group_memory(meta, ["id", "a.b"], worker_memory_mib=256, where="s3://src/w.parquet")


def test_a_row_group_whose_batch_passes_the_workers_memory_is_refused_naming_it() -> None:
    rows = 2 * parquet.BATCH_ROWS
    data = parquet_bytes(
        pa.table({"id": [str(i) for i in range(rows)], "n": [b"%06d" % i * 700 for i in range(rows)]}),
        compression="zstd",
    )
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    parquet.check_row_group_memory(meta, ["id"], worker_memory_mib=256, where="s3://src/w.parquet")
    with pytest.raises(InputValidationError, match=r"s3://src/w.parquet row group 0 .*256 MiB"):
        parquet.check_row_group_memory(meta, ["id", "n"], worker_memory_mib=256, where="s3://src/w.parquet")


def rows_of(store: BytesStore, obj: parquet.ParquetObject, shards: list[dict[str, Any]]) -> list[Any]:
    info = ObjectInfo(obj.bucket, obj.key, obj.size, obj.etag)
    read = []
    for shard in shards:
        read.extend(parquet_rows(store, info, SPEC, shard))  # type: ignore[arg-type]
    return read


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(0, 400),
    group_rows=st.integers(1, 120),
    shard_size=st.integers(1, 20_000),
    seed=st.integers(0, 2**16),
)
def test_any_shard_cut_reads_every_row_once_as_the_whole_file_reads(
    rows: int, group_rows: int, shard_size: int, seed: int
) -> None:
    table = pa.table(
        {
            "id": [f"r{(i * 7919 + seed) % 100_003}" for i in range(rows)],
            "n": [None if (i + seed) % 13 == 0 else i * seed for i in range(rows)],
            "blob": [b"z" * ((i + seed) % 50) for i in range(rows)],
        }
    )
    data = parquet_bytes(table, row_group_size=group_rows)
    obj = footer_of(data)
    store = BytesStore({obj.key: data})

    shards = parquet.cut_row_groups([obj], shard_size, max_shards=10**6)
    read = rows_of(store, obj, shards)

    whole = pq.read_table(io.BytesIO(data), columns=["id", "n"])
    assert [r.fields for r in read] == [row for batch in whole.to_batches() for row in batch_fields(batch)]
    assert [r.row for r in read] == list(range(rows))  # each row once, in order
    groups = [g.index for g in obj.row_groups]
    assert sorted(g for s in shards for g in range(*s["rowGroups"])) == groups


def test_the_worker_reads_only_its_row_groups_and_columns() -> None:
    table = pa.table(
        {"id": [str(i) for i in range(20_000)], "n": range(20_000), "blob": [b"q" * 100] * 20_000}
    )
    data = parquet_bytes(table, row_group_size=5000, compression="none")
    obj = footer_of(data)
    shards = parquet.cut_row_groups([obj], 1, max_shards=100)  # a row group a shard
    assert len(shards) == 4
    store = BytesStore({obj.key: data})

    read = rows_of(store, obj, shards[1:2])

    assert [r.row for r in read] == list(range(5000, 10_000))
    assert {r.row_group for r in read} == {1}
    blob_bytes = sum(
        g.column(2).total_compressed_size
        for g in map(pq.ParquetFile(io.BytesIO(data)).metadata.row_group, range(4))
    )
    assert store.read < len(data) - blob_bytes  # no blob page, no other row group


def test_plan_ids_of_other_formats_are_unchanged_and_a_parquet_shards_row_groups_count() -> None:
    from logic.planning import plan_id

    shards = [
        {"bucket": "b", "key": "k.csv", "etag": '"e"', "start": 10, "end": 200},
        {"source": "s3://b/a.zip", "member": "x.csv", "sourceEtag": '"z"', "start": 0, "end": 5},
    ]
    spec_json = {"format": "csv", "source": "s3://b/k.csv", "jobId": "j"}
    assert plan_id(shards, spec_json) == "c527519c64b4b5d255aa"  # as before Parquet sources
    one = [{"bucket": "b", "key": "k", "etag": '"e"', "start": 4, "end": 90, "rowGroups": [0, 2]}]
    other = [{**one[0], "rowGroups": [0, 1]}]
    assert plan_id(one, {"format": "parquet"}) != plan_id(other, {"format": "parquet"})


class FailingStore(BytesStore):
    """Ranged reads that break (a timeout, an OSError as pyarrow's own errors are) when they start
    in `broken`: data pages, not the footer."""

    def __init__(self, objects: dict[str, bytes], broken: range) -> None:
        super().__init__(objects)
        self.broken = broken

    def read_range(self, obj: ObjectInfo, first: int, last: int) -> bytes:
        if first in self.broken:
            raise TimeoutError("read timed out")
        return super().read_range(obj, first, last)


def test_a_failed_read_fails_the_shard_instead_of_rejecting_rows() -> None:
    data = parquet_bytes(
        pa.table({"id": [str(i) for i in range(3000)], "n": range(3000)}), row_group_size=1000
    )
    obj = footer_of(data)
    store = FailingStore({obj.key: data}, range(obj.row_groups[1].start, obj.row_groups[1].end))

    with pytest.raises(TimeoutError):
        rows_of(store, obj, parquet.cut_row_groups([obj], len(data), max_shards=10))


@pytest.mark.parametrize("codec", ["snappy", "gzip", "zstd", "lz4", "brotli", "none"])
def test_every_codec_pyarrow_reads_is_read_by_the_worker(codec: str) -> None:
    table = pa.table({"id": [f"r{i}" for i in range(500)], "n": [i if i % 7 else None for i in range(500)]})
    data = parquet_bytes(table, row_group_size=120, compression=codec)
    obj = footer_of(data)

    read = rows_of(BytesStore({obj.key: data}), obj, parquet.cut_row_groups([obj], 300, max_shards=100))

    assert [r.fields for r in read] == batch_fields(pa.RecordBatch.from_pylist(table.to_pylist()))


def test_files_polars_and_duckdb_write_are_sharded_and_read_whole(tmp_path: Any) -> None:
    import duckdb
    import polars

    path = tmp_path / "p.parquet"
    polars.DataFrame({"id": [f"r{i}" for i in range(5000)], "n": list(range(5000))}).write_parquet(
        path, row_group_size=700, compression="zstd"
    )
    duck = tmp_path / "d.parquet"
    duckdb.sql(
        f"COPY (SELECT 'r' || i::VARCHAR AS id, i AS n FROM range(5000) t(i)) TO '{duck}' "
        "(FORMAT parquet, ROW_GROUP_SIZE 1000)"
    )
    for written in (path, duck):
        data = written.read_bytes()
        obj = footer_of(data, written.name)
        assert len(obj.row_groups) > 1
        read = rows_of(BytesStore({obj.key: data}), obj, parquet.cut_row_groups([obj], 2000, max_shards=100))
        assert [r.fields["id"] for r in read] == [f"r{i}" for i in range(5000)]


def test_a_property_graph_weighs_row_groups_uncompressed_and_refuses_one_it_cannot_hold() -> None:
    sizes = [300, 300, 300]  # compressed; uncompressed three times that (group())
    obj = parquet.ParquetObject("src", "a", 10_000, '"e"', tuple(group(i, s) for i, s in enumerate(sizes)))

    assert len(parquet.cut_row_groups([obj], 1000, max_shards=100)) == 1
    by_text = parquet.cut_row_groups([obj], 1000, max_shards=100, uncompressed=True, held_bytes=900)
    assert [s["rowGroups"] for s in by_text] == [[0, 1], [1, 2], [2, 3]]
    assert len(parquet.cut_row_groups([obj], 10, max_shards=100, uncompressed=True, held_bytes=900)) == 3
    with pytest.raises(InputValidationError, match=r"row group 0 of s3://src/a holds .*property graph"):
        parquet.cut_row_groups([obj], 1000, max_shards=100, uncompressed=True, held_bytes=800)


def test_no_function_imports_pyarrow_until_a_parquet_job_needs_it() -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import handlers.plan, handlers.worker, handlers.prepare, handlers.finalize, sys; "
        "print('pyarrow' in sys.modules)"
    )
    # pytest puts runtime/ on its own path (pyproject's pythonpath): a child needs it said.
    runtime = Path(__file__).resolve().parents[2] / "runtime"
    env = {**os.environ, "PYTHONPATH": str(runtime)}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "False"  # the other formats' cold start does not pay for it
