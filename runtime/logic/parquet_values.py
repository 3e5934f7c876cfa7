"""A Parquet row's values as the mapping reads them, and the schema check Plan runs on each object.

A minimal stand-in (values as pyarrow's `to_pylist` gives them; the check: every column the mapping
names exists): the values' full typing is its own piece of work and replaces this module.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from logic.errors import InputValidationError
from logic.spec import JobSpec, graph_references, references

if TYPE_CHECKING:
    import pyarrow


def batch_fields(batch: pyarrow.RecordBatch) -> list[dict[str, Any]]:
    """Each row of `batch` as its Fields: column name -> value (numbers as Decimal, as JSON Lines
    numbers are)."""
    return [{name: _value(value) for name, value in row.items()} for row in batch.to_pylist()]


def _value(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return Decimal(str(value))
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _value(v) for k, v in value.items()}
    return value


def check_schema(schema: pyarrow.Schema, spec: JobSpec, object_key: str) -> None:
    """Raise InputValidationError naming the object and the column when a column the mapping
    names is not in the object's schema (a nested field `a.b`: column `a`)."""
    names = set(schema.names)
    for path, name in [*references(spec), *graph_references(spec)]:
        if name not in names and name.split(".", 1)[0] not in names:
            raise InputValidationError(path, f"names field {name!r}, which is not a column of {object_key}")
