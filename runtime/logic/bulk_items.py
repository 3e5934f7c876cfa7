"""dynamodb.engine bulkPutItems: a staged item's line, how a shard's staged items are cut into
objects, and the service's limits that Plan checks (docs/BULK_PUT_ITEMS.md, docs/INPUT.md).

The line: one JSON object per line, `{"Item": {...}}` with the item in DynamoDB JSON (the form
DynamoDB's export to S3 writes and logic/dynamodb_json.py reads; binary values base64). It is made
here alone (`staged_line`): if the service's input shape turns out otherwise, this is the one
function to change.

The objects: a shard's items go in `parts(shard_bytes)` objects, a count fixed by the shard's
source bytes (PART_SOURCE_BYTES each), so Plan knows the job's object count before any Worker runs
and refuses more than MAX_OBJECTS. The items are ordered by a hash of their line, not by their
key or file order (developer guide BulkPutItems.BestPractices.DistributeKeys: items sorted by
partition key make a rolling hot partition), and cut into parts of nearly equal bytes
(BestPractices.SplitInput: similarly sized objects complete faster). The same records give the
same objects on every attempt: a retried shard overwrites its objects, never adds one.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from logic.endpoints import WORKER_BASELINE_MIB
from logic.errors import InputValidationError

# StartBulkPutItems reads at most this many objects, each at most this large (developer guide
# BulkPutItems.BestPractices, "Split your input across multiple similarly sized S3 objects").
MAX_OBJECTS: Final = 50_000
MAX_OBJECT_BYTES: Final = 5 * 1024**3
# StartBulkPutItems' MaxWriteRequestUnits is at least this (API reference; botocore's model: min 1024).
MIN_WRITE_REQUEST_UNITS: Final = 1024
# Source bytes of a shard per staged object: a default shard (64 MiB) is one object, a larger
# shard several of similar size. The docs name no size but the 5 GB limit; this keeps an object
# well below it (a record's DynamoDB JSON is a few times its source) and the objects many
# enough for the service to read in parallel.
PART_SOURCE_BYTES: Final = 64 * 1024 * 1024
# A Worker holds its shard's staged items until the shard's end (each key's line, its source
# position, the key): at most this many bytes a byte of source, on top of the Worker's own
# (logic/endpoints.py WORKER_BASELINE_MIB). Measured: 24.2 MiB of peak RSS a MiB of the postcode
# sample (29-byte rows, the worst case: a record's fixed cost is most of it; larger records hold
# less a byte), and a sixth more for the rejects upload's buffers and the runtime.
HELD_PER_SOURCE_BYTE: Final = 28
# The compression the staged objects have (InputCompressionType) and its level: the fastest (make
# bench, "dynamodb.engine": a tenth larger than level 6, a microsecond a record less).
COMPRESSION: Final = "GZIP"
GZIP_LEVEL: Final = 1


def _binary(value: object) -> str:
    """JSON has no bytes: B and BS values are base64 (RFC 4648, padded), as DynamoDB JSON writes them."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not a DynamoDB attribute value")


# The C encoder json.dumps builds on every call, built once: a line a record, the per-call setup
# would be a third of a line's cost (make bench, "dynamodb.engine"). Without it (another Python),
# json.JSONEncoder gives the same text.
_FALLBACK = json.JSONEncoder(separators=(",", ":"), default=_binary)
_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_iterencode = (
    None
    if _C_ENCODER is None
    else _C_ENCODER(None, _binary, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
)


def _encode(value: Any) -> str:
    return _FALLBACK.encode(value) if _iterencode is None else "".join(_iterencode(value, 0))


def staged_line(attributes: Mapping[str, Any]) -> bytes:
    """One staged record: the item (low-level form, as logic/mapping.py makes it) as a DynamoDB
    JSON line (compact, ASCII), newline-terminated."""
    return _encode({"Item": attributes}).encode() + b"\n"


def parts(shard_bytes: int) -> int:
    """How many objects a shard of `shard_bytes` source bytes stages at most (one part per
    PART_SOURCE_BYTES; an empty part is not written)."""
    return max(1, math.ceil(shard_bytes / PART_SOURCE_BYTES))


def max_shard_mib(worker_memory_mib: int) -> int:
    """The largest whole shardSizeMiB whose staged items a Worker of `worker_memory_mib` holds (0:
    not even 1 MiB)."""
    return max(0, (worker_memory_mib - WORKER_BASELINE_MIB) // HELD_PER_SOURCE_BYTE)


def staged_objects(shard_bytes: Sequence[int]) -> int:
    """The most objects a job of shards of these source bytes stages (Plan's count)."""
    return sum(parts(size) for size in shard_bytes)


def order(line: bytes) -> int:
    """Where a line goes in its shard's staged order: a hash of the line (the key is in it, and
    a key has one line once duplicates are resolved), so neither key order nor file order."""
    return zlib.crc32(line)


def cut(sizes: Sequence[int], count: int) -> list[range]:
    """`count` consecutive ranges of the records of `sizes` (bytes each, in staged order) of
    nearly equal bytes (a range may be empty when records are fewer than parts); more ranges when
    an object would exceed MAX_OBJECT_BYTES."""
    total = sum(sizes)
    count = max(count, math.ceil(total / MAX_OBJECT_BYTES), 1)
    ranges, start, running = [], 0, 0
    for part in range(1, count + 1):
        bound = total * part / count
        end = start
        while end < len(sizes) and running + sizes[end] / 2 <= bound:
            running += sizes[end]
            end += 1
        if part == count:
            end = len(sizes)
        ranges.append(range(start, end))
        start = end
    return ranges


def check_table(name: str, table: Mapping[str, Any] | None) -> None:
    """Refuse, in one line, a table bulk put items cannot start on (developer guide
    BulkPutItems.Considerations, "Table state requirements" and "Global tables"): missing, not
    ACTIVE, building a secondary index, or part of a global table. `table`: DescribeTable's `Table`."""
    if table is None:
        _refuse(f"table {name!r} does not exist in this environment's account and region")
    assert table is not None
    status = table.get("TableStatus")
    if status != "ACTIVE":
        _refuse(f"table {name!r} is {status}, not ACTIVE: start the load once it is ACTIVE")
    building = [
        str(index.get("IndexName"))
        for index in table.get("GlobalSecondaryIndexes") or ()
        if index.get("IndexStatus") == "CREATING" or index.get("Backfilling")
    ]
    if building:
        _refuse(
            f"table {name!r} is building index {', '.join(building)}: bulk put items cannot start "
            "while a table creates a secondary index; start the load once it is ACTIVE"
        )
    replicas = [str(r.get("RegionName")) for r in table.get("Replicas") or ()]
    if replicas or table.get("GlobalTableVersion"):
        where = f" (replicas in {', '.join(replicas)})" if replicas else ""
        _refuse(
            f"table {name!r} is part of a global table{where}: bulk put items does not support global "
            'tables; use engine "lambda"'
        )


def check_objects(count: int) -> None:
    """Refuse a job whose shards would stage more objects than one operation reads."""
    if count > MAX_OBJECTS:
        _refuse(
            f"the shards would stage up to {count:,} objects, more than the {MAX_OBJECTS:,} one bulk put "
            "items operation reads: use a larger shardSizeMiB",
        )


def check_write_units(write_units_per_second: float | None) -> None:
    """Refuse a write budget under MaxWriteRequestUnits' minimum (null: the operation is not capped)."""
    if write_units_per_second is not None and write_units_per_second < MIN_WRITE_REQUEST_UNITS:
        raise InputValidationError(
            "writeUnitsPerSecond",
            f"{write_units_per_second:g} is under {MIN_WRITE_REQUEST_UNITS:,}, the least "
            "MaxWriteRequestUnits bulk put items takes: give at least that, null (no cap), or use "
            'engine "lambda"',
        )


def _refuse(message: str) -> None:
    raise InputValidationError("dynamodb.engine", f"bulkPutItems: {message}")
