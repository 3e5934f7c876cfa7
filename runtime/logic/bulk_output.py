"""What a bulk put items operation reported of the items it did not write, as mapload reads it.

The service writes its reports under the run's output prefix (`layout.bulk_output_prefix`); the
reader of that output (this module) turns each entry into a ReportedItem, keeping only the fields
the documentation names (docs/BULK_PUT_ITEMS.md cites the pages). Finalize (reports/) folds them
back into the run's report: an ERROR is a reject of the record's source line, a
CONDITION_CHECK_FAILURE a skip, found through the staged object's sidecar (logic/bulk_sidecar.py).

What the documentation reachable here names of the output (docs/BULK_PUT_ITEMS.md): two report
types, ERROR (input records or whole input objects the service could not process: malformed
input, validation failures) and CONDITION_CHECK_FAILURE (the attempted item and, when present, the
existing item), and a manifest. It does not state the output's file layout, the manifest's fields
or a report entry's fields. The layout below is therefore the emulator's
(mapload/emulator/bulk_put.py writes it with this module's encoders, so writer and reader are one
source of truth), NOT AWS's; against the service it must be checked before it is relied on:

    <output prefix><operation id>/manifest.json     one JSON object (encode_manifest)
    <output prefix><operation id>/<type>-<n>.jsonl.gz  gzip JSON Lines, one entry a line

An entry: `message` (why), `code` (the emulator's reason code), `s3Object` (the input object's
key), `record` (the record's 0-based line in that object, when the record could be told apart),
`item` (the attempted item, DynamoDB JSON, when it parsed) and `existingItem` (a condition
failure's existing item, when present). An entry naming an object but neither a record nor an
item is about the object as a whole.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

ReportKind = Literal["ERROR", "CONDITION_CHECK_FAILURE"]
ERROR: Final = "ERROR"
CONDITION_CHECK_FAILURE: Final = "CONDITION_CHECK_FAILURE"
KINDS: Final[tuple[ReportKind, ...]] = (ERROR, CONDITION_CHECK_FAILURE)

MANIFEST_NAME: Final = "manifest.json"
MANIFEST_VERSION: Final = 1
# An entry's fields (the emulator's layout; see the module's text).
MESSAGE: Final = "message"
CODE: Final = "code"
OBJECT: Final = "s3Object"
RECORD: Final = "record"
ITEM: Final = "item"
EXISTING: Final = "existingItem"


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


@dataclass(frozen=True)
class Report:
    """One report object the manifest lists: its type, key (in the output bucket) and entries."""

    kind: ReportKind
    key: str
    entries: int


@dataclass(frozen=True)
class Manifest:
    operation_arn: str
    status: str
    reports: tuple[Report, ...]


class OutputError(ValueError):
    """The output under the prefix is not what the manifest says (missing, malformed, short)."""


def operation_id(operation_arn: str) -> str:
    """The last part of a bulk operation's ARN (the emulator's ARNs end in `/<uuid>`)."""
    return operation_arn.rstrip("/").rsplit("/", 1)[-1]


def operation_folder(output_prefix: str, operation_arn: str) -> str:
    """Where one operation's output goes under OutputS3Configuration's S3KeyPrefix."""
    prefix = output_prefix if not output_prefix or output_prefix.endswith("/") else output_prefix + "/"
    return f"{prefix}{operation_id(operation_arn)}/"


def manifest_key(output_prefix: str, operation_arn: str) -> str:
    return operation_folder(output_prefix, operation_arn) + MANIFEST_NAME


def report_key(output_prefix: str, operation_arn: str, kind: ReportKind, part: int = 0) -> str:
    return operation_folder(output_prefix, operation_arn) + f"{kind.lower()}-{part:05d}.jsonl.gz"


# -- writing (the emulator's local model) -------------------------------------------------------


def encode_entry(entry: ReportedItem) -> dict[str, Any]:
    """An entry as a report line holds it (the kind is the report's, not the line's)."""
    line: dict[str, Any] = {MESSAGE: entry.message}
    if entry.code is not None:
        line[CODE] = entry.code
    if entry.object_key is not None:
        line[OBJECT] = entry.object_key
    if entry.record is not None:
        line[RECORD] = entry.record
    if entry.item is not None:
        line[ITEM] = entry.item
    if entry.existing is not None:
        line[EXISTING] = entry.existing
    return line


def encode_report(entries: Iterable[ReportedItem]) -> bytes:
    text = "".join(json.dumps(encode_entry(e), separators=(",", ":")) + "\n" for e in entries)
    return gzip.compress(text.encode(), mtime=0)


def encode_manifest(manifest: Manifest) -> bytes:
    return json.dumps(
        {
            "version": MANIFEST_VERSION,
            "bulkOperationArn": manifest.operation_arn,
            "status": manifest.status,
            "reports": [{"type": r.kind, "key": r.key, "entries": r.entries} for r in manifest.reports],
        },
        indent=1,
    ).encode()


# -- reading (Finalize) --------------------------------------------------------------------------


def decode_manifest(data: bytes) -> Manifest:
    try:
        raw = json.loads(data)
        if raw.get("version") != MANIFEST_VERSION:
            version = raw.get("version")
            raise OutputError(f"manifest version {version!r}, this reader reads {MANIFEST_VERSION}")
        reports = tuple(
            Report(_kind(r["type"]), str(r["key"]), int(r["entries"])) for r in raw.get("reports", [])
        )
        return Manifest(str(raw["bulkOperationArn"]), str(raw["status"]), reports)
    except OutputError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise OutputError(f"the bulk output manifest is malformed: {error}") from error


def decode_report(kind: ReportKind, data: bytes) -> list[ReportedItem]:
    """A report's entries (gzip or plain JSON Lines)."""
    text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    entries = []
    for number, line in enumerate(text.decode().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append(_entry(kind, json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise OutputError(f"{kind} report line {number} is malformed: {error}") from error
    return entries


def find_manifest(keys: Iterable[str], operation_arn: str) -> str | None:
    """The key of the operation's manifest among the keys listed under the output prefix."""
    suffix = f"{operation_id(operation_arn)}/{MANIFEST_NAME}"
    found = [key for key in keys if key == suffix or key.endswith("/" + suffix)]
    return found[0] if len(found) == 1 else None


def read_output(keys: Iterable[str], get: Callable[[str], bytes], operation_arn: str) -> list[ReportedItem]:
    """Every entry the operation reported: its manifest found among `keys` (the objects listed
    under the run's output prefix), each report it lists read with `get(key) -> bytes` (the
    caller's S3 adapter). OutputError when there is no manifest, it names another operation, or a
    report does not hold the entries the manifest counts (nothing is silently lost)."""
    listed = list(keys)
    key = find_manifest(listed, operation_arn)
    if key is None:
        raise OutputError(f"no manifest of bulk operation {operation_arn} under the output prefix")
    manifest = decode_manifest(get(key))
    if manifest.operation_arn != operation_arn:
        other = manifest.operation_arn
        raise OutputError(f"manifest {key} is bulk operation {other}'s, not {operation_arn}'s")
    found: list[ReportedItem] = []
    for report in manifest.reports:
        if report.key not in listed:
            raise OutputError(f"the manifest lists {report.key}, which is not under the output prefix")
        entries = decode_report(report.kind, get(report.key))
        if len(entries) != report.entries:
            raise OutputError(
                f"{report.key} holds {len(entries)} entries, the manifest counts {report.entries}"
            )
        found += entries
    return found


def _kind(value: Any) -> ReportKind:
    if value == ERROR:
        return ERROR
    if value == CONDITION_CHECK_FAILURE:
        return CONDITION_CHECK_FAILURE
    raise OutputError(f"unknown report type {value!r}")


def _entry(kind: ReportKind, line: dict[str, Any]) -> ReportedItem:
    record = line.get(RECORD)
    item = line.get(ITEM)
    existing = line.get(EXISTING)
    if record is not None and (not isinstance(record, int) or record < 0):
        raise ValueError(f"record {record!r} is not a line number")
    for name, value in ((ITEM, item), (EXISTING, existing)):
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"{name} is not an item")
    obj = line.get(OBJECT)
    return ReportedItem(
        kind=kind,
        message=str(line[MESSAGE]),
        object_key=str(obj) if obj is not None else None,
        record=record,
        item=item,
        existing=existing,
        code=str(line[CODE]) if line.get(CODE) is not None else None,
        whole_object=obj is not None and record is None and item is None,
    )
