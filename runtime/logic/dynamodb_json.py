"""Read one DynamoDB JSON line (`{"Item": {...}}`, as DynamoDB's export to S3 writes it) strictly.

Each value is an object with exactly one type key: `S` (string), `N` (number as text: exact
decimal text within DynamoDB's limits), `B` (base64, RFC 4648 with padding), `BOOL` (true or
false), `NULL` (true), `SS`/`NS`/`BS` (non-empty lists of such texts, without duplicates: for
NS, 1 and 1.0 are one number), `L` (a list of values), `M` (an object of values). The item comes
back in DynamoDB's low-level form as the writers send it (B and BS as bytes), with each top-level
attribute's size as logic/mapping.py counts it. A bad line is an ItemError naming the attribute
(`address.lines[2]`) and what is wrong with it; the line is then a reject with its `code`.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, NoReturn

from logic.cells import MAX_DEPTH, CellError, number_text, utf8_len

TYPES = ("S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "L", "M")
SETS = ("SS", "NS", "BS")
ITEM_KEY = "Item"
# An export's own files beside its data/ folder: `<prefix>/AWSDynamoDB/<export id>/` holds
# manifest-summary.json, manifest-files.json, their .checksum (.md5) files and an empty _started.
_EXPORT_METADATA = re.compile(r"(?:^|/)AWSDynamoDB/[^/]+/(?:manifest-[^/]*|_started)\Z")


class ItemError(CellError):
    """A DynamoDB JSON line that is not a valid item: `code` is the reject's reason code."""


class ItemFields(dict[str, dict[str, Any]]):
    """A parsed item: attribute name -> value in low-level form; `sizes` holds each one's size."""

    __slots__ = ("sizes",)

    def __init__(self, attributes: dict[str, dict[str, Any]], sizes: dict[str, int]) -> None:
        super().__init__(attributes)
        self.sizes = sizes


def not_data(fmt: str) -> Callable[[str], object] | None:
    """What a prefix listing leaves out for format `fmt` (true of a key to skip): for dynamodb-json,
    an export's metadata files."""
    return _EXPORT_METADATA.search if fmt == "dynamodb-json" else None


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


# DynamoDB JSON writes N as a string: a bare JSON number (a Decimal here) is refused below.
_decode: Callable[[str], Any] = json.JSONDecoder(
    parse_float=Decimal, parse_int=Decimal, parse_constant=_no_constants
).decode


def parse_item(text: str) -> ItemFields:
    """The item of one line's text; raises ItemError (`invalid_json`, `not_an_item`, or a value's code)."""
    try:
        document = _decode(text)
    except json.JSONDecodeError as error:
        raise ItemError("invalid_json", f"invalid JSON: {error.msg} at column {error.colno}") from None
    except (ValueError, RecursionError) as error:
        raise ItemError("invalid_json", f"invalid JSON: {error}") from None
    if type(document) is not dict or ITEM_KEY not in document:
        raise ItemError("not_an_item", 'expected {"Item": {...}} (a DynamoDB JSON item)')
    extra = sorted(name for name in document if name != ITEM_KEY)
    if extra:
        raise ItemError("not_an_item", f'unexpected top-level key {extra[0]!r} next to "Item"')
    item = document[ITEM_KEY]
    if type(item) is not dict:
        raise ItemError("not_an_item", '"Item" must be an object of attributes')
    attributes: dict[str, dict[str, Any]] = {}
    sizes: dict[str, int] = {}
    for name, value in item.items():
        if not name:
            raise ItemError(
                "empty_name", "an attribute name is empty; DynamoDB attribute names need a character"
            )
        attributes[name], size = _value(value, name, 1)
        sizes[name] = size
    return ItemFields(attributes, sizes)


def _value(value: Any, path: str, depth: int) -> tuple[dict[str, Any], int]:
    """One DynamoDB JSON value in low-level form, with its size."""
    if type(value) is not dict or len(value) != 1:
        keys = f" (it has {', '.join(sorted(value))})" if type(value) is dict and value else ""
        raise ItemError(
            "bad_type",
            f"{path}: a value must be an object with exactly one type key of {', '.join(TYPES)}{keys}",
        )
    ((kind, inner),) = value.items()
    if kind == "S":
        return {"S": _text(inner, path, kind)}, utf8_len(inner)
    if kind == "N":
        number, size = _number(inner, path)
        return {"N": number}, size
    if kind == "B":
        data = _binary(inner, path)
        return {"B": data}, len(data)
    if kind == "BOOL":
        if type(inner) is not bool:
            raise ItemError("bad_value", f"{path}: BOOL must be true or false, got {_shown(inner)}")
        return {"BOOL": inner}, 1
    if kind == "NULL":
        if inner is not True:
            raise ItemError("bad_value", f"{path}: NULL must be true, got {_shown(inner)}")
        return {"NULL": True}, 1
    if kind in SETS:
        return _set(kind, inner, path)
    if kind not in ("L", "M"):
        raise ItemError("bad_type", f"{path}: unknown type {kind!r} (one of {', '.join(TYPES)})")
    if depth >= MAX_DEPTH:
        raise ItemError(
            "too_deep", f"{path}: nested more than {MAX_DEPTH} levels deep; DynamoDB allows {MAX_DEPTH}"
        )
    size = 3
    if kind == "L":
        if type(inner) is not list:
            raise ItemError("bad_value", f"{path}: L must be a list, got {_shown(inner)}")
        elements = []
        for index, element in enumerate(inner):
            converted, element_size = _value(element, f"{path}[{index}]", depth + 1)
            elements.append(converted)
            size += 1 + element_size
        return {"L": elements}, size
    if type(inner) is not dict:
        raise ItemError("bad_value", f"{path}: M must be an object, got {_shown(inner)}")
    members: dict[str, Any] = {}
    for member, element in inner.items():
        if not member:
            raise ItemError(
                "empty_name", f"{path}: a member name is empty; DynamoDB map keys need a character"
            )
        members[member], element_size = _value(element, f"{path}.{member}", depth + 1)
        size += 1 + utf8_len(member) + element_size
    return {"M": members}, size


def _set(kind: str, inner: Any, path: str) -> tuple[dict[str, Any], int]:
    if type(inner) is not list:
        raise ItemError("bad_value", f"{path}: {kind} must be a list, got {_shown(inner)}")
    if not inner:
        raise ItemError("empty_set", f"{path}: {kind} is empty; DynamoDB has no empty set")
    elements: list[Any] = []
    seen: set[Any] = set()
    size = 3
    for index, element in enumerate(inner):
        where = f"{path}[{index}]"
        identity: Any
        sent: Any
        if kind == "SS":
            sent = identity = _text(element, where, "an SS element")
            element_size = utf8_len(sent)
        elif kind == "NS":
            sent, element_size = _number(element, where)
            identity = Decimal(sent)  # 1 and 1.0 are one number, as in DynamoDB
        else:
            sent = identity = _binary(element, where)
            element_size = len(sent)
        if identity in seen:
            raise ItemError(
                "duplicate_in_set",
                f"{path}: {kind} element {_shown(element)} repeats an earlier one (a set holds each once)",
            )
        seen.add(identity)
        elements.append(sent)
        size += 1 + element_size
    return {kind: elements}, size


def _text(inner: Any, path: str, what: str) -> str:
    if type(inner) is not str:
        raise ItemError("bad_value", f"{path}: {what} must be a string, got {_shown(inner)}")
    if not inner.isascii():
        try:
            inner.encode("utf-8")
        except UnicodeEncodeError as error:  # a lone surrogate escape ("\\ud800") is no text
            raise ItemError(
                "bad_value", f"{path}: {what} holds a lone surrogate at character {error.start}"
            ) from None
    return inner


def _number(inner: Any, path: str) -> tuple[str, int]:
    """N text as DynamoDB takes it (exact decimal text, no spaces); `bad_number` otherwise."""
    if type(inner) is not str:
        raise ItemError("bad_number", f"{path}: N must be a number in a string, got {_shown(inner)}")
    try:
        return number_text(inner, path)
    except CellError as error:
        raise ItemError(error.code, error.reason) from None


def _binary(inner: Any, path: str) -> bytes:
    text = _text(inner, path, "B")
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise ItemError(
            "bad_base64", f"{path}: {_shown(text)} is not base64 (RFC 4648, with padding)"
        ) from None


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def plain(value: Mapping[str, Any]) -> Any:
    """A low-level value as a JSON Lines field holds it (so templates and typed attributes read it):
    S text, N Decimal, BOOL bool, NULL None, L list, M dict, SS/NS lists, B and BS base64 text."""
    ((kind, inner),) = value.items()
    if kind == "S" or kind == "BOOL":
        return inner
    if kind == "N":
        return Decimal(inner)
    if kind == "NULL":
        return None
    if kind == "B":
        return binascii.b2a_base64(inner, newline=False).decode("ascii")
    if kind == "SS":
        return list(inner)
    if kind == "NS":
        return [Decimal(n) for n in inner]
    if kind == "BS":
        return [binascii.b2a_base64(b, newline=False).decode("ascii") for b in inner]
    if kind == "L":
        return [plain(element) for element in inner]
    return {member: plain(element) for member, element in inner.items()}
