"""Worker: stream one shard's byte range, parse and map its records, write them (in batches for
`put`, one item at a time in the spec's write mode otherwise)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from adapters import clients
from adapters.budget import LeaseBoard, SharedBudget
from adapters.csvchain import LedgerChain
from adapters.dynamodb import BatchWriter, ItemWriter
from adapters.ledger import Ledger, Markers
from adapters.property_graph import PropertyGraphStager
from adapters.rdf import GraphStager, Writable, line_parser, to_quad
from adapters.s3 import ObjectInfo, S3Store
from handlers.observability import entry_point
from handlers.settings import WorkerSettings
from logic import layout, opencypher
from logic.batching import BATCH_ITEMS, Batcher
from logic.csvrecords import CutRecord, ShardRecords
from logic.endpoints import encode_ids, text_size
from logic.errors import SourceNotAllowedError
from logic.graph import is_rdf_comment, make_graph_mapper
from logic.mapping import make_mapper
from logic.parsing import is_skipped, make_parser
from logic.property_graph import headers, make_property_mapper
from logic.ratecontrol import write_units
from logic.records import Line, iter_shard_lines
from logic.report import SKIPPED_SAMPLE_SIZE, clip_sample
from logic.spec import RDF_FORMATS, JobSpec, parse_spec
from logic.values import Item, Reject
from logic.writemodes import write_plan

SETTINGS_CLASS = WorkerSettings
# Formats read as RFC 4180 records (logic/csvrecords.py): a quoted field may hold a line break.
CSV_RECORD_FORMATS = ("csv", "opencypher")
SAMPLE_SIZE = 5
# How long an uncertain CSV shard waits for the shards before it to publish (adapters/csvchain.py)
# before it raises CsvStartPendingError and gives its concurrency slot back: the state machine
# retries it with a backoff of up to a minute, for about as long as a throttled invocation.
CSV_START_WAIT_SECONDS = 20.0


class RejectSink:
    """Rejected records with everything needed to fix and reload them, written to `out` as they
    come (the Worker's `out` streams to S3 in parts: nothing is spooled to /tmp)."""

    def __init__(self, source: str, member: str | None = None, *, out: Writable) -> None:
        self._member = member
        self._source = source
        self._file = out
        self.count = 0
        self.by_reason: Counter[str] = Counter()
        self.sample: list[dict[str, Any]] = []

    def add(self, line: Line | CutRecord, code: str, reason: str) -> None:
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


Stager = GraphStager | PropertyGraphStager


class _Tally:
    """A shard's counts as its records pass: lines owned, records read, records accepted."""

    def __init__(self) -> None:
        self.owned = self.read = self.written = 0

    def counts(self, duplicates: int = 0) -> dict[str, int]:
        return {"lines": self.owned, "read": self.read, "written": self.written, "duplicates": duplicates}


def _records(
    lines: Iterable[Line | CutRecord], spec: JobSpec, rejects: RejectSink, tally: _Tally
) -> Iterator[Line]:
    """The CSV-like records to parse: blank and comment lines skipped, a cut record rejected."""
    for line in lines:
        tally.owned += 1
        if is_skipped(line.raw, spec):
            continue
        tally.read += 1
        if isinstance(line, CutRecord):
            rejects.add(line, line.code, line.reason)
            continue
        yield line


def process_rdf(
    lines: Iterable[Line], spec: JobSpec, graph: Stager | None, rejects: RejectSink
) -> dict[str, int]:
    """N-Quads/N-Triples: each line is one statement, checked by the RDF parser and staged."""
    parse = line_parser(spec.format)
    read = written = owned = 0
    for line in lines:
        owned += 1
        if is_skipped(line.raw, spec) or is_rdf_comment(line.raw):
            continue
        quads = parse(line)
        if not quads:  # a comment after whitespace the parser saw first
            continue
        read += 1
        if isinstance(quads, Reject):
            rejects.add(line, quads.code, quads.reason)
            continue
        written += 1
        if isinstance(graph, GraphStager):
            graph.add(quads)
    return {"lines": owned, "read": read, "written": written, "duplicates": 0}


def process_opencypher(
    lines: Iterable[Line | CutRecord],
    spec: JobSpec,
    header: list[str] | None,
    graph: Stager | None,
    rejects: RejectSink,
) -> dict[str, int]:
    """openCypher CSV rows (RFC 4180 records, as Neptune reads them: a quoted field may hold a line
    break): each checked against the format's rules under the object's header (Plan checked the
    header) and staged as it is, in the vertex or edge file by the header's kind."""
    columns = opencypher.parse_header(header or [])
    tally = _Tally()
    for line in _records(lines, spec, rejects, tally):
        try:
            text = line.raw.decode("utf-8")
            row = opencypher.parse_line(columns, text)
        except UnicodeDecodeError as error:
            rejects.add(line, "invalid_utf8", f"invalid UTF-8 at byte {line.offset + error.start}")
            continue
        except opencypher.FormatError as error:
            rejects.add(line, "opencypher_syntax", str(error))
            continue
        tally.written += 1
        if isinstance(graph, PropertyGraphStager):
            graph.add_line(columns.kind, text, row)
    return tally.counts()


class _Sender:
    """Hands mapped items to the writer: `put` in batches of 25 (the Batcher keeps the later of two
    records with one key and counts the other in `duplicates`), any other write mode one item at a
    time in file order (no dedupe: each record's condition or update must see the ones before)."""

    def __init__(self, writer: BatchWriter | ItemWriter | None, spec: JobSpec) -> None:
        assert spec.dynamodb is not None
        self._writer = writer
        self._batcher = Batcher(BATCH_ITEMS) if spec.dynamodb.write_mode == "put" else None

    def add(self, item: Item, offset: int) -> None:
        """Send `item`, mapped from the record at byte `offset` of its object."""
        if self._batcher is None:
            if isinstance(self._writer, ItemWriter):
                self._writer.submit(item.key, item.attributes, self._writer.units(item.size), offset)
            return
        self._send(self._batcher.add(item))

    def finish(self) -> int:
        """Send what is left; the duplicates superseded in a batch."""
        if self._batcher is None:
            return 0
        self._send(self._batcher.flush())
        return self._batcher.duplicates

    def _send(self, batch: list[Item] | None) -> None:
        if batch and isinstance(self._writer, BatchWriter):
            self._writer.submit([i.attributes for i in batch], write_units(i.size for i in batch))


def process(
    lines: Iterable[Line] | ShardRecords,
    spec: JobSpec,
    header: list[str] | None,
    writer: BatchWriter | ItemWriter | None,
    rejects: RejectSink,
    graph: Stager | None = None,
    *,
    source: str = "",
) -> dict[str, int]:
    """The per-record loop; `writer` and `graph` are None in a dry run (or without that target).
    `source` names the records' object (and member): a property graph's edge ids derive from it.

    CSV comes as ShardRecords: a record may span lines, and a cut one is rejected as it is."""
    if isinstance(lines, ShardRecords):
        if spec.format == "opencypher":
            counts = process_opencypher(lines, spec, header, graph, rejects)
        else:
            counts = _process_records(lines, spec, header, writer, rejects, graph, source)
        return {**counts, "lines": lines.lines}
    if spec.format in RDF_FORMATS:
        return process_rdf(lines, spec, graph, rejects)
    return _process_records(lines, spec, header, writer, rejects, graph, source)


def _process_records(
    lines: Iterable[Line | CutRecord],
    spec: JobSpec,
    header: list[str] | None,
    writer: BatchWriter | ItemWriter | None,
    rejects: RejectSink,
    graph: Stager | None,
    source: str,
) -> dict[str, int]:
    parse = make_parser(spec, header)
    to_item = make_mapper(spec) if spec.dynamodb is not None else None
    model = spec.graph.model if spec.graph is not None else None
    to_statements = make_graph_mapper(spec) if model == "rdf" else None
    to_rows = make_property_mapper(spec, source) if model == "property" else None
    sender = _Sender(writer, spec) if spec.dynamodb is not None else None
    tally = _Tally()
    for line in _records(lines, spec, rejects, tally):
        fields = parse(line)
        if isinstance(fields, Reject):
            rejects.add(line, fields.code, fields.reason)
            continue
        item = to_item(fields) if to_item is not None else None
        if isinstance(item, Reject):
            rejects.add(line, item.code, item.reason)
            continue
        if to_statements is not None:
            rendered = to_statements(fields)
            if isinstance(rendered, Reject):
                rejects.add(line, rendered.code, rendered.reason)
                continue
            quads = [to_quad(statement) for statement in rendered]
            bad = next((quad for quad in quads if isinstance(quad, Reject)), None)
            if bad is not None:
                rejects.add(line, bad.code, bad.reason)
                continue
            if isinstance(graph, GraphStager):
                graph.add([quad for quad in quads if not isinstance(quad, Reject)])
        if to_rows is not None:
            rows = to_rows(fields, line.offset)
            if isinstance(rows, Reject):
                rejects.add(line, rows.code, rows.reason)
                continue
            if isinstance(graph, PropertyGraphStager):
                graph.add(rows)
        tally.written += 1
        if item is not None and sender is not None:
            sender.add(item, line.offset)
    return tally.counts(sender.finish() if sender is not None else 0)


def _writer(
    db: Any, item_db: Any, spec: JobSpec, settings: WorkerSettings, markers: Markers
) -> BatchWriter | ItemWriter | None:
    """BatchWriter for `put`, ItemWriter with the spec's plan for another write mode (and the
    shard's markers, for a numeric ADD); None in a dry run or without a DynamoDB target."""
    if spec.dry_run or spec.dynamodb is None:
        return None
    plan = write_plan(spec.dynamodb)
    if plan is None:
        return BatchWriter(db, settings.table_name, in_flight=settings.write_concurrency)
    return ItemWriter(
        item_db,
        settings.table_name,
        plan,
        in_flight=settings.write_concurrency,
        sample=SKIPPED_SAMPLE_SIZE,
        markers=markers if plan.counters else None,
    )


def _skipped_keys(writer: BatchWriter | ItemWriter | None, spec: JobSpec) -> list[dict[str, str]]:
    """The sample of skipped keys as JSON: {key attribute: value} (numbers as text, binary as base64)."""
    if not isinstance(writer, ItemWriter) or spec.dynamodb is None:
        return []
    names = list(spec.dynamodb.key)

    def text(value: Any) -> str:
        return base64.b64encode(value).decode() if isinstance(value, bytes) else str(value)

    return [dict(zip(names, map(text, key), strict=True)) for key in writer.skipped_keys]


def _budget(
    writer: BatchWriter | ItemWriter | None,
    spec: JobSpec,
    ledger: Ledger,
    settings: WorkerSettings,
    job_id: str,
    run_id: str,
    index: int,
) -> contextlib.AbstractContextManager[Any]:
    """The job's write budget, re-shared among the running shards (adapters/budget.py), if it has one."""
    if writer is None or spec.write_units_per_second is None:
        return contextlib.nullcontext()
    board = LeaseBoard(ledger.client, ledger.table, job_id, run_id, settings.ledger_ttl_days * 86_400)
    return SharedBudget(board, index, spec.write_units_per_second, writer)


def _sinks(
    outputs: contextlib.ExitStack,
    store: S3Store,
    settings: WorkerSettings,
    spec: JobSpec,
    shard: Mapping[str, Any],
    source: str,
    rejects_key: str,
    graph_keys: tuple[str, ...],
) -> tuple[RejectSink, Stager | None]:
    """The shard's rejects and (unless the job has no graph, or is a dry run) its staged statements,
    each an upload closed with `outputs`."""
    # A shard of a decompressed copy (Prepare) names the original source and zip member.
    rejects = RejectSink(
        source,
        shard.get("member"),
        out=outputs.enter_context(
            store.upload_if_written(settings.staging_bucket, rejects_key, "application/x-ndjson")
        ),
    )
    if spec.graph is None or spec.dry_run:  # a dry run stages nothing
        return rejects, None
    if spec.graph.model == "property":
        vertices_key, edges_key = graph_keys
        # openCypher sources keep their own header (one per object, so one per shard).
        own = opencypher.parse_header(shard["header"]) if spec.format == "opencypher" else None
        return rejects, PropertyGraphStager(
            (own, own) if own is not None else headers(spec),
            compress=spec.graph.gzip,
            vertices=outputs.enter_context(
                store.upload_if_written(settings.staging_bucket, vertices_key, "text/csv")
            ),
            edges=outputs.enter_context(
                store.upload_if_written(settings.staging_bucket, edges_key, "text/csv")
            ),
        )
    graph = GraphStager(
        compress=spec.graph.gzip,
        out=outputs.enter_context(
            store.upload_if_written(settings.staging_bucket, graph_keys[0], "application/n-quads")
        ),
    )
    return rejects, graph


def _outputs(
    rejects: RejectSink, rejects_key: str, graph: Stager | None, graph_keys: tuple[str, ...]
) -> dict[str, Any]:
    """What the shard wrote besides items: its rejects and staged statements (or vertices and
    edges), and their keys."""
    outputs = {
        "byReason": dict(rejects.by_reason),
        "sample": rejects.sample,
        "rejectsKey": rejects_key if rejects.count else None,
        "graphStaged": graph.staged if graph is not None else 0,
        "graphKey": graph_keys[0] if graph is not None and graph.staged else None,
    }
    if isinstance(graph, PropertyGraphStager):
        outputs |= {
            "graphKey": graph_keys[0] if graph.vertices else graph_keys[1] if graph.edges else None,
            "graphVertices": graph.vertices,
            "graphEdges": graph.edges,
            # The endpoint check's passes are sized by the sums over shards (report.graph_section).
            "graphOpenEndpoints": graph.ids.opened,
            "graphOpenEndpointBytes": graph.ids.opened_bytes,
        }
    return outputs


def _finish_graph(graph: Stager | None, store: S3Store, bucket: str, keys: tuple[str, str]) -> None:
    """Write what the stager buffered; for a property graph also the shard's vertex ids and open
    endpoints (logic/endpoints.py), one file each, before the shard is recorded done. Written for
    every such shard (even empty) so the check reads known keys: S3 answers a missing key with
    403, not 404, to a reader without s3:ListBucket."""
    if graph is not None:
        graph.finish()
    if not isinstance(graph, PropertyGraphStager):
        return
    vertices_key, endpoints_key = keys
    store.put_bytes(bucket, vertices_key, encode_ids(sorted(graph.ids.vertices)), "application/gzip")
    opened = encode_ids(graph.ids.open_endpoints())
    graph.ids.opened_bytes = text_size(opened)
    store.put_bytes(bucket, endpoints_key, opened, "application/gzip")


def _graph_keys(spec: JobSpec, job_id: str, plan_id: str, index: int) -> tuple[str, ...]:
    """Where the shard stages its graph: one N-Quads file, or a property graph's vertex and edge files."""
    compressed = bool(spec.graph and spec.graph.gzip)
    if spec.graph is not None and spec.graph.model == "property":
        return layout.property_graph_keys(job_id, plan_id, index, compressed=compressed)
    return (layout.graph_file_key(job_id, plan_id, index, compressed=compressed),)


def _origin(source: str, shard: Mapping[str, Any]) -> str:
    """The records' object and zip member: what a property graph's default edge ids derive from."""
    member = shard.get("member")
    return f"{source}#{member}" if member else source


def _physical_lines(store: S3Store, obj: ObjectInfo, start: int, end: int) -> Iterator[Line]:
    read_from = start - 1 if start > 0 else 0
    return iter_shard_lines(store.stream(obj, read_from), read_from=read_from, start=start, end=end)


def _csv_chain(
    store: S3Store, obj: ObjectInfo, spec: JobSpec, ledger: Ledger, job_id: str, plan_id: str, index: int
) -> LedgerChain | None:
    """Where a CSV shard publishes its start state or summary, and resolves an unknown start state."""
    if spec.format not in CSV_RECORD_FORMATS or spec.csv is None:
        return None
    comment = spec.csv.comment
    return LedgerChain(
        ledger,
        job_id,
        plan_id,
        index,
        lambda first, end: _physical_lines(store, obj, first, end),
        max_record=spec.csv.max_record_bytes,
        comment=comment.encode() if comment is not None else None,
        deadline=time.monotonic() + CSV_START_WAIT_SECONDS,
        now=time.monotonic,
        sleep=time.sleep,
    )


def _shard_lines(
    store: S3Store,
    obj: ObjectInfo,
    spec: JobSpec,
    start: int,
    end: int,
    data_start: int,
    chain: LedgerChain | None = None,
) -> Iterable[Line] | ShardRecords:
    """The shard's lines; for CSV its records (logic/csvrecords.py: read from a window before
    `start`, past `end` to complete the last record)."""
    if spec.format not in CSV_RECORD_FORMATS or spec.csv is None:
        return _physical_lines(store, obj, start, end)
    return ShardRecords(
        lambda first: store.stream(obj, first),
        start=start,
        end=end,
        object_size=obj.size,
        data_start=data_start,
        max_record=spec.csv.max_record_bytes,
        comment=spec.csv.comment.encode() if spec.csv.comment is not None else None,
        chain=chain,
    )


def work(
    event: Mapping[str, Any],
    settings: WorkerSettings,
    store: S3Store,
    ledger: Ledger,
    db: Any,
    item_db: Any = None,
) -> dict[str, Any]:
    """`db` sends BatchWriteItem; `item_db` (default `db`) the single-item calls of another write mode."""
    shard, job = event["shard"], event["job"]
    job_id, run_id, index = job["jobId"], job["runId"], int(shard["index"])
    plan_id = str(job.get("planId") or run_id)
    prepared = shard["bucket"] == settings.staging_bucket and str(shard["key"]).startswith("prepared/")
    if shard["bucket"] not in settings.source_buckets and not prepared:
        raise SourceNotAllowedError(f"shard {index}: bucket {shard['bucket']!r} is not an allowed source")
    if ledger.shard_done(job_id, plan_id, index):
        # A retry after the counts were recorded, or a re-run of the job whose earlier run
        # finished this shard: the items are written, count nothing twice.
        return {"index": index, "skipped": True}
    spec = parse_spec(job["spec"], table_key=job["tableKey"])
    obj = ObjectInfo(shard["bucket"], shard["key"], int(shard["objectSize"]), shard["etag"])
    start, end = int(shard["start"]), int(shard["end"])
    chain = _csv_chain(store, obj, spec, ledger, job_id, plan_id, index)
    lines = _shard_lines(store, obj, spec, start, end, int(shard.get("dataStart") or 0), chain)
    source = shard.get("source") or f"s3://{obj.bucket}/{obj.key}"
    origin = _origin(source, shard)  # the records' object and member, for property graph edge ids
    writer = _writer(db, item_db or db, spec, settings, ledger.markers(job_id, plan_id, index))
    # Rejects and graph statements stream to staging as multipart uploads while the shard is
    # read (an object only if something is written): a 10 GiB shard needs no /tmp for them. An
    # error aborts both; a retried shard writes the same keys afresh.
    rejects_key = layout.shard_rejects_key(job_id, run_id, index)
    graph_keys = _graph_keys(spec, job_id, plan_id, index)
    with contextlib.ExitStack() as outputs:
        rejects, graph = _sinks(outputs, store, settings, spec, shard, source, rejects_key, graph_keys)
        try:
            with _budget(writer, spec, ledger, settings, job_id, run_id, index):
                counts = process(lines, spec, shard.get("header"), writer, rejects, graph, source=origin)
        finally:
            stats = writer.close() if writer is not None else None
        _finish_graph(graph, store, settings.staging_bucket, layout.graph_ids_keys(job_id, plan_id, index))
    skipped = stats.skipped if stats else 0
    result = {
        **counts,
        "rejected": rejects.count,
        # A record whose condition was not met was read and accepted, but not written.
        "written": counts["written"] - skipped,
        "skipped": skipped,
        "skippedSample": _skipped_keys(writer, spec),
        "bytes": end - start,
        "requests": stats.requests if stats else 0,
        "retries": stats.retries if stats else 0,
        "throttles": stats.throttles if stats else 0,
        "s3Retries": store.retries,
        **_outputs(rejects, rejects_key, graph, graph_keys),
    }
    ledger.record_shard(job_id, plan_id, index, {**result, "runId": run_id})
    # The state machine keeps only `index`; the rest feeds the EMF metrics (handlers/observability.py).
    metric_fields = ("read", "written", "rejected", "retries", "throttles", "bytes")
    return {"index": index, **{name: result[name] for name in metric_fields}}


def handle(event: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    settings = WorkerSettings.from_env(env)
    pool = settings.write_concurrency + 2
    return work(
        event,
        settings,
        S3Store(clients.s3()),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        clients.batch_writes(pool),
        clients.dynamodb(pool),  # PutItem/UpdateItem/DeleteItem: the botocore client batch_writes wraps
    )


@entry_point("Worker", emit_metrics=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
