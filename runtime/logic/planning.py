"""Plan a job: find where each object's data starts (after a CSV header) and cut it into byte-range shards."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from logic.errors import InputValidationError
from logic.parsing import is_skipped, split_csv_line
from logic.records import BOM
from logic.spec.inputs import Common, JobSpec
from logic.values import Reject

__all__ = ["DEFAULT_MAX_SHARDS", "SourceObject", "cut_shards", "read_header"]

# A Distributed Map reads its items from one manifest; far more shards than this means the shard
# size is a mistake (1 byte shards of a big file), and building the list would exhaust memory.
DEFAULT_MAX_SHARDS = 100_000

# The shard size Plan (and `mapload estimate`) chooses when the input gives no shardSizeMiB: the
# source spread over one shard per worker, at least MIN_CHOSEN_SHARD_MIB (a tiny file is one
# shard, not crumbs that each cost an invocation) and at most the input's default, 64 MiB (what a
# Worker writes well inside Lambda's 15 minutes; a property graph's is fitted to its memory too).
MIN_CHOSEN_SHARD_MIB = 1
MAX_CHOSEN_SHARD_MIB = float(Common.model_fields["shard_size_mib"].default)


def chosen_shard_mib(data_bytes: float, workers: int, largest: float = MAX_CHOSEN_SHARD_MIB) -> float:
    """The shard size (whole MiB) that gives each of `workers` a shard of `data_bytes`, within
    MIN_CHOSEN_SHARD_MIB and `largest` (the default, or less for a Worker that holds less)."""
    per_worker = math.ceil(data_bytes / max(1, workers) / 2**20)
    return float(max(min(MIN_CHOSEN_SHARD_MIB, largest), min(largest, per_worker)))


def with_chosen_shard_size(spec: JobSpec, data_bytes: float, workers: int, *, given: bool) -> JobSpec:
    """The spec with the shard size chosen for its source (`chosen_shard_mib`, at most the size it
    has: the default, or what a property graph's Worker holds) when the input gave none (`given`
    false); a size the input gives is kept. The choice is in the normalized spec: the plan id, the
    Workers and the report's `shards.sizeMiB` have it."""
    if given:
        return spec
    chosen = chosen_shard_mib(data_bytes, workers, spec.shard_size_mib)
    return spec if chosen == spec.shard_size_mib else spec.model_copy(update={"shard_size_mib": chosen})


@dataclass(frozen=True)
class SourceObject:
    """One object to load, as cut_shards needs it (a Mapping with these keys works too)."""

    bucket: str
    key: str
    size: int
    etag: str
    header: list[str] | None = None
    data_start: int = 0


# How much of an object's start probe_header reads first, and at most (a longer header fails).
HEADER_PROBE_BYTES = 64 * 1024
HEADER_MAX_BYTES = 1024 * 1024


def probe_header(
    read_range: Callable[[int, int], bytes], size: int, spec: JobSpec
) -> tuple[list[str] | None, int, int]:
    """An object's CSV header, the byte where its data starts and how many lines precede it.

    `read_range(first, last)` returns the object's bytes first..last (inclusive), as a ranged GET
    does: Plan reads S3 objects with it, `mapload start` the local file before uploading it.
    """
    if size == 0 or not has_header(spec):  # nothing to read: the data starts at byte 0
        return None, 0, 0
    probe = HEADER_PROBE_BYTES
    while True:
        prefix = read_range(0, min(probe, size) - 1)
        try:
            fields, data_start = read_header(prefix, spec, size)
            return fields, data_start, prefix[:data_start].count(b"\n")
        except Exception:
            # A header longer than the probe: read more, up to a limit that stays cheap.
            if probe >= HEADER_MAX_BYTES or probe >= size:
                raise
            probe *= 4


def has_header(spec: JobSpec) -> bool:
    """Whether the source's objects start with a header line (CSV with `header`), which Plan reads."""
    return spec.csv is not None and spec.csv.header


def read_header(prefix: bytes, spec: JobSpec, object_size: int) -> tuple[list[str] | None, int]:
    """The CSV header's fields and `data_start`, the offset of the byte after the header line.

    `prefix` is the object's first bytes (all of it, or enough to hold the header line). Blank
    and comment lines before the header are skipped; a UTF-8 BOM and a "\\r\\n" ending are
    handled; the fields are split by the same rules as records. An object without a header line
    (empty, or only blank and comment lines) gives `([], object_size)`: it has no data to shard.
    Without a header line (`csv.header` false, or JSON Lines) the result is `(None, 0)`.
    """
    if spec.csv is None or not has_header(spec):
        return None, 0
    complete = len(prefix) >= object_size
    pos = 3 if prefix.startswith(BOM) else 0
    while True:
        newline = prefix.find(b"\n", pos)
        if newline < 0:
            if not complete:
                raise InputValidationError(
                    "csv.header",
                    f"no complete header line in the first {len(prefix)} bytes of the object "
                    '(is it a newline-delimited CSV file, or does it need "header": false?)',
                )
            newline = end = data_start = object_size
        else:
            end, data_start = newline, newline + 1
        raw = prefix[pos:end]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not is_skipped(raw, spec):
            return _header_fields(raw, pos, spec.csv.delimiter, spec.csv.skip_initial_space), data_start
        if newline >= len(prefix) or data_start >= object_size:
            return [], object_size
        pos = data_start


def _header_fields(raw: bytes, offset: int, delimiter: str, skip_initial_space: bool = False) -> list[str]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputValidationError(
            "csv.header", f"the header line is not UTF-8 (byte {offset + error.start})"
        ) from None
    fields = split_csv_line(text, delimiter, skip_initial_space)
    if isinstance(fields, Reject):
        raise InputValidationError("csv.header", f"the header line cannot be split: {fields.reason}")
    seen: set[str] = set()
    for i, name in enumerate(fields):
        if not name.strip():
            raise InputValidationError("csv.header", f"column {i + 1} of the header line has no name")
        if name in seen:
            raise InputValidationError("csv.header", f"the header line names column {name!r} twice")
        seen.add(name)
    return fields


def cut_shards(
    objects: Iterable[SourceObject | Mapping[str, Any]],
    shard_size: int,
    *,
    max_shards: int = DEFAULT_MAX_SHARDS,
) -> list[dict[str, Any]]:
    """Shard items (docs/CONTRACTS.md "Shard item") covering each object's `[data_start, size)`.

    Each object's data is split into the fewest shards of at most `shard_size` bytes, of nearly
    equal sizes (no sliver at the end); an object with no data gives none. Indices run 0..n-1
    across all objects in the order given. Raises InputValidationError (field shardSizeMiB) when
    more than `max_shards` shards would be cut.
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be at least 1 byte, got {shard_size}")
    sources = [_source(o) for o in objects]
    counts = [-(-(o.size - o.data_start) // shard_size) if o.size > o.data_start else 0 for o in sources]
    if sum(counts) > max_shards:
        raise InputValidationError(
            "shardSizeMiB",
            f"{shard_size}-byte shards would cut the source into {sum(counts)} shards, "
            f"more than {max_shards}; use a larger shard size",
        )
    shards: list[dict[str, Any]] = []
    for source, count in zip(sources, counts, strict=True):
        span = source.size - source.data_start
        header = None if source.header is None else list(source.header)
        for i in range(count):
            shards.append(
                {
                    "index": len(shards),
                    "bucket": source.bucket,
                    "key": source.key,
                    "etag": source.etag,
                    "start": source.data_start + span * i // count,
                    "end": source.data_start + span * (i + 1) // count,
                    "objectSize": source.size,
                    "dataStart": source.data_start,
                    "header": header,
                    "firstLineNumber": None,
                }
            )
    return shards


def _source(obj: SourceObject | Mapping[str, Any]) -> SourceObject:
    if isinstance(obj, SourceObject):
        return obj
    size = int(obj["size"])
    data_start = int(obj.get("data_start") or 0)
    if not 0 <= data_start <= size:
        raise ValueError(f"{obj['key']}: data_start {data_start} is outside the object (size {size})")
    return SourceObject(obj["bucket"], obj["key"], size, obj["etag"], obj.get("header"), data_start)


# The graph section's fields that shape only the Neptune load, never a staged file.
LOAD_ONLY_GRAPH_FIELDS = frozenset(
    {
        "parallelism",
        "failOnError",
        "queueRequest",
        "updateSingleCardinalityProperties",
        "dependencies",
        "pollSeconds",
        "timeoutMinutes",
        "maxDanglingPercent",
    }
)


# The format of what a plan's shards record under its id (counts, CSV start states and summaries):
# bumped whenever the same file and spec would be read differently, so that a re-run after an
# upgrade never trusts what an older version recorded. 2: CSV read with csv.reader's grammar (a
# quote opens a quoted field only at the start of a field), and line counts per outcome.
PLAN_FORMAT = 2


def plan_id(
    shards: Sequence[Mapping[str, Any]], spec_json: Mapping[str, Any], *, plan_format: int = PLAN_FORMAT
) -> str:
    """A fingerprint of what a plan will do: the same objects (ETags), the same shard cuts and
    the same parsing and mapping, read by the same `PLAN_FORMAT`, give the same id, so a re-run of
    a job can trust the shards an earlier run recorded under it — and a changed file or spec, or
    an upgraded reader, starts afresh. `reload` is not in it: a reload runs the same plan again;
    nor is `writeUnitsPerSecond`: a budget paces the writes, so raising it to rescue a slow job
    keeps the shards it finished.
    """
    relevant = {
        k: v
        for k, v in spec_json.items()
        if k not in ("jobId", "maxConcurrency", "maxRejectedPercent", "reload")
    }
    if "writeUnitsPerSecond" in relevant:
        # As without a budget (the normalized form's null): the ids of plans made before the
        # budget left the id, and of plans without one, stay as they were.
        relevant["writeUnitsPerSecond"] = None
    if isinstance(relevant.get("graph"), Mapping):
        # How the load runs (and whether it may start) changes nothing staged: a job held back by
        # its endpoint check, or whose load failed, re-runs with other loader options on its shards.
        relevant["graph"] = {k: v for k, v in relevant["graph"].items() if k not in LOAD_ONLY_GRAPH_FIELDS}
    # A shard of a decompressed copy names its archive (and member): the copy itself is new
    # on every run, the archive is what must be unchanged.
    cuts = [
        (
            (s["source"], s.get("member"), s.get("sourceEtag"), s["start"], s["end"])
            if s.get("source")
            else (s["bucket"], s["key"], s["etag"], s["start"], s["end"])
        )
        + ((tuple(s["rowGroups"]),) if s.get("rowGroups") else ())  # a Parquet shard's row groups
        for s in shards
    ]
    digest = hashlib.sha256(json.dumps([plan_format, relevant, cuts], sort_keys=True, default=str).encode())
    return digest.hexdigest()[:20]
