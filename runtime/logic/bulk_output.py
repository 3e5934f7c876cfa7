"""What a bulk put items operation reported of the items it did not write, as mapload reads it.

The service writes its reports under the run's output prefix (`layout.bulk_output_prefix`); the
reader of that output (this module) turns each entry into a ReportedItem, keeping only the fields
the documentation names (docs/BULK_PUT_ITEMS.md cites the pages). Finalize (reports/) folds them
back into the run's report: an ERROR is a reject of the record's source line, a
CONDITION_CHECK_FAILURE a skip, found through the staged object's sidecar (logic/bulk_sidecar.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

ReportKind = Literal["ERROR", "CONDITION_CHECK_FAILURE"]
ERROR: Final = "ERROR"
CONDITION_CHECK_FAILURE: Final = "CONDITION_CHECK_FAILURE"


@dataclass(frozen=True)
class ReportedItem:
    """One entry of the service's report. `object_key` is the staged object it names and
    `record` the record's 0-based line in that object, each when the report gives it; `item` the
    attempted item (DynamoDB JSON) when given, by which Finalize finds the record when `record`
    is not given; `whole_object` when the entry is about the staged object as a whole (then every
    record of it gets `message`); `existing` the item a condition check failed against."""

    kind: ReportKind
    message: str
    object_key: str | None = None
    record: int | None = None
    item: dict[str, Any] | None = None
    existing: dict[str, Any] | None = None
    code: str | None = None
    whole_object: bool = False
