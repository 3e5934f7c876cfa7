"""Parquet sources: which objects are data, their footers, and shards of whole row groups.

Plan reads only each object's footer (`read_footer`, through a `read_range` the caller does ranged
GETs with) and cuts shards of whole row groups (`cut_row_groups`); the Worker reads a shard's row
groups (shards/sources.py). pyarrow is imported lazily: only a Parquet job pays for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logic.errors import InputValidationError
from logic.spec.checks import graph_references, references
from logic.spec.inputs import JobSpec

if TYPE_CHECKING:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

__all__ = [
    "MAGIC",
    "ParquetObject",
    "RowGroup",
    "check_not_table_format",
    "columns_read",
    "cut_row_groups",
    "is_data",
    "read_footer",
    "table_format",
]

MAGIC = b"PAR1"
# The smallest Parquet file: "PAR1", a footer of at least one byte, its 4-byte length, "PAR1".
MIN_SIZE = 12
# Plan's first ranged GET of an object: its last bytes, which hold most footers whole (a footer
# longer than this costs one more GET).
TAIL_PROBE_BYTES = 64 * 1024
# A footer that long is a corrupt length, or a file Plan cannot describe in its memory.
MAX_FOOTER_BYTES = 64 * 1024 * 1024

# The Worker reads a row group in batches of this many rows (shards/sources.py).
BATCH_ROWS = 2048
# What a batch costs the Worker per uncompressed byte of its columns: the decoded Arrow arrays,
# the rows as Python values (a str or int object is several times its bytes), the mapped items.
BATCH_MEMORY_FACTOR = 16
# The Worker's own memory besides the batch: the runtime, pyarrow, the footer, page buffers.
WORKER_BASE_MIB = 160

_ICEBERG_METADATA = re.compile(r"(?:^|/)metadata/[^/]*(?:\.metadata\.json|version-hint\.text)$")


def is_data(key: str, prefix: str = "") -> bool:
    """Whether a key under `prefix` is a data file: not when a name of its path below the prefix
    starts with `_` or `.` (`_SUCCESS`, `_committed_*`, `_metadata`, `.part-0.crc`, a `_temporary/`
    folder a failed Spark job left), and not a folder marker."""
    rest = key[len(prefix) :] if key.startswith(prefix) else key
    return not key.endswith("/") and not any(part[:1] in ("_", ".") for part in rest.split("/") if part)


def not_data(prefix: str) -> Callable[[str], bool]:
    """What a prefix listing of a Parquet source leaves out (true of a key to skip)."""
    return lambda key: not is_data(key, prefix)


def table_format(keys: Iterable[str], prefix: str = "") -> str | None:
    """The table format whose folder `keys` (a prefix listing, every key) are, or None. Its folder
    holds data files its log has since removed: only the format's own reader can tell them apart."""
    for key in keys:
        rest = "/" + (key[len(prefix) :] if key.startswith(prefix) else key)
        if "/_delta_log/" in rest:
            return "a Delta Lake table (_delta_log/)"
        if "/.hoodie/" in rest:
            return "an Apache Hudi table (.hoodie/)"
        if _ICEBERG_METADATA.search(rest):
            return "an Apache Iceberg table (metadata/)"
    return None


def check_not_table_format(keys: Iterable[str], prefix: str, where: str) -> None:
    """Raise InputValidationError (source) naming `where` when `keys` (a listing under `prefix`, every
    key) are a table format's folder (`table_format`)."""
    table = table_format(keys, prefix)
    if table is not None:
        raise InputValidationError(
            "source",
            f"{where} is {table}: its folder holds data files its log has since removed; "
            "load a snapshot written as plain Parquet (e.g. CREATE TABLE AS SELECT) instead",
        )


@dataclass(frozen=True)
class RowGroup:
    """One row group: its index in the object, its rows, the object's rows before it, and the
    bytes of its column chunks (`start`..`end`, compressed) and their uncompressed size."""

    index: int
    rows: int
    first_row: int
    start: int
    end: int
    uncompressed: int


@dataclass(frozen=True)
class ParquetObject:
    """An object Plan read the footer of: where it is, its version and its row groups."""

    bucket: str
    key: str
    size: int
    etag: str
    row_groups: tuple[RowGroup, ...]


def _refuse(where: str, why: str) -> InputValidationError:
    return InputValidationError("source", f"{where} is not a Parquet file Plan can read: {why}")


def read_footer(read_range: Callable[[int, int], bytes], size: int, where: str) -> pq.FileMetaData:
    """The object's footer, parsed by pyarrow from its last bytes only (`read_range(first, last)`:
    bytes first..last inclusive, a ranged GET pinned to the planned ETag). Raises
    InputValidationError naming `where` when the object is not Parquet or its footer is corrupt."""
    if size < MIN_SIZE:
        raise _refuse(where, f"{size} bytes is smaller than the smallest Parquet file")
    first = max(0, size - TAIL_PROBE_BYTES)
    tail = read_range(first, size - 1)
    if tail[-4:] != MAGIC:
        raise _refuse(where, "it does not end with the Parquet magic bytes PAR1")
    length = int.from_bytes(tail[-8:-4], "little")
    start = size - 8 - length
    if length == 0 or start < 4 or length > MAX_FOOTER_BYTES:
        raise _refuse(where, f"its footer length {length} does not fit the object's {size} bytes")
    if start < first:
        tail = read_range(start, first - 1) + tail
        first = start
    import pyarrow
    import pyarrow.parquet as pq

    # The footer alone after the leading magic: pyarrow parses a footer from a file's end, and the
    # offsets it holds (absolute in the object) are only read, never followed, here.
    footer = MAGIC + tail[start - first :]
    try:
        return pq.read_metadata(pyarrow.BufferReader(footer))
    except Exception as error:  # pyarrow's own errors (ArrowInvalid, OSError) name the damage
        raise _refuse(where, f"corrupt footer ({' '.join(str(error).split())})") from None


def row_groups(meta: pq.FileMetaData) -> tuple[RowGroup, ...]:
    """The footer's row groups with their byte spans (a column chunk starts at its dictionary page,
    if any, else its first data page)."""
    groups = []
    first_row = 0
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        starts, ends, uncompressed = [], [], 0
        for c in range(group.num_columns):
            chunk = group.column(c)
            dictionary = chunk.dictionary_page_offset
            begin = min(dictionary, chunk.data_page_offset) if dictionary else chunk.data_page_offset
            starts.append(begin)
            ends.append(begin + chunk.total_compressed_size)
            uncompressed += chunk.total_uncompressed_size
        start = min(starts, default=0)
        groups.append(RowGroup(i, group.num_rows, first_row, start, max(ends, default=start), uncompressed))
        first_row += group.num_rows
    return tuple(groups)


def check_row_group_memory(
    meta: pq.FileMetaData, columns: Sequence[str] | None, *, worker_memory_mib: int, where: str
) -> None:
    """Raise InputValidationError (source) naming the object and row group whose batch of BATCH_ROWS
    rows the Worker cannot hold: the Worker streams pages, so a row group costs it one batch, but a
    batch of very wide rows (large binary or text values) can still pass its memory."""
    read = _leaves_read(meta, columns)
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        if group.num_rows == 0:
            continue
        size = sum(group.column(c).total_uncompressed_size for c in read)
        batch = size / group.num_rows * min(BATCH_ROWS, group.num_rows)
        need = WORKER_BASE_MIB + batch * BATCH_MEMORY_FACTOR / 2**20
        if need > worker_memory_mib:
            raise InputValidationError(
                "source",
                f"{where} row group {i} has rows of ~{size / group.num_rows:,.0f} bytes (uncompressed, the "
                f"columns the mapping reads): a batch of {min(BATCH_ROWS, group.num_rows)} needs "
                f"~{need:,.0f} MiB, more than the Worker's {worker_memory_mib} MiB; raise worker_memory_mib "
                "in cdk.json, or write the file with fewer, smaller values per row",
            )


def columns_read(spec: JobSpec, names: Sequence[str]) -> list[str] | None:
    """The top-level columns of `names` (a file's) the mapping reads, in the file's order; None for
    every column (`"attributes": "*"`). A name the mapping gives reads the column of that name, or,
    when the file has none and the name has dots, the struct column its first part names (`a.b` is
    the field `b` of `a`), as the mapping resolves it (logic.values.field_value): the one rule for
    which columns a job reads, at Plan (checks, memory), in the Worker and in `mapload estimate`."""
    if spec.dynamodb is not None and spec.dynamodb.copy_all:
        return None
    wanted = {name for _, name in [*references(spec), *graph_references(spec)]}
    top = {name if name in names else name.split(".", 1)[0] for name in wanted}
    return [name for name in names if name in top]


def _leaves_read(meta: pq.FileMetaData, columns: Sequence[str] | None) -> list[int]:
    """The leaf columns (column chunks) pyarrow reads for `iter_batches(columns=columns)`: a name
    selects a leaf when it is the leaf's path or a prefix of it ending at a part, so a top-level
    column literally named `a.b` also reads the field `b` of a struct `a`, and nothing of `a.bc`."""
    if columns is None:
        return list(range(meta.num_columns))
    tops = _leaf_tops(meta)
    wanted = set(columns)
    read = []
    for c in range(meta.num_columns):
        path, top = meta.schema.column(c).path, tops[c]
        parts = [top, *path[len(top) + 1 :].split(".")] if path != top else [top]
        if any(".".join(parts[:k]) in wanted for k in range(1, len(parts) + 1)):
            read.append(c)
    return read


def _leaf_tops(meta: pq.FileMetaData) -> list[str]:
    """The top-level column of each leaf column, in order. A leaf's dotted path cannot tell a column
    named `a.b` from the field `b` of a struct `a`; the schema's tree can (a leaf per scalar)."""
    schema = meta.schema.to_arrow_schema()
    tops = [field.name for field in schema for _ in range(_leaf_count(field.type))]
    if len(tops) != meta.num_columns:  # a type this count does not know: the path's first part
        return [meta.schema.column(c).path.split(".", 1)[0] for c in range(meta.num_columns)]
    return tops


def _leaf_count(kind: Any) -> int:
    import pyarrow.types as pat  # type: ignore[import-untyped]

    if pat.is_struct(kind):
        return sum(_leaf_count(kind.field(i).type) for i in range(kind.num_fields))
    if pat.is_map(kind):
        return _leaf_count(kind.key_type) + _leaf_count(kind.item_type)
    if pat.is_list(kind) or pat.is_large_list(kind) or pat.is_fixed_size_list(kind):
        return _leaf_count(kind.value_type)
    return 1


def cut_row_groups(
    objects: Iterable[ParquetObject],
    shard_size: int,
    *,
    max_shards: int,
    uncompressed: bool = False,
    held_bytes: int | None = None,
) -> list[dict[str, Any]]:
    """Shard items (docs/CONTRACTS.md "Shard item") of whole row groups.

    The rule: an object's row groups, in file order, fill a shard while their compressed bytes stay
    within `shard_size`; the row group that would pass it starts the next shard, and a row group
    larger than `shard_size` is a shard alone. So each row group is in exactly one shard, and
    shards never span objects; an object without rows gives none. `start`/`end` are the bytes of
    the shard's column chunks, `rowGroups` its `[first, stop)` row groups, `firstRow` the object's
    rows before it. Raises InputValidationError (shardSizeMiB) past `max_shards`.

    `uncompressed`: weigh row groups by their uncompressed bytes instead: a property graph Worker
    holds every id of its shard (a bulkPutItems one its staged items), so its shard size bounds
    the data as text (logic/spec/checks.py
    `check_shard_memory`), which compression would hide. `held_bytes`: refuse, naming it, a row
    group larger (uncompressed) than the largest shard the Worker holds.
    """
    shards: list[dict[str, Any]] = []
    for obj in objects:
        if held_bytes is not None:
            _check_held(obj, held_bytes)
        for first, stop in _packed(obj.row_groups, shard_size, uncompressed):
            groups = obj.row_groups[first:stop]
            shards.append(
                {
                    "index": len(shards),
                    "bucket": obj.bucket,
                    "key": obj.key,
                    "etag": obj.etag,
                    "start": min(g.start for g in groups),
                    "end": max(g.end for g in groups),
                    "objectSize": obj.size,
                    "dataStart": 0,
                    "header": None,
                    "firstLineNumber": None,
                    "rowGroups": [first, stop],
                    "firstRow": groups[0].first_row,
                    "rows": sum(g.rows for g in groups),
                }
            )
            if len(shards) > max_shards:
                raise InputValidationError(
                    "shardSizeMiB",
                    f"{shard_size}-byte shards would cut the source into more than {max_shards} shards; "
                    "use a larger shard size",
                )
    return shards


def _check_held(obj: ParquetObject, held_bytes: int) -> None:
    for group in obj.row_groups:
        if group.uncompressed > held_bytes:
            raise InputValidationError(
                "source",
                f"row group {group.index} of s3://{obj.bucket}/{obj.key} holds "
                f"{group.uncompressed / 2**20:,.1f} MiB uncompressed, more than the "
                f"{held_bytes / 2**20:g} MiB a Worker holds of a shard here (a property graph's keeps "
                "every id of its shard in memory, a bulkPutItems one its staged items); write the file "
                "with smaller row groups, or raise worker_memory_mib",
            )


def _packed(groups: Sequence[RowGroup], shard_size: int, uncompressed: bool) -> Iterator[tuple[int, int]]:
    first, size = 0, 0
    for i, group in enumerate(groups):
        span = group.uncompressed if uncompressed else group.end - group.start
        if i > first and size + span > shard_size:
            yield first, i
            first, size = i, 0
        size += span
    if first < len(groups):
        yield first, len(groups)
