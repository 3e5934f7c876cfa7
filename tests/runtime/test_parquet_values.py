"""Parquet values into DynamoDB items: the same table from pyarrow, DuckDB and Polars, every codec.

The expected items are written out by hand from the issue's rules (docs/INPUT.md "Parquet types"),
not computed by the code under test.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from parquet_corpus import CODECS, REPEAT, WRITER_GAPS, WRITERS, write

from logic.mapping import Item, Reject, make_mapper
from logic.parquet_values import batch_fields, check_schema
from logic.spec.inputs import FORMATS, JobSpec
from logic.spec.parse import parse_spec

pytestmark = pytest.mark.runtime

TABLE_KEY = {"pk": "S", "sk": "S"}


def parquet_spec(dynamodb: dict[str, Any] | None = None, graph: dict[str, Any] | None = None) -> JobSpec:
    """A format "parquet" spec (read as "jsonl" and relabelled until the spec model has the format)."""
    raw: dict[str, Any] = {"source": "s3://bucket/in/", "jobId": "j", "format": "parquet"}
    if dynamodb is not None:
        raw["dynamodb"] = dynamodb
    if graph is not None:
        raw["graph"] = graph
    if "parquet" in FORMATS:
        return parse_spec(raw, table_key=TABLE_KEY)
    return parse_spec({**raw, "format": "jsonl"}, table_key=TABLE_KEY).model_copy(
        update={"format": "parquet"}
    )


def n(text: str) -> dict[str, str]:
    return {"N": text}


def s(text: str) -> dict[str, str]:
    return {"S": text}


NULL = {"NULL": True}

# "attributes": "*" -- every column but the key's, as each base row (0..5) maps; a null column is
# no attribute. `clock` is in microseconds but for Polars (nanoseconds: CLOCK_NS).
COPIED: list[dict[str, Any]] = [
    {
        "small": n("-32768"),
        "big": n("18446744073709551615"),
        "price": n("1234567890123456789012345678.1234567891"),
        "amount": n("19.99"),
        "ratio": n("0.1"),
        "f32": n("0.1"),
        "name": s("Zoë"),
        "blob": {"B": b"\x00\xff"},
        "flag": {"BOOL": True},
        "day": s("2026-01-01"),
        "clock": s("00:00:00.000000"),
        "at_utc": s("2026-01-01T00:00:00.123456Z"),
        "at_local": s("2026-01-01T00:00:00.123"),
        "at_ns": s("2026-01-01T00:00:00.123456000"),
        "tags": {"L": [s("a"), s("b"), s("a")]},
        "scores": {"L": [n("1"), n("2"), n("2")]},
        "address": {
            "M": {"city": s("Aberdeen"), "zip": s("AB1"), "geo": {"M": {"lat": n("57.1"), "lon": n("-2.1")}}}
        },
        "attrs": {"M": {"a": n("1"), "b": n("2")}},
        "nested": {
            "L": [
                {"M": {"k": s("p"), "v": {"L": [n("1"), n("2")]}}},
                {"M": {"k": NULL, "v": {"L": []}}},
            ]
        },
    },
    {
        "small": n("0"),
        "big": n("0"),
        "price": n("-1E-10"),
        "amount": n("-0.50"),
        "ratio": n("0.00001"),
        "f32": n("16777216.0"),
        "name": s(""),
        "blob": {"B": b""},
        "flag": {"BOOL": False},
        "day": s("1970-01-01"),
        "clock": s("00:00:00.000001"),
        "at_utc": s("1970-01-01T00:00:00.000000Z"),
        "at_local": s("1970-01-01T00:00:00.000"),
        "at_ns": s("1970-01-01T00:00:00.000000000"),
        "tags": {"L": []},
        "scores": {"L": []},
        "address": {"M": {"city": s(""), "zip": NULL, "geo": NULL}},
        "attrs": {"M": {}},
        "nested": {"L": []},
    },
    {
        "small": n("7"),
        "big": n("1"),
        "price": n("0"),
        "amount": n("0"),
        "ratio": n("-2.5"),
        "f32": n("-1.5"),
        "name": s("a,b\nc"),
        "blob": {"B": b"hello"},
        "flag": {"BOOL": True},
        "day": s("1969-12-31"),
        "clock": s("23:59:59.999999"),
        "at_utc": s("1969-12-31T23:59:59.999999Z"),
        "at_local": s("1969-12-31T23:59:59.999"),
        "at_ns": s("1969-12-31T23:59:59.999999000"),
        "tags": {"L": [s("ü")]},
        "scores": {"L": [n("-1")]},
        "address": {
            "M": {"city": s("Ely"), "zip": s("CB7"), "geo": {"M": {"lat": n("52.4"), "lon": n("0.26")}}}
        },
        "attrs": {"M": {"c": NULL}},
        "nested": {"L": [{"M": {"k": s("q"), "v": NULL}}]},
    },
    {
        "small": n("32767"),
        "big": n("2"),
        "price": n("100.5000000000"),
        "amount": n("9999999.99"),
        "ratio": n("1E+20"),
        "f32": n("3.4028235E+38"),
        "name": s('o\'neil "q"'),
        "blob": {"B": b"\n"},
        "flag": {"BOOL": False},
        "day": s("9999-12-31"),
        "clock": s("12:00:00.000000"),
        "at_utc": s("9999-12-31T23:59:59.000000Z"),
        "at_local": s("1970-01-01T00:00:00.001"),
        "at_ns": s("1970-01-01T00:00:00.000001000"),
        "scores": {"L": [n("1000000000000000000")]},
        "address": {"M": {"city": NULL, "zip": NULL, "geo": {"M": {"lat": NULL, "lon": n("1E-7")}}}},
        "attrs": {"M": {"d": n("-4")}},
    },
    {},
    {
        "small": n("1"),
        "big": n("3"),
        "price": n("1.0000000000"),
        "amount": n("1.00"),
        "ratio": n("3.0"),
        "f32": n("0"),
        "name": s("x"),
        "blob": {"B": b"z"},
        "flag": {"BOOL": True},
        "day": s("1970-01-02"),
        "clock": s("00:00:00.001000"),
        "at_utc": s("1970-01-01T00:00:00.000001Z"),
        "at_local": s("1970-01-01T00:00:01.000"),
        "at_ns": s("1970-01-01T00:00:00.000000001"),
        "tags": {"L": [s("x")]},
        "scores": {"L": [n("0")]},
        "address": {
            "M": {"city": s("York"), "zip": s("YO1"), "geo": {"M": {"lat": n("53.9"), "lon": n("-1.08")}}}
        },
        "attrs": {"M": {"e": n("5")}},
        "nested": {"L": [NULL]},
    },
]
CLOCK_NS = [
    "00:00:00.000000000",
    "00:00:00.000001000",
    "23:59:59.999999000",
    "12:00:00.000000000",
    None,
    "00:00:00.001000000",
]

# Typed attributes (all optional but the template "label"):
TYPED_SPEC = {
    "key": {"pk": "ROW#{id}", "sk": "TYPED"},
    "attributes": {
        "price": {"field": "price", "type": "N", "optional": True},
        "ratio": {"field": "ratio", "type": "N", "optional": True},
        "f32": {"field": "f32", "type": "N", "optional": True},
        "flag": {"field": "flag", "type": "BOOL", "optional": True},
        "blob": {"field": "blob", "type": "B", "optional": True},
        "tags": {"field": "tags", "type": "SS", "optional": True},
        "scores": {"field": "scores", "type": "NS", "optional": True},
        "when": {"field": "at_utc", "type": "N", "from": "iso8601", "optional": True},
        "localWhen": {"field": "at_local", "type": "N", "from": "iso8601", "optional": True},
        "nanos": {"field": "at_ns", "type": "N", "from": "iso8601", "optional": True},
        "address": {"field": "address", "type": "M", "optional": True},
        "city": {"field": "address.city", "type": "S", "optional": True},
        "label": "{small}/{day}",
    },
}
TYPED: list[dict[str, Any] | Reject] = [
    {
        "price": n("1234567890123456789012345678.1234567891"),
        "ratio": n("0.1"),
        "f32": n("0.1"),
        "flag": {"BOOL": True},
        "blob": {"B": b"\x00\xff"},
        "tags": {"SS": ["a", "b"]},
        "scores": {"NS": ["1", "2"]},
        "when": n("1767225600.123456"),
        "localWhen": n("1767225600.123"),
        "nanos": n("1767225600.123456"),
        "address": COPIED[0]["address"],
        "city": s("Aberdeen"),
        "label": s("-32768/2026-01-01"),
    },
    {
        "price": n("-1E-10"),
        "ratio": n("0.00001"),
        "f32": n("16777216.0"),
        "flag": {"BOOL": False},
        "blob": {"B": b""},
        "when": n("0"),
        "localWhen": n("0"),
        "nanos": n("0"),
        "address": COPIED[1]["address"],
        "label": s("0/1970-01-01"),
    },
    {
        "price": n("0"),
        "ratio": n("-2.5"),
        "f32": n("-1.5"),
        "flag": {"BOOL": True},
        "blob": {"B": b"hello"},
        "tags": {"SS": ["ü"]},
        "scores": {"NS": ["-1"]},
        "when": n("-0.000001"),
        "localWhen": n("-0.001"),
        "nanos": n("-0.000001"),
        "address": COPIED[2]["address"],
        "city": s("Ely"),
        "label": s("7/1969-12-31"),
    },
    {
        "price": n("100.5000000000"),
        "ratio": n("1E+20"),
        "f32": n("3.4028235E+38"),
        "flag": {"BOOL": False},
        "blob": {"B": b"\n"},
        "scores": {"NS": ["1000000000000000000"]},
        "when": n("253402300799"),
        "localWhen": n("0.001"),
        "nanos": n("0.000001"),
        "address": COPIED[3]["address"],
        "label": s("32767/9999-12-31"),
    },
    Reject("missing_field", "field 'small' is null"),
    {
        "price": n("1.0000000000"),
        "ratio": n("3.0"),
        "f32": n("0"),
        "flag": {"BOOL": True},
        "blob": {"B": b"z"},
        "tags": {"SS": ["x"]},
        "scores": {"NS": ["0"]},
        "when": n("0.000001"),
        "localWhen": n("1"),
        "nanos": n("0.000000001"),
        "address": COPIED[5]["address"],
        "city": s("York"),
        "label": s("1/1970-01-02"),
    },
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    directory = tmp_path_factory.mktemp("parquet")
    return {(writer, codec): write(directory, writer, codec) for writer in WRITERS for codec in CODECS}


def rows(path: Path) -> Iterator[dict[str, Any]]:
    """Every row's Fields, read row group by row group (as a shard of whole groups is)."""
    file = pq.ParquetFile(path)
    assert file.metadata.num_row_groups >= 3
    for group in range(file.metadata.num_row_groups):
        for batch in file.read_row_group(group).to_batches(max_chunksize=1000):
            yield from batch_fields(batch)


def expected_copy(writer: str, row_id: int) -> dict[str, Any]:
    base = (row_id - 1) % 6
    expected = {"pk": s(f"ROW#{row_id}"), "sk": s("ALL"), "id": n(str(row_id))}
    expected |= {name: value for name, value in COPIED[base].items() if name not in WRITER_GAPS[writer]}
    if writer == "polars" and "clock" in expected:
        expected["clock"] = s(CLOCK_NS[base] or "")
    return expected


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("codec", CODECS)
def test_every_column_is_copied_with_its_type(
    corpus: dict[tuple[str, str], Path], writer: str, codec: str
) -> None:
    # Given a table of every type written by `writer` with `codec`, and "attributes": "*"
    spec = parquet_spec({"key": {"pk": "ROW#{id}", "sk": "ALL"}, "attributes": "*"})
    check_schema(pq.read_schema(corpus[writer, codec]), spec, f"{writer}-{codec}.parquet")  # Plan's check
    to_item = make_mapper(spec)
    seen = 0
    for fields in rows(corpus[writer, codec]):
        # When each row is mapped
        item = to_item(fields)
        # Then the item holds each column as its type says
        assert isinstance(item, Item), item
        assert item.attributes == expected_copy(writer, fields["id"]), fields["id"]
        seen += 1
    assert seen == 6 * REPEAT


@pytest.mark.parametrize("writer", WRITERS)
def test_typed_attributes_sets_timestamps_and_paths(corpus: dict[tuple[str, str], Path], writer: str) -> None:
    spec = parquet_spec(TYPED_SPEC)
    check_schema(pq.read_schema(corpus[writer, "zstd"]), spec, f"{writer}-zstd.parquet")
    to_item = make_mapper(spec)
    for fields in rows(corpus[writer, "zstd"]):
        row_id = fields["id"]
        expected = TYPED[(row_id - 1) % 6]
        item = to_item(fields)
        if isinstance(expected, Reject):
            assert item == expected
            continue
        assert isinstance(item, Item), item
        assert item.attributes == {"pk": s(f"ROW#{row_id}"), "sk": s("TYPED"), **expected}, row_id


@pytest.mark.parametrize("codec", CODECS)
def test_int96_timestamps_as_spark_writes_them(corpus: dict[tuple[str, str], Path], codec: str) -> None:
    # Given pyarrow's INT96 file (Spark's default timestamp), read as pyarrow reads it: nanoseconds
    # with no zone -- text without an offset, epoch seconds counting its wall clock as UTC
    path = corpus["pyarrow", codec].with_name(f"pyarrow-{codec}-int96.parquet")
    assert pq.ParquetFile(path).schema.column(1).physical_type == "INT96"
    spec = parquet_spec(
        {
            "key": {"pk": "ROW#{id}", "sk": "INT96"},
            "attributes": {
                "text": {"field": "at_int96", "type": "S", "optional": True},
                "ttl": {"field": "at_int96", "type": "N", "from": "iso8601", "optional": True},
            },
        }
    )
    check_schema(pq.read_schema(path), spec, path.name)
    to_item = make_mapper(spec)
    texts = [
        "2026-01-01T00:00:00.123456789",
        "1970-01-01T00:00:00.000000000",
        "1969-12-31T23:59:59.999999999",
        "1970-01-01T00:00:00.000000001",
        None,
        "1970-01-01T00:00:00.000000001",
    ]
    seconds = ["1767225600.123456789", "0", "-0.000000001", "0.000000001", None, "0.000000001"]
    for fields in rows(path):
        item = to_item(fields)
        assert isinstance(item, Item)
        base = (fields["id"] - 1) % 6
        expected = (
            {} if texts[base] is None else {"text": s(texts[base] or ""), "ttl": n(seconds[base] or "")}
        )
        assert item.attributes == {"pk": s(f"ROW#{fields['id']}"), "sk": s("INT96"), **expected}


def one_row(name: str, array: pa.Array) -> list[dict[str, Any]]:
    return batch_fields(pa.record_batch({"id": pa.array(range(1, len(array) + 1)), name: array}))


COPY_ALL = {"key": {"pk": "ROW#{id}", "sk": "R"}, "attributes": "*"}


@pytest.mark.parametrize(
    ("array", "reason"),
    [
        (pa.array([float("nan")]), "x: nan is not a number DynamoDB can store (no NaN or infinity)"),
        (
            pa.array([float("inf")], pa.float32()),
            "x: inf is not a number DynamoDB can store (no NaN or infinity)",
        ),
        (pa.array([float("-inf")]), "x: -inf is not a number DynamoDB can store (no NaN or infinity)"),
        (
            pa.array([Decimal("1" * 39)], pa.decimal256(40, 0)),
            f"x: {'1' * 39} has 39 significant digits; DynamoDB allows 38",
        ),
        (
            pa.array([Decimal("0." + "1" * 39)], pa.decimal256(40, 39)),
            f"x: 0.{'1' * 39} has 39 significant digits; DynamoDB allows 38",
        ),
    ],
)
def test_numbers_dynamodb_cannot_hold_are_rejects_naming_the_column(array: pa.Array, reason: str) -> None:
    for spec in (COPY_ALL, {"key": COPY_ALL["key"], "attributes": {"y": {"field": "x", "type": "N"}}}):
        (fields,) = one_row("x", array)
        result = make_mapper(parquet_spec(spec))(fields)
        named = reason if spec is COPY_ALL else reason.replace("x: ", "y: ", 1)
        assert result == Reject("bad_number", named)


def test_a_decimal_of_38_digits_is_exact_and_never_a_float() -> None:
    digits = "12345678901234567890123456789012345678"
    (fields,) = one_row("x", pa.array([Decimal(digits[:20] + "." + digits[20:])], pa.decimal128(38, 18)))
    item = make_mapper(parquet_spec(COPY_ALL))(fields)
    assert isinstance(item, Item)
    assert item.attributes["x"] == n("12345678901234567890.123456789012345678")


def test_a_map_whose_keys_are_not_strings_is_a_reject_naming_the_column() -> None:
    (fields,) = one_row("x", pa.array([[(1, "a")]], pa.map_(pa.int32(), pa.string())))
    assert make_mapper(parquet_spec(COPY_ALL))(fields) == Reject(
        "bad_key", "x: map key '1' is not a string (DynamoDB map keys are strings)"
    )


def test_an_empty_list_is_no_set() -> None:
    spec = {"key": COPY_ALL["key"], "attributes": {"tags": {"field": "x", "type": "SS"}}}
    (fields,) = one_row("x", pa.array([[]], pa.list_(pa.string())))
    assert make_mapper(parquet_spec(spec))(fields) == Reject(
        "empty_set", 'tags: empty value (make the attribute "optional" to leave it out)'
    )


def test_a_local_timestamp_is_written_as_plain_text() -> None:
    spec = {
        "key": COPY_ALL["key"],
        "attributes": {"s": {"field": "x", "type": "S"}, "ss": {"field": "y", "type": "SS"}},
    }
    (fields,) = batch_fields(
        pa.record_batch(
            {
                "id": [1],
                "x": pa.array([1], pa.timestamp("s")),
                "y": pa.array([[1]], pa.list_(pa.timestamp("ms"))),
            }
        )
    )
    item = make_mapper(parquet_spec(spec))(fields)
    assert isinstance(item, Item)
    assert item.attributes["s"] == {"S": "1970-01-01T00:00:01"} and type(item.attributes["s"]["S"]) is str
    assert (
        item.attributes["ss"] == {"SS": ["1970-01-01T00:00:00.001"]}
        and type(item.attributes["ss"]["SS"][0]) is str
    )
