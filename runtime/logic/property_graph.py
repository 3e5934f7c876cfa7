"""Turn one record into property-graph rows by the input's graph.vertices and graph.edges (stdlib only).

A record's rows are rendered and checked against the openCypher CSV rules before anything is
staged, so a record is staged whole or rejected whole. An edge without an `id` template gets a
deterministic id from the record's source, its byte offset and the edge's position in
graph.edges: a re-run stages the same ids (the loader keeps one edge per id), and two records,
or two edges of one record, never share one.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, NamedTuple

from logic import opencypher
from logic.opencypher import FormatError, Header, Row
from logic.spec.fields import Template
from logic.spec.graph import Edge, Properties, Vertex, property_type
from logic.spec.inputs import JobSpec
from logic.values import Fields, Reject, field_value


class PropertyRecord(NamedTuple):
    """One record's rows as CSV cells, checked: vertices' under the vertex header, edges' under
    the edge header; and how many of its `optional` vertices and edges were left out."""

    vertices: list[list[str]]
    edges: list[list[str]]
    skipped_vertices: int = 0
    skipped_edges: int = 0


class _Rejected(Exception):
    def __init__(self, code: str, reason: str) -> None:
        self.reject = Reject(code, reason)


class _NoValue(_Rejected):
    """A field an id, label or endpoint template names is missing, null or empty: the record is
    rejected, unless its vertex or edge is `optional` (then that vertex or edge is left out)."""


def headers(spec: JobSpec) -> tuple[Header, Header]:
    """The vertex and edge files' headers: system columns, then one column per property name in
    the order the spec first names it (spec.py checked that a name has one type per section)."""
    if spec.graph is None:
        raise ValueError("the spec has no graph section")
    return (
        opencypher.node_header(_columns(spec.graph.vertices)),
        opencypher.relationship_header(_columns(spec.graph.edges)),
    )


def _columns(elements: Sequence[Vertex | Edge]) -> list[tuple[str, str]]:
    columns: dict[str, str] = {}
    for element in elements:
        for name, value in element.properties.items():
            columns.setdefault(name, opencypher.INPUT_TYPES[property_type(value)])
    return list(columns.items())


def edge_id(source: str, offset: int, index: int) -> str:
    """The id of edge `index` of the record at byte `offset` of `source` (when no id is given)."""
    digest = hashlib.sha256(f"{source}\n{offset}\n{index}".encode()).hexdigest()
    return f"edge-{digest[:32]}"


def make_property_mapper(spec: JobSpec, source: str) -> Callable[[Fields, int], PropertyRecord | Reject]:
    """Per-record mapper: (fields, the record's byte offset) -> its checked rows, or why not.
    `source` names the object (and zip member) the records come from, for edge ids."""
    vertex_header, edge_header = headers(spec)
    assert spec.graph is not None
    vertices = [(vertex, f"graph.vertices[{i}]") for i, vertex in enumerate(spec.graph.vertices)]
    edges = [(edge, f"graph.edges[{i}]") for i, edge in enumerate(spec.graph.edges)]

    def to_rows(fields: Fields, offset: int) -> PropertyRecord | Reject:
        vertex_rows: list[list[str]] = []
        edge_rows: list[list[str]] = []
        try:
            for vertex, where in vertices:
                if (row := _kept(vertex, _vertex, vertex, fields, where)) is not None:
                    vertex_rows.append(_cells(vertex_header, row, where))
            for i, (edge, where) in enumerate(edges):
                if (row := _kept(edge, _edge, edge, fields, where, edge_id(source, offset, i))) is not None:
                    edge_rows.append(_cells(edge_header, row, where))
        except _Rejected as rejected:
            return rejected.reject
        skipped = len(vertices) - len(vertex_rows), len(edges) - len(edge_rows)
        return PropertyRecord(vertex_rows, edge_rows, *skipped)

    return to_rows


def _kept(element: Vertex | Edge, make: Callable[..., Row], *args: Any) -> Row | None:
    """`make(*args)`, the element's row; None when the element is `optional` and a field its id,
    label or endpoint templates name has no value."""
    try:
        return make(*args)
    except _NoValue:
        if element.optional:
            return None
        raise


def _cells(header: Header, row: Row, where: str) -> list[str]:
    try:
        return opencypher.row_cells(header, row)
    except FormatError as error:
        raise _Rejected("bad_value", f"{where}: {error}") from None


def _vertex(vertex: Vertex, fields: Fields, where: str) -> Row:
    return Row(
        id=_render(vertex.id, fields, f"{where}.id", required=True),
        labels=tuple(_render(label, fields, f"{where}.label", required=True) for label in vertex.labels),
        properties=_properties(vertex.properties, fields, where),
    )


def _edge(edge: Edge, fields: Fields, where: str, default_id: str) -> Row:
    return Row(
        id=default_id if edge.id is None else _render(edge.id, fields, f"{where}.id", required=True),
        start=_render(edge.from_, fields, f"{where}.from", required=True),
        end=_render(edge.to, fields, f"{where}.to", required=True),
        type=_render(edge.label, fields, f"{where}.label", required=True),
        properties=_properties(edge.properties, fields, where),
    )


def _properties(properties: Properties, fields: Fields, where: str) -> dict[str, str]:
    """Each property's text; one left out when it has no value (an empty CSV cell is no value):
    a template that renders empty, or an optional field that is missing, null or empty."""
    out: dict[str, str] = {}
    for name, prop in properties.items():
        at = f"{where}.properties.{name}"
        if isinstance(prop, Template):
            text = _render(prop, fields, at, required=False)
        else:
            value = field_value(fields, prop.field)
            text = "" if value is None else _text(value, prop.field, at)
            if not text and not prop.optional:
                raise _Rejected(
                    "missing_field", f"field {prop.field!r} needed by {at} is missing, null or empty"
                )
            if text:
                text = _typed(prop.type, text, at)
        if text:
            out[name] = text
    return out


def _typed(kind: str, text: str, at: str) -> str:
    try:
        if kind == "Date":
            return opencypher.check_date(text)
        return opencypher.check_value(opencypher.INPUT_TYPES[kind], text)
    except FormatError as error:
        raise _Rejected("bad_value", f"{at}: {error}") from None


def _render(template: Template, fields: Fields, at: str, *, required: bool) -> str:
    """The template with its fields substituted; a missing or null field rejects the record, and
    so does an empty result where a value is `required` (an id, a label, an endpoint), or an empty
    field there (`person-{boss}` with no boss is no vertex id; see `_NoValue`)."""
    parts = [template.literals[0]]
    for name, literal in zip(template.fields, template.literals[1:], strict=True):
        value = field_value(fields, name)
        if value is None:
            raise (_NoValue if required else _Rejected)(
                "missing_field",
                f"field {name!r} needed by {at} is missing or null{_HINT if required else ''}",
            )
        text = _text(value, name, at)
        if required and not text:
            raise _NoValue("empty_value", f"field {name!r} needed by {at} is empty{_HINT}")
        parts.append(text)
        parts.append(literal)
    text = "".join(parts)
    if required and not text:
        raise _Rejected("empty_value", f"{at} is empty")
    return text


_HINT = ' ("optional": true on the vertex or edge leaves it out of such records)'


def _text(value: Any, name: str, at: str) -> str:
    """A scalar field value as text (JSON Lines numbers and booleans as JSON writes them; a Parquet
    float by its shortest digits, NaN and infinities as openCypher spells them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal | int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else _NON_FINITE[repr(value)]
    what = "binary" if isinstance(value, bytes) else f"a JSON {type(value).__name__}"
    raise _Rejected("not_scalar", f"field {name!r} in {at} is {what}, not a scalar")


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
