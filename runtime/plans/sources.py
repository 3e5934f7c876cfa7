"""A job's source objects as Plan sees them: listed or prepared, with CSV headers or Parquet footers."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from adapters.s3 import ObjectInfo, S3Store
from logic import bulk_items, endpoints, parquet, planning
from logic.dynamodb_json import not_data
from logic.errors import InputValidationError, SourceNotFoundError
from logic.spec.checks import check_fields, id_shape
from logic.spec.inputs import MAX_SHARD_SIZE_MIB, JobSpec
from plans.reads import READS_IN_FLIGHT

# (bucket, key) of a prepared object -> (its source, zip member, source ETag).
Origins = dict[tuple[str, str], tuple[str, str | None, str]]


def _header(store: S3Store, obj: ObjectInfo, spec: JobSpec) -> tuple[list[str] | None, int, int]:
    """The object's CSV header, the byte where its data starts and how many lines precede it."""
    return planning.probe_header(lambda first, last: store.read_range(obj, first, last), obj.size, spec)


def objects(
    store: S3Store,
    staging_bucket: str,
    bucket: str,
    key: str,
    prepared: Mapping[str, Any],
    spec_format: str,
) -> tuple[list[ObjectInfo], Origins]:
    """The objects to load: Prepare's plain copies (with where each came from) or the source's."""
    if not prepared.get("preparedKey"):
        listed = (
            store.list(bucket, key, not_data(spec_format))
            if key == "" or key.endswith("/")
            else [store.head(bucket, key)]
        )
        return listed, {}
    entries = store.get_json(staging_bucket, str(prepared["preparedKey"]))
    found = [ObjectInfo(e["bucket"], e["key"], int(e["size"]), str(e["etag"])) for e in entries]
    origin: Origins = {
        (e["bucket"], e["key"]): (str(e["source"]), e.get("member"), str(e.get("sourceEtag") or e["etag"]))
        for e in entries
    }
    return found, origin


def read_headers(
    store: S3Store, found: list[ObjectInfo], spec: JobSpec, origin: Origins
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each object with its header and where its data starts; the lines before its data, by key.

    Only a CSV header is read (READS_IN_FLIGHT objects at a time); the other formats' data starts
    at byte 0, and nothing of them is read."""
    planned = []
    line_bases: dict[str, int] = {}
    if planning.has_header(spec):
        with ThreadPoolExecutor(max_workers=READS_IN_FLIGHT, thread_name_prefix="header") as pool:
            headers = list(pool.map(lambda obj: _header(store, obj, spec), found))
    else:
        headers = [(None, 0, 0)] * len(found)
    for obj, (header, data_start, lines_before) in zip(found, headers, strict=True):
        if header is not None:
            try:  # a field name typo fails the job now instead of rejecting every record
                check_fields(spec, header)
            except InputValidationError as error:
                source, member, _ = origin.get(
                    (obj.bucket, obj.key), (f"s3://{obj.bucket}/{obj.key}", None, "")
                )
                where = f"{source} member {member}" if member else source
                raise InputValidationError(error.field, f"{error.message} (header of {where})") from None
        line_bases[obj.key] = lines_before
        planned.append(
            {
                "bucket": obj.bucket,
                "key": obj.key,
                "size": obj.size,
                "etag": obj.etag,
                "header": header,
                "data_start": data_start,
            }
        )
    return planned, line_bases


def parquet_objects(store: S3Store, bucket: str, key: str) -> list[ObjectInfo]:
    """A Parquet source's data files: the object, or the prefix's keys but those whose name (below
    the prefix) starts with `_` or `.`; a table format's folder is refused."""
    if not (key == "" or key.endswith("/")):
        return [store.head(bucket, key)]
    listed = store.list(bucket, key)
    parquet.check_not_table_format((o.key for o in listed), key, f"s3://{bucket}/{key}")
    found = [o for o in listed if parquet.is_data(o.key, key)]
    if not found:
        raise SourceNotFoundError(
            f"no Parquet data files under s3://{bucket}/{key} (names starting _ or . are not data)"
        )
    return found


def read_footers(
    store: S3Store, found: list[ObjectInfo], spec: JobSpec, worker_memory_mib: int
) -> list[parquet.ParquetObject]:
    """Each object's row groups from its footer (ranged GETs of its last bytes only, many at once);
    the columns the mapping names are checked in every object, and each row group's memory."""
    from logic.parquet_values import check_schema

    def footer(obj: ObjectInfo) -> parquet.ParquetObject:
        where = f"s3://{obj.bucket}/{obj.key}"
        meta = parquet.read_footer(lambda first, last: store.read_range(obj, first, last), obj.size, where)
        schema = meta.schema.to_arrow_schema()
        check_schema(schema, spec, where)
        columns = parquet.columns_read(spec, schema.names)
        parquet.check_row_group_memory(meta, columns, worker_memory_mib=worker_memory_mib, where=where)
        return parquet.ParquetObject(obj.bucket, obj.key, obj.size, obj.etag, parquet.row_groups(meta))

    with ThreadPoolExecutor(max_workers=READS_IN_FLIGHT, thread_name_prefix="footer") as pool:
        return list(pool.map(footer, found))


def held_bytes(spec: JobSpec, worker_memory_mib: int) -> int | None:
    """The largest shard (bytes of text) a Worker holds: a property graph's (its ids) or a
    bulkPutItems job's (its staged items); None for the others (they stream)."""
    if spec.dynamodb is not None and spec.dynamodb.bulk:
        return bulk_items.max_shard_mib(worker_memory_mib) * 2**20
    if spec.graph is None or spec.graph.model != "property":
        return None
    largest = endpoints.max_shard_mib(worker_memory_mib, MAX_SHARD_SIZE_MIB, id_shape(spec))
    return largest * 2**20


def number_and_attribute(shards: list[dict[str, Any]], line_bases: dict[str, int], origin: Origins) -> None:
    """The first shard of each object knows its first line number; rejects name the source, not
    the prepared copy."""
    seen: set[str] = set()
    for shard in shards:
        shard["lineBase"] = line_bases[shard["key"]] if shard["key"] not in seen else None
        seen.add(shard["key"])
        if (shard["bucket"], shard["key"]) in origin:
            shard["source"], shard["member"], shard["sourceEtag"] = origin[(shard["bucket"], shard["key"])]
