"""Stage one shard's property graph: its vertex rows and edge rows as two openCypher CSV files."""

from __future__ import annotations

import csv
import gzip
import io
from typing import Any

from adapters.rdf import Writable
from logic.endpoints import ShardIds
from logic.opencypher import NODE, Header, Kind, Row
from logic.property_graph import PropertyRecord

_FLUSH_ROWS = 1000


class _CsvFile:
    """One staged CSV file: the header before the first row; nothing is written to `out` (so no
    object is made) until rows come. Rows are buffered as text and sent in blocks."""

    def __init__(self, header: Header, *, compress: bool, out: Writable) -> None:
        self._header = header
        self._target = out
        self._compress = compress
        self._out: Any = None  # `out`, or a GzipFile over it once the first rows come
        self._buffer = io.StringIO(newline="")
        self._csv = csv.writer(self._buffer, lineterminator="\r\n")
        self._pending = 0
        self.rows = 0

    def add(self, rows: list[list[str]]) -> None:
        if not rows:
            return
        self._start()
        self._csv.writerows(rows)
        self._count(len(rows))

    def add_line(self, text: str) -> None:
        """A source line staged as it is (format opencypher: it was checked, not rewritten)."""
        self._start()
        self._buffer.write(text + "\r\n")
        self._count(1)

    def _start(self) -> None:
        if self.rows == 0:
            self._csv.writerow(self._header.cells)

    def _count(self, rows: int) -> None:
        self.rows += rows
        self._pending += rows
        if self._pending >= _FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        text = self._buffer.getvalue()
        if not text:
            return
        if self._out is None:
            self._out = (
                gzip.GzipFile(fileobj=self._target, mode="wb", mtime=0) if self._compress else self._target
            )
        self._out.write(text.encode("utf-8"))
        self._buffer.seek(0)
        self._buffer.truncate()
        self._pending = 0

    def finish(self) -> None:
        self._flush()
        if self._compress and self._out is not None:
            self._out.close()  # the gzip trailer; `out` itself stays open


class PropertyGraphStager:
    """A shard's vertices and edges, each file written to its own `out` as rows come (the Worker's
    outputs stream to S3 in parts). A record's rows were checked before they come here, so a
    record is staged whole; a retried shard writes the same keys afresh."""

    def __init__(
        self, headers: tuple[Header, Header], *, compress: bool, vertices: Writable, edges: Writable
    ) -> None:
        self._vertices = _CsvFile(headers[0], compress=compress, out=vertices)
        self._edges = _CsvFile(headers[1], compress=compress, out=edges)
        # The vertex ids staged and the edges' endpoints, for the check before the load.
        self.ids = ShardIds()
        self._id_at = headers[0].position(":ID")
        self._ends_at = headers[1].position(":START_ID"), headers[1].position(":END_ID")
        # Ids in an ID space are not checked (logic/endpoints.py); only openCypher sources have them.
        self._vertex_checked = headers[0].checked(":ID")
        self._ends_checked = headers[1].checked(":START_ID"), headers[1].checked(":END_ID")
        # The `optional` vertices and edges left out of their records (the report's graph.skipped*).
        self.skipped_vertices = self.skipped_edges = 0

    def add(self, record: PropertyRecord) -> None:
        self._vertices.add(record.vertices)
        self._edges.add(record.edges)
        self.skipped_vertices += record.skipped_vertices
        self.skipped_edges += record.skipped_edges
        for cells in record.vertices:
            self.ids.vertex(cells[self._id_at])
        start, end = self._ends_at
        for cells in record.edges:
            self.ids.edge(cells[start], cells[end])

    def add_line(self, kind: Kind, text: str, row: Row) -> None:
        """An openCypher source line (`row`, as read), to the vertex file or the edge file by its
        file's kind."""
        if kind == NODE:
            self._vertices.add_line(text)
            if self._vertex_checked:
                self.ids.vertex(row.id)
            return
        self._edges.add_line(text)
        for end, checked in zip((row.start, row.end), self._ends_checked, strict=True):
            if checked:
                self.ids.endpoint(end)

    @property
    def vertices(self) -> int:
        return self._vertices.rows

    @property
    def edges(self) -> int:
        return self._edges.rows

    @property
    def staged(self) -> int:
        """Vertices and edges staged (the report's graph.staged)."""
        return self.vertices + self.edges

    def finish(self) -> None:
        """Write what is buffered (and gzip trailers): each `out` then holds its whole file."""
        self._vertices.finish()
        self._edges.finish()
