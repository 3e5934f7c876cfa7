"""Map a record's fields to a DynamoDB item in low-level form, or a Reject that says why it cannot be.

Everything that depends only on the spec (templates, attribute converters, limits) is prepared
once in make_mapper; the per-record function only looks fields up and builds the item.

Item size is estimated the way DynamoDB counts it, rounded up where DynamoDB is vague, so an item
we accept is never refused for size: each attribute is its name's UTF-8 length plus its value's
size; S and B are their byte length; N is (significant digits + 1) // 2 + 2 (DynamoDB documents
"about one byte per two significant digits plus one"); BOOL and NULL are 1; M and L are 3 plus,
per element, 1 + (for M) the member name's length + the element's size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from logic import cells
from logic.cells import CellError as _Rejected
from logic.cells import decimal_number as _decimal
from logic.cells import json_value as _json_value
from logic.cells import number_text as _number
from logic.cells import shown as _shown
from logic.cells import utf8_len as _utf8_len
from logic.dynamodb_json import ItemFields, plain
from logic.spec.csv_options import FALSE_WORDS, TRUE_WORDS
from logic.spec.dynamodb import DynamoDbTarget, TypedField
from logic.spec.fields import Template
from logic.spec.inputs import JobSpec
from logic.values import Fields, Item, Reject, field_value

__all__ = ["MAX_ITEM_BYTES", "Item", "Reject", "make_mapper"]

MAX_ITEM_BYTES = 400 * 1024
MAX_KEY_BYTES = (2048, 1024)  # partition key, sort key

_TRUE = frozenset(TRUE_WORDS)
_FALSE = frozenset(FALSE_WORDS)
_MISSING = object()
# Formats whose fields hold typed values (JSON's, or Parquet's: logic/parquet_values.py).
_TYPED_FORMATS: frozenset[str] = frozenset(("jsonl", "parquet"))
_PARQUET: str = "parquet"

_Producer = Callable[[Fields, dict[str, dict[str, Any]]], int]


def make_mapper(spec: JobSpec) -> Callable[[Fields], Item | Reject]:
    """A per-record function: fields -> Item (key attributes included in `attributes`) or Reject."""
    # Parquet's fields are typed values as JSON Lines' are (logic/parquet_values.py).
    jsonl = spec.format in _TYPED_FORMATS
    target = spec.dynamodb
    if target is None:
        raise ValueError("the spec has no dynamodb section (a graph-only job maps no items)")
    if spec.format == "dynamodb-json":
        return _item_mapper(target)
    keys = tuple(
        (
            key.name,
            key.type,
            _renderer(key.template, jsonl, key=key.name),
            MAX_KEY_BYTES[i],
            _utf8_len(key.name),
        )
        for i, key in enumerate(target.key_attributes)
    )
    producers: tuple[_Producer, ...]
    if target.copy_all:
        producers = (_copy_all(frozenset(target.key), jsonl, skip_null=spec.format == _PARQUET),)
    else:
        words = _bool_words(spec)
        producers = tuple(_producer(name, value, jsonl, words) for name, value in target.mapped.items())

    def to_item(fields: Fields) -> Item | Reject:
        attributes: dict[str, dict[str, Any]] = {}
        key: list[Any] = []
        size = 0
        try:
            for name, kind, render, limit, name_len in keys:
                text = render(fields)
                if not text:
                    return Reject("empty_key", f"key attribute {name} is empty")
                attributes[name], value, length = _key_from_text(name, kind, text)
                if length > limit:
                    return _key_too_large(name, length, limit)
                key.append(value)
                size += name_len + length
            for produce in producers:
                size += produce(fields, attributes)
        except _Rejected as problem:
            return Reject(problem.code, problem.reason)
        return _sized_item(key, attributes, size)

    return to_item


def _key_too_large(name: str, length: int, limit: int) -> Reject:
    return Reject("key_too_large", f"key attribute {name} is {length} bytes; DynamoDB allows {limit}")


def _sized_item(key: list[Any], attributes: dict[str, dict[str, Any]], size: int) -> Item | Reject:
    """The item, or `item_too_large` when its estimated size is past DynamoDB's 400 KB."""
    if size > MAX_ITEM_BYTES:
        return Reject(
            "item_too_large", f"item is about {size} bytes; DynamoDB allows {MAX_ITEM_BYTES} (400 KB)"
        )
    return Item(tuple(key), attributes, size)


def _key_from_text(name: str, kind: str, text: str) -> tuple[dict[str, Any], Any, int]:
    """A key attribute of type `kind` from its rendered text: (low-level value, key value, bytes)."""
    if kind == "S":
        return {"S": text}, text, len(text) if text.isascii() else len(text.encode())
    if kind == "N":
        number, length = _number(text.strip(), name, text)
        return {"N": number}, Decimal(number), length  # so 1 and 1.0 are one key, as in DynamoDB
    data = text.encode()
    return {"B": data}, data, len(data)


def _item_mapper(target: DynamoDbTarget) -> Callable[[Fields], Item | Reject]:
    """format dynamodb-json: each record already is an item (an ItemFields of low-level values).

    A key template that is one attribute alone (`{pk}`, as when the input has no `dynamodb.key`)
    copies that attribute, which must be there with the key's type, else `key_schema`. `"*"`
    copies every attribute as it is, and so does a typed attribute of type L or M from a field of
    that type; other templates and typed attributes read each value as a JSON Lines field holds
    it (logic.dynamodb_json.plain: N a Decimal, B base64 text, sets lists, ...).
    """
    keys = tuple(
        (key.name, _item_key(key.name, key.type, key.template), MAX_KEY_BYTES[i], _utf8_len(key.name))
        for i, key in enumerate(target.key_attributes)
    )
    producers = tuple(_item_attribute(name, value) for name, value in target.mapped.items())
    key_names = frozenset(target.key)
    copy_all = target.copy_all
    # The attributes the plain view needs: those that templates and typed attributes read.
    read = frozenset(
        [field for key in target.key.values() if key.literals != ("", "") for field in key.fields]
        + [
            field
            for a in target.mapped.values()
            for field in (a.fields if isinstance(a, Template) else (a.field,))
            if field
        ]
    )

    def to_item(fields: Fields) -> Item | Reject:
        assert isinstance(fields, ItemFields)
        plain_fields = {name: plain(fields[name]) for name in read if name in fields}
        attributes: dict[str, dict[str, Any]] = {}
        key: list[Any] = []
        size = 0
        try:
            for name, fill, limit, name_len in keys:
                attributes[name], value, length = fill(fields, plain_fields)
                if length > limit:
                    return _key_too_large(name, length, limit)
                key.append(value)
                size += name_len + length
            for produce in producers:
                size += produce(fields, plain_fields, attributes)
            if copy_all:
                for name, value in fields.items():
                    if name not in key_names:
                        attributes[name] = value
                        size += _utf8_len(name) + fields.sizes[name]
        except _Rejected as problem:
            return Reject(problem.code, problem.reason)
        return _sized_item(key, attributes, size)

    return to_item


_KeyFill = Callable[[ItemFields, Fields], tuple[dict[str, Any], Any, int]]


def _item_key(name: str, kind: str, template: Template) -> _KeyFill:
    """One key attribute of an exported item: (low-level value, key value, bytes) from the item
    and its plain view; raises the reject (`key_schema`, `empty_key`, ...) naming the attribute."""
    if template.literals != ("", ""):
        render = _renderer(template, True, key=name)

        def rendered(fields: ItemFields, plain_fields: Fields) -> tuple[dict[str, Any], Any, int]:
            text = render(plain_fields)
            if not text:
                raise _Rejected("empty_key", f"key attribute {name} is empty")
            return _key_from_text(name, kind, text)

        return rendered
    alone = template.fields[0]

    def copied(fields: ItemFields, plain_fields: Fields) -> tuple[dict[str, Any], Any, int]:
        found = fields.get(alone)
        if found is None or kind not in found:
            why = (
                f"the item has no {alone!r}"
                if found is None
                else f"the item's {alone!r} is {next(iter(found))}, not {kind}"
            )
            raise _Rejected("key_schema", f"key attribute {name} ({kind}): {why}")
        length = fields.sizes[alone]
        if not length:
            raise _Rejected("empty_key", f"key attribute {name} is empty")
        value = found[kind]
        return found, Decimal(value) if kind == "N" else value, length

    return copied


def _item_attribute(
    name: str, attribute: Template | TypedField
) -> Callable[[ItemFields, Fields, dict[str, dict[str, Any]]], int]:
    """One mapped attribute of an exported item: L or M copied from a field of that type (B and
    sets inside kept), else produced from the plain view as for JSON Lines."""
    produce = _producer(name, attribute, True)
    field, kind = (None, "S") if isinstance(attribute, Template) else (attribute.field, attribute.type)
    name_len = _utf8_len(name)

    def attribute_value(fields: ItemFields, plain_fields: Fields, out: dict[str, dict[str, Any]]) -> int:
        found = fields.get(field) if field is not None and kind in ("L", "M") else None
        if field is not None and found is not None and kind in found:
            out[name] = found
            return name_len + fields.sizes[field]
        return produce(plain_fields, out)

    return attribute_value


def _renderer(template: Template, jsonl: bool, *, key: str | None = None) -> Callable[[Fields], str]:
    """Prepare a template: constants and single-field templates avoid any joining per record.

    For a key attribute (`key` names it) every substituted field must be non-empty: "POSTCODE#"
    from an empty postcode is a broken record, not a key to write.
    """
    literals, names = template.literals, template.fields
    if not names:
        constant = literals[0]
        return lambda fields: constant
    text: Callable[[Fields, str], str] = _json_text if jsonl else _csv_text
    if key is not None:
        text = _non_empty(text, key)
    if len(names) == 1:
        before, only, after = literals[0], names[0], literals[1]
        if not before and not after:
            return lambda fields: text(fields, only)
        return lambda fields: before + text(fields, only) + after
    head = literals[0]
    pairs = tuple(zip(names, literals[1:], strict=True))

    def render(fields: Fields) -> str:
        parts = [head]
        for name, literal in pairs:
            parts.append(text(fields, name))
            parts.append(literal)
        return "".join(parts)

    return render


def _non_empty(text: Callable[[Fields, str], str], key: str) -> Callable[[Fields, str], str]:
    def key_part(fields: Fields, name: str) -> str:
        value = text(fields, name)
        if not value:
            raise _Rejected("empty_key", f"key attribute {key} is empty: field {name!r} has no value")
        return value

    return key_part


def _csv_text(fields: Fields, name: str) -> str:
    value = fields.get(name)
    if value is None:  # absent, or a csv.nullValues cell
        raise _Rejected(
            "missing_field", f"field {name!r} is null" if name in fields else f"missing field {name!r}"
        )
    return str(value)


def _json_text(fields: Fields, name: str) -> str:
    value = field_value(fields, name, _MISSING)
    if type(value) is str:
        return value
    if value is _MISSING or value is None:
        raise _Rejected(
            "missing_field", f"missing field {name!r}" if value is _MISSING else f"field {name!r} is null"
        )
    return _scalar_text(value, name)


def _scalar_text(value: Any, name: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal | int | str):
        return str(value)  # a str subclass (cells.LocalTimestamp) as plain text
    if isinstance(value, float):
        return cells.float_number(value, name)[0]
    kind = "binary" if isinstance(value, bytes) else "an object" if isinstance(value, Mapping) else "a list"
    raise _Rejected("not_scalar", f"field {name!r} is {kind}; only strings, numbers and booleans fit here")


_Words = tuple[frozenset[str], frozenset[str]]


def _bool_words(spec: JobSpec) -> _Words:
    """The words a BOOL attribute reads as true and as false: the defaults and csv.trueValues and
    csv.falseValues (any case), which win over them."""
    if spec.csv is None:
        return _TRUE, _FALSE
    true = frozenset(w.strip().lower() for w in spec.csv.true_values)
    false = frozenset(w.strip().lower() for w in spec.csv.false_values) - true
    # The spec's words win over the defaults (trueValues over falseValues): each word reads one way.
    return (_TRUE - false) | true, (_FALSE - true) | false


def _producer(
    name: str, attribute: Template | TypedField, jsonl: bool, words: _Words = (_TRUE, _FALSE)
) -> _Producer:
    name_len = _utf8_len(name)
    if isinstance(attribute, Template):
        render = _renderer(attribute, jsonl)

        def template_attribute(fields: Fields, out: dict[str, dict[str, Any]]) -> int:
            text = render(fields)
            out[name] = {"S": text}
            return name_len + _utf8_len(text)

        return template_attribute

    field = attribute.field
    optional = attribute.optional
    convert = _converter(attribute, words)
    # A JSON null is a value for NULL (the others reject it, or leave an optional attribute out).
    null_is_value = attribute.type == "NULL"
    empty_code = "empty_set" if attribute.type in ("SS", "NS", "BS") else "empty_value"

    def field_attribute(fields: Fields, out: dict[str, dict[str, Any]]) -> int:
        value = field_value(fields, field, _MISSING)
        if value is _MISSING or (value is None and not null_is_value):
            if optional:
                return 0
            raise _Rejected(
                "missing_field",
                f"missing field {field!r}" if value is _MISSING else f"field {field!r} is null",
            )
        converted = convert(value, name)
        if converted is None:  # empty
            if optional:
                return 0
            if attribute.type == "S":
                out[name] = {"S": ""}  # empty strings are fine in non-key attributes
                return name_len
            raise _Rejected(
                empty_code, f'{name}: empty value (make the attribute "optional" to leave it out)'
            )
        out[name] = converted[0]
        return name_len + converted[1]

    return field_attribute


def _converter(attribute: TypedField, words: _Words = (_TRUE, _FALSE)) -> cells.Converter:
    """S, N and BOOL here; the other types (and N from an ISO-8601 timestamp) in logic/cells.py."""
    if attribute.from_ is None and attribute.type == "BOOL" and words != (_TRUE, _FALSE):
        return _bool_of(*words)
    if attribute.from_ is None and attribute.type in ("S", "N", "BOOL"):
        return {"S": _to_string, "N": _to_number, "BOOL": _to_bool}[attribute.type]
    return cells.converter(attribute.type, separator=attribute.set_separator, source=attribute.from_)


def _to_string(value: Any, name: str) -> tuple[dict[str, Any], int] | None:
    text = value if type(value) is str else _scalar_text(value, name)
    if not text:
        return None
    return {"S": text}, _utf8_len(text)


def _to_number(value: Any, name: str) -> tuple[dict[str, Any], int] | None:
    if type(value) is str:
        text = value.strip()
        if not text:
            return None
        number, size = _number(text, name, value)
    elif isinstance(value, Decimal):
        number, size = _decimal(value, name)
    elif type(value) is int:
        number, size = cells.int_number(value, name)
    elif type(value) is float:
        number, size = cells.float_number(value, name)
    else:
        raise _Rejected("bad_number", f"{name}: {_shown(value)} is not a number")
    return {"N": number}, size


def _bool_of(true: frozenset[str], false: frozenset[str]) -> cells.Converter:
    """A BOOL converter that reads the words csv.trueValues and csv.falseValues add too."""
    return lambda value, name: _to_bool(value, name, true, false)


def _to_bool(
    value: Any, name: str, true: frozenset[str] = _TRUE, false: frozenset[str] = _FALSE
) -> tuple[dict[str, Any], int] | None:
    if isinstance(value, bool):
        return {"BOOL": value}, 1
    text = (
        value.strip().lower()
        if type(value) is str
        else str(value)
        if isinstance(value, Decimal | int)
        else None
    )
    if text == "":
        return None
    if text in true:
        return {"BOOL": True}, 1
    if text in false:
        return {"BOOL": False}, 1
    raise _Rejected(
        "bad_bool", f"{name}: {_shown(value)} is not a boolean (true/false, 1/0, yes/no, y/n, t/f)"
    )


def _copy_all(key_names: frozenset[str], jsonl: bool, *, skip_null: bool = False) -> _Producer:
    """`"attributes": "*"`: every field becomes an attribute; a field named like a key attribute is
    left out because the key template already filled that attribute. With `skip_null` (Parquet,
    where every row has every column) a null column is no attribute, as a member JSON Lines
    leaves out is none; a null inside a list or struct stays NULL."""
    if not jsonl:

        def copy_text(fields: Fields, out: dict[str, dict[str, Any]]) -> int:
            size = 0
            for name, value in fields.items():
                if name in key_names or value is None:  # None: a csv.nullValues cell, no attribute
                    continue
                out[name] = {"S": value}
                size += _utf8_len(name) + _utf8_len(value)
            return size

        return copy_text

    def copy_json(fields: Fields, out: dict[str, dict[str, Any]]) -> int:
        size = 0
        for name, value in fields.items():
            if name in key_names or (value is None and skip_null):
                continue
            if not name:
                raise _Rejected(
                    "empty_name", "a member name is empty; DynamoDB attribute names need a character"
                )
            out[name], value_size = _json_value(value, name, 1)
            size += _utf8_len(name) + value_size
        return size

    return copy_json
