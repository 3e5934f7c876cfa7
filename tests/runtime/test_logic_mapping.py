"""Fields to DynamoDB items: templates, typed attributes, "*", JSON types, limits and rejects."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typed_support import TYPED_ATTRIBUTES

from logic.mapping import MAX_ITEM_BYTES, Item, Reject, make_mapper
from logic.spec.parse import parse_spec

pytestmark = pytest.mark.runtime

TABLE_KEY = {"pk": "S", "sk": "S"}


def mapper(
    attributes: Any, *, key: dict[str, str] | None = None, fmt: str = "csv", table_key: Any = None
) -> Any:
    raw: dict[str, Any] = {
        "source": "s3://bucket/in",
        "format": fmt,
        "dynamodb": {"key": key or {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"}, "attributes": attributes},
        "jobId": "j",
    }
    return make_mapper(parse_spec(raw, table_key=table_key or TABLE_KEY))


def reject(result: Any) -> tuple[str, str]:
    assert isinstance(result, Reject), result
    return result.code, result.reason


POSTCODE_ATTRIBUTES = {
    "latitude": {"field": "latitude", "type": "N"},
    "longitude": {"field": "longitude", "type": "N"},
    "label": "{postcode} ({latitude})",
}


def test_the_readme_example() -> None:
    item = mapper(POSTCODE_ATTRIBUTES)(
        {"postcode": "AB1 0AA", "latitude": "57.101474", "longitude": " -2.242851"}
    )
    assert isinstance(item, Item)
    assert item.key == ("POSTCODE#AB1 0AA", "LOCATION")
    assert item.attributes == {
        "pk": {"S": "POSTCODE#AB1 0AA"},
        "sk": {"S": "LOCATION"},
        "latitude": {"N": "57.101474"},
        "longitude": {"N": "-2.242851"},
        "label": {"S": "AB1 0AA (57.101474)"},
    }
    assert 0 < item.size < 200


def test_literal_braces_in_templates() -> None:
    item = mapper({"t": "{{{postcode}}}"}, key={"pk": "{{x}}", "sk": "{postcode}#{{y}}"})({"postcode": "P"})
    assert item.attributes == {"pk": {"S": "{x}"}, "sk": {"S": "P#{y}"}, "t": {"S": "{P}"}}


@pytest.mark.parametrize(
    ("fields", "code", "reason"),
    [
        ({"latitude": "1", "longitude": "2"}, "missing_field", "missing field 'postcode'"),
        ({"postcode": "P", "longitude": "2"}, "missing_field", "missing field 'latitude'"),
        (
            {"postcode": "P", "latitude": "abc", "longitude": "2"},
            "bad_number",
            "latitude: 'abc' is not a number",
        ),
        ({"postcode": "P", "latitude": "", "longitude": "2"}, "empty_value", "latitude: empty value"),
        ({"postcode": "P", "latitude": "1_000", "longitude": "2"}, "bad_number", "is not a number"),
        ({"postcode": "P", "latitude": "nan", "longitude": "2"}, "bad_number", "is not a number"),
        (
            {"postcode": "P", "latitude": "1e126", "longitude": "2"},
            "bad_number",
            "outside DynamoDB's number range",
        ),
        (
            {"postcode": "P", "latitude": "1e-131", "longitude": "2"},
            "bad_number",
            "outside DynamoDB's number range",
        ),
        ({"postcode": "P", "latitude": "1" * 39, "longitude": "2"}, "bad_number", "39 significant digits"),
    ],
)
def test_rejects(fields: dict[str, str], code: str, reason: str) -> None:
    found_code, found_reason = reject(mapper(POSTCODE_ATTRIBUTES)(fields))
    assert found_code == code
    assert reason in found_reason


def test_empty_key() -> None:
    assert reject(mapper({}, key={"pk": "{postcode}", "sk": "X"})({"postcode": ""}))[0] == "empty_key"
    assert (
        reject(mapper({}, key={"pk": "X", "sk": "{a}{b}"}, fmt="jsonl")({"a": "", "b": ""}))[0] == "empty_key"
    )


def test_a_key_with_an_empty_field_is_empty_even_with_literals_around_it() -> None:
    assert reject(mapper(POSTCODE_ATTRIBUTES)({"postcode": "", "latitude": "1", "longitude": "2"})) == (
        "empty_key",
        "key attribute pk is empty: field 'postcode' has no value",
    )


def test_key_size_limits() -> None:
    to_item = mapper({}, key={"pk": "{a}", "sk": "{b}"})
    assert isinstance(to_item({"a": "p" * 2048, "b": "s" * 1024}), Item)
    assert reject(to_item({"a": "p" * 2049, "b": "s"}))[0] == "key_too_large"
    code, reason = reject(to_item({"a": "p", "b": "é" * 513}))
    assert (code, reason) == ("key_too_large", "key attribute sk is 1026 bytes; DynamoDB allows 1024")


def test_number_keys_compare_as_numbers() -> None:
    to_item = mapper({}, key={"id": "{id}"}, table_key={"id": "N"})
    one, also_one = to_item({"id": "1"}), to_item({"id": "1.0"})
    assert one.key == also_one.key
    assert one.attributes == {"id": {"N": "1"}}
    assert reject(to_item({"id": "one"})) == ("bad_number", "id: 'one' is not a number")


def test_binary_keys_are_the_templates_utf8_bytes() -> None:
    item = mapper({}, key={"id": "K#{id}"}, table_key={"id": "B"})({"id": "é"})
    assert item.attributes == {"id": {"B": "K#é".encode()}}


def test_numbers_within_limits_are_canonical() -> None:
    to_item = mapper({"n": {"field": "n", "type": "N"}}, key={"pk": "X", "sk": "Y"})
    cases = {
        "+1": "1",
        ".5": "0.5",
        "1.50": "1.50",
        "1e5": "1E+5",
        "-0": "0",
        "0e999": "0",
        "1E-130": "1E-130",
        "9" * 38: "9" * 38,
        "1" + "0" * 100: "1" + "0" * 100,  # trailing zeros are not significant
    }
    for text, expected in cases.items():
        assert to_item({"n": text}).attributes["n"] == {"N": expected}, text


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("FALSE", False), ("1", True), ("0", False), ("Yes", True), (" no ", False)],
)
def test_booleans(text: str, expected: bool) -> None:
    to_item = mapper({"b": {"field": "b", "type": "BOOL"}}, key={"pk": "X", "sk": "Y"})
    assert to_item({"b": text}).attributes["b"] == {"BOOL": expected}


def test_bad_booleans() -> None:
    to_item = mapper({"b": {"field": "b", "type": "BOOL"}}, key={"pk": "X", "sk": "Y"})
    assert reject(to_item({"b": "maybe"})) == (
        "bad_bool",
        "b: 'maybe' is not a boolean (true/false, 1/0, yes/no, y/n, t/f)",
    )
    assert reject(to_item({"b": ""}))[0] == "empty_value"


def test_optional_attributes_are_left_out_when_missing_or_empty() -> None:
    to_item = mapper(
        {
            "n": {"field": "n", "type": "N", "optional": True},
            "b": {"field": "b", "type": "BOOL", "optional": True},
            "s": {"field": "s", "optional": True},
            "m": {"field": "missing", "optional": True},
        },
        key={"pk": "X", "sk": "Y"},
    )
    assert to_item({"n": " ", "b": "", "s": ""}).attributes == {"pk": {"S": "X"}, "sk": {"S": "Y"}}


def test_empty_strings_are_kept_in_required_string_attributes() -> None:
    to_item = mapper({"s": {"field": "s"}, "t": "{s}"}, key={"pk": "X", "sk": "Y"})
    assert to_item({"s": ""}).attributes == {
        "pk": {"S": "X"},
        "sk": {"S": "Y"},
        "s": {"S": ""},
        "t": {"S": ""},
    }


def test_star_copies_every_csv_field_as_a_string_including_key_sources() -> None:
    item = mapper("*", key={"pk": "P#{id}", "sk": "{kind}"})({"id": "7", "kind": "A", "n": "1.5", "e": ""})
    assert item.attributes == {
        "pk": {"S": "P#7"},
        "sk": {"S": "A"},
        "id": {"S": "7"},
        "kind": {"S": "A"},
        "n": {"S": "1.5"},
        "e": {"S": ""},
    }


def test_star_leaves_fields_named_like_key_attributes_to_the_key() -> None:
    item = mapper("*", key={"pk": "P#{pk}", "sk": "S"})({"pk": "7", "x": "y"})
    assert item.attributes == {"pk": {"S": "P#7"}, "sk": {"S": "S"}, "x": {"S": "y"}}


def test_star_keeps_json_types() -> None:
    fields = {
        "id": "a",
        "s": "text",
        "n": Decimal("1.25"),
        "i": Decimal(3),
        "t": True,
        "z": None,
        "m": {"inner": [Decimal("1"), "two", False, None, {}]},
        "l": [],
    }
    item = mapper("*", key={"pk": "{id}", "sk": "X"}, fmt="jsonl")(fields)
    assert item.attributes == {
        "pk": {"S": "a"},
        "sk": {"S": "X"},
        "id": {"S": "a"},
        "s": {"S": "text"},
        "n": {"N": "1.25"},
        "i": {"N": "3"},
        "t": {"BOOL": True},
        "z": {"NULL": True},
        "m": {"M": {"inner": {"L": [{"N": "1"}, {"S": "two"}, {"BOOL": False}, {"NULL": True}, {"M": {}}]}}},
        "l": {"L": []},
    }


def test_star_rejects_json_numbers_dynamodb_cannot_hold() -> None:
    to_item = mapper("*", key={"pk": "{id}", "sk": "X"}, fmt="jsonl")
    assert reject(to_item({"id": "a", "big": Decimal("1e200")}))[0] == "bad_number"
    assert reject(to_item({"id": "a", "deep": {"n": [Decimal("1" * 40)]}}))[0] == "bad_number"


def test_star_rejects_nesting_deeper_than_dynamodb_allows() -> None:
    deep: Any = "leaf"
    for _ in range(40):
        deep = [deep]
    assert (
        reject(mapper("*", key={"pk": "{id}", "sk": "X"}, fmt="jsonl")({"id": "a", "d": deep}))[0]
        == "too_deep"
    )


def test_jsonl_typed_attributes_and_templates() -> None:
    to_item = mapper(
        {
            "n": {"field": "n", "type": "N"},
            "ns": {"field": "ns", "type": "N"},
            "b": {"field": "b", "type": "BOOL"},
            "b1": {"field": "b1", "type": "BOOL"},
            "s": {"field": "num", "type": "S"},
            "label": "{num}/{flag}",
        },
        key={"pk": "{id}", "sk": "X"},
        fmt="jsonl",
    )
    item = to_item(
        {
            "id": "a",
            "n": Decimal("2.5"),
            "ns": "7",
            "b": False,
            "b1": Decimal(1),
            "num": Decimal("3"),
            "flag": True,
        }
    )
    assert item.attributes == {
        "pk": {"S": "a"},
        "sk": {"S": "X"},
        "n": {"N": "2.5"},
        "ns": {"N": "7"},
        "b": {"BOOL": False},
        "b1": {"BOOL": True},
        "s": {"S": "3"},
        "label": {"S": "3/true"},
    }


def test_jsonl_values_that_do_not_fit() -> None:
    to_item = mapper(
        {"n": {"field": "n", "type": "N"}, "t": "{obj}"}, key={"pk": "{id}", "sk": "X"}, fmt="jsonl"
    )
    assert reject(to_item({"id": "a", "n": True, "obj": "x"})) == ("bad_number", "n: true is not a number")
    assert reject(to_item({"id": "a", "n": None, "obj": "x"})) == ("missing_field", "field 'n' is null")
    assert reject(to_item({"id": "a", "n": Decimal(1), "obj": {"k": 1}}))[0] == "not_scalar"
    assert reject(to_item({"id": None, "n": Decimal(1), "obj": "x"})) == (
        "missing_field",
        "field 'id' is null",
    )


def test_item_size_limit() -> None:
    to_item = mapper({"blob": "{blob}"}, key={"pk": "X", "sk": "Y"})
    fits = to_item({"blob": "x" * (MAX_ITEM_BYTES - 100)})
    assert isinstance(fits, Item)
    assert fits.size == len("pk") + 1 + len("sk") + 1 + len("blob") + MAX_ITEM_BYTES - 100
    code, reason = reject(to_item({"blob": "é" * (MAX_ITEM_BYTES // 2)}))
    assert code == "item_too_large"
    assert "400 KB" in reason


def test_sizes_count_utf8_bytes_names_and_number_digits() -> None:
    to_item = mapper({"né": "{s}", "n": {"field": "n", "type": "N"}}, key={"pk": "X", "sk": "Y"})
    item = to_item({"s": "€", "n": "12345"})
    # pk:2+1, sk:2+1, né:3+3, n: 1 + (5 + 1) // 2 + 2
    assert item.size == 3 + 3 + 6 + 1 + 5


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.decimals(allow_nan=False, allow_infinity=False).map(str),
        st.decimals(allow_nan=False, allow_infinity=False).map(lambda d: f"{d:f}"),
        st.from_regex(r"\A[+-]?[0-9]{0,45}(\.[0-9]{0,45})?([eE][+-]?[0-9]{1,3})?\Z"),
    )
)
def test_a_number_is_sent_exactly_when_dynamodb_can_hold_it(text: str) -> None:
    result = mapper({"n": {"field": "n", "type": "N"}}, key={"pk": "X", "sk": "Y"})({"n": text})
    if not text:
        assert reject(result)[0] == "empty_value"
        return
    try:
        value = Decimal(text)
    except ArithmeticError:
        assert reject(result)[0] == "bad_number"
        return
    digits = value.as_tuple().digits
    significant = len("".join(map(str, digits)).rstrip("0")) or 1
    fits = value.is_zero() or (significant <= 38 and -130 <= value.adjusted() <= 125)
    if not fits:
        assert reject(result)[0] == "bad_number"
        return
    assert isinstance(result, Item), text
    sent = result.attributes["n"]["N"]
    assert Decimal(sent) == value
    assert sent == text.strip() or sent == str(value) or (value.is_zero() and sent == "0")


TYPED_CSV = {
    "postcode": "AB1",
    "tags": "a;b;a",
    "codes": "1|2.50|1.0",
    "blobs": "AQI=|/w==",
    "data": "aGVsbG8=",
    "nothing": "",
    "list": '[1, "x", {"y": 0.1}]',
    "map": '{"n": 12345678901234567890.123, "t": true, "z": null}',
    "expires": "2026-12-01T00:00:01.5+01:00",
}
TYPED_ITEM = {
    "pk": {"S": "POSTCODE#AB1"},
    "sk": {"S": "LOCATION"},
    "tags": {"SS": ["a", "b"]},
    "codes": {"NS": ["1", "2.50"]},
    "blobs": {"BS": [b"\x01\x02", b"\xff"]},
    "data": {"B": b"hello"},
    "nothing": {"NULL": True},
    "list": {"L": [{"N": "1"}, {"S": "x"}, {"M": {"y": {"N": "0.1"}}}]},
    "map": {"M": {"n": {"N": "12345678901234567890.123"}, "t": {"BOOL": True}, "z": {"NULL": True}}},
    "expires": {"N": "1796079601.5"},  # datetime(...).timestamp()
}


def test_every_type_from_csv_cells() -> None:
    item = mapper(TYPED_ATTRIBUTES)(TYPED_CSV)
    assert isinstance(item, Item)
    assert item.attributes == TYPED_ITEM


def test_every_type_from_json_lines_values() -> None:
    fields = {
        **TYPED_CSV,
        "tags": ["a", "b", "a"],
        "codes": [Decimal(1), Decimal("2.50"), "1.0"],
        "blobs": ["AQI=", "/w=="],
        "nothing": None,
        "list": [Decimal(1), "x", {"y": Decimal("0.1")}],
        "map": {"n": Decimal("12345678901234567890.123"), "t": True, "z": None},
    }
    item = mapper(TYPED_ATTRIBUTES, fmt="jsonl")(fields)
    assert isinstance(item, Item)
    assert item.attributes == TYPED_ITEM


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("codes", "1|x", "bad_number"),
        ("codes", "1||2", "bad_number"),
        ("data", "not base64!", "bad_base64"),
        ("blobs", "AQI=|AQ", "bad_base64"),
        ("list", "[1,", "bad_json"),
        ("list", '{"a": 1}', "bad_json"),
        ("map", "[1]", "bad_json"),
        ("expires", "2026-12-01T00:00:00", "bad_timestamp"),
        ("expires", "yesterday", "bad_timestamp"),
        ("nothing", "nil", "bad_null"),
        ("tags", "", "empty_set"),
        ("codes", "", "empty_set"),
        ("data", "", "empty_value"),
        ("expires", "", "empty_value"),
    ],
)
def test_every_bad_cell_is_a_reject_naming_the_attribute(name: str, value: str, code: str) -> None:
    for fmt in ("csv", "jsonl"):
        got, reason = reject(mapper(TYPED_ATTRIBUTES, fmt=fmt)({**TYPED_CSV, name: value}))
        assert (got, reason.split(":")[0]) == (code, name), (fmt, reason)


def test_json_lines_values_of_the_wrong_kind_are_rejects() -> None:
    to_item = mapper(TYPED_ATTRIBUTES, fmt="jsonl")
    assert reject(to_item({**TYPED_CSV, "tags": {"a": 1}}))[0] == "bad_set"
    assert reject(to_item({**TYPED_CSV, "data": Decimal(1)}))[0] == "bad_base64"
    assert reject(to_item({**TYPED_CSV, "nothing": True}))[0] == "bad_null"


def test_optional_typed_attributes_are_left_out_when_empty() -> None:
    optional = {name: {**value, "optional": True} for name, value in TYPED_ATTRIBUTES.items()}
    item = mapper(optional)({**dict.fromkeys(TYPED_CSV, ""), "postcode": "AB1"})
    assert isinstance(item, Item)
    # NULL's empty cell is its value; every other empty cell leaves the attribute out.
    assert set(item.attributes) == {"pk", "sk", "nothing"}


def test_typed_sizes_count_toward_the_item_limit() -> None:
    small = mapper({"data": {"field": "data", "type": "B"}})({"postcode": "AB1", "data": "AAAA"})
    big = mapper({"data": {"field": "data", "type": "B"}})({"postcode": "AB1", "data": "AAAA" * 1000})
    assert isinstance(small, Item) and isinstance(big, Item)
    assert big.size - small.size == 3 * 999
    huge = "A" * (4 * 140_000)
    assert reject(mapper({"data": {"field": "data", "type": "B"}})({"postcode": "AB1", "data": huge}))[0] == (
        "item_too_large"
    )


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.text(max_size=20)
    | st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**9), max_value=10**9),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@given(st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda n: n not in ("pk", "sk")), JSON_VALUES))
@settings(max_examples=200, deadline=None)
def test_the_mapper_s_item_size_is_never_below_what_the_emulator_counts_as_dynamodb(
    record: dict[str, Any],
) -> None:
    """The mapper rejects an item past 400 KB by its estimate; the emulator (mapload/emulator/
    limits.py, AWS's item-size rules) refuses one past 400 KB by its count: an item the mapper
    lets through must not be one the emulator refuses."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    from mapload.emulator.limits import value_bytes

    item = mapper("*", key={"pk": "K", "sk": "S"}, fmt="jsonl")({**record, "pk": "K", "sk": "S"})
    assert isinstance(item, Item), item
    counted = 0
    for name, typed in item.attributes.items():
        value = DynamoType(typed)
        counted += len(name.encode()) + value_bytes(value.type, value.value)
    assert item.size >= counted


def test_a_dotted_name_reaches_a_member_of_a_json_object_unless_a_field_has_that_name() -> None:
    to_item = mapper(
        {"city": "{address.city}", "zip": {"field": "address.zip.code", "type": "N", "optional": True}},
        key={"pk": "{id}", "sk": "A"},
        fmt="jsonl",
    )
    item = to_item({"id": "1", "address": {"city": "Ely", "zip": {"code": Decimal(7)}}})
    assert isinstance(item, Item) and item.attributes["city"] == {"S": "Ely"}
    assert item.attributes["zip"] == {"N": "7"}
    item = to_item({"id": "1", "address.city": "York", "address": {"city": "Ely"}})
    assert (
        isinstance(item, Item) and item.attributes["city"] == {"S": "York"} and "zip" not in item.attributes
    )
    assert reject(to_item({"id": "1", "address": "Ely"})) == ("missing_field", "missing field 'address.city'")
