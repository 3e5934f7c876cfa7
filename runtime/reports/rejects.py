"""The job's rejects file: the shards' rejected records merged in file order, with file line numbers."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from adapters.s3 import S3Store
from logic import checkpoints, layout, report

# Shards' rejects files read at once (one GET each for most): 100,000 shards at 20 ms a GET take
# ~63 s of Finalize's 900 s instead of 2,000 s one after another.
REJECTS_READS_IN_FLIGHT = 32
# What is read ahead of the merge: the first REJECTS_HEAD_BYTES of each of up to
# REJECTS_READ_AHEAD files (a larger file's rest is streamed when the merge reaches it), so
# memory holds at most 64 MiB of read-ahead, whatever the files' sizes.
REJECTS_HEAD_BYTES = 1024 * 1024
REJECTS_READ_AHEAD = 2 * REJECTS_READS_IN_FLIGHT


def merge_rejects(
    store: S3Store,
    bucket: str,
    job_id: str,
    run_id: str,
    manifest: list[dict[str, Any]],
    shards: Mapping[int, Mapping[str, Any]],
) -> tuple[str | None, list[dict[str, Any]]]:
    """One rejects file in file order with absolute line numbers; None when nothing was rejected.

    Streamed to S3 in parts as it is merged: memory holds one part and the files read ahead,
    /tmp holds nothing, whatever the number of rejects (S3 cannot copy the shards' files: every
    line gets its file line number). The files are read REJECTS_READS_IN_FLIGHT at a time.
    """
    bases = report.line_numbers(manifest, shards)
    sample: list[dict[str, Any]] = []
    # A shard that stopped before its end (logic/checkpoints.py) has a file per segment, in order.
    keyed = [(index, key) for index in sorted(shards) for key in checkpoints.rejects_keys(shards[index])]
    if not keyed:
        return None, sample
    key = layout.rejects_key(job_id, run_id)
    with store.streaming_upload(bucket, key, "application/x-ndjson") as merged:
        for index, lines in _read_ahead(store, bucket, keyed):
            base = bases.get(index)
            for raw in lines:
                record = json.loads(raw)
                if "shardLine" not in record:  # a Parquet row: its row group and row say where
                    merged.write(raw + b"\n")
                    if len(sample) < report.SAMPLE_SIZE:
                        sample.append(report.clip_sample(record))
                    continue
                shard_line = record.pop("shardLine")
                record = {
                    "line": None if base is None else base + shard_line,
                    "shardLine": shard_line,
                    **record,
                }
                if base is not None:
                    del record["shardLine"]
                merged.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
                if len(sample) < report.SAMPLE_SIZE:
                    sample.append(report.clip_sample(record))
    return f"s3://{bucket}/{key}", sample


def _read_ahead(
    store: S3Store, bucket: str, keyed: Sequence[tuple[int, str]]
) -> Iterator[tuple[int, Iterator[bytes]]]:
    """Each shard's rejects lines, in `keyed`'s order, while the next files' starts are being read."""
    with ThreadPoolExecutor(max_workers=REJECTS_READS_IN_FLIGHT, thread_name_prefix="rejects") as pool:
        waiting: deque[tuple[int, str, Future[tuple[bytes, int]]]] = deque()
        queued = iter(keyed)

        def fill() -> None:
            while len(waiting) < REJECTS_READ_AHEAD:
                following = next(queued, None)
                if following is None:
                    return
                index, key = following
                waiting.append((index, key, pool.submit(store.read_start, bucket, key, REJECTS_HEAD_BYTES)))

        try:
            fill()
            while waiting:
                index, key, started = waiting.popleft()
                fill()
                head, size = started.result()
                rest = store.stream_from(bucket, key, len(head)) if size > len(head) else iter(())
                yield index, _lines(head, rest)
        finally:
            for _, _, started in waiting:
                started.cancel()


def _lines(head: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    """The non-empty lines of `head` followed by `rest`'s chunks, without their newlines."""
    pending = head
    for chunk in rest:
        pending += chunk
        *whole, pending = pending.split(b"\n")
        yield from (line for line in whole if line)
    yield from (line for line in pending.split(b"\n") if line)
