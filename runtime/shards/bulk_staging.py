"""dynamodb.engine bulkPutItems' Worker side: each accepted item staged as a DynamoDB JSON line, not
written; DynamoDB's bulk put items operation writes the plan's staged objects after the Map.

A shard runs in one invocation (no checkpoints, as writeMode sync's): its items are held until
its end, a key's earlier records replaced by its later one (put's rule, logic/batching.py: the
later line of the file wins; each replaced record counts in `duplicates`), then ordered and cut
into parts (logic/bulk_items.py), each part one gzip object under the plan's items prefix with
its sidecar (logic/bulk_sidecar.py: record n of the object came from that source position), all
at keys fixed by the shard and part (logic/layout.py): a retried shard writes the same objects.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from adapters.s3 import S3Store
from logic import bulk_items, layout
from logic.bulk_sidecar import Position, RowPosition, Sidecar, TextPosition
from logic.values import Item, ParquetRow

# Lines handed to the compressor at once (fewer calls; a part's body is built as it is compressed).
_CHUNK_LINES = 512


@dataclass
class StagedObject:
    """One staged object of a shard: its key, its gzip body, its items and its sidecar."""

    key: str
    body: bytes
    items: int
    sidecar: bytes


@dataclass
class BulkStager:
    """A shard's items as staged lines, by key (the later record of a key replaces the earlier)."""

    duplicates: int = 0
    # key -> (its place in the staged order, its line, its source position)
    _records: dict[tuple[Any, ...], tuple[int, bytes, Position]] = field(default_factory=dict)

    @property
    def staged(self) -> int:
        """The items the shard stages: one per key."""
        return len(self._records)

    def add(self, item: Item, record: Any) -> None:
        """Stage `item`, mapped from `record` (a shard's Line, or a ParquetRow)."""
        if item.key in self._records:
            self.duplicates += 1
        line = bulk_items.staged_line(item.attributes)
        self._records[item.key] = (bulk_items.order(line), line, _position(record))

    def close(self) -> None:
        """Nothing to wait for: the objects are written by `finish` once the shard is read."""
        return None

    def objects(
        self, job_id: str, plan_id: str, index: int, shard_bytes: int, source: str, member: str | None
    ) -> list[StagedObject]:
        """The shard's staged objects (none when it staged no item), in part order."""
        if not self._records:
            return []
        # By order, then line: lines of distinct keys differ, so the order is the same every time.
        staged = sorted(self._records.values())
        ranges = bulk_items.cut([len(line) for _, line, _ in staged], bulk_items.parts(shard_bytes))
        parquet = isinstance(staged[0][2], RowPosition)
        found = []
        for part, records in enumerate(ranges):
            if not records:
                continue
            key = layout.bulk_items_key(job_id, plan_id, index, part)
            lines = [staged[n][1] for n in records]
            sidecar = Sidecar(source, member, parquet, [staged[n][2] for n in records])
            found.append(StagedObject(key, _gzip(lines), len(lines), sidecar.encode()))
        return found

    def finish(
        self,
        store: S3Store,
        bucket: str,
        job_id: str,
        plan_id: str,
        index: int,
        shard_bytes: int,
        source: str,
        member: str | None,
    ) -> dict[str, Any]:
        """Write the shard's objects and sidecars to `bucket`; what the shard's counts record of them."""
        written = self.objects(job_id, plan_id, index, shard_bytes, source, member)
        for obj in written:
            store.put_bytes(bucket, layout.bulk_lines_key(obj.key), obj.sidecar, "application/gzip")
            store.put_bytes(bucket, obj.key, obj.body, "application/gzip")
        return {
            "staged": self.staged,
            "bulkKeys": [obj.key for obj in written],
            "bulkItems": [obj.items for obj in written],
            "bulkBytes": [len(obj.body) for obj in written],
        }


def _position(record: Any) -> Position:
    if isinstance(record, ParquetRow):
        return RowPosition(record.row_group, record.row)
    raw: bytes = record.raw
    return TextPosition(record.number, raw.count(b"\n") + 1, record.offset, len(raw))


def _gzip(lines: list[bytes]) -> bytes:
    """The lines as one gzip stream (no file name, mtime 0: the same lines give the same bytes)."""
    compressor = zlib.compressobj(bulk_items.GZIP_LEVEL, zlib.DEFLATED, 31)
    chunks = [
        compressor.compress(b"".join(lines[start : start + _CHUNK_LINES]))
        for start in range(0, len(lines), _CHUNK_LINES)
    ]
    chunks.append(compressor.flush())
    return b"".join(chunks)
