"""Cell text to DynamoDB's B, NULL, L, M, SS, NS, BS and ISO-8601 epoch seconds (logic/cells.py)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer
from hypothesis import given, settings
from hypothesis import strategies as st

from logic.cells import CellError, LocalTimestamp, converter

pytestmark = pytest.mark.runtime

PYTHON = TypeDeserializer()


def convert(kind: str, value: Any, **options: Any) -> Any:
    converted = converter(kind, **options)(value, "attr")
    return None if converted is None else converted[0]


def refused(kind: str, value: Any, **options: Any) -> tuple[str, str]:
    with pytest.raises(CellError) as caught:
        converter(kind, **options)(value, "attr")
    assert caught.value.reason.startswith("attr: "), caught.value.reason  # names the attribute
    return caught.value.code, caught.value.reason


@given(st.binary(max_size=300))
def test_base64_cells_become_the_bytes_they_encode(data: bytes) -> None:
    assert convert("B", base64.b64encode(data).decode()) == ({"B": data} if data else None)


@pytest.mark.parametrize("cell", ["abc", "a===", "@@@@", "YWJj\nZA==", "YW Jj"])
def test_text_that_is_not_base64_is_refused(cell: str) -> None:
    assert refused("B", cell)[0] == "bad_base64"


def test_null_from_empty_or_null_and_nothing_else() -> None:
    for cell in ("", "null", "NULL", " Null ", None):
        assert convert("NULL", cell) == {"NULL": True}
    assert refused("NULL", "0") == ("bad_null", "attr: '0' is not empty or null")


def test_string_sets_split_on_the_separator_once_per_value() -> None:
    assert convert("SS", "red|green|red") == {"SS": ["red", "green"]}
    assert convert("SS", "a;b", separator=";") == {"SS": ["a", "b"]}
    assert convert("SS", "a||b") == {"SS": ["a", "", "b"]}  # DynamoDB allows "" inside a set
    assert convert("SS", ["x", "y"]) == {"SS": ["x", "y"]}  # JSON Lines: the list itself


def test_an_empty_cell_is_an_absent_set_never_an_empty_one() -> None:
    for kind in ("SS", "NS", "BS"):
        assert convert(kind, "") is None
        assert convert(kind, []) is None


def test_number_sets_are_exact_and_equal_numbers_are_one_element() -> None:
    assert convert("NS", "1|1.0|2.50|1E+2|100") == {"NS": ["1", "2.50", "1E+2"]}
    assert convert("NS", "12345678901234567890.123456789") == {"NS": ["12345678901234567890.123456789"]}
    assert refused("NS", "1|two")[0] == "bad_number"
    assert refused("NS", "1||2")[0] == "bad_number"
    assert refused("NS", "1E+200")[0] == "bad_number"


def test_binary_sets_decode_each_element() -> None:
    assert convert("BS", "YQ==|Yg==|YQ==") == {"BS": [b"a", b"b"]}
    assert refused("BS", "YQ==|no!e")[0] == "bad_base64"


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.text(max_size=8)
    | st.integers(-(10**30), 10**30)
    | st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-(10**9), max_value=10**9),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def _dumps(value: Any) -> str:
    """JSON text with each Decimal written with its exact digits (json.dumps would use float)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dumps(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


@settings(max_examples=150, deadline=None)
@given(st.lists(_JSON, max_size=5), st.dictionaries(st.text(min_size=1, max_size=5), _JSON, max_size=5))
def test_json_cells_round_trip_exactly(array: list[Any], obj: dict[str, Any]) -> None:
    for kind, value in (("L", array), ("M", obj)):
        assert PYTHON.deserialize(convert(kind, _dumps(value))) == _normal(value)


def _normal(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return {k: _normal(v) for k, v in value.items()}


def test_json_numbers_never_pass_through_float() -> None:
    assert convert("L", "[0.1, 12345678901234567890123456789012345678, 1e-5]") == {
        "L": [{"N": "0.1"}, {"N": "12345678901234567890123456789012345678"}, {"N": "0.00001"}]
    }
    assert convert("M", '{"a": {"b": [true, null, "x"]}}') == {
        "M": {"a": {"M": {"b": {"L": [{"BOOL": True}, {"NULL": True}, {"S": "x"}]}}}}
    }


@pytest.mark.parametrize(
    ("kind", "cell", "code"),
    [
        ("L", "[1, 2", "bad_json"),
        ("L", '{"a": 1}', "bad_json"),
        ("M", "[1]", "bad_json"),
        ("M", '{"a": NaN}', "bad_json"),
        ("L", "[1e999]", "bad_number"),
        ("M", '{"": 1}', "empty_name"),
        ("L", "[" * 40 + "]" * 40, "too_deep"),
    ],
)
def test_bad_json_cells_are_refused_with_the_reason(kind: str, cell: str, code: str) -> None:
    assert refused(kind, cell)[0] == code


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.timezones()))
def test_iso8601_timestamps_become_exact_epoch_seconds(moment: datetime) -> None:
    if moment.utcoffset() is None:
        return
    micros = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    converted = convert("N", moment.isoformat(), source="iso8601")
    assert Decimal(converted["N"]) == Decimal(micros).scaleb(-6)


def test_iso8601_forms_and_refusals() -> None:
    assert convert("N", "2024-01-01T00:00:00Z", source="iso8601") == {"N": "1704067200"}
    assert convert("N", "2024-01-01T01:00:00.5+01:00", source="iso8601") == {"N": "1704067200.5"}
    assert convert(
        "N", datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=-5))).isoformat(), source="iso8601"
    ) == {"N": "1704085200"}
    assert convert("N", "", source="iso8601") is None
    assert refused("N", "2024-01-01T00:00:00", source="iso8601")[0] == "bad_timestamp"
    assert refused("N", "yesterday", source="iso8601")[0] == "bad_timestamp"


def test_iso8601_keeps_every_fractional_digit() -> None:
    # Python's datetime keeps microseconds only: nanoseconds (Parquet's, Java's) were dropped.
    assert convert("N", "2026-01-01T00:00:00.123456789Z", source="iso8601") == {"N": "1767225600.123456789"}
    assert convert("N", "1969-12-31T23:59:59.999999999Z", source="iso8601") == {"N": "-0.000000001"}
    assert convert("N", "1970-01-01T01:00:00,000000001+01:00", source="iso8601") == {"N": "0.000000001"}


def test_a_local_timestamp_counts_its_wall_clock_as_utc() -> None:
    # Parquet's timestamps without UTC adjustment (Spark's INT96); the same text from CSV is refused.
    assert convert("N", LocalTimestamp("1970-01-01T00:00:01.5"), source="iso8601") == {"N": "1.5"}
    assert refused("N", "1970-01-01T00:00:01.5", source="iso8601")[0] == "bad_timestamp"
