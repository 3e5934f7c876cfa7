"""Random Arrow columns of each type -> batch_fields -> the mapper, against an oracle written apart:
Python's own arithmetic on the values the column was built from, not the code under test."""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_parquet_values import parquet_spec

from logic.mapping import Item, Reject, make_mapper
from logic.parquet_values import batch_fields

pytestmark = pytest.mark.runtime

_EPOCH = datetime(1970, 1, 1)
# Parquet's units (an Arrow timestamp in seconds is written in milliseconds).
_UNITS = {"ms": 10**3, "us": 10**6, "ns": 10**9}
_DIGITS = {"ms": 3, "us": 6, "ns": 9}


def _iso(value: int, unit: str, zone: bool) -> str:
    whole, fraction = divmod(value, _UNITS[unit])
    text = (_EPOCH + timedelta(seconds=whole)).strftime("%Y-%m-%dT%H:%M:%S")
    text = text.rjust(19, "0")  # strftime writes year 1 as "1" on some platforms
    text += "." + str(fraction).rjust(_DIGITS[unit], "0")
    return text + ("Z" if zone else "")


def _iso_value(value: int, *, unit: str, zone: bool) -> dict[str, Any]:
    return {"S": _iso(value, unit, zone)}


def _timestamps(unit: str) -> st.SearchStrategy[int]:
    low = -62135596800 * _UNITS[unit]  # 0001-01-01
    high = 253402300799 * _UNITS[unit]  # 9999-12-31T23:59:59
    if unit == "ns":  # int64 nanoseconds reach 1677-09-21 .. 2262-04-11
        low, high = -(2**63) + 1, 2**63 - 1
    return st.integers(low, high)


def _in_range(value: float) -> bool:
    """Within DynamoDB's numbers: zero, or a magnitude from 1E-130 to below 1E+126."""
    return value == 0 or 1e-130 <= abs(value) < 1e126


def _number(text: str) -> Decimal:
    return Decimal(text)


Oracle = Callable[[Any], dict[str, Any]]
# (Arrow type, values, what DynamoDB must hold) -- N is compared as a number, not as text.
CASES: list[tuple[str, pa.DataType, st.SearchStrategy[Any], Oracle]] = [
    ("int64", pa.int64(), st.integers(-(2**63), 2**63 - 1), lambda v: {"N": Decimal(v)}),
    ("uint64", pa.uint64(), st.integers(0, 2**64 - 1), lambda v: {"N": Decimal(v)}),
    ("int8", pa.int8(), st.integers(-128, 127), lambda v: {"N": Decimal(v)}),
    (
        "double",
        pa.float64(),
        st.floats(allow_nan=False, allow_infinity=False).filter(_in_range),
        lambda v: {"N": v},
    ),
    (
        "float",
        pa.float32(),
        st.floats(width=32, allow_nan=False, allow_infinity=False),
        lambda v: {"N32": v},
    ),
    (
        "decimal",
        pa.decimal128(38, 9),
        st.decimals(min_value=Decimal("-" + "9" * 29), max_value=Decimal("9" * 29), places=9),
        lambda v: {"N": v},
    ),
    (
        "decimal256",
        pa.decimal256(50, 20),
        st.decimals(min_value=Decimal("-1e18"), max_value=Decimal("1e18"), places=20),
        lambda v: {"N": v},
    ),
    ("string", pa.string(), st.text(), lambda v: {"S": v}),
    ("large_string", pa.large_string(), st.text(), lambda v: {"S": v}),
    ("binary", pa.binary(), st.binary(), lambda v: {"B": v}),
    ("fixed", pa.binary(3), st.binary(min_size=3, max_size=3), lambda v: {"B": v}),
    ("bool", pa.bool_(), st.booleans(), lambda v: {"BOOL": v}),
    (
        "date",
        pa.date32(),
        st.integers(-719162, 2932896),
        lambda v: {"S": (date(1970, 1, 1) + timedelta(days=v)).isoformat().rjust(10, "0")},
    ),
    *[
        (
            f"timestamp_{unit}_{'utc' if zone else 'local'}",
            pa.timestamp(unit, tz="UTC" if zone else None),
            _timestamps(unit),
            partial(_iso_value, unit=unit, zone=zone),
        )
        for unit in _UNITS
        for zone in (True, False)
    ],
    (
        "list",
        pa.list_(pa.int32()),
        st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=4),
        lambda v: {"L": [{"NULL": True} if e is None else {"N": Decimal(e)} for e in v]},
    ),
    (
        "struct",
        pa.struct([("a", pa.string()), ("b", pa.list_(pa.bool_()))]),
        st.fixed_dictionaries(
            {
                "a": st.one_of(st.none(), st.text()),
                "b": st.one_of(st.none(), st.lists(st.booleans(), max_size=3)),
            }
        ),
        lambda v: {
            "M": {
                "a": {"NULL": True} if v["a"] is None else {"S": v["a"]},
                "b": {"NULL": True} if v["b"] is None else {"L": [{"BOOL": e} for e in v["b"]]},
            }
        },
    ),
]


def _same(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """DynamoDB's value `got` holds what `want` says (numbers compared as numbers)."""
    if "N32" in want:  # a float32's text reads back as the same float32
        return "N" in got and struct.unpack("f", struct.pack("f", float(got["N"])))[0] == want["N32"]
    if "N" in want:
        if "N" not in got:
            return False
        if isinstance(want["N"], float):
            return float(got["N"]) == want["N"] and len(Decimal(got["N"]).as_tuple().digits) <= 17
        return _number(got["N"]) == want["N"]
    if "L" in want:
        return "L" in got and len(got["L"]) == len(want["L"]) and all(map(_same, got["L"], want["L"]))
    if "M" in want:
        return (
            "M" in got
            and got["M"].keys() == want["M"].keys()
            and all(_same(got["M"][k], want["M"][k]) for k in want["M"])
        )
    return got == want


@pytest.mark.parametrize(
    ("kind", "values", "oracle"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_values_map_as_the_oracle_says(
    kind: pa.DataType, values: Any, oracle: Oracle, data: st.DataObject
) -> None:
    column = data.draw(st.lists(st.one_of(st.none(), values), min_size=1, max_size=30), label="column")
    group = data.draw(st.integers(1, 30), label="row group size")
    # Given a Parquet file of the column (random row groups), read back batch by batch
    buffer = io.BytesIO()
    pq.write_table(
        pa.table({"id": pa.array(range(len(column)), pa.int64()), "x": pa.array(column, kind)}),
        buffer,
        row_group_size=group,
    )
    file = pq.ParquetFile(io.BytesIO(buffer.getvalue()))
    to_item = make_mapper(parquet_spec({"key": {"pk": "{id}", "sk": "R"}, "attributes": "*"}))
    mapped = [
        to_item(fields) for batch in file.iter_batches(batch_size=group) for fields in batch_fields(batch)
    ]
    # Then each row's item holds the oracle's value (and a null column is no attribute)
    assert len(mapped) == len(column)
    for value, item in zip(column, mapped, strict=True):
        assert isinstance(item, Item), item
        if value is None:
            assert "x" not in item.attributes
        else:
            assert _same(item.attributes["x"], oracle(value)), (value, item.attributes["x"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.floats(), st.floats(width=32)), min_size=1, max_size=20))
def test_a_float_is_a_number_or_a_reject_naming_the_column(values: list[float]) -> None:
    fields = batch_fields(pa.record_batch({"id": range(len(values)), "x": pa.array(values, pa.float64())}))
    to_item = make_mapper(parquet_spec({"key": {"pk": "{id}", "sk": "R"}, "attributes": "*"}))
    for value, row in zip(values, fields, strict=True):
        result = to_item(row)
        if math.isfinite(value) and _in_range(value):
            assert isinstance(result, Item) and float(result.attributes["x"]["N"]) == value
        else:
            assert (
                isinstance(result, Reject) and result.code == "bad_number" and result.reason.startswith("x: ")
            )


@pytest.mark.parametrize("unit", list(_UNITS))
@pytest.mark.parametrize("zone", ["UTC", "America/New_York", None])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_timestamps_as_epoch_seconds_are_exact(unit: str, zone: str | None, data: st.DataObject) -> None:
    values = data.draw(st.lists(_timestamps(unit), min_size=1, max_size=20))
    # Given timestamps (any zone, or none: the wall clock counts as UTC) read back from Parquet
    buffer = io.BytesIO()
    pq.write_table(
        pa.table({"id": range(len(values)), "t": pa.array(values, pa.timestamp(unit, tz=zone))}), buffer
    )
    spec = parquet_spec(
        {
            "key": {"pk": "{id}", "sk": "R"},
            "attributes": {"ttl": {"field": "t", "type": "N", "from": "iso8601"}},
        }
    )
    to_item = make_mapper(spec)
    for value, fields in zip(values, batch_fields(pq.read_table(buffer).to_batches()[0]), strict=True):
        item = to_item(fields)
        # Then N is the stored count of units since 1970, scaled exactly
        assert isinstance(item, Item), item
        assert Decimal(item.attributes["ttl"]["N"]) == Decimal(value) / _UNITS[unit]


_NESTED_TYPES = {
    "list": pa.list_(pa.int32()),
    "large_list": pa.large_list(pa.string()),
    "fixed": pa.list_(pa.int8(), 2),
    "struct": pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))]),
    "map": pa.map_(pa.string(), pa.int16()),
}
_NESTED_VALUES = {
    "list": st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=3),
    "large_list": st.lists(st.one_of(st.none(), st.text(max_size=3)), max_size=3),
    "fixed": st.lists(st.one_of(st.none(), st.integers(-128, 127)), min_size=2, max_size=2),
    "struct": st.fixed_dictionaries(
        {
            "a": st.one_of(st.none(), st.integers(-5, 5)),
            "b": st.one_of(st.none(), st.lists(st.text(max_size=2))),
        }
    ),
    "map": st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.integers(-5, 5)), max_size=3),
}


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_nested_and_dictionary_columns_of_a_sliced_batch_are_the_rows_they_hold(data: st.DataObject) -> None:
    # Given a batch of nested, dictionary-encoded and null columns, sliced anywhere
    size = data.draw(st.integers(1, 12))
    columns = {
        name: [data.draw(st.one_of(st.none(), _NESTED_VALUES[name])) for _ in range(size)]
        for name in _NESTED_TYPES
    }
    arrays = {
        name: pa.array([None if v is None else list(v.items()) for v in values], _NESTED_TYPES[name])
        if name == "map"
        else pa.array(values, _NESTED_TYPES[name])
        for name, values in columns.items()
    }
    words = [data.draw(st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))) for _ in range(size)]
    arrays["words"] = pa.array(words).dictionary_encode()
    arrays["nothing"] = pa.nulls(size)
    start = data.draw(st.integers(0, size - 1))
    length = data.draw(st.integers(0, size - start))
    batch = pa.record_batch(arrays).slice(start, length)
    # Then each row holds what the column was built from
    rows = batch_fields(batch)
    expected = [
        {**{name: values[i] for name, values in columns.items()}, "words": words[i], "nothing": None}
        for i in range(start, start + length)
    ]
    assert rows == expected
