"""The per-record loop: each record parsed, mapped, then written (`Sender`) or staged, or rejected;
the shard's counts as they pass."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from adapters.property_graph import PropertyGraphStager
from adapters.rdf import GraphStager, line_parser, to_quad
from logic import opencypher
from logic.checkpoints import Stop
from logic.csvrecords import CutRecord, ShardRecords
from logic.errors import mark_record
from logic.graph import is_rdf_comment, make_graph_mapper
from logic.mapping import make_mapper
from logic.parsing import allow_fields_of, is_skipped, make_parser
from logic.property_graph import make_property_mapper
from logic.records import Line
from logic.spec.inputs import RDF_FORMATS, JobSpec
from logic.values import Fields, ParquetRow, Reject
from shards.rejects import RejectSink
from shards.staging import Stager
from shards.writing import Sender, Writer


class _Tally:
    """A shard's counts as its records pass: lines owned, records read, records accepted, and the
    lines of the records it read (`recordLines`, its last one's past its end too) and of the blank
    and comment lines it skipped (`ignoredLines`): Finalize reconciles them with the lines owned."""

    def __init__(self) -> None:
        self.owned = self.read = self.written = self.record_lines = self.ignored_lines = 0

    def counts(self, duplicates: int = 0) -> dict[str, int]:
        return {
            "lines": self.owned,
            "read": self.read,
            "written": self.written,
            "duplicates": duplicates,
            "recordLines": self.record_lines,
            "ignoredLines": self.ignored_lines,
        }


def _records(
    lines: Iterable[Line | CutRecord], spec: JobSpec, rejects: RejectSink, tally: _Tally
) -> Iterator[Line]:
    """The CSV-like records to parse: blank and comment lines skipped, a cut record rejected."""
    for line in lines:
        tally.owned += 1
        if is_skipped(line.raw, spec):
            tally.ignored_lines += 1  # never more than one line: no record opens on a skipped line
            continue
        tally.read += 1
        tally.record_lines += line.raw.count(b"\n") + 1  # a record keeps its inner line ends
        if isinstance(line, CutRecord):
            rejects.add(line, line.code, line.reason)
            continue
        yield line


def process_rdf(
    lines: Iterable[Line], spec: JobSpec, graph: Stager | None, rejects: RejectSink
) -> dict[str, int]:
    """N-Quads/N-Triples: each line is one statement, checked by the RDF parser and staged."""
    parse = line_parser(spec.format)
    tally = _Tally()
    for line in lines:
        tally.owned += 1
        if is_skipped(line.raw, spec) or is_rdf_comment(line.raw):
            tally.ignored_lines += 1
            continue
        quads = parse(line)
        if not quads:  # a comment after whitespace the parser saw first
            tally.ignored_lines += 1
            continue
        tally.read += 1
        tally.record_lines += 1  # one statement a line
        if isinstance(quads, Reject):
            rejects.add(line, quads.code, quads.reason)
            continue
        tally.written += 1
        if isinstance(graph, GraphStager):
            graph.add(quads)
    return tally.counts()


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
    if spec.csv is not None:
        allow_fields_of(spec.csv.max_record_bytes)
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


def process(
    lines: Iterable[Line] | ShardRecords,
    spec: JobSpec,
    header: list[str] | None,
    writer: Writer | None,
    rejects: RejectSink,
    graph: Stager | None = None,
    *,
    source: str = "",
    stop: Stop | None = None,
) -> dict[str, int]:
    """The per-record loop; `writer` and `graph` are None in a dry run (or without that target).
    `source` names the records' object (and member): a property graph's edge ids derive from it.
    `stop`: when to stop before the shard's end (logic/checkpoints.py): `stop.at` is then the first
    byte of the first record not read.

    CSV comes as ShardRecords: a record may span lines, and a cut one is rejected as it is."""
    if isinstance(lines, ShardRecords):
        records = _until(lines, stop, lambda line: line.offset)
        if spec.format == "opencypher":
            counts = process_opencypher(records, spec, header, graph, rejects)
        else:
            counts = _process_records(records, spec, header, writer, rejects, graph, source)
        if stop is not None and stop.at is not None:
            # Stopped at a record's first byte: the lines owned so far are the records' own.
            return {**counts, "lines": counts["recordLines"] + counts["ignoredLines"]}
        return {**counts, "lines": lines.lines}
    lines = _until(lines, stop, lambda line: line.offset)
    if spec.format in RDF_FORMATS:
        return process_rdf(lines, spec, graph, rejects)
    return _process_records(lines, spec, header, writer, rejects, graph, source)


def _process_records(
    lines: Iterable[Line | CutRecord],
    spec: JobSpec,
    header: list[str] | None,
    writer: Writer | None,
    rejects: RejectSink,
    graph: Stager | None,
    source: str,
) -> dict[str, int]:
    tally = _Tally()
    records = _records(lines, spec, rejects, tally)
    return _map_records(records, make_parser(spec, header), spec, writer, rejects, graph, source, tally)


def process_parquet(
    rows: Iterable[ParquetRow],
    spec: JobSpec,
    writer: Writer | None,
    rejects: RejectSink,
    graph: Stager | None = None,
    *,
    source: str = "",
    stop: Stop | None = None,
) -> dict[str, int]:
    """Parquet rows (shards/sources.py `parquet_rows`): each row is one record, counted in `lines`
    as one line (a row is the unit every count of a Parquet job reconciles), mapped as a JSON Lines
    record is; its position (row group, row) stands for the line and byte offset."""
    tally = _Tally()

    def counted() -> Iterator[ParquetRow]:
        # `stop.at`, once stopped: the rows of the shard read before this segment and in it.
        for row in _until(rows, stop, lambda row: row.number - 1):
            tally.owned += 1
            tally.read += 1
            tally.record_lines += 1
            yield row

    return _map_records(counted(), _row_fields, spec, writer, rejects, graph, source, tally)


def _until(records: Iterable[Any], stop: Stop | None, position: Callable[[Any], int]) -> Iterator[Any]:
    """`records` until `stop` is due: its `at` is then the position of the first record not read."""
    if stop is None:
        yield from records
        return
    for record in records:
        if stop.due():
            stop.stopped_at(position(record))
            return
        stop.passed()
        yield record


def _row_fields(row: ParquetRow) -> Fields | Reject:
    return row.fields


def _map_records(
    records: Iterable[Line | ParquetRow],
    parse: Callable[[Any], Fields | Reject],
    spec: JobSpec,
    writer: Writer | None,
    rejects: RejectSink,
    graph: Stager | None,
    source: str,
    tally: _Tally,
) -> dict[str, int]:
    """Each record parsed, then mapped to its item, statements or rows, or rejected; `offset` (a
    line's first byte, a Parquet row's index) tells records of one object apart."""
    to_item = make_mapper(spec) if spec.dynamodb is not None else None
    model = spec.graph.model if spec.graph is not None else None
    to_statements = make_graph_mapper(spec) if model == "rdf" else None
    to_rows = make_property_mapper(spec, source) if model == "property" else None
    sender = Sender(writer, spec, rejects) if spec.dynamodb is not None else None
    current: list[Line | ParquetRow | None] = [None]
    try:
        _each_record(
            _tracked(records, current),
            parse,
            spec,
            (to_item, to_statements, to_rows),
            rejects,
            graph,
            tally,
            sender,
        )
    except Exception as error:
        if current[0] is not None:  # raised while that record was processed, not while reading
            mark_record(error, _where(current[0]))
        raise
    duplicates = sender.finish() if sender is not None else 0
    tally.written -= sender.refused if sender is not None else 0  # rejected after all
    return tally.counts(duplicates)


def _tracked(records: Iterable[Line | ParquetRow], current: list[Line | ParquetRow | None]) -> Iterator[Any]:
    """`records`, with `current[0]` the one being processed (None while the next is read)."""
    for record in records:
        current[0] = record
        yield record
        current[0] = None


def _where(record: Line | ParquetRow) -> dict[str, int]:
    if isinstance(record, ParquetRow):
        return {"rowGroup": record.row_group, "row": record.row}
    return {"shardLine": record.number, "offset": record.offset}


def _each_record(
    records: Iterable[Any],
    parse: Callable[[Any], Fields | Reject],
    spec: JobSpec,
    mappers: tuple[Any, Any, Any],
    rejects: RejectSink,
    graph: Stager | None,
    tally: _Tally,
    sender: Sender | None,
) -> None:
    """Each record parsed, then mapped (`mappers`: to its item, statements, rows) and sent or
    staged, or rejected."""
    to_item, to_statements, to_rows = mappers
    for line in records:
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
            sender.add(item, line.offset, line)
