"""Turn one owned line into a record's fields (CSV, JSON Lines, DynamoDB JSON), or a Reject saying why not."""

from __future__ import annotations

import csv
import functools
import json
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import NoReturn

from logic.dynamodb_json import ItemError, parse_item
from logic.spec import JobSpec
from logic.values import Fields, Line, Reject

__all__ = ["Fields", "Reject", "is_skipped", "make_parser"]

_UNBALANCED = "unbalanced quote: a quoted field never closes"


def is_skipped(raw: bytes, spec: JobSpec) -> bool:
    """True for lines that are not records: blank (empty or whitespace only) and comment lines.

    Blank means ASCII whitespace only, so with a tab delimiter a line of nothing but tabs is blank.
    """
    if not raw or raw.isspace():
        return True
    comment = spec.csv.comment if spec.csv is not None else None
    return comment is not None and raw.startswith(comment.encode())


def make_parser(spec: JobSpec, header: Sequence[str] | None) -> Callable[[Line], Fields | Reject]:
    """A per-line parser for the spec's format.

    CSV fields are named by `header` (the object's header line), or by `csv.columns` when the
    spec has no header line and `header` is None. JSON Lines and DynamoDB JSON ignore `header`;
    a DynamoDB JSON record's fields are the item's attributes in low-level form (an ItemFields).
    """
    if spec.format == "jsonl":
        return _jsonl_parser()
    if spec.format == "dynamodb-json":
        return _dynamodb_json_parser
    if spec.csv is None:
        raise ValueError("a csv spec has csv options")
    columns = header if header is not None else spec.csv.columns
    if columns is None:
        raise ValueError("CSV with a header line needs the header read at planning time")
    return _csv_parser(tuple(columns), spec.csv.delimiter)


@functools.lru_cache(maxsize=8)
def _well_quoted(delimiter: str) -> re.Pattern[str]:
    """A whole line of fields, each unquoted (no quote in it) or quoted with "" as the escape."""
    d = re.escape(delimiter)
    field = f'(?:"(?:[^"]|"")*"|[^"{d}]*)'
    return re.compile(f"{field}(?:{d}{field})*")


def split_csv_line(text: str, delimiter: str) -> list[str] | Reject:
    """Split one CSV record; quoted fields follow RFC 4180 (they may hold newlines: the record's
    lines are grouped by logic/csvrecords.py, so an odd quote count is a header's or a cut record's)."""
    if '"' not in text:
        # The common case: no quoting, so a plain split is exactly what csv would return.
        return text.split(delimiter)
    if not _well_quoted(delimiter).fullmatch(text):
        # csv would accept a stray quote inside an unquoted field (`1AA",51.5`): a malformed
        # record must not become an item.
        if text.count('"') % 2:
            return Reject("unbalanced_quote", _UNBALANCED)
        return Reject("bad_quote", "malformed quoting: a quote inside an unquoted field")
    try:
        return next(csv.reader((text,), delimiter=delimiter, strict=True))
    except csv.Error as error:
        if "unexpected end of data" in str(error):
            return Reject("unbalanced_quote", _UNBALANCED)
        return Reject("bad_quote", f"malformed quoting: {error}")


def _csv_parser(columns: tuple[str, ...], delimiter: str) -> Callable[[Line], Fields | Reject]:
    count = len(columns)

    def parse(line: Line) -> Fields | Reject:
        try:
            text = line.raw.decode("utf-8")
        except UnicodeDecodeError as error:
            return Reject("invalid_utf8", f"invalid UTF-8 at byte {line.offset + error.start}")
        if '"' not in text:
            values = text.split(delimiter)
        else:
            split = split_csv_line(text, delimiter)
            if isinstance(split, Reject):
                return split
            values = split
        if len(values) != count:
            return Reject("column_count", f"expected {count} columns, got {len(values)}")
        return dict(zip(columns, values, strict=True))

    return parse


def _no_constants(name: str) -> NoReturn:
    # NaN and Infinity are not JSON and have no DynamoDB number form.
    raise ValueError(f"{name} is not valid JSON")


def _jsonl_parser() -> Callable[[Line], Fields | Reject]:
    # Decimal for every number (integers too) so values reach DynamoDB's N type exactly.
    decode = json.JSONDecoder(parse_float=Decimal, parse_int=Decimal, parse_constant=_no_constants).decode

    def parse(line: Line) -> Fields | Reject:
        try:
            text = line.raw.decode("utf-8")
        except UnicodeDecodeError as error:
            return Reject("invalid_utf8", f"invalid UTF-8 at byte {line.offset + error.start}")
        try:
            value = decode(text)
        except json.JSONDecodeError as error:
            return Reject("invalid_json", f"invalid JSON: {error.msg} at column {error.colno}")
        except (ValueError, RecursionError) as error:
            return Reject("invalid_json", f"invalid JSON: {error}")
        if type(value) is not dict:
            return Reject("not_an_object", f"expected a JSON object, got {_json_kind(value)}")
        return value

    return parse


def _dynamodb_json_parser(line: Line) -> Fields | Reject:
    try:
        return parse_item(line.raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        return Reject("invalid_utf8", f"invalid UTF-8 at byte {line.offset + error.start}")
    except ItemError as error:
        return Reject(error.code, error.reason)


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Decimal):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
