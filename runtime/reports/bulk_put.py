"""dynamodb.engine bulkPutItems: the bulk put items operation's results folded back into the report.

An ERROR entry of the service's output is a reject of the record's source line (found through the
staged object's sidecar, logic/bulk_sidecar.py: by the entry's record index, else by the item's
key in the staged object, else, for an entry about the whole object, every record of it), with
the service's reason; a CONDITION_CHECK_FAILURE entry is a skip. Each shard's counts then say what
the service did with what the shard staged: `written` = staged - errors - condition failures. After
an operation that ended FAILED or CANCELLED (or still runs) what was written is not known: the
counts stay as the shards recorded them, the report says "at most" and claims no reconciliation.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from adapters.s3 import S3Store
from logic import bulk_output, bulk_put, layout
from logic.bulk_output import CONDITION_CHECK_FAILURE, ERROR, ReportedItem
from logic.bulk_sidecar import RowPosition, Sidecar, TextPosition, decode
from logic.clipping import TEXT_BYTES, clip
from logic.errors import SourceNotFoundError

# The reject reason code of a record the service refused (docs/REPORT.md).
REJECT_CODE: Final = "bulk_put_error"
# Skipped keys kept per shard (as the Worker keeps them).
SKIPPED_SAMPLE: Final = 5
# The report's `bulkPut` section: its field names, once (docs/REPORT.md, schemas/report.schema.json).
SECTION_FIELDS: Final[tuple[str, ...]] = (
    "operationArn",
    "status",
    "exact",
    "stagedObjects",
    "staged",
    "written",
    "writtenAtMost",
    "errors",
    "conditionFailures",
    "counters",
    "failure",
    "note",
)


def reported_items(store: S3Store, bucket: str, prefix: str, operation_arn: str) -> list[ReportedItem]:
    """The operation's output under `prefix` as the reader of the service's output reads it
    (logic/bulk_output.py `read_output`): the one call to it. OutputError (a ValueError) when the
    output is not whole."""
    try:
        keys = [obj.key for obj in store.list(bucket, prefix)]
    except SourceNotFoundError:  # nothing under the prefix: the reader says what is missing
        keys = []
    return bulk_output.read_output(keys, lambda key: store.get_bytes(bucket, key), operation_arn)


@dataclass
class Folded:
    """What the service's output says per shard: rejects (records in the rejects file's shape)
    and condition failures (count and a sample of the items' keys)."""

    rejects: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    rejected_lines: Counter[int] = field(default_factory=Counter)
    conditions: Counter[int] = field(default_factory=Counter)
    skipped_sample: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        return sum(len(records) for records in self.rejects.values())


class StagedObjects:
    """The plan's staged objects as the fold-back reads them: which shard staged each (its
    `bulkKeys`), their sidecars and their records, each read once."""

    def __init__(
        self, store: S3Store, bucket: str, shards: Mapping[int, Mapping[str, Any]], key_names: Iterable[str]
    ) -> None:
        self._store, self._bucket = store, bucket
        self.shard_of = {
            str(key): index for index, counts in shards.items() for key in counts.get("bulkKeys") or ()
        }
        self.key_names = tuple(key_names)
        self._sidecars: dict[str, Sidecar] = {}
        self._records: dict[str, list[dict[str, Any]]] = {}

    def sidecar(self, key: str) -> Sidecar:
        if key not in self._sidecars:
            self._sidecars[key] = decode(self._store.get_bytes(self._bucket, layout.bulk_lines_key(key)))
        return self._sidecars[key]

    def find(self, key: str | None, item: Mapping[str, Any]) -> tuple[str, int] | None:
        """The staged object and record holding `item`'s key (every object when `key` is None)."""
        wanted = {name: item.get(name) for name in self.key_names}
        for candidate in [key] if key else sorted(self.shard_of):
            for number, staged in enumerate(self._staged(candidate)):
                if {name: staged.get(name) for name in self.key_names} == wanted:
                    return candidate, number
        return None

    def record(self, key: str, number: int) -> dict[str, Any]:
        """The staged item of record `number` of object `key` (DynamoDB JSON)."""
        return self._staged(key)[number]

    def _staged(self, key: str) -> list[dict[str, Any]]:
        if key not in self._records:
            text = gzip.decompress(self._store.get_bytes(self._bucket, key)).decode()
            lines = [json.loads(line) for line in text.splitlines() if line.strip()]
            self._records[key] = [line.get("Item", line) for line in lines]
        return self._records[key]


def fold(reported: Iterable[ReportedItem], staged: StagedObjects) -> tuple[Folded, int]:
    """Each entry to its shard: (what the shards get, entries no staged record was found for)."""
    folded, unplaced, seen = Folded(), 0, set()
    for entry in reported:
        places = _places(entry, staged)
        if not places:
            unplaced += 1
            continue
        for key, number in places:
            if (key, number) in seen:  # an entry about the object and one about its record
                continue
            seen.add((key, number))
            index = staged.shard_of[key]
            if entry.kind == CONDITION_CHECK_FAILURE:
                folded.conditions[index] += 1
                sample = folded.skipped_sample.setdefault(index, [])
                if len(sample) < SKIPPED_SAMPLE and entry.item is not None:
                    sample.append({name: entry.item.get(name) for name in staged.key_names})
            elif entry.kind == ERROR:
                item = entry.item if entry.item is not None else staged.record(key, number)
                record, lines = _reject(staged.sidecar(key), number, entry, item)
                folded.rejects.setdefault(index, []).append(record)
                folded.rejected_lines[index] += lines
    return folded, unplaced


def _places(entry: ReportedItem, staged: StagedObjects) -> list[tuple[str, int]]:
    """The (staged object, record) pairs an entry is about."""
    key = entry.object_key
    if key is not None and key not in staged.shard_of:
        return []
    if key is not None and entry.whole_object:
        return [(key, number) for number in range(len(staged.sidecar(key).records))]
    if key is not None and entry.record is not None:
        return [(key, entry.record)]
    if entry.item is not None:
        found = staged.find(key, entry.item)
        return [found] if found else []
    return []


def _reject(
    sidecar: Sidecar, number: int, entry: ReportedItem, item: Mapping[str, Any]
) -> tuple[dict[str, Any], int]:
    """A reject as the Worker writes one (shards/rejects.py): where the record is and the
    service's reason; in place of the raw line (Finalize does not read the source again), `item`,
    the item as staged (DynamoDB JSON), which a reload of the fixed record writes."""
    position = sidecar.records[number]
    reason = clip(f"{entry.code}: {entry.message}" if entry.code else entry.message, TEXT_BYTES)
    where: dict[str, Any] = {
        "source": sidecar.source,
        **({"member": sidecar.member} if sidecar.member else {}),
    }
    if isinstance(position, RowPosition):
        return {
            **where,
            "rowGroup": position.row_group,
            "row": position.row,
            "code": REJECT_CODE,
            "reason": reason,
            "item": dict(item),
        }, 1
    assert isinstance(position, TextPosition)
    text = {"shardLine": position.shard_line, "lines": position.lines, "offset": position.offset}
    return {**where, **text, "code": REJECT_CODE, "reason": reason, "item": dict(item)}, position.lines


def folded_counts(counts: Mapping[str, Any], folded: Folded, index: int) -> dict[str, Any]:
    """A shard's counts once the service's results are in: its staged records written but for
    the service's errors (rejects) and condition failures (skips)."""
    errors = len(folded.rejects.get(index, ()))
    conditions = folded.conditions[index]
    staged = int(counts.get("staged") or 0)
    by_reason = Counter({k: int(v) for k, v in (counts.get("byReason") or {}).items()})
    if errors:
        by_reason[REJECT_CODE] += errors
    return {
        **counts,
        "bulkFolded": True,  # logic/report.py balanced: read = written + skipped + rejected + duplicates
        "written": staged - errors - conditions,
        "skipped": int(counts.get("skipped") or 0) + conditions,
        "rejected": int(counts.get("rejected") or 0) + errors,
        "rejectedLines": int(counts.get("rejectedLines") or 0) + folded.rejected_lines[index],
        "byReason": dict(by_reason),
        "skippedSample": [*(counts.get("skippedSample") or ()), *folded.skipped_sample.get(index, ())][
            :SKIPPED_SAMPLE
        ],
    }


def _note(status: str, staged: int, exact: bool) -> str | None:
    """Why `written` is not given, when it is not."""
    if exact or status == bulk_put.NOTHING_STAGED:
        return None
    if status == bulk_put.NOT_STARTED:
        ended = "did not start (or did not answer)"
    elif status in bulk_put.EXACT_STATUSES:
        ended = f"ended {status} but its output could not be read"
    else:
        ended = f"ended {status}"
    return (
        f"the operation {ended}: at most {staged:,} of the staged records were written; which is not "
        "known, so the run claims no reconciliation of what was written"
    )


def section(
    answer: Mapping[str, Any], staged: int, folded: Folded | None, unplaced: int = 0
) -> dict[str, Any]:
    """The report's `bulkPut`: the operation, its status and counters, and what it wrote: exactly
    (COMPLETED, COMPLETED_WITH_ERRORS) or at most (any other status: unknown, no reconciliation)."""
    status = str(answer.get("status") or bulk_put.NOTHING_STAGED)
    exact = folded is not None and status in bulk_put.EXACT_STATUSES
    errors = folded.errors if folded is not None else 0
    conditions = sum(folded.conditions.values()) if folded is not None else 0
    body = {
        "operationArn": answer.get("operationArn"),
        "status": status,
        "exact": exact or status == bulk_put.NOTHING_STAGED,
        "stagedObjects": int(answer.get("stagedObjects") or 0),
        "staged": staged,
        "written": staged - errors - conditions
        if exact
        else (0 if status == bulk_put.NOTHING_STAGED else None),
        "writtenAtMost": staged,
        "errors": errors + unplaced,
        "conditionFailures": conditions,
        "counters": dict(answer.get("counters") or {}),
        "failure": answer.get("failure"),
        "note": _note(status, staged, exact),
    }
    return {name: body[name] for name in SECTION_FIELDS}
