"""Parquet record batches as Fields (Python values the mapping reads), and Plan's check of a schema.

`batch_fields(batch)` converts column by column (Arrow's casts and `to_pylist`, never a Python
dispatch per value where Arrow can do it), then builds each row's dict:

| Arrow type (as pyarrow reads Parquet)            | Python value in Fields                         |
|--------------------------------------------------|------------------------------------------------|
| int8..int64, uint8..uint64                       | int                                            |
| decimal128/256                                   | decimal.Decimal, exact (through Arrow's text)  |
| float64; float32/float16                         | float; a float32 is its shortest text's float |
| string, large_string                             | str                                            |
| binary, large_binary, fixed_size_binary          | bytes                                          |
| bool                                             | bool                                           |
| date32/date64                                    | str `YYYY-MM-DD`                               |
| time32/time64                                    | str `HH:MM:SS[.fff]`, the unit's digits        |
| timestamp with a time zone (isAdjustedToUTC)     | str `YYYY-MM-DDTHH:MM:SS[.fff]Z`, in UTC       |
| timestamp without (INT96, TimestampNTZ)          | cells.LocalTimestamp: the same text, no `Z`    |
| list, large_list, fixed_size_list                | list                                           |
| struct                                           | dict                                           |
| map                                              | dict (keys as Arrow gives them)                |
| null                                             | None                                           |

A timestamp's fraction has its unit's digits (ms 3, us 6, ns 9; none for s), so every value of
a column has one width and S values sort as the instants do.

`check_schema(schema, spec, object_key)` is Plan's check of one object's columns against the
mapping: a column the mapping names must be there, and an attribute's (or property's) declared
type must be one the column's type can give; it raises InputValidationError naming the object,
the spec's field and the column. A name is resolved as the mapping reads it
(logic.values.field_value: the column of that name, else a dotted path into struct columns);
which top-level columns a job reads is logic.parquet.columns_read.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from itertools import pairwise
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.types as pat  # type: ignore[import-untyped]

from logic.cells import LocalTimestamp
from logic.errors import InputValidationError
from logic.spec.checks import graph_references, references
from logic.spec.dynamodb import TypedField
from logic.spec.fields import Template, shown_name
from logic.spec.graph import Edge, TypedProperty, Vertex
from logic.spec.inputs import JobSpec

__all__ = ["batch_fields", "check_schema", "column_values"]


def batch_fields(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """Each row of `batch` as Fields: column name -> Python value (see the module's table)."""
    names = batch.schema.names
    columns = [column_values(column) for column in batch.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def column_values(array: pa.Array) -> list[Any]:
    """One column's values as Python values, converted column-wise."""
    kind = array.type
    if pat.is_dictionary(kind):
        dictionary = column_values(array.dictionary)
        return [None if index is None else dictionary[index] for index in array.indices.to_pylist()]
    convert = _SCALAR.get(kind.id)
    if convert is not None:
        return convert(array)
    if pat.is_list(kind) or pat.is_large_list(kind) or pat.is_map(kind):
        return _lists(array)
    if pat.is_fixed_size_list(kind):
        size = kind.list_size
        values = column_values(array.values.slice(array.offset * size, len(array) * size))
        return _masked(array, [values[i * size : (i + 1) * size] for i in range(len(array))])
    if pat.is_struct(kind):
        names = [kind.field(i).name for i in range(kind.num_fields)]
        children = [column_values(child) for child in array.flatten()]
        return _masked(array, [dict(zip(names, row, strict=True)) for row in zip(*children, strict=True)])
    raise TypeError(f"no DynamoDB or graph value for an Arrow {kind} column")


def _masked(array: pa.Array, values: list[Any]) -> list[Any]:
    """`values` with None where `array` is null."""
    if not array.null_count:
        return values
    return [
        value if valid else None for value, valid in zip(values, array.is_valid().to_pylist(), strict=True)
    ]


def _lists(array: pa.Array) -> list[Any]:
    offsets = array.offsets.to_pylist()
    start = offsets[0]
    if pat.is_map(array.type):
        keys = column_values(array.keys.slice(start, offsets[-1] - start))
        items = column_values(array.items.slice(start, offsets[-1] - start))
        out: list[Any] = [
            dict(zip(keys[begin - start : end - start], items[begin - start : end - start], strict=True))
            for begin, end in pairwise(offsets)
        ]
    else:
        values = column_values(array.values.slice(start, offsets[-1] - start))
        out = [values[begin - start : end - start] for begin, end in pairwise(offsets)]
    return _masked(array, out)


def _plain(array: pa.Array) -> list[Any]:
    return array.to_pylist()  # type: ignore[no-any-return]


def _text(array: pa.Array) -> list[Any]:
    return array.cast(pa.string()).to_pylist()  # type: ignore[no-any-return]


def _short_float(array: pa.Array) -> list[Any]:
    # A float32 0.1 is 0.100000001490116...: its shortest text ("0.1") is what the writer meant.
    if pat.is_float16(array.type):
        array = array.cast(pa.float32())
    return array.cast(pa.string()).cast(pa.float64()).to_pylist()  # type: ignore[no-any-return]


def _decimal(array: pa.Array) -> list[Any]:
    return [None if text is None else Decimal(text) for text in array.cast(pa.string()).to_pylist()]


def _timestamp(array: pa.Array) -> list[Any]:
    # The stored value is UTC when the type has a zone: read as naive it is UTC's wall clock (a
    # zone's rules would cost microseconds a value). Arrow's text has the unit's fraction digits.
    kind = array.type
    wall = array.view(pa.timestamp(kind.unit)) if kind.tz is not None else array
    texts = pc.replace_substring(wall.cast(pa.string()), " ", "T", max_replacements=1)
    if kind.tz is None:
        return [None if text is None else LocalTimestamp(text) for text in texts.to_pylist()]
    return pc.binary_join_element_wise(texts, "Z", "").to_pylist()  # type: ignore[no-any-return]


def _nulls(array: pa.Array) -> list[Any]:
    return [None] * len(array)


_SCALAR: dict[int, Callable[[pa.Array], list[Any]]] = {
    **{
        kind.id: _plain
        for kind in (
            pa.bool_(),
            pa.int8(),
            pa.int16(),
            pa.int32(),
            pa.int64(),
            pa.uint8(),
            pa.uint16(),
            pa.uint32(),
            pa.uint64(),
            pa.float64(),
            pa.string(),
            pa.large_string(),
            pa.string_view(),
            pa.binary(),
            pa.large_binary(),
            pa.binary_view(),
            pa.binary(1),
        )
    },
    pa.float32().id: _short_float,
    pa.float16().id: _short_float,
    pa.decimal128(1).id: _decimal,
    pa.decimal256(1).id: _decimal,
    pa.date32().id: _text,
    pa.date64().id: _text,
    pa.time32("s").id: _text,
    pa.time64("us").id: _text,
    pa.timestamp("s").id: _timestamp,
    pa.null().id: _nulls,
}


# --- Plan's check of a schema ---------------------------------------------------------------------

_Check = Callable[[pa.DataType], bool]


def _scalar(kind: pa.DataType) -> bool:
    """A value a template renders as text: not binary, not nested, and convertible at all."""
    kind = _plain_type(kind)
    return kind.id in _SCALAR and not _binary(kind)


def _binary(kind: pa.DataType) -> bool:
    kind = _plain_type(kind)
    return bool(
        pat.is_binary(kind)
        or pat.is_large_binary(kind)
        or pat.is_fixed_size_binary(kind)
        or pat.is_binary_view(kind)
    )


def _string(kind: pa.DataType) -> bool:
    kind = _plain_type(kind)
    return bool(pat.is_string(kind) or pat.is_large_string(kind) or pat.is_string_view(kind))


def _integer(kind: pa.DataType) -> bool:
    return bool(pat.is_integer(_plain_type(kind)))


def _number(kind: pa.DataType) -> bool:
    kind = _plain_type(kind)
    return bool(pat.is_integer(kind) or pat.is_floating(kind) or pat.is_decimal(kind))


def _temporal(kind: pa.DataType) -> bool:
    kind = _plain_type(kind)
    return bool(pat.is_date(kind) or pat.is_time(kind) or pat.is_timestamp(kind))


def _list(kind: pa.DataType) -> bool:
    kind = _plain_type(kind)
    return bool(pat.is_list(kind) or pat.is_large_list(kind) or pat.is_fixed_size_list(kind))


def _elements(check: _Check) -> _Check:
    return lambda kind: _list(kind) and check(_plain_type(kind).value_type)


def _plain_type(kind: pa.DataType) -> pa.DataType:
    return kind.value_type if pat.is_dictionary(kind) else kind


# Which column types each attribute type can come from (a string column: as CSV text is read).
_ATTRIBUTE_SOURCES: dict[str, tuple[str, _Check]] = {
    "S": ("a scalar that is not binary", _scalar),
    "N": ("a number or a string", lambda kind: _number(kind) or _string(kind)),
    "BOOL": (
        "a boolean, an integer or a string",
        lambda kind: pat.is_boolean(_plain_type(kind)) or _integer(kind) or _string(kind),
    ),
    "NULL": ("any column", lambda kind: True),
    "B": ("binary or a string of base64", lambda kind: _binary(kind) or _string(kind)),
    "SS": (
        "a list of strings (or dates and times) or a string",
        lambda kind: _string(kind) or _elements(lambda k: _string(k) or _temporal(k))(kind),
    ),
    "NS": ("a list of numbers or a string", lambda kind: _string(kind) or _elements(_number)(kind)),
    "BS": (
        "a list of binary or base64 strings, or a string",
        lambda kind: _string(kind) or _elements(lambda k: _binary(k) or _string(k))(kind),
    ),
    "L": ("a list or a string of JSON", lambda kind: _list(kind) or _string(kind)),
    "M": (
        "a struct, a map or a string of JSON",
        lambda kind: pat.is_struct(kind) or pat.is_map(kind) or _string(kind),
    ),
}
_INSTANT = ("a timestamp or a string", lambda kind: pat.is_timestamp(_plain_type(kind)) or _string(kind))
_PROPERTY_SOURCES: dict[str, tuple[str, _Check]] = {
    "String": _ATTRIBUTE_SOURCES["S"],
    "Int": ("an integer or a string", lambda kind: _integer(kind) or _string(kind)),
    "Long": ("an integer or a string", lambda kind: _integer(kind) or _string(kind)),
    "Double": ("a number or a string", lambda kind: _number(kind) or _string(kind)),
    "Float": ("a number or a string", lambda kind: _number(kind) or _string(kind)),
    "Bool": ("a boolean or a string", lambda kind: pat.is_boolean(_plain_type(kind)) or _string(kind)),
    "Date": ("a date or a string", lambda kind: pat.is_date(_plain_type(kind)) or _string(kind)),
    "DateTime": (
        "a date, a timestamp or a string",
        lambda kind: pat.is_date(_plain_type(kind)) or pat.is_timestamp(_plain_type(kind)) or _string(kind),
    ),
}
_TEMPLATE = ("a scalar that is not binary (a template renders text)", _scalar)


def check_schema(schema: pa.Schema, spec: JobSpec, object_key: str) -> None:
    """Raise InputValidationError (one line naming the object, the spec's field and the column) when
    a column the mapping names is missing or its type cannot give the declared attribute type."""
    names = schema.names
    for name in names:
        if names.count(name) > 1:
            raise InputValidationError("source", f"{object_key}: column {name!r} appears twice")
    checked = [(path, name, _needs(spec, path)) for path, name in _references(spec)]
    if spec.dynamodb is not None and spec.dynamodb.copy_all:
        checked += [('dynamodb.attributes "*"', name, ("any column", lambda kind: True)) for name in names]
    for path, name, (wanted, fits) in checked:
        kind = _column_type(schema, name)
        if kind is None:
            hint = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise InputValidationError(
                path,
                f"{object_key}: names column {name!r}, which the object does not have{suggestion}; "
                f"columns: {shown}",
            )
        problem = _unmappable(kind)
        if problem is None and not fits(kind):
            problem = f"is {kind}; this needs {wanted}"
        if problem is not None:
            raise InputValidationError(path, f"{object_key}: column {name!r} {problem}")


def _unmappable(kind: pa.DataType) -> str | None:
    """Why no value of `kind` can be mapped (a map with keys that are not strings, a duration, ...)."""
    kind = _plain_type(kind)
    if pat.is_map(kind):
        if not _string(kind.key_type):
            return f"is {kind}: a map's keys become DynamoDB map keys, which are strings"
        return _unmappable(kind.item_type)
    if _list(kind):
        return _unmappable(kind.value_type)
    if pat.is_struct(kind):
        for i in range(kind.num_fields):
            if (problem := _unmappable(kind.field(i).type)) is not None:
                return problem
        return None
    if kind.id not in _SCALAR:
        return f"is {kind}, which has no DynamoDB or graph type"
    return None


def _column_type(schema: pa.Schema, name: str) -> pa.DataType | None:
    """The type of the column `name`, or of the struct field a dotted path names; None if none."""
    if name in schema.names:
        return schema.field(name).type
    head, _, rest = name.partition(".")
    if not rest or head not in schema.names:
        return None
    kind = _plain_type(schema.field(head).type)
    for part in rest.split("."):
        if not pat.is_struct(kind) or kind.get_field_index(part) < 0:
            return None
        kind = _plain_type(kind.field(part).type)
    return kind


def _references(spec: JobSpec) -> Iterator[tuple[str, str]]:
    yield from references(spec)
    yield from graph_references(spec)


def _needs(spec: JobSpec, path: str) -> tuple[str, _Check]:
    """What the spec's field at `path` (from logic.spec's references) needs of its column."""
    typed = _typed_at(spec, path)
    if isinstance(typed, TypedField):
        return _INSTANT if typed.from_ == "iso8601" else _ATTRIBUTE_SOURCES[typed.type]
    if isinstance(typed, TypedProperty):
        return _PROPERTY_SOURCES[typed.type]
    return _TEMPLATE


def _typed_at(spec: JobSpec, path: str) -> TypedField | TypedProperty | Template | None:
    if not path.endswith(".field"):
        return None
    if spec.dynamodb is not None:
        for attribute, value in spec.dynamodb.mapped.items():
            if path == f"dynamodb.attributes.{shown_name(attribute)}.field":
                return value
    if spec.graph is not None:
        sections: tuple[tuple[str, Sequence[Vertex | Edge]], ...] = (
            ("vertices", spec.graph.vertices),
            ("edges", spec.graph.edges),
        )
        for section, elements in sections:
            for index, element in enumerate(elements):
                for name, prop in element.properties.items():
                    if path == f"graph.{section}[{index}].properties.{shown_name(name)}.field":
                        return prop
    return None
