"""Turn one owned line into a record's fields (CSV, JSON Lines, DynamoDB JSON), or a Reject saying why not."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import NoReturn

from logic.dynamodb_json import ItemError, parse_item
from logic.spec.checks import required_fields
from logic.spec.inputs import JobSpec
from logic.values import Fields, Line, Reject

__all__ = ["Fields", "Reject", "allow_fields_of", "is_skipped", "make_parser"]

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
    allow_fields_of(spec.csv.max_record_bytes)
    options = spec.csv
    required = required_fields(spec)
    if not options.null_values and not options.skip_initial_space:
        return _csv_parser(tuple(columns), options.delimiter, required)
    nulls = frozenset(options.null_values)
    return _csv_cells_parser(tuple(columns), options.delimiter, required, nulls, options.skip_initial_space)


def split_csv_line(text: str, delimiter: str, skip_initial_space: bool = False) -> list[str] | Reject:
    """Split one CSV record as `csv.reader(strict=True)` does (its lines are grouped by
    logic/csvrecords.py under the same grammar): a quote opens a quoted field only at the start of
    a field, elsewhere it is data; text after a closing quote is `bad_quote`. With
    `skip_initial_space` (csv.skipInitialSpace) as csv.reader's skipinitialspace: the spaces that
    begin a field are not part of it (and a quote after them opens a quoted field)."""
    if '"' not in text:
        # The common case: no quoting, so a plain split is exactly what csv would return.
        if skip_initial_space:
            return [value.lstrip(" ") for value in text.split(delimiter)]
        return text.split(delimiter)
    try:
        return next(
            csv.reader((text,), delimiter=delimiter, strict=True, skipinitialspace=skip_initial_space)
        )
    except csv.Error as error:
        message = str(error)
        if "unexpected end of data" in message:
            return Reject("unbalanced_quote", _UNBALANCED)
        if "field limit" in message:
            return Reject(
                "record_too_large", f"a quoted field is longer than {csv.field_size_limit()} characters"
            )
        return Reject("bad_quote", f"malformed quoting: {message}")


def allow_fields_of(size: int) -> None:
    """Let csv.reader (here and in logic/opencypher.py) read fields of up to `size` characters, not
    its default 131072: a quoted field may be as long as a record (csv.maxRecordBytes). The limit
    is the csv module's, one per process: it only grows."""
    if csv.field_size_limit() < size:
        csv.field_size_limit(size)


def _short_rows(
    columns: tuple[str, ...], required: frozenset[str] | None
) -> Callable[[list[str]], Fields | Reject]:
    """What a row of fewer fields than `columns` is: its fields, the missing trailing ones absent,
    when no `required` field is among them (only optional attributes and graph elements read
    them, or nothing does); else a `column_count` reject naming the first missing column a
    required reader needs. `required` None: every column is."""
    count = len(columns)
    # For each length a short row may have, the first missing column that is required (or None).
    first_needed: list[str | None] = []
    for length in range(count):
        needed = [name for name in columns[length:] if required is None or name in required]
        first_needed.append(needed[0] if needed else None)

    def short(values: list[str]) -> Fields | Reject:
        needed = first_needed[len(values)]
        if needed is not None:
            return Reject(
                "column_count", f"expected {count} columns, got {len(values)}: column {needed!r} is missing"
            )
        return dict(zip(columns, values, strict=False))

    return short


def _csv_parser(
    columns: tuple[str, ...], delimiter: str, required: frozenset[str] | None = None
) -> Callable[[Line], Fields | Reject]:
    count = len(columns)
    short = _short_rows(columns, required)

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
            if len(values) < count:
                return short(values)
            return Reject("column_count", f"expected {count} columns, got {len(values)}")
        return dict(zip(columns, values, strict=True))

    return parse


def _csv_cells_parser(
    columns: tuple[str, ...],
    delimiter: str,
    required: frozenset[str] | None,
    nulls: frozenset[str],
    skip_initial_space: bool,
) -> Callable[[Line], Fields | Reject]:
    """`_csv_parser` with csv.nullValues (a null cell is a None field: absent for an optional
    attribute, `missing_field` for a required one) and csv.skipInitialSpace; kept apart so that a
    spec without them keeps the plain parser's speed."""
    count = len(columns)
    short = _short_rows(columns, required)

    def parse(line: Line) -> Fields | Reject:
        try:
            text = line.raw.decode("utf-8")
        except UnicodeDecodeError as error:
            return Reject("invalid_utf8", f"invalid UTF-8 at byte {line.offset + error.start}")
        values = split_csv_line(text, delimiter, skip_initial_space)
        if isinstance(values, Reject):
            return values
        if len(values) > count:
            return Reject("column_count", f"expected {count} columns, got {len(values)}")
        fields: Fields | Reject = (
            dict(zip(columns, values, strict=True)) if len(values) == count else short(values)
        )
        if nulls and not isinstance(fields, Reject):
            for name, value in fields.items():
                if value in nulls:
                    fields[name] = None
        return fields

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
