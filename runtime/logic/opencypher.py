"""Neptune's openCypher CSV load format: headers, value rules, rows written and read (stdlib only).

The rules (Neptune "Load format for openCypher data"): RFC 4180 CSV in UTF-8 with a header row;
node files have `:ID` (required) and `:LABEL` (labels separated by `;`), relationship files `:ID`,
`:START_ID`, `:END_ID` and `:TYPE` (one type); a property column is `name:Type`, or `name:Type[]`
for an array (nodes only) whose values are separated by `;` (`\\;` inside a value); type names are
not case sensitive, a `:` in a name is written `\\:`, and an empty cell is no value. Files are
written and read with the csv module only, never by joining strings.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Literal, TextIO

NODE: Literal["node"] = "node"
RELATIONSHIP: Literal["relationship"] = "relationship"
Kind = Literal["node", "relationship"]
NODE_SYSTEM = (":ID", ":LABEL")
RELATIONSHIP_SYSTEM = (":ID", ":START_ID", ":END_ID", ":TYPE")
# The column types Neptune's openCypher loader reads, by their lower-case name.
COLUMN_TYPES: Mapping[str, str] = {
    name.lower(): name
    for name in ("Bool", "Byte", "Short", "Int", "Long", "Float", "Double", "String", "DateTime")
} | {"boolean": "Bool"}
# The input's property types (logic/spec/graph.py PROPERTY_TYPES) as column types: a Date is a DateTime
# column holding the date alone (yyyy-MM-dd is one of the loader's DateTime forms).
INPUT_TYPES: Mapping[str, str] = {
    "String": "String",
    "Int": "Int",
    "Long": "Long",
    "Double": "Double",
    "Float": "Float",
    "Bool": "Bool",
    "Date": "DateTime",
    "DateTime": "DateTime",
}
_RANGES = {"Byte": 8, "Short": 16, "Int": 32, "Long": 64}
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Float and Double include plus and minus Infinity and NaN, but not INF (Neptune's data model page).
_FLOATING = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Infinity|NaN")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_DATETIME = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})(?:T([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.[0-9]{1,9})?)?"
    r"(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)?)?"
)
_UNESCAPED_SEMICOLON = re.compile(r"(?<!\\);")
_UNESCAPED_COLON = re.compile(r"(?<!\\):")
_ID_COLUMN = re.compile(r":(ID|START_ID|END_ID)(?:\(([^()]*)\))?")


class FormatError(ValueError):
    """A header or value that breaks the openCypher CSV rules; the message says which and why."""


@dataclass(frozen=True)
class Column:
    """One header cell: a system column (`system` like ":ID", `name` the id's property or "") or a
    property (`name`, column `type`, `array`)."""

    name: str
    type: str = "String"
    array: bool = False
    system: str | None = None
    id_space: str | None = None

    @property
    def header(self) -> str:
        if self.system is not None:
            space = f"({self.id_space})" if self.id_space is not None else ""
            return f"{self.name.replace(':', chr(92) + ':')}{self.system}{space}"
        return f"{self.name.replace(':', chr(92) + ':')}:{self.type}{'[]' if self.array else ''}"


@dataclass(frozen=True)
class Header:
    kind: Kind
    columns: tuple[Column, ...]

    @property
    def cells(self) -> list[str]:
        return [column.header for column in self.columns]

    @property
    def properties(self) -> tuple[Column, ...]:
        return tuple(column for column in self.columns if column.system is None)

    def checked(self, system: str) -> bool:
        """Whether the edge endpoint check covers this id column: it has no ID space."""
        at = self.position(system)
        return at < 0 or self.columns[at].id_space is None

    def position(self, system: str) -> int:
        """Where the system column (":ID", ":START_ID", ...) sits; -1 when the file has none."""
        systems = [column.system for column in self.columns]
        return systems.index(system) if system in systems else -1


PropertyValue = str | tuple[str, ...]


@dataclass(frozen=True)
class Row:
    """A node (`labels`) or relationship (`start`, `end`, `type`); property values as canonical text
    (a tuple for an array); a property left out has no value."""

    id: str
    labels: tuple[str, ...] = ()
    start: str = ""
    end: str = ""
    type: str = ""
    properties: Mapping[str, PropertyValue] = field(default_factory=dict)


def node_header(properties: Iterable[tuple[str, str]]) -> Header:
    """`:ID`, `:LABEL` and a column per (property name, column type)."""
    return Header(NODE, (*_system(NODE_SYSTEM), *(Column(name, kind) for name, kind in properties)))


def relationship_header(properties: Iterable[tuple[str, str]]) -> Header:
    """`:ID`, `:START_ID`, `:END_ID`, `:TYPE` and a column per (property name, column type)."""
    return Header(
        RELATIONSHIP, (*_system(RELATIONSHIP_SYSTEM), *(Column(name, kind) for name, kind in properties))
    )


def _system(names: Sequence[str]) -> tuple[Column, ...]:
    return tuple(Column("", system=name) for name in names)


def check_value(kind: str, text: str) -> str:
    """The value's text if it is a valid `kind` (a column type); raises FormatError saying why not.
    Empty text is no value: callers leave the property out rather than check it."""
    if kind == "String":
        return text
    if kind in _RANGES:
        bits = _RANGES[kind]
        if not _INTEGER.fullmatch(text) or not -(2 ** (bits - 1)) <= int(text) < 2 ** (bits - 1):
            raise FormatError(f"{_short(text)} is not a {kind} ({bits}-bit integer)")
        return text
    if kind in ("Float", "Double"):
        if not _FLOATING.fullmatch(text):
            raise FormatError(f"{_short(text)} is not a {kind} (a decimal number, Infinity or NaN)")
        return text
    if kind == "Bool":
        if text.lower() not in ("true", "false"):
            raise FormatError(f"{_short(text)} is not a Bool (true or false)")
        return text
    if kind == "DateTime":
        return check_datetime(text)
    raise FormatError(f"unknown column type {kind!r}")


def check_date(text: str) -> str:
    """A yyyy-MM-dd date (the input's Date type); raises FormatError."""
    if _DATE.fullmatch(text) is None or not _real_date(text):
        raise FormatError(f"{_short(text)} is not a Date (yyyy-MM-dd)")
    return text


def check_datetime(text: str) -> str:
    """An ISO 8601 date or date and time the loader reads; raises FormatError."""
    match = _DATETIME.fullmatch(text)
    ok = match is not None and _real_date(match.group(1))
    if ok and match is not None and match.group(2) is not None:
        hour, minute, second = int(match.group(2)), int(match.group(3)), int(match.group(4) or 0)
        ok = hour < 24 and minute < 60 and second < 60
    if not ok:
        raise FormatError(f"{_short(text)} is not a DateTime (ISO 8601, e.g. 2026-12-01T04:05:06Z)")
    return text


def _real_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def join_array(values: Sequence[str]) -> str:
    """An array cell: values separated by `;`, a `;` inside one written `\\;`. Raises FormatError
    for a value no cell can hold exactly (empty, or ending in a backslash, which reads as an escape)."""
    for value in values:
        if not value or value.endswith("\\"):
            raise FormatError(f"{_short(value)} cannot be an array element (empty, or ends with a backslash)")
    return ";".join(value.replace(";", "\\;") for value in values)


def split_array(cell: str) -> tuple[str, ...]:
    return tuple(part.replace("\\;", ";") for part in _UNESCAPED_SEMICOLON.split(cell))


def row_cells(header: Header, row: Row) -> list[str]:
    """The cells of `row` under `header`; raises FormatError for a value the format cannot hold."""
    cells: list[str] = []
    for column in header.columns:
        if column.system == ":ID":
            cells.append(_required(row.id, ":ID"))
        elif column.system == ":LABEL":
            cells.append(join_labels(row.labels))
        elif column.system == ":START_ID":
            cells.append(_required(row.start, ":START_ID"))
        elif column.system == ":END_ID":
            cells.append(_required(row.end, ":END_ID"))
        elif column.system == ":TYPE":
            cells.append(_required(row.type, ":TYPE"))
        else:
            cells.append(_property_cell(column, row.properties.get(column.name)))
    unknown = set(row.properties) - {column.name for column in header.properties}
    if unknown:
        raise FormatError(f"no column for property {sorted(unknown)[0]!r}")
    return cells


def join_labels(labels: Sequence[str]) -> str:
    for label in labels:
        if not label or ";" in label:
            raise FormatError(f"label {_short(label)} is empty or holds ';' (the label separator)")
    return ";".join(labels)


def _required(value: str, name: str) -> str:
    if not value:
        raise FormatError(f"{name} is empty")
    return value


def _property_cell(column: Column, value: PropertyValue | None) -> str:
    if value is None:
        return ""
    if column.array:
        values = (value,) if isinstance(value, str) else value
        return join_array([check_value(column.type, item) for item in values])
    if not isinstance(value, str):
        raise FormatError(f"property {column.name!r} is not an array column")
    if not value:
        raise FormatError(f"property {column.name!r} is empty (an empty cell is no value)")
    return check_value(column.type, value)


class Writer:
    """Rows as RFC 4180 CSV (the csv module's quoting: a field with `,`, `"` or a line break is
    quoted, `"` doubled; lines end CRLF)."""

    def __init__(self, out: TextIO) -> None:
        self._csv = csv.writer(out, lineterminator="\r\n")

    def header(self, header: Header) -> None:
        self._csv.writerow(header.cells)

    def row(self, header: Header, row: Row) -> None:
        self._csv.writerow(row_cells(header, row))


def parse_header(cells: Sequence[str]) -> Header:
    """A header row's columns and file kind; raises FormatError naming the first bad cell."""
    columns: list[Column] = []
    for cell in cells:
        columns.append(_column(cell))
    systems = [column.system for column in columns if column.system is not None]
    kind: Kind = RELATIONSHIP if {":START_ID", ":END_ID", ":TYPE"} & set(systems) else NODE
    allowed = RELATIONSHIP_SYSTEM if kind == RELATIONSHIP else NODE_SYSTEM
    for system in systems:
        if system not in allowed:
            raise FormatError(f"{system} is not a column of a {kind} file")
        if systems.count(system) > 1:
            raise FormatError(f"{system} appears twice (a system column appears once)")
    required = (":ID", ":START_ID", ":END_ID", ":TYPE") if kind == RELATIONSHIP else (":ID",)
    for name in required:
        if name not in systems:
            raise FormatError(f"a {kind} file needs a {name} column")
    names = [column.name for column in columns if column.system is None or column.name]
    for name in names:
        if names.count(name) > 1:
            raise FormatError(f"property {name!r} has two columns")
    if kind == RELATIONSHIP and any(column.array for column in columns):
        raise FormatError(
            "a relationship property cannot be an array (relationship properties are single values)"
        )
    return Header(kind, tuple(columns))


def _column(cell: str) -> Column:
    parts = _UNESCAPED_COLON.split(cell)
    if len(parts) < 2:
        raise FormatError(f"column {_short(cell)} has no ':' (name:Type, or a system column like :ID)")
    name, kind = ":".join(parts[:-1]).replace("\\:", ":"), parts[-1]
    match = _ID_COLUMN.fullmatch(":" + kind)
    if match is not None:
        if name and match.group(1) != "ID":
            raise FormatError(f"column {_short(cell)}: only :ID may be stored as a property")
        return Column(name, system=":" + match.group(1), id_space=match.group(2))
    if kind in ("LABEL", "TYPE"):
        if name:
            raise FormatError(f"column {_short(cell)}: :{kind} takes no name")
        return Column("", system=":" + kind)
    if not name or re.search(r"[\s,]", name):
        raise FormatError(f"column {_short(cell)}: a property name is non-empty, without spaces or commas")
    array = kind.endswith("[]")
    column_type = COLUMN_TYPES.get(kind.removesuffix("[]").lower())
    if column_type is None:
        known = ", ".join(sorted(set(COLUMN_TYPES.values())))
        raise FormatError(
            f"column {_short(cell)}: unknown type {kind!r} (types: {known}, or Type[] for arrays)"
        )
    return Column(name, column_type, array)


def parse_row(header: Header, cells: Sequence[str]) -> Row:
    """One data row under `header`; raises FormatError naming the column and the rule broken."""
    if len(cells) != len(header.columns):
        raise FormatError(f"{len(cells)} cells, the header has {len(header.columns)}")
    values: dict[str, str] = {}
    properties: dict[str, PropertyValue] = {}
    for column, cell in zip(header.columns, cells, strict=True):
        if column.system is not None:
            values[column.system] = cell
            if column.name and cell:  # name:ID also stores the id as a String property
                properties[column.name] = cell
            continue
        if not cell:
            continue
        try:
            if column.array:
                properties[column.name] = tuple(check_value(column.type, part) for part in split_array(cell))
            else:
                properties[column.name] = check_value(column.type, cell)
        except FormatError as error:
            raise FormatError(f"column {column.header}: {error}") from None
    for system in (":ID", ":START_ID", ":END_ID", ":TYPE"):
        if system in values and not values[system]:
            raise FormatError(f"{system} is empty")
    labels = tuple(values[":LABEL"].split(";")) if values.get(":LABEL") else ()
    if any(not label for label in labels):
        raise FormatError(":LABEL holds an empty label")
    return Row(
        id=values[":ID"],
        labels=labels,
        start=values.get(":START_ID", ""),
        end=values.get(":END_ID", ""),
        type=values.get(":TYPE", ""),
        properties=properties,
    )


def parse_line(header: Header, text: str) -> Row:
    """One record of a file as a row (its text may hold line breaks inside quoted fields: the Worker
    reads RFC 4180 records); raises FormatError."""
    try:
        cells = next(csv.reader([text], strict=True))
    except (csv.Error, StopIteration) as error:
        raise FormatError(f"not a CSV line: {error}") from None
    return parse_row(header, cells)


def read(lines: Iterable[str]) -> Iterator[Header | Row]:
    """A whole file's header, then its rows; raises FormatError (with the row number) at the first
    bad row. For tests and the embedded loader: the Worker reads row by row with its own lines."""
    reader = csv.reader(lines, strict=True)
    header: Header | None = None
    for cells in reader:
        if header is None:
            header = parse_header(cells)
            yield header
            continue
        try:
            yield parse_row(header, cells)
        except FormatError as error:
            raise FormatError(f"row {reader.line_num}: {error}") from None
