"""The prepare service: find the gzip and zip sources (by content), stream their decompression into
plain objects in the staging bucket (multipart, parts in flight), and list what Plan must shard."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from adapters.archive import S3RangeReader, zip_members
from adapters.multipart import S3Multipart, StreamUpload
from adapters.s3 import ObjectInfo, S3Store
from archives.settings import PrepareServiceSettings
from logic import compression
from logic.dynamodb_json import not_data
from logic.spec.checks import check_source_bucket
from logic.spec.parse import parse_s3_uri, parse_spec
from logic.tables import named_table

# Memory ~ PART_BYTES x (IN_FLIGHT + 1) for the buffered parts, well inside the function's memory.
PART_BYTES = 16 * 1024 * 1024
IN_FLIGHT = 4


def _entry(obj: ObjectInfo, source: str, member: str | None, source_etag: str) -> dict[str, Any]:
    return {
        "bucket": obj.bucket,
        "key": obj.key,
        "size": obj.size,
        "etag": obj.etag,
        "source": source,
        "member": member,
        # The archive's own ETag: what a re-run's plan fingerprint compares (the plain copy is
        # written anew, under a new key and ETag, by every run).
        "sourceEtag": source_etag,
    }


def _write(client: Any, store: S3Store, bucket: str, key: str, chunks: Iterator[bytes]) -> ObjectInfo:
    StreamUpload(S3Multipart(client, bucket, key), part_size=PART_BYTES, in_flight=IN_FLIGHT).write_all(
        chunks
    )
    return store.head(bucket, key)


def prepare(
    event: Mapping[str, Any], settings: PrepareServiceSettings, client: Any, store: S3Store
) -> dict[str, Any]:
    """Prepare the execution's input (`event`: `input`, `execution`): its compressed objects are
    written to staging as plain copies and listed there; the result names the listing (None when
    nothing is compressed) and counts the objects."""
    execution = event.get("execution") or {}
    run_id = str(execution.get("name") or "local")
    # The whole input is validated here, so a typo fails before a long decompression; the key of a
    # table the input names is Plan's to check (plans/target.py), once it has read that table.
    raw = event.get("input") or {}
    table_key = settings.table_key if named_table(raw) is None else None
    spec = parse_spec(raw, table_key=table_key, execution_name=run_id)
    bucket, key = parse_s3_uri(spec.source)
    check_source_bucket(bucket, settings.source_buckets)
    if spec.format == "parquet":  # compressed page by page inside the file: never a gzip or zip
        return {"preparedKey": None, "objects": 0, "compressed": 0}
    objects = (
        store.list(bucket, key, not_data(spec.format))
        if key == "" or key.endswith("/")
        else [store.head(bucket, key)]
    )
    kinds = [
        compression.detect(store.read_range(o, 0, min(o.size, compression.MAGIC_BYTES) - 1))
        if o.size
        else None
        for o in objects
    ]
    if not any(kinds):  # plain sources pass straight through: no copy
        return {"preparedKey": None, "objects": len(objects), "compressed": 0}
    entries: list[dict[str, Any]] = []
    for index, (obj, kind) in enumerate(zip(objects, kinds, strict=True)):
        source = f"s3://{obj.bucket}/{obj.key}"
        if kind is None:
            entries.append(_entry(obj, source, None, obj.etag))
        elif kind == "gzip":
            target = compression.prepared_key(
                spec.job_id, run_id, index, compression.plain_name(obj.key, kind)
            )
            chunks = compression.gunzip(store.stream(obj, 0), source)
            entries.append(
                _entry(_write(client, store, settings.staging_bucket, target, chunks), source, None, obj.etag)
            )
        else:
            with S3RangeReader(client, obj.bucket, obj.key, obj.size, obj.etag) as reader:
                for name, chunks in zip_members(reader, source):
                    target = compression.prepared_key(spec.job_id, run_id, index, name)
                    written = _write(client, store, settings.staging_bucket, target, chunks)
                    entries.append(_entry(written, source, name, obj.etag))
    listing = compression.prepared_list_key(spec.job_id, run_id)
    store.put_json(settings.staging_bucket, listing, entries)
    return {
        "preparedKey": listing,
        "objects": len(entries),
        "compressed": sum(1 for k in kinds if k),
    }
