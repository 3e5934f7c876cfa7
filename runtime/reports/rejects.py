"""The job's rejects file: the shards' rejected records merged in file order, with file line numbers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from adapters.s3 import S3Store
from logic import layout, report


def merge_rejects(
    store: S3Store,
    bucket: str,
    job_id: str,
    run_id: str,
    manifest: list[dict[str, Any]],
    shards: Mapping[int, Mapping[str, Any]],
) -> tuple[str | None, list[dict[str, Any]]]:
    """One rejects file in file order with absolute line numbers; None when nothing was rejected.

    Streamed to S3 in parts as it is merged: memory holds one part, /tmp holds nothing, whatever
    the number of rejects (S3 cannot copy the shards' files: every line gets its file line number).
    """
    bases = report.line_numbers(manifest, shards)
    sample: list[dict[str, Any]] = []
    keyed = sorted(
        (index, str(shards[index]["rejectsKey"])) for index in shards if shards[index].get("rejectsKey")
    )
    if not keyed:
        return None, sample
    key = layout.rejects_key(job_id, run_id)
    with store.streaming_upload(bucket, key, "application/x-ndjson") as merged:
        for index, shard_key in keyed:
            base = bases.get(index)
            for raw in store.open_lines(bucket, shard_key):
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
