"""format dynamodb-json: strict parsing of `{"Item": {...}}` lines and their mapping to items."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logic.dynamodb_json import ItemError, ItemFields, not_data, parse_item
from logic.mapping import Item, Reject, make_mapper
from logic.parsing import make_parser
from logic.spec.parse import parse_spec, spec_to_json
from logic.values import Line

pytestmark = pytest.mark.runtime

TABLE_KEY = {"pk": "S", "sk": "N"}


def line(item: dict[str, Any], **top: Any) -> str:
    """An item (low-level form, B as bytes) as DynamoDB's export writes it."""

    def binary(value: object) -> str:
        assert isinstance(value, bytes)
        return base64.b64encode(value).decode()

    return json.dumps({"Item": item, **top}, default=binary)


def spec(dynamodb: dict[str, Any] | None = None, table_key: dict[str, str] | None = None) -> Any:
    raw: dict[str, Any] = {"source": "s3://bucket/data/", "format": "dynamodb-json", "jobId": "j"}
    if dynamodb is not None:
        raw["dynamodb"] = dynamodb
    return parse_spec(raw, table_key=table_key or TABLE_KEY)


def load(text: str, dynamodb: dict[str, Any] | None = None, table_key: dict[str, str] | None = None) -> Any:
    """Parse then map one line, as the Worker does."""
    job = spec(dynamodb, table_key)
    fields = make_parser(job, None)(Line(1, 0, text.encode()))
    return fields if isinstance(fields, Reject) else make_mapper(job)(fields)


EVERY_TYPE: dict[str, Any] = {
    "pk": {"S": "user#1"},
    "sk": {"N": "42"},
    "s": {"S": "héllo"},
    "empty": {"S": ""},
    "n": {"N": "-1250.5"},
    "b": {"B": b"\x00\xff"},
    "yes": {"BOOL": True},
    "none": {"NULL": True},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [b"\x01", b"\x02"]},
    "l": {"L": [{"S": "x"}, {"N": "1"}, {"L": []}, {"B": b"\x03"}]},
    "m": {"M": {"inner": {"M": {"deep": {"SS": ["z"]}}}, "flag": {"BOOL": False}}},
}


# --- parsing ---------------------------------------------------------------------------------


def test_every_type_parses_to_the_low_level_form_the_writers_send() -> None:
    parsed = parse_item(line(EVERY_TYPE))

    assert dict(parsed) == EVERY_TYPE
    assert parsed.sizes["b"] == 2 and parsed.sizes["none"] == 1
    assert parsed.sizes["s"] == len("héllo".encode())


@pytest.mark.parametrize(
    ("text", "code", "named"),
    [
        ("not json", "invalid_json", "invalid JSON"),
        ('{"Item": {"n": {"N": NaN}}}', "invalid_json", "NaN"),
        ('["Item"]', "not_an_item", "Item"),
        ('{"pk": {"S": "a"}}', "not_an_item", "Item"),
        ('{"Item": {}, "Extra": 1}', "not_an_item", "'Extra'"),
        ('{"Item": []}', "not_an_item", "Item"),
        ('{"Item": {"": {"S": "a"}}}', "empty_name", "attribute name is empty"),
        ('{"Item": {"a": {"S": "x", "N": "1"}}}', "bad_type", "a: "),
        ('{"Item": {"a": {}}}', "bad_type", "a: "),
        ('{"Item": {"a": "text"}}', "bad_type", "a: "),
        ('{"Item": {"a": {"STRING": "x"}}}', "bad_type", "'STRING'"),
        ('{"Item": {"a": {"S": 5}}}', "bad_value", "a: S must be a string"),
        ('{"Item": {"a": {"S": "\\ud800"}}}', "bad_value", "a: S holds a lone surrogate"),
        ('{"Item": {"a": {"N": 5}}}', "bad_number", "a: N must be a number in a string"),
        ('{"Item": {"a": {"N": "1,5"}}}', "bad_number", "a: '1,5' is not a number"),
        ('{"Item": {"a": {"N": " 1"}}}', "bad_number", "a: "),
        ('{"Item": {"a": {"N": "1e200"}}}', "bad_number", "a: "),
        ('{"Item": {"a": {"N": "1234567890123456789012345678901234567890"}}}', "bad_number", "38"),
        ('{"Item": {"a": {"B": "AA"}}}', "bad_base64", "a: 'AA' is not base64"),
        ('{"Item": {"a": {"B": "A A="}}}', "bad_base64", "a: "),
        ('{"Item": {"a": {"BOOL": "true"}}}', "bad_value", "a: BOOL must be true or false"),
        ('{"Item": {"a": {"NULL": false}}}', "bad_value", "a: NULL must be true"),
        ('{"Item": {"a": {"SS": []}}}', "empty_set", "a: SS is empty"),
        ('{"Item": {"a": {"SS": "x"}}}', "bad_value", "a: SS must be a list"),
        ('{"Item": {"a": {"SS": ["x", "x"]}}}', "duplicate_in_set", "a: SS element 'x'"),
        ('{"Item": {"a": {"NS": ["1", "1.0"]}}}', "duplicate_in_set", "a: NS element '1.0'"),
        ('{"Item": {"a": {"BS": ["AQ==", "AQ=="]}}}', "duplicate_in_set", "a: BS element"),
        ('{"Item": {"a": {"BS": ["AQ=", "Ag=="]}}}', "bad_base64", "a[0]: "),
        ('{"Item": {"a": {"SS": ["x", 1]}}}', "bad_value", "a[1]: an SS element must be a string"),
        ('{"Item": {"a": {"L": {"S": "x"}}}}', "bad_value", "a: L must be a list"),
        ('{"Item": {"a": {"M": [1]}}}', "bad_value", "a: M must be an object"),
        ('{"Item": {"a": {"L": [{"S": "x"}, {"N": "y"}]}}}', "bad_number", "a[1]: 'y' is not a number"),
        ('{"Item": {"a": {"M": {"b": {"M": {"c": {"X": 1}}}}}}}', "bad_type", "a.b.c: "),
        ('{"Item": {"a": {"M": {"": {"S": "x"}}}}}', "empty_name", "a: a member name is empty"),
    ],
)
def test_a_bad_line_is_a_reject_whose_reason_names_the_attribute(text: str, code: str, named: str) -> None:
    with pytest.raises(ItemError) as raised:
        parse_item(text)

    assert raised.value.code == code
    assert named in raised.value.reason


def test_nesting_deeper_than_dynamodb_allows_is_too_deep() -> None:
    value: dict[str, Any] = {"S": "x"}
    for _ in range(32):
        value = {"L": [value]}

    with pytest.raises(ItemError) as raised:
        parse_item(line({"a": value}))

    assert raised.value.code == "too_deep"


def test_the_worker_parser_turns_invalid_utf8_and_item_errors_into_rejects() -> None:
    parse = make_parser(spec(), None)

    assert parse(Line(1, 10, b'{"Item": {"a": {"S": "\xff"}}}')) == Reject(
        "invalid_utf8", "invalid UTF-8 at byte 32"
    )
    bad = parse(Line(1, 0, b'{"Item": {"a": {"SS": []}}}'))
    assert isinstance(bad, Reject) and bad.code == "empty_set"


# --- round trip ------------------------------------------------------------------------------

_texts = st.text(max_size=8)
_bytes = st.binary(max_size=8)
_numbers = st.builds(
    lambda digits, exponent: str(Decimal(digits).scaleb(exponent)),
    st.integers(-(10**37), 10**37),
    st.integers(-60, 60),
)


def _values(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    scalars = st.one_of(
        _texts.map(lambda v: {"S": v}),
        _numbers.map(lambda v: {"N": v}),
        _bytes.map(lambda v: {"B": v}),
        st.booleans().map(lambda v: {"BOOL": v}),
        st.just({"NULL": True}),
        st.lists(_texts, min_size=1, max_size=4, unique=True).map(lambda v: {"SS": v}),
        st.lists(_numbers, min_size=1, max_size=4, unique_by=Decimal).map(lambda v: {"NS": v}),
        st.lists(_bytes, min_size=1, max_size=4, unique=True).map(lambda v: {"BS": v}),
    )
    if depth == 0:
        return scalars
    inner = _values(depth - 1)
    return st.one_of(
        scalars,
        st.lists(inner, max_size=3).map(lambda v: {"L": v}),
        st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=3).map(lambda v: {"M": v}),
    )


def _exact(value: Any) -> Any:
    """A low-level value with numbers compared as numbers (DynamoDB's N is a number, not text)."""
    ((kind, inner),) = value.items()
    if kind == "N":
        return {kind: Decimal(inner)}
    if kind == "NS":
        return {kind: [Decimal(n) for n in inner]}
    if kind == "L":
        return {kind: [_exact(v) for v in inner]}
    if kind == "M":
        return {kind: {k: _exact(v) for k, v in inner.items()}}
    return value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=6), _values(2), max_size=6))
def test_any_item_of_any_types_survives_a_dynamodb_json_line(item: dict[str, Any]) -> None:
    parsed = parse_item(line(item))

    assert {k: _exact(v) for k, v in parsed.items()} == {k: _exact(v) for k, v in item.items()}
    assert list(parsed) == list(item)


# --- mapping ---------------------------------------------------------------------------------


def test_without_a_dynamodb_section_the_item_is_written_as_it_is() -> None:
    result = load(line(EVERY_TYPE))

    assert isinstance(result, Item), result
    assert result.key == ("user#1", Decimal(42))
    assert result.attributes == EVERY_TYPE


def test_the_implied_target_is_the_key_as_itself_and_every_attribute() -> None:
    implied = spec_to_json(spec())["dynamodb"]

    assert implied == {"key": {"pk": "{pk}", "sk": "{sk}"}, "attributes": "*", "writeMode": "put"}
    assert spec(implied) == spec()


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({"sk": {"N": "1"}}, "key attribute pk (S): the item has no 'pk'"),
        ({"pk": {"N": "1"}, "sk": {"N": "1"}}, "key attribute pk (S): the item's 'pk' is N, not S"),
        ({"pk": {"S": "a"}, "sk": {"S": "1"}}, "key attribute sk (N): the item's 'sk' is S, not N"),
    ],
)
def test_an_item_without_the_tables_key_is_a_key_schema_reject(item: dict[str, Any], reason: str) -> None:
    assert load(line(item)) == Reject("key_schema", reason)


def test_a_binary_key_is_copied_as_bytes_and_an_empty_one_is_refused() -> None:
    binary_key = {"id": "B"}

    written = load(line({"id": {"B": b"\x00\xfe"}}), table_key=binary_key)
    empty = load(line({"id": {"B": b""}}), table_key=binary_key)

    assert isinstance(written, Item) and written.key == (b"\x00\xfe",)
    assert written.attributes == {"id": {"B": b"\x00\xfe"}}
    assert empty == Reject("empty_key", "key attribute id is empty")


def test_templates_read_the_items_top_level_attributes_as_json_lines_fields() -> None:
    item = {
        "user": {"S": "ann"},
        "n": {"N": "7.50"},
        "on": {"BOOL": True},
        "b": {"B": b"\x01\x02"},
        "ns": {"NS": ["3", "1"]},
        "doc": {"M": {"raw": {"B": b"\x09"}, "tags": {"SS": ["t"]}}},
    }
    target = {
        "key": {"pk": "USER#{user}", "sk": "{n}"},
        "attributes": {
            "label": "{user}/{n}/{on}",
            "count": {"field": "n", "type": "S"},
            "blob": {"field": "b", "type": "B"},
            "nums": {"field": "ns", "type": "NS"},
            "doc": {"field": "doc", "type": "M"},
            "gone": {"field": "missing", "type": "S", "optional": True},
        },
    }

    result = load(line(item), target)

    assert isinstance(result, Item), result
    assert result.key == ("USER#ann", Decimal("7.50"))
    assert result.attributes == {
        "pk": {"S": "USER#ann"},
        "sk": {"N": "7.50"},
        "label": {"S": "ann/7.50/true"},
        "count": {"S": "7.50"},
        "blob": {"B": b"\x01\x02"},
        "nums": {"NS": ["3", "1"]},
        "doc": {"M": {"raw": {"B": b"\x09"}, "tags": {"SS": ["t"]}}},  # copied, B and SS kept
    }


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ({"key": {"pk": "U#{missing}", "sk": "1"}}, "missing_field"),
        ({"key": {"pk": "U#{doc}", "sk": "1"}}, "not_scalar"),
        ({"key": {"pk": "{pk}", "sk": "1"}, "attributes": {"x": {"field": "pk", "type": "N"}}}, "bad_number"),
    ],
)
def test_a_template_over_a_value_that_cannot_fill_it_is_rejected(target: dict[str, Any], code: str) -> None:
    result = load(line({"pk": {"S": "a"}, "doc": {"M": {}}}), target)

    assert isinstance(result, Reject) and result.code == code, result


def test_item_sizes_match_the_json_lines_copy_of_the_same_values() -> None:
    # The parser sizes each attribute itself; the "*" copy of JSON Lines is sized by logic/cells.
    document = {"pk": "a", "sk": 5, "s": "ünï", "n": 1.25, "t": True, "z": None, "l": [1, "x", {"k": []}]}
    typed = {
        "pk": {"S": "a"},
        "sk": {"N": "5"},
        "s": {"S": "ünï"},
        "n": {"N": "1.25"},
        "t": {"BOOL": True},
        "z": {"NULL": True},
        "l": {"L": [{"N": "1"}, {"S": "x"}, {"M": {"k": {"L": []}}}]},
    }
    jsonl = parse_spec(
        {
            "source": "s3://bucket/x",
            "format": "jsonl",
            "jobId": "j",
            "dynamodb": {"key": {"pk": "{pk}", "sk": "{sk}"}, "attributes": "*"},
        },
        table_key=TABLE_KEY,
    )
    from_jsonl = make_mapper(jsonl)(make_parser(jsonl, None)(Line(1, 0, json.dumps(document).encode())))

    from_export = load(line(typed))

    assert isinstance(from_jsonl, Item) and isinstance(from_export, Item)
    assert from_export.size == from_jsonl.size
    assert from_export.attributes == from_jsonl.attributes


def test_an_item_over_400_kb_is_refused() -> None:
    result = load(line({"pk": {"S": "a"}, "sk": {"N": "1"}, "big": {"S": "x" * 410_000}}))

    assert isinstance(result, Reject) and result.code == "item_too_large"


def test_parsed_fields_carry_each_attributes_size() -> None:
    parsed = make_parser(spec(), None)(Line(1, 0, line({"pk": {"S": "ab"}}).encode()))

    assert isinstance(parsed, ItemFields) and parsed.sizes == {"pk": 2}


# --- listing an export -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "skipped"),
    [
        ("exports/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-summary.json", True),
        ("exports/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-files.json", True),
        ("exports/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-files.checksum", True),
        ("exports/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-summary.md5", True),
        ("AWSDynamoDB/01234567890123-a1b2c3d4/_started", True),
        ("exports/AWSDynamoDB/01234567890123-a1b2c3d4/data/abc.json.gz", False),
        ("exports/AWSDynamoDB/01234567890123-a1b2c3d4/data/manifest-files.json", False),
        ("exports/manifest-summary.json", False),
        ("mine/AWSDynamoDB_x/1/_started", False),
    ],
)
def test_a_prefix_listing_of_an_export_leaves_out_its_metadata_files(key: str, skipped: bool) -> None:
    skip = not_data("dynamodb-json")

    assert skip is not None and bool(skip(key)) is skipped
    assert not_data("jsonl") is None
