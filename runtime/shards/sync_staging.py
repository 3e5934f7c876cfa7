"""writeMode sync's Worker side: each mapped item staged in the hash bucket of its key, not written.

A shard's staged items are one object (`layout.sync_shard_key`): one gzip member per bucket, in
bucket order, so a bucket's section is a byte range that is a whole gzip stream; the sections'
ranges are recorded with the shard's counts (`syncSections`), and the Sync Map's worker of a
bucket reads its range of every shard (runtime/syncs/service.py). One object per shard keeps the
S3 requests at one PUT a shard and one ranged GET per shard and bucket.
"""

from __future__ import annotations

import zlib
from typing import Any

from logic import sync
from logic.values import Item


class SyncStager:
    """Stages a shard's items by bucket, compressed as they come (a bucket's gzip member each)."""

    def __init__(self, key_names: tuple[str, ...], buckets: int = 1) -> None:
        self.key_names = key_names
        self.buckets = buckets
        self.staged = 0
        self._parts: dict[int, list[bytes]] = {}
        self._compressors: dict[int, Any] = {}

    def add(self, item: Item) -> None:
        plain = sync.plain_item(item.attributes)
        key = sync.key_text(plain, self.key_names)
        bucket = sync.bucket_of(key, self.buckets)
        compressor = self._compressors.get(bucket)
        if compressor is None:
            compressor = self._compressors[bucket] = zlib.compressobj(6, zlib.DEFLATED, 31)
            self._parts[bucket] = []
        self._parts[bucket].append(compressor.compress(sync.staged_line(key, plain)))
        self.staged += 1

    def close(self) -> None:
        """Nothing to wait for: the object is written by `finish` once the shard is read."""
        return None

    def finish(self) -> tuple[bytes, dict[str, list[int]]]:
        """The shard's object and each non-empty bucket's [start, end) byte range in it."""
        body = bytearray()
        sections: dict[str, list[int]] = {}
        for bucket in sorted(self._compressors):
            start = len(body)
            body += b"".join(self._parts[bucket]) + self._compressors[bucket].flush()
            sections[str(bucket)] = [start, len(body)]
        return bytes(body), sections
