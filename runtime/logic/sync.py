"""writeMode sync: the pure rules of a sync (buckets, staged lines, the diff against the baseline).

A sync stages each mapped item in one of a fixed number of hash buckets of its key (`bucket_of`),
chosen at the dataset's first sync (`bucket_count`) and kept for the dataset, so two syncs
compare bucket by bucket. A bucket's staged items dedupe by key (the later in the file wins, the
earlier counted a duplicate: `merge`), then `diff` against the same bucket of the previous
successful sync (the baseline) gives the puts (new or changed, types included), the deletes
(keys the baseline has and the file no longer has) and the unchanged count. Numbers (N, NS, also
inside L and M) are compared by value, as DynamoDB stores them with leading and trailing zeros
trimmed: "50.0030" and "50.003" are one value and one key (`number_value`); what is put keeps the
file's text.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Context, Decimal
from typing import Any, Final

from logic import shardtime

# Source bytes per bucket at a dataset's first sync: a bucket's staged and baseline lines are held
# by one Worker, ~9 times their source bytes each (postcode rows, measured; ~20 at the peak while
# a section is split into lines): 16 MiB of source is ~300-400 MB of a 1,024 MiB Worker. At
# MAX_BUCKETS that is a 16 GiB source; a larger first sync gets larger buckets.
BUCKET_SOURCE_BYTES: Final = 16 * 1024 * 1024
# At most this many buckets: one SyncWorker each in the Sync Map, and each shard's record in the
# ledger lists one section per bucket (a few bytes each, far from the 400 KB item limit).
MAX_BUCKETS: Final = 1000
# The Sync Map is an inline Map: Step Functions runs at most 40 of its iterations at once
# (developer guide, "Using Map state in Inline mode"); Plan's `syncConcurrency` stays within it.
MAX_CONCURRENCY: Final = 40
# The Sync Map's history events (an inline Map's are the execution's, at most 25,000): a bucket's
# iteration without a retry (MapIterationStarted, the SyncWorker task's 5, MapIterationSucceeded),
# and room for SYNC_RETRIES retried attempts (3 events each) at MAX_BUCKETS: one a bucket on
# average. The graph poll loop of a sync leaves this much (logic/polling.py SYNC_MAP_EVENTS;
# tests/infra/test_sync_limits.py).
BUCKET_EVENTS: Final = 7
SYNC_RETRIES: Final = MAX_BUCKETS
SYNC_MAP_EVENTS: Final = MAX_BUCKETS * BUCKET_EVENTS + SYNC_RETRIES * 3


def bucket_count(source_bytes: int, per_bucket: int | None = None) -> int:
    """The buckets of a dataset's first sync of `source_bytes`: one per `per_bucket` (default
    BUCKET_SOURCE_BYTES), 1 to MAX_BUCKETS."""
    per = BUCKET_SOURCE_BYTES if per_bucket is None else per_bucket
    return max(1, min(MAX_BUCKETS, -(-source_bytes // max(1, per))))


# Wide enough that normalizing never rounds: a mapped number has at most 38 significant digits
# (logic/cells.py NUMBER_LIMITS), trailing zeros aside, which normalizing drops exactly.
_EXACT = Context(prec=200)


def number_value(text: str) -> str:
    """A DynamoDB number's canonical text: equal for numbers DynamoDB stores as one value (it
    trims leading and trailing zeros; "7", "7.0", "007" and "7E0" are one, as are "0" and "-0")."""
    number = Decimal(text)
    if not number:
        return "0"
    return str(number.normalize(_EXACT))


def _by_value(value: Any) -> Any:
    """A JSON-form attribute value with its numbers (N, NS, inside L and M) as `number_value`s,
    sets of them sorted: two values are one in DynamoDB exactly when these are equal."""
    (kind, inner), *_ = value.items()
    if kind == "N":
        return {"N": number_value(inner)}
    if kind == "NS":
        return {"NS": sorted({number_value(n) for n in inner})}
    if kind == "L":
        return {"L": [_by_value(v) for v in inner]}
    if kind == "M":
        return {"M": {k: _by_value(v) for k, v in inner.items()}}
    return value


def same_item(a: bytes, b: bytes) -> bool:
    """Whether two staged items (canonical JSON) are one DynamoDB item: equal bytes, or equal
    once their numbers are compared by value (parsed only when the bytes differ and hold one)."""
    if a == b:
        return True
    if b'"N' not in a or b'"N' not in b:
        return False
    first, second = json.loads(a), json.loads(b)
    if first.keys() != second.keys():
        return False
    return all(_by_value(first[name]) == _by_value(second[name]) for name in first)


def sync_workers(
    buckets: int,
    max_concurrency: int,
    budget: float | None,
    bucket_records: float,
    units_per_record: int,
    limit: float,
) -> int:
    """The SyncWorkers the Sync Map runs at once (Plan's `syncConcurrency`): at most
    `max_concurrency` (maxConcurrency within the deployment's cap), MAX_CONCURRENCY and the
    buckets; under a write `budget` fewer, as for the Shards Map (logic/shardtime.py), where that
    lets one Worker write a whole bucket (`bucket_records` items of `units_per_record`: every item
    at a dataset's first sync, the most a later one writes) within `limit` seconds at its share,
    budget / Workers: a SyncWorker has no checkpoints."""
    concurrency = max(1, min(max_concurrency, MAX_CONCURRENCY, buckets))
    if budget is None:
        return concurrency
    return shardtime.budget_workers(bucket_records, units_per_record, budget, concurrency, limit)


def _plain(value: Any) -> Any:
    """A low-level attribute value as JSON (binary as base64 text, sets sorted)."""
    (kind, inner), *_ = value.items()
    if kind == "B":
        return {"B": base64.b64encode(inner).decode()}
    if kind == "BS":
        return {"BS": sorted(base64.b64encode(b).decode() for b in inner)}
    if kind in ("SS", "NS"):
        return {kind: sorted(inner)}
    if kind == "L":
        return {"L": [_plain(v) for v in inner]}
    if kind == "M":
        return {"M": {k: _plain(v) for k, v in inner.items()}}
    return {kind: inner}


def _wire(value: Any) -> Any:
    """The low-level attribute value of its JSON form (`_plain`'s inverse)."""
    (kind, inner), *_ = value.items()
    if kind == "B":
        return {"B": base64.b64decode(inner)}
    if kind == "BS":
        return {"BS": [base64.b64decode(b) for b in inner]}
    if kind == "L":
        return {"L": [_wire(v) for v in inner]}
    if kind == "M":
        return {"M": {k: _wire(v) for k, v in inner.items()}}
    return {kind: inner}


def plain_item(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _plain(value) for name, value in attributes.items()}


def wire_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _wire(value) for name, value in item.items()}


def key_text(item: Mapping[str, Any], key_names: Sequence[str]) -> str:
    """The item's key as canonical text (types included, numbers by value): what buckets,
    dedupes and compares keys, so keys DynamoDB holds as one item are one key here too."""
    return json.dumps([_by_value(item[name]) for name in key_names], sort_keys=True, separators=(",", ":"))


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of a key's text: a stable hash (never Python's salted hash) modulo `buckets`."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % buckets


def staged_line(key: str, item: Mapping[str, Any]) -> bytes:
    """One staged item: its key text, a tab, the item as canonical JSON (sorted names, sets
    sorted by `plain_item`), a newline. The key's JSON holds no raw tab, so the first tab splits."""
    return key.encode() + b"\t" + json.dumps(item, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def read_lines(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The (key text, item JSON) of staged lines, in order, as bytes: a bucket is held as its
    lines (a parsed item takes ~47 times its source bytes in memory, its line ~9)."""
    for line in data.splitlines():
        if line:
            key, _, item = line.partition(b"\t")
            yield key, item


def merge(sections: Iterable[Iterable[tuple[bytes, bytes]]]) -> tuple[dict[bytes, bytes], int]:
    """A bucket's items by key from its sections in file order (shard by shard): the later record
    of a key wins, as with put; the superseded ones are counted (duplicates)."""
    items: dict[bytes, bytes] = {}
    duplicates = 0
    for section in sections:
        for key, item in section:
            if key in items:
                duplicates += 1
            items[key] = item
    return items, duplicates


def merged_lines(items: Mapping[bytes, bytes]) -> bytes:
    """A merged bucket as staged lines (what the next sync reads as its baseline)."""
    return b"".join(key + b"\t" + item + b"\n" for key, item in items.items())


@dataclass
class Diff:
    """What a bucket's sync writes: the items to put, the keys to delete (as key attributes in
    JSON form), and how many items are unchanged."""

    puts: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0


def _staged_by_text(key: bytes, new: Mapping[bytes, bytes], bucket: int | None, buckets: int) -> bool:
    """Whether a baseline key not in `new` was staged with a number's raw text (before keys were
    compared by value) and is no delete: its key by value is in `new` (the same item, put again),
    or now hashes to another bucket (which owns it: the item is left rather than deleted here
    while that bucket may put it). Parsed only for such keys, none of a baseline staged since."""
    if b'"N"' not in key:
        return False
    by_value = json.dumps([_by_value(v) for v in json.loads(key)], sort_keys=True, separators=(",", ":"))
    if by_value.encode() == key:
        return False
    return by_value.encode() in new or (bucket is not None and bucket_of(by_value, buckets) != bucket)


def diff(
    new: Mapping[bytes, bytes],
    old: Mapping[bytes, bytes],
    key_names: Sequence[str],
    *,
    bucket: int | None = None,
    buckets: int = 1,
) -> Diff:
    """The puts (new keys, changed items: any attribute or type differs, numbers compared by
    value: `same_item`), deletes (keys of `old` not in `new`, but `_staged_by_text`) and unchanged
    count of bucket `bucket` of `buckets`; `old` is empty at a dataset's first sync."""
    result = Diff()
    for key, item in new.items():
        before = old.get(key)
        if before is not None and same_item(before, item):
            result.unchanged += 1
        else:
            result.puts.append(json.loads(item))
    for key, item in old.items():
        if key not in new and not _staged_by_text(key, new, bucket, buckets):
            stored = json.loads(item)
            result.deletes.append({name: stored[name] for name in key_names})
    return result
