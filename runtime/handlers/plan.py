"""Plan: validate the input, size the source objects, cut byte-range shards, write the manifest."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from adapters import clients
from adapters.executions import execution_ended
from adapters.ledger import Ledger
from adapters.s3 import ObjectInfo, S3Store
from handlers.observability import entry_point
from handlers.settings import PlanSettings
from logic import endpoints, layout, parquet, planning
from logic.dynamodb_json import not_data
from logic.errors import InputValidationError, SourceNotFoundError
from logic.payloads import check_input_size
from logic.spec.checks import (
    check_fields,
    check_graph_database,
    check_shard_memory,
    check_source_bucket,
    fit_shard_size,
    id_shape,
)
from logic.spec.inputs import MAX_SHARD_SIZE_MIB, JobSpec
from logic.spec.parse import parse_s3_uri, parse_spec, spec_to_json
from logic.writemodes import check_update_limits, write_plan

SETTINGS_CLASS = PlanSettings
# Footers read at once: thousands of Parquet objects' footers within Plan's timeout.
FOOTER_READS_IN_FLIGHT = 32


def _header(store: S3Store, obj: ObjectInfo, spec: JobSpec) -> tuple[list[str] | None, int, int]:
    """The object's CSV header, the byte where its data starts and how many lines precede it."""
    return planning.probe_header(lambda first, last: store.read_range(obj, first, last), obj.size, spec)


# (bucket, key) of a prepared object -> (its source, zip member, source ETag).
Origins = dict[tuple[str, str], tuple[str, str | None, str]]


def _objects(
    store: S3Store,
    settings: PlanSettings,
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
    entries = store.get_json(settings.staging_bucket, str(prepared["preparedKey"]))
    objects = [ObjectInfo(e["bucket"], e["key"], int(e["size"]), str(e["etag"])) for e in entries]
    origin: Origins = {
        (e["bucket"], e["key"]): (str(e["source"]), e.get("member"), str(e.get("sourceEtag") or e["etag"]))
        for e in entries
    }
    return objects, origin


def _read_headers(
    store: S3Store, objects: list[ObjectInfo], spec: JobSpec, origin: Origins
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each object with its header and where its data starts; the lines before its data, by key."""
    planned = []
    line_bases: dict[str, int] = {}
    for obj in objects:
        header, data_start, lines_before = _header(store, obj, spec)
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


def _parquet_objects(store: S3Store, bucket: str, key: str) -> list[ObjectInfo]:
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


def _read_footers(
    store: S3Store, objects: list[ObjectInfo], spec: JobSpec, worker_memory_mib: int
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

    with ThreadPoolExecutor(max_workers=FOOTER_READS_IN_FLIGHT, thread_name_prefix="footer") as pool:
        return list(pool.map(footer, objects))


def _graph_held_bytes(spec: JobSpec, worker_memory_mib: int) -> int | None:
    """The largest shard (bytes of text) a property graph Worker holds; None without one."""
    if spec.graph is None or spec.graph.model != "property":
        return None
    largest = endpoints.max_shard_mib(worker_memory_mib, MAX_SHARD_SIZE_MIB, id_shape(spec))
    return largest * 2**20


def _number_and_attribute(shards: list[dict[str, Any]], line_bases: dict[str, int], origin: Origins) -> None:
    """The first shard of each object knows its first line number; rejects name the source, not
    the prepared copy."""
    seen: set[str] = set()
    for shard in shards:
        shard["lineBase"] = line_bases[shard["key"]] if shard["key"] not in seen else None
        seen.add(shard["key"])
        if (shard["bucket"], shard["key"]) in origin:
            shard["source"], shard["member"], shard["sourceEtag"] = origin[(shard["bucket"], shard["key"])]


def _counted_plan(spec: JobSpec, ledger: Ledger, plan_id: str) -> str | None:
    """The plan id when the job adds numbers (`"update": "add"`), else None; refuses a re-run of
    such a job under another plan: its markers are keyed by plan and byte offset, so a changed
    input or spec would add every record an earlier run already added once more."""
    target = write_plan(spec.dynamodb) if spec.dynamodb is not None else None
    if target is None or not target.counters:
        return None
    earlier = (ledger.get_job(spec.job_id) or {}).get("countedPlanId")
    if earlier is not None and earlier != plan_id:
        raise InputValidationError(
            "jobId",
            f"jobId {spec.job_id!r} already added numbers (update add) under another plan: its input "
            "objects or spec have changed since, so a re-run cannot tell which records were added; "
            "start the corrected load under a new jobId (the earlier additions stay)",
        )
    return plan_id


def _shards(
    store: S3Store,
    settings: PlanSettings,
    bucket: str,
    key: str,
    prepared: Mapping[str, Any],
    spec: JobSpec,
) -> tuple[list[Any], list[dict[str, Any]]]:
    """The source's objects and the shards cut from them: whole row groups from Parquet footers,
    byte ranges from the other formats' objects."""
    if spec.format == "parquet":  # shards of whole row groups, from the objects' footers
        objects = _parquet_objects(store, bucket, key)
        footers = _read_footers(store, objects, spec, settings.worker_memory_mib)
        graph_held = _graph_held_bytes(spec, settings.worker_memory_mib)
        shards = parquet.cut_row_groups(
            footers,
            spec.shard_size_bytes,
            max_shards=planning.DEFAULT_MAX_SHARDS,
            # A property graph shard's size bounds its ids in the Worker's memory: count them as text.
            uncompressed=graph_held is not None,
            held_bytes=graph_held,
        )
    else:
        objects, origin = _objects(store, settings, bucket, key, prepared, spec.format)
        planned, line_bases = _read_headers(store, objects, spec, origin)
        shards = planning.cut_shards(planned, spec.shard_size_bytes)
        _number_and_attribute(shards, line_bases, origin)
    return objects, shards


def plan(
    event: Mapping[str, Any],
    settings: PlanSettings,
    store: S3Store,
    ledger: Ledger,
    ended: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """`ended(execution id)`: whether the execution holding the jobId is over (then taken over)."""
    execution = event.get("execution") or {}
    run_id = str(execution.get("name") or "local")
    raw_input = dict(event.get("input") or {})
    # Prepare's result ($.prepare in the state machine): the plain objects it wrote, if any.
    prepared = raw_input.pop("prepare", None) or {}
    spec = parse_spec(raw_input, table_key=settings.table_key, execution_name=run_id)
    check_input_size(raw_input, spec_to_json(spec))
    check_graph_database(spec, raw_input, graph_enabled=settings.graph_enabled)
    spec = fit_shard_size(spec, worker_memory_mib=settings.worker_memory_mib)
    check_shard_memory(spec, worker_memory_mib=settings.worker_memory_mib)
    if spec.dynamodb is not None:
        check_update_limits(spec.dynamodb)
    bucket, key = parse_s3_uri(spec.source)
    check_source_bucket(bucket, settings.source_buckets)
    objects, shards = _shards(store, settings, bucket, key, prepared, spec)
    job_id = spec.job_id
    spec_json = spec_to_json(spec)
    # Shards are recorded under the plan's fingerprint: a re-run of the job with the same
    # objects and spec finds the shards an earlier run finished, and skips them.
    plan_id = planning.plan_id(shards, spec_json)
    counted = _counted_plan(spec, ledger, plan_id)
    execution_id = str(execution.get("id") or run_id)
    ledger.start_job(job_id, run_id, execution_id, len(shards), counted_plan=counted, ended=ended)
    manifest = layout.manifest_key(job_id, run_id)
    store.put_json(settings.staging_bucket, manifest, shards)
    max_concurrency = min(spec.max_concurrency, settings.max_concurrency_cap)
    return {
        "job": {
            "jobId": job_id,
            "runId": run_id,
            "planId": plan_id,
            "spec": spec_json,
            "tableKey": settings.table_key,
            "objects": len(objects),
            "bytes": sum(o.size for o in objects),
            # The Workers that can run at once: the write budget's share is never above budget / this.
            "workers": max(1, min(max_concurrency, len(shards))),
        },
        "manifestKey": manifest,
        "mapResultsPrefix": layout.map_results_prefix(job_id, run_id),
        "maxConcurrency": max_concurrency,
        "shardCount": len(shards),
    }


def handle(event: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    settings = PlanSettings.from_env(env)
    return plan(
        event,
        settings,
        S3Store(clients.s3()),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        functools.partial(
            execution_ended, clients.stepfunctions(), worker_timeout_seconds=settings.worker_timeout_seconds
        ),
    )


@entry_point("Plan")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
