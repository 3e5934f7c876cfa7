"""A staged bulk put items object's sidecar: where each of its records came from.

The service writes staged items exactly as staged, so nothing of mapload's may be in them; the
sidecar (`layout.bulk_lines_key`) keeps, in the staged object's record order (its n-th line is
record n, from 0), each record's position in the source as a shard's rejects name it
(shards/rejects.py): a text record's `shardLine`, `lines` and `offset` (and its byte `length`,
to read it back), a Parquet row's `rowGroup` and `row`. Finalize reads it only for an object the
service reported items of (reports/), to turn them into rejects and skips with their lines.

Format: gzip of one JSON object `{"v": 1, "source": "s3://…", "member": str | null,
"parquet": bool, "records": [[a, b, c, d], ...]}`, each record `[shardLine, lines, offset,
length]` (text) or `[rowGroup, row]` (Parquet).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from typing import NamedTuple

VERSION = 1


# Tuples, so a Worker makes one a staged record cheaply and the encoder writes each as the array
# the format has (make bench, "dynamodb.engine").
class TextPosition(NamedTuple):
    shard_line: int
    lines: int
    offset: int
    length: int


class RowPosition(NamedTuple):
    row_group: int
    row: int


Position = TextPosition | RowPosition


@dataclass
class Sidecar:
    source: str
    member: str | None = None
    parquet: bool = False
    records: list[Position] = field(default_factory=list)

    def add(self, position: Position) -> None:
        if isinstance(position, RowPosition) != self.parquet:
            raise ValueError("a sidecar holds text positions or Parquet rows, not both")
        self.records.append(position)

    def encode(self) -> bytes:
        body = {
            "v": VERSION,
            "source": self.source,
            "member": self.member,
            "parquet": self.parquet,
            "records": self.records,  # each position a JSON array (a tuple)
        }
        return gzip.compress(json.dumps(body, separators=(",", ":")).encode(), 6, mtime=0)


def decode(data: bytes) -> Sidecar:
    body = json.loads(gzip.decompress(data))
    if body.get("v") != VERSION:
        raise ValueError(f"sidecar version {body.get('v')!r}, expected {VERSION}")
    parquet = bool(body["parquet"])
    records: list[Position] = [
        RowPosition(*map(int, r)) if parquet else TextPosition(*map(int, r)) for r in body["records"]
    ]
    return Sidecar(body["source"], body.get("member"), parquet, records)
