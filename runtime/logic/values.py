"""Value types of the per-record pipeline (Line, Reject, Item, Fields), shared by its stages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class Line(NamedTuple):
    """One newline-delimited line of a shard.

    `number` is 1-based within the shard; `offset` is the absolute byte offset in the object of
    `raw[0]` (so `offset + i` locates byte i exactly); `raw` excludes the "\\n", a trailing "\\r",
    and a UTF-8 BOM at object offset 0 (then `offset` is 3).
    """

    number: int
    offset: int
    raw: bytes


class ParquetRow(NamedTuple):
    """One row of a Parquet shard: `number` is 1-based within the shard, `row_group` the row group's
    index in the object and `row` the row's 0-based index in the object (rows of earlier row groups
    counted); `fields` the row's values, or the Reject of a row whose page could not be decoded."""

    number: int
    row_group: int
    row: int
    fields: Fields | Reject

    @property
    def offset(self) -> int:
        """What tells the object's records apart, as a line's byte offset does: the row's index."""
        return self.row


@dataclass(frozen=True, slots=True)
class Reject:
    """Why a record was not loaded: `code` is a short snake_case category, `reason` is for people."""

    code: str
    reason: str


class Item(NamedTuple):
    """A DynamoDB item ready for a PutRequest.

    `key` holds the key attributes' values in table-key order (str, Decimal for N, bytes for B),
    for de-duplication; `attributes` is the whole item (key attributes included) in DynamoDB's
    low-level form; `size` is an upper estimate of DynamoDB's item size in bytes.
    """

    key: tuple[Any, ...]
    attributes: dict[str, dict[str, Any]]
    size: int


Fields = dict[str, Any]
"""A parsed record: column (or JSON member) name -> value (str for CSV; JSON types for JSON Lines)."""


def field_value(fields: Fields, name: str, default: Any = None) -> Any:
    """The field `name`; when there is none and the name has dots, `address.city` is the member
    `city` of the object (JSON Lines) or struct (Parquet) field `address`, at any depth."""
    value = fields.get(name, default)
    if value is not default or "." not in name:
        return value
    found: Any = fields
    for part in name.split("."):
        if not isinstance(found, dict) or part not in found:
            return default
        found = found[part]
    return found
