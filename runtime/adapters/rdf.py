"""RDF through pyoxigraph: check N-Quads/N-Triples lines, build terms, stage N-Quads files for the loader."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from typing import Any, Protocol

import pyoxigraph as ox

from logic.graph import RenderedStatement, RenderedTerm
from logic.values import Line, Reject


class Writable(Protocol):
    """Where a staged file goes: anything with write(bytes) (a LazyUpload, or BytesIO in tests)."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


FORMATS = {"nquads": ox.RdfFormat.N_QUADS, "ntriples": ox.RdfFormat.N_TRIPLES}
_NAMES = {"nquads": "N-Quads", "ntriples": "N-Triples"}
_POSITION = re.compile(r"^Parser error at line \d+ between columns (\d+) and (\d+): ")


def line_parser(fmt: str) -> Callable[[Line], list[ox.Quad] | Reject]:
    """Parse one line with the real N-Quads/N-Triples parser: its statement(s), or why not.

    The parser refuses a second statement on a line, so a valid line is exactly one statement
    (or none: a comment). A reject's reason is the parser's own, with the column in the line.
    """
    rdf_format, name = FORMATS[fmt], _NAMES[fmt]

    def parse(line: Line) -> list[ox.Quad] | Reject:
        try:
            line.raw.decode("utf-8")
        except UnicodeDecodeError as error:
            return Reject("invalid_utf8", f"invalid UTF-8 at byte {line.offset + error.start}")
        try:
            return list(ox.parse(input=line.raw, format=rdf_format))
        except SyntaxError as error:
            message = str(error.msg if hasattr(error, "msg") else error)
            message = _POSITION.sub(r"columns \1-\2: ", message)
            return Reject("rdf_syntax", f"{name} syntax error at {message}")

    return parse


def _term(term: RenderedTerm) -> Any:
    kind = term[0]
    if kind == "iri":
        return ox.NamedNode(term[1])
    if kind == "blank":
        return ox.BlankNode(term[1])
    _, text, datatype, language = term
    if language is not None:
        return ox.Literal(text, language=language)
    return ox.Literal(text, datatype=ox.NamedNode(datatype) if datatype else None)


def to_quad(statement: RenderedStatement) -> ox.Quad | Reject:
    """A pyoxigraph Quad from rendered terms; a term the library refuses becomes a reject."""
    subject, predicate, obj, graph = statement
    try:
        return ox.Quad(
            _term(subject),
            _term(predicate),
            _term(obj),
            _term(graph) if graph is not None else ox.DefaultGraph(),
        )
    except ValueError as error:
        return Reject("bad_term", f"not a valid RDF term: {error}")


class GraphStager:
    """One shard's statements as an N-Quads file (gzip: one text file per .gz), written to `out`
    as they come (the Worker's `out` streams to S3 in parts: nothing is spooled to /tmp).

    The loader reads every file under the job's graph prefix; files are written whole, once per
    shard, under a deterministic key, so a retried shard replaces its own file. Nothing is
    written to `out` (so no object is made) until the first statements are flushed.
    """

    def __init__(self, *, compress: bool, out: Writable) -> None:
        self._target = out
        self._out: Any = None  # `out`, or a GzipFile over it once the first statements come
        self.compress = compress
        self.staged = 0
        self._buffer: list[ox.Quad] = []

    def add(self, quads: list[ox.Quad]) -> None:
        self._buffer.extend(quads)
        self.staged += len(quads)
        if len(self._buffer) >= 1000:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            if self._out is None:
                self._out = (
                    gzip.GzipFile(fileobj=self._target, mode="wb", mtime=0) if self.compress else self._target
                )
            ox.serialize(self._buffer, self._out, ox.RdfFormat.N_QUADS)
            self._buffer = []

    def finish(self) -> None:
        """Write what is buffered (and the gzip trailer); `out` then holds the whole file."""
        self._flush()
        if self.compress and self._out is not None:
            self._out.close()  # the gzip trailer; `out` itself stays open
