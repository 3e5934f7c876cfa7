"""writeMode sync: the pure rules of a sync (buckets, staged lines, the diff against the baseline).

A sync stages each mapped item in one of a fixed number of hash buckets of its key (`bucket_of`),
chosen at the dataset's first sync (`bucket_count`) and kept for the dataset, so two syncs
compare bucket by bucket. A bucket's staged items dedupe by key (the later in the file wins, the
earlier counted a duplicate: `merge`), then `diff` against the same bucket of the previous
successful sync (the baseline) gives the puts (new or changed, types included), the deletes
(keys the baseline has and the file no longer has) and the unchanged count.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

# Source bytes per bucket at a dataset's first sync: a bucket's staged and baseline lines are held
# by one Worker, ~9 times their source bytes each (postcode rows, measured; ~20 at the peak while
# a section is split into lines): 16 MiB of source is ~300-400 MB of a 1,024 MiB Worker. At
# MAX_BUCKETS that is a 16 GiB source; a larger first sync gets larger buckets.
BUCKET_SOURCE_BYTES: Final = 16 * 1024 * 1024
# At most this many buckets: one SyncWorker each in the Sync Map, and each shard's record in the
# ledger lists one section per bucket (a few bytes each, far from the 400 KB item limit).
MAX_BUCKETS: Final = 1000


def bucket_count(source_bytes: int, per_bucket: int | None = None) -> int:
    """The buckets of a dataset's first sync of `source_bytes`: one per `per_bucket` (default
    BUCKET_SOURCE_BYTES), 1 to MAX_BUCKETS."""
    per = BUCKET_SOURCE_BYTES if per_bucket is None else per_bucket
    return max(1, min(MAX_BUCKETS, -(-source_bytes // max(1, per))))


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
    """The item's key as canonical text (types included): what buckets and compares keys."""
    return json.dumps([item[name] for name in key_names], sort_keys=True, separators=(",", ":"))


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


def diff(new: Mapping[bytes, bytes], old: Mapping[bytes, bytes], key_names: Sequence[str]) -> Diff:
    """The puts (new keys, changed items: any attribute or type differs; canonical JSON compared),
    deletes (keys of `old` not in `new`) and unchanged count of a bucket; `old` is empty at a
    dataset's first sync."""
    result = Diff()
    for key, item in new.items():
        if old.get(key) == item:
            result.unchanged += 1
        else:
            result.puts.append(json.loads(item))
    for key, item in old.items():
        if key not in new:
            stored = json.loads(item)
            result.deletes.append({name: stored[name] for name in key_names})
    return result
