"""Worker: stream one shard's byte range, parse and map its records, write them in batches."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import IO, Any

from adapters import clients
from adapters.dynamodb import BatchWriter
from adapters.ledger import Ledger
from adapters.s3 import ObjectInfo, S3Store
from handlers.observability import entry_point
from handlers.settings import WorkerSettings
from logic import layout
from logic.batching import Batcher
from logic.errors import SourceNotAllowedError
from logic.mapping import make_mapper
from logic.parsing import is_skipped, make_parser
from logic.records import Line, iter_shard_lines
from logic.report import clip_sample
from logic.spec import JobSpec, parse_spec
from logic.values import Reject

SETTINGS_CLASS = WorkerSettings
SAMPLE_SIZE = 5
SPOOL_BYTES = 8 * 1024 * 1024


class RejectSink:
    """Rejected records with everything needed to fix and reload them, spooled to disk when large."""

    def __init__(self, source: str, member: str | None = None) -> None:
        self._member = member
        self._source = source
        self._file: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - closed by upload
        self.count = 0
        self.by_reason: Counter[str] = Counter()
        self.sample: list[dict[str, Any]] = []

    def add(self, line: Line, code: str, reason: str) -> None:
        try:
            raw: dict[str, str] = {"raw": line.raw.decode("utf-8")}
        except UnicodeDecodeError:  # keep the exact bytes so the row can be repaired and reloaded
            raw = {
                "raw": line.raw.decode("utf-8", "replace"),
                "rawBase64": base64.b64encode(line.raw).decode(),
            }
        record = {
            "source": self._source,
            **({"member": self._member} if self._member else {}),
            "shardLine": line.number,
            "offset": line.offset,
            "code": code,
            "reason": reason,
            **raw,
        }
        self._file.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        self.count += 1
        self.by_reason[code] += 1
        if len(self.sample) < SAMPLE_SIZE:
            # The sample travels in the ledger item and the report: keep it small; the rejects
            # file holds the whole line.
            self.sample.append(clip_sample(record))

    def file(self) -> IO[bytes]:
        self._file.seek(0)
        return self._file


def process(
    lines: Iterable[Line],
    spec: JobSpec,
    header: list[str] | None,
    writer: BatchWriter | None,
    rejects: RejectSink,
) -> dict[str, int]:
    """The per-record loop; `writer` is None in a dry run."""
    parse = make_parser(spec, header)
    to_item = make_mapper(spec)
    batcher = Batcher(25)
    read = written = owned = 0
    for line in lines:
        owned += 1
        if is_skipped(line.raw, spec):
            continue
        read += 1
        fields = parse(line)
        if isinstance(fields, Reject):
            rejects.add(line, fields.code, fields.reason)
            continue
        item = to_item(fields)
        if isinstance(item, Reject):
            rejects.add(line, item.code, item.reason)
            continue
        written += 1
        batch = batcher.add(item)
        if batch and writer is not None:
            writer.submit([i.attributes for i in batch])
    last = batcher.flush()
    if last and writer is not None:
        writer.submit([i.attributes for i in last])
    return {"lines": owned, "read": read, "written": written, "duplicates": batcher.duplicates}


def work(
    event: Mapping[str, Any], settings: WorkerSettings, store: S3Store, ledger: Ledger, db: Any
) -> dict[str, Any]:
    shard = event["shard"]
    job = event["job"]
    job_id, run_id, index = job["jobId"], job["runId"], int(shard["index"])
    prepared = shard["bucket"] == settings.staging_bucket and str(shard["key"]).startswith("prepared/")
    if shard["bucket"] not in settings.source_buckets and not prepared:
        raise SourceNotAllowedError(f"shard {index}: bucket {shard['bucket']!r} is not an allowed source")
    if ledger.shard_done(job_id, run_id, index):
        # A retry after the counts were recorded: the items are written, count nothing twice.
        return {"index": index, "skipped": True}
    spec = parse_spec(job["spec"], table_key=job["tableKey"])
    obj = ObjectInfo(shard["bucket"], shard["key"], int(shard["objectSize"]), shard["etag"])
    start, end = int(shard["start"]), int(shard["end"])
    read_from = start - 1 if start > 0 else 0
    lines = iter_shard_lines(store.stream(obj, read_from), read_from=read_from, start=start, end=end)
    # A shard of a decompressed copy (Prepare) names the original source and zip member.
    rejects = RejectSink(shard.get("source") or f"s3://{obj.bucket}/{obj.key}", shard.get("member"))
    writer = None
    if not spec.dry_run:
        writer = BatchWriter(db, settings.table_name, in_flight=settings.write_concurrency)
    try:
        counts = process(lines, spec, shard.get("header"), writer, rejects)
    finally:
        stats = writer.close() if writer is not None else None
    rejects_key = None
    if rejects.count:
        rejects_key = layout.shard_rejects_key(job_id, run_id, index)
        store.upload(settings.staging_bucket, rejects_key, rejects.file(), "application/x-ndjson")
    result = {
        **counts,
        "rejected": rejects.count,
        "written": counts["written"],
        "bytes": end - start,
        "requests": stats.requests if stats else 0,
        "retries": stats.retries if stats else 0,
        "throttles": stats.throttles if stats else 0,
        "byReason": dict(rejects.by_reason),
        "sample": rejects.sample,
        "rejectsKey": rejects_key,
    }
    ledger.record_shard(job_id, run_id, index, result)
    # The state machine keeps only `index`; the rest feeds the EMF metrics (handlers/observability.py).
    metric_fields = ("read", "written", "rejected", "retries", "throttles", "bytes")
    return {"index": index, **{name: result[name] for name in metric_fields}}


def handle(event: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    settings = WorkerSettings.from_env(env)
    return work(
        event,
        settings,
        S3Store(clients.s3()),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        clients.dynamodb(settings.write_concurrency + 2),
    )


@entry_point("Worker", emit_metrics=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
