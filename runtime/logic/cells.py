"""Convert one field's value (a CSV cell's text, or a JSON Lines value) to a typed DynamoDB value.

Each converter takes the value and the attribute's name and returns `(value, size)` in
DynamoDB's low-level form with its size as logic/mapping.py counts it, `None` for an empty
value (the mapper then leaves an optional attribute out), or raises CellError naming the
attribute and why. Sizes are rounded up where DynamoDB is vague: a set counts like a list
(3 plus, per element, 1 + its size), so an item we accept is never refused for size.

- `B`: base64 text (RFC 4648, padding required, no other characters) -> bytes.
- `SS`/`NS`/`BS`: the cell split on a separator; duplicates are dropped (a set holds each value
  once and DynamoDB refuses a request that repeats one: for NS, 1 and 1.0 are the same number).
  An empty cell is an absent set, never an empty one, which DynamoDB refuses.
- `L`/`M`: JSON text (numbers become N exactly, never through float); from JSON Lines, the
  value itself when it already is a list or an object.
- `NULL`: an empty cell, `null` (any case) or a JSON null -> `{"NULL": true}`.
- `iso8601` (on N): an ISO-8601 timestamp with an offset or `Z` -> epoch seconds, exact
  (every fractional digit kept, nanoseconds too), which is what a TTL attribute needs; a
  LocalTimestamp (a Parquet timestamp not adjusted to UTC) counts its wall clock as UTC.

Values from Parquet (logic/parquet_values.py) add Python types that JSON Lines has not: int and
float (N; a float NaN or infinity is refused, DynamoDB has no such number), bytes (B) and
LocalTimestamp (text, as str).
"""

from __future__ import annotations

import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from logic.spec.dynamodb import SET_SEPARATOR

Converted = tuple[dict[str, Any], int] | None
Converter = Callable[[Any, str], Converted]

NUMBER_LIMITS = {"digits": 38, "min_exponent": -130, "max_exponent": 125}
MAX_DEPTH = 32
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
# Plain decimals that are non-zero and have no leading zeros: at most 38 characters of them are
# within every DynamoDB limit, so they are sent as written, without a Decimal round trip.
_PLAIN_NUMBER = re.compile(r"-?(?:[1-9][0-9]*(?:\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)")


class LocalTimestamp(str):
    """A timestamp's ISO-8601 text without an offset, from a Parquet timestamp not adjusted to UTC
    (INT96 as Spark writes it, TimestampNTZ): as epoch seconds its wall clock is counted as UTC,
    which is how the file stores it; text without an offset from CSV or JSON is refused instead."""

    __slots__ = ()


class CellError(Exception):
    """A field value that cannot become the attribute's type: `code` is the reject's reason code."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason


def utf8_len(text: str) -> int:
    # ASCII is the common case: its length is its UTF-8 length, with no encoding copy.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def shown(value: Any) -> str:
    """A value as an error message shows it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, Decimal, int, float)):
        return repr(str(value))
    if isinstance(value, bytes):
        return f"{len(value)} bytes"
    return "an object" if isinstance(value, Mapping) else "a list"


def decimal_number(number: Decimal, name: str) -> tuple[str, int]:
    """A Decimal as DynamoDB's N text, with its size; CellError outside DynamoDB's limits."""
    if not number.is_finite():
        raise CellError("bad_number", f"{name}: {number} is not a number")
    _, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    count = len(digits)
    if count == 1 and digits[0] == 0:
        return "0", 2  # "0E+999" and "-0" are zero; send plain 0
    if count > NUMBER_LIMITS["digits"]:
        # DynamoDB trims leading and trailing zeros before counting (as_tuple has no leading ones).
        while count > 1 and digits[count - 1] == 0:
            count -= 1
        if count > NUMBER_LIMITS["digits"]:
            raise CellError(
                "bad_number",
                f"{name}: {number} has {count} significant digits; DynamoDB allows {NUMBER_LIMITS['digits']}",
            )
    magnitude = exponent + len(digits) - 1
    if not NUMBER_LIMITS["min_exponent"] <= magnitude <= NUMBER_LIMITS["max_exponent"]:
        raise CellError(
            "bad_number",
            f"{name}: {number} is outside DynamoDB's number range (magnitude 1E-130 to 9.99E+125)",
        )
    return str(number), (count + 1) // 2 + 2


def number_text(text: str, name: str, written: str | None = None) -> tuple[str, int]:
    """A number's text (already stripped) as DynamoDB's N text, with its size; `written` is the
    value as the record had it, for the message."""
    if len(text) <= NUMBER_LIMITS["digits"] and _PLAIN_NUMBER.fullmatch(text) is not None:
        return text, (len(text) + 1) // 2 + 2
    if _NUMBER.fullmatch(text) is None:
        raise CellError("bad_number", f"{name}: {(text if written is None else written)!r} is not a number")
    return decimal_number(Decimal(text), name)


def int_number(value: int, name: str) -> tuple[str, int]:
    """An int as DynamoDB's N text, with its size (Arrow's integers, at most 20 digits, need no check)."""
    text = str(value)
    if len(text) > NUMBER_LIMITS["digits"]:
        return number_text(text, name)
    return text, (len(text) + 1) // 2 + 2


def float_number(value: float, name: str) -> tuple[str, int]:
    """A float as DynamoDB's N text (its shortest round-trip digits), with its size; CellError for
    NaN and the infinities, which no DynamoDB number is."""
    if not math.isfinite(value):
        raise CellError(
            "bad_number", f"{name}: {value} is not a number DynamoDB can store (no NaN or infinity)"
        )
    return number_text(repr(value), name)


def json_value(value: Any, name: str, depth: int = 1) -> tuple[dict[str, Any], int]:
    """A parsed JSON value (numbers as Decimal), or a Parquet one (int, float, bytes too), in
    DynamoDB's low-level form, with its size."""
    kind = type(value)
    if kind is str:
        return {"S": value}, utf8_len(value)
    if kind is Decimal:
        number, size = decimal_number(value, name)
        return {"N": number}, size
    if kind is bool:
        return {"BOOL": value}, 1
    if value is None:
        return {"NULL": True}, 1
    if kind is int:
        number, size = int_number(value, name)
        return {"N": number}, size
    if kind is float:
        number, size = float_number(value, name)
        return {"N": number}, size
    if kind is bytes:
        return {"B": value}, len(value)
    if kind is LocalTimestamp:
        return {"S": str(value)}, len(value)
    if depth >= MAX_DEPTH:
        raise CellError(
            "too_deep", f"{name}: nested more than {MAX_DEPTH} levels deep; DynamoDB allows {MAX_DEPTH}"
        )
    size = 3
    if kind is dict:
        members: dict[str, Any] = {}
        for member, element in value.items():
            if type(member) is not str:
                raise CellError(
                    "bad_key",
                    f"{name}: map key {shown(member)} is not a string (DynamoDB map keys are strings)",
                )
            if not member:
                raise CellError(
                    "empty_name", f"{name}: a member name is empty; DynamoDB map keys need a character"
                )
            members[member], element_size = json_value(element, name, depth + 1)
            size += 1 + utf8_len(member) + element_size
        return {"M": members}, size
    elements = []
    for element in value:
        converted, element_size = json_value(element, name, depth + 1)
        elements.append(converted)
        size += 1 + element_size
    return {"L": elements}, size


def parse_json(text: str, name: str) -> Any:
    """JSON text with exact numbers (Decimal, never float); CellError `bad_json` naming where."""
    try:
        return json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        where = f" at character {error.pos}" if isinstance(error, json.JSONDecodeError) else ""
        raise CellError("bad_json", f"{name}: {shown(text)} is not JSON{where}") from None


def _no_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def _text(value: Any, name: str, what: str) -> str:
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)  # a LocalTimestamp as plain text
    raise CellError(f"bad_{what}", f"{name}: {shown(value)} is not {what} text")


def to_binary(value: Any, name: str) -> Converted:
    if type(value) is bytes:  # from Parquet: an empty binary is a value, as DynamoDB allows
        return {"B": value}, len(value)
    text = _text(value, name, "base64").strip()
    if not text:
        return None
    try:
        data = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise CellError(
            "bad_base64", f"{name}: {shown(text)} is not base64 (RFC 4648, with padding)"
        ) from None
    return {"B": data}, len(data)


def to_null(value: Any, name: str) -> Converted:
    if value is None or (type(value) is str and value.strip().lower() in ("", "null")):
        return {"NULL": True}, 1
    raise CellError("bad_null", f"{name}: {shown(value)} is not empty or null")


def to_document(kind: str) -> Converter:
    """`L` or `M`: JSON text (or, from JSON Lines, the list or object itself)."""
    wanted, noun = (list, "a JSON array") if kind == "L" else (dict, "a JSON object")

    def convert(value: Any, name: str) -> Converted:
        if type(value) is str:
            if not value.strip():
                return None
            value = parse_json(value, name)
        if not isinstance(value, wanted):
            raise CellError("bad_json", f"{name}: {shown(value)} is not {noun}")
        return json_value(value, name)

    return convert


def to_set(kind: str, separator: str) -> Converter:
    """`SS`, `NS` or `BS` from a cell split on `separator` (or, from JSON Lines, a list)."""
    element: Callable[[Any, str], tuple[Any, Any, int]]
    if kind == "SS":
        element = _string_element
    elif kind == "NS":
        element = _number_element
    else:
        element = _binary_element

    def convert(value: Any, name: str) -> Converted:
        if type(value) is str:
            if value == "":
                return None
            parts: list[Any] = value.split(separator)
        elif isinstance(value, list):
            if not value:
                return None
            parts = value
        else:
            raise CellError("bad_set", f"{name}: {shown(value)} is not a {kind} set")
        seen: dict[Any, Any] = {}
        size = 3
        for part in parts:
            identity, sent, part_size = element(part, name)
            if identity not in seen:
                seen[identity] = sent
                size += 1 + part_size
        return {kind: list(seen.values())}, size

    return convert


def _string_element(part: Any, name: str) -> tuple[Any, Any, int]:
    text = _text(part, name, "string")
    return text, text, utf8_len(text)


def _number_element(part: Any, name: str) -> tuple[Any, Any, int]:
    if isinstance(part, Decimal):
        number, size = decimal_number(part, name)
    elif type(part) is int:
        number, size = int_number(part, name)
    elif type(part) is float:
        number, size = float_number(part, name)
    else:
        text = _text(part, name, "number").strip()
        if not text:
            raise CellError("bad_number", f"{name}: an element of the number set is empty")
        number, size = number_text(text, name)
    return Decimal(number), number, size  # 1 and 1.0 are one element, as in DynamoDB


def _binary_element(part: Any, name: str) -> tuple[Any, Any, int]:
    if type(part) is bytes:
        return part, part, len(part)
    converted = to_binary(part, name) if _text(part, name, "base64").strip() else ({"B": b""}, 0)
    assert converted is not None
    data = converted[0]["B"]
    return data, data, len(data)


def epoch_seconds(value: Any, name: str) -> Converted:
    """An ISO-8601 timestamp with an offset (or Z) -> N: seconds since 1970-01-01T00:00:00Z."""
    text = _text(value, name, "timestamp").strip()
    if not text:
        return None
    # datetime keeps microseconds only (Python 3.11 drops further digits): the fraction is read
    # apart, exactly, and the rest without it.
    fraction = _FRACTION.search(text)
    digits = fraction.group(1) if fraction is not None else ""
    whole_text = text if fraction is None else text[: fraction.start()] + text[fraction.end() :]
    try:
        moment = datetime.fromisoformat(whole_text)
    except ValueError:
        raise CellError("bad_timestamp", f"{name}: {shown(text)} is not an ISO-8601 timestamp") from None
    if moment.tzinfo is None and type(value) is LocalTimestamp:
        moment = moment.replace(tzinfo=UTC)
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise CellError("bad_timestamp", f"{name}: {shown(text)} has no UTC offset (end it with Z or +HH:MM)")
    whole = (moment - _EPOCH) // timedelta(seconds=1)
    digits = digits.rstrip("0")
    if digits:  # exact, in plain notation: whole + 0.digits as one scaled integer
        scaled = whole * 10 ** len(digits) + int(digits)
        units, part = divmod(abs(scaled), 10 ** len(digits))
        seconds = f"{'-' if scaled < 0 else ''}{units}.{part:0{len(digits)}d}"
    else:
        seconds = str(whole)
    number, size = number_text(seconds, name)
    return {"N": number}, size


# The fraction of the seconds in an ISO-8601 time (`.` or `,`, then digits), after hh:mm:ss.
_FRACTION = re.compile(r"(?<=[0-9]{2}:[0-9]{2}:[0-9]{2})[.,]([0-9]+)")


def converter(kind: str, *, separator: str = SET_SEPARATOR, source: str | None = None) -> Converter:
    """The converter of one of the non-scalar types this module adds (B, NULL, L, M, sets, iso8601)."""
    if source == "iso8601":
        return epoch_seconds
    if kind == "B":
        return to_binary
    if kind == "NULL":
        return to_null
    if kind in ("L", "M"):
        return to_document(kind)
    if kind in ("SS", "NS", "BS"):
        return to_set(kind, separator)
    raise ValueError(f"no converter for {kind!r}")
