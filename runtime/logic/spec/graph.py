"""The input's `graph` target: RDF statements or a property graph's vertices and edges, and the
Neptune loader's options (one model per form: records' statements, a property graph, N-Quads or
N-Triples lines, openCypher CSV files)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator
from pydantic.config import JsonDict

from logic import polling
from logic.described import kind
from logic.spec.fields import (
    ABSENT,
    END,
    IriTemplateText,
    KeyTemplateText,
    Model,
    NotNull,
    Template,
    TemplateText,
    WholeNumber,
    fail,
    matches,
    omit_default,
    shape,
)

Parallelism = Literal["LOW", "MEDIUM", "HIGH", "OVERSUBSCRIBE"]
PARALLELISM = get_args(Parallelism)
# graph.model: RDF statements (N-Quads) or a property graph (Neptune's openCypher CSV).
GraphModel = Literal["rdf", "property"]
GRAPH_MODELS = get_args(GraphModel)
# A property's type as the input names it (logic/opencypher.py maps each to its column type).
PropertyType = Literal["String", "Int", "Long", "Double", "Float", "Bool", "Date", "DateTime"]
PROPERTY_TYPES = get_args(PropertyType)


MAX_DEPENDENCIES = 64  # the loader's queue length
MAX_POLL_SECONDS = polling.MAX_WAIT_SECONDS  # a poll never waits longer than an hour anyway
DEFAULT_POLL_SECONDS = 30
DEFAULT_TIMEOUT_MINUTES = 720
MAX_TIMEOUT_MINUTES = 525_600  # a year


DATATYPE_PATTERN = r'^(?:xsd:[A-Za-z]+|[A-Za-z][A-Za-z0-9+.-]*:[^\s<>"{}|\\^`]+)' + END
LANGUAGE_PATTERN = r"^[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*" + END
LOAD_ID_PATTERN = r"^[A-Za-z0-9-]{1,64}" + END


# A property name in an openCypher CSV header: no space, comma or line break (Neptune), and no
# ':' or backslash (the header's type separator and its escape).
PROPERTY_NAME_PATTERN = r"^[^\u0000-\u0020,:\\]+" + END


LoadId = Annotated[str, matches(LOAD_ID_PATTERN, lambda v: f"must be a loader load id, got {v!r}")]
XSD = "http://www.w3.org/2001/XMLSchema#"
Datatype = Annotated[
    str,
    matches(DATATYPE_PATTERN, lambda v: f"must be an absolute IRI or xsd:NAME, got {v!r}"),
    AfterValidator(lambda v: XSD + v[4:] if re.fullmatch(r"xsd:[A-Za-z]+", v) else v),  # one spelling
]
Language = Annotated[
    str, matches(LANGUAGE_PATTERN, lambda v: f"must be a language tag like en or en-GB, got {v!r}")
]


def _term_shape(*kinds: str) -> Discriminator:
    """A term: an IRI template string, or an object with exactly one of `kinds`."""

    def choose(value: Any) -> str | None:
        if isinstance(value, str | Template):
            return "~text"
        names = type(value).model_fields if isinstance(value, Model) else value
        given = [kind for kind in kinds if isinstance(names, Mapping) and kind in names]
        if given == ["literal"] and (
            isinstance(value, LanguageLiteral)
            or (isinstance(value, Mapping) and value.get("language") is not None)
        ):
            return "~language"  # a literal in a language: its own model, which has no datatype
        return f"~{given[0]}" if len(given) == 1 else None

    return shape(choose, f"an IRI template or an object with exactly one of: {', '.join(kinds)}")


def _not_optional(value: object) -> object:
    if value is not False:
        raise ValueError(f"only the object of a statement may be optional, got {kind(value)}")
    return value


# A subject, predicate or graph name is never optional: `"optional": false` is all it may say.
NeverOptional = Annotated[Literal[False], BeforeValidator(_not_optional)]


class IriNode(Model):
    iri: IriTemplateText
    optional: NeverOptional = omit_default(False)
    kind: ClassVar[str] = "iri"

    @property
    def template(self) -> Template:
        return self.iri


class BlankNode(Model):
    blank: KeyTemplateText
    optional: NeverOptional = omit_default(False)
    kind: ClassVar[str] = "blank"

    @property
    def template(self) -> Template:
        return self.blank


class OptionalIri(IriNode):
    """An object's IRI; optional: the statement is left out when a field it names is empty."""

    optional: bool = omit_default(False)  # type: ignore[assignment]


class OptionalBlank(BlankNode):
    optional: bool = omit_default(False)  # type: ignore[assignment]


class _Literal(Model):
    """A literal; optional: left out when its fields are empty."""

    literal: TemplateText
    optional: bool = omit_default(False)
    kind: ClassVar[str] = "literal"

    @property
    def template(self) -> Template:
        return self.literal


def _no_datatype(value: object) -> object:
    if value is not None:
        raise ValueError("a literal has a datatype or a language, not both")
    return value


class LiteralTerm(_Literal):
    """A literal, of `datatype` when given (a string otherwise); optional: left out when its
    fields are empty. A literal with a language is a LanguageLiteral (a literal has one or the other)."""

    datatype: Datatype | None = omit_default(None)
    language: None = omit_default(None)  # null: no language, as when absent
    model_config = ConfigDict(title="Literal")


class LanguageLiteral(_Literal):
    """A literal in a language (a language-tagged string); optional: left out when its fields are
    empty."""

    language: Language
    datatype: Annotated[None, BeforeValidator(_no_datatype)] = omit_default(None)  # null: as when absent


# A term of a statement: an IRI template string, or an object naming its kind.
Term = Template | IriNode | BlankNode | LiteralTerm | LanguageLiteral


def term_template(term: Term) -> Template:
    """The template a term renders."""
    return term if isinstance(term, Template) else term.template


def _one_iri_form(term: Term) -> Term:
    """`{"iri": ...}` that is not optional is the IRI template string: one form, one value."""
    return term.iri if isinstance(term, IriNode) and not term.optional else term


Subject = Annotated[
    Annotated[IriTemplateText, Tag("~text")]
    | Annotated[IriNode, Tag("~iri")]
    | Annotated[BlankNode, Tag("~blank")],
    _term_shape("iri", "blank"),
    AfterValidator(_one_iri_form),
]
Predicate = Annotated[
    Annotated[IriTemplateText, Tag("~text")] | Annotated[IriNode, Tag("~iri")],
    _term_shape("iri"),
    AfterValidator(_one_iri_form),
]
Object = Annotated[
    Annotated[IriTemplateText, Tag("~text")]
    | Annotated[OptionalIri, Tag("~iri")]
    | Annotated[OptionalBlank, Tag("~blank")]
    | Annotated[LiteralTerm, Tag("~literal")]
    | Annotated[LanguageLiteral, Tag("~language")],
    _term_shape("iri", "blank", "literal"),
    AfterValidator(_one_iri_form),
]


# A statement's parts, in order (`graph`, its graph name, may be absent).
STATEMENT_PARTS = ("subject", "predicate", "object", "graph")


class Statement(Model):
    """subject, predicate, object (and optional graph name) templates: one statement per record.
    Only the object may be optional (a subject, predicate or graph has no `optional`)."""

    subject: Subject
    predicate: Predicate
    object: Object
    graph: Predicate | None = omit_default(None)  # null: no graph name, as when absent


class GraphOptions(Model):
    """The Neptune loader's settings (POST /loader) and the poll loop; defaults are Neptune's own."""

    gzip: bool = Field(
        default=False, description="stage each shard's file gzip-compressed (one text file per .gz)"
    )
    parallelism: Parallelism = "HIGH"
    fail_on_error: bool = True
    queue_request: bool = True
    update_single_cardinality_properties: bool = False
    dependencies: list[LoadId] = Field(default_factory=list, max_length=MAX_DEPENDENCIES)
    poll_seconds: Annotated[int, WholeNumber] = Field(default=DEFAULT_POLL_SECONDS, ge=1, le=MAX_POLL_SECONDS)
    timeout_minutes: Annotated[int, WholeNumber] = Field(
        default=DEFAULT_TIMEOUT_MINUTES, ge=1, le=MAX_TIMEOUT_MINUTES
    )

    @model_validator(mode="after")
    def _polls_fit_the_history(self) -> GraphOptions:
        # The execution history's limit depends on the poll schedule: no schema can state it.
        timeout, poll = self.timeout_minutes, self.poll_seconds
        polls = polling.poll_count(timeout, poll)
        if polls > polling.MAX_POLLS:
            raise fail(
                f"{timeout} minutes would poll the load {polls} times; the execution history "
                f"({polling.HISTORY_EVENTS:,} events) allows {polling.MAX_POLLS} polls: at pollSeconds "
                f"{poll}, at most {polling.longest_timeout_minutes(poll, timeout)} minutes",
                "timeoutMinutes",
            )
        return self


class RecordGraph(GraphOptions):
    """The graph target of CSV/JSON Lines records: statements made from each record."""

    model: Literal["rdf"] = omit_default(
        "rdf", description='"rdf": statements staged as N-Quads; "property": vertices and edges.'
    )
    statements: list[Statement] = Field(min_length=1)
    vertices: ClassVar[tuple[()]] = ()
    edges: ClassVar[tuple[()]] = ()


class TypedProperty(Model):
    """One field copied as a typed property; an optional property is left out when the field is
    missing, null or empty (an empty openCypher CSV cell is no value)."""

    field: str = Field(min_length=1)
    type: PropertyType = "String"
    optional: bool = False


def property_type(value: Template | TypedProperty) -> PropertyType:
    """A property's type: a template is a String property."""
    return "String" if isinstance(value, Template) else value.type


PropertyValue = Annotated[
    Annotated[TemplateText, Tag("~text")] | Annotated[TypedProperty, Tag("~field")],
    shape(
        lambda v: (
            "~text" if isinstance(v, str | Template) else "~field" if isinstance(v, Mapping | Model) else None
        ),
        'a template string or {"field": ..., "type": "String", "optional": false}',
    ),
]
PropertyName = Annotated[
    str,
    matches(
        PROPERTY_NAME_PATTERN,
        lambda v: f"property names may not hold spaces, commas, line breaks, ':' or backslashes, got {v!r}",
    ),
]
Properties = dict[PropertyName, PropertyValue]
# Vertex and Edge give their `properties` json_schema_extra {"additionalProperties": False}. Kept:
# pydantic states PropertyName's pattern as patternProperties, which alone would let any other
# name through the schema.
Labels = Annotated[
    Annotated[KeyTemplateText, Tag("~text")]
    | Annotated[list[KeyTemplateText], Field(min_length=1), Tag("~list")],
    shape(
        lambda v: "~text" if isinstance(v, str | Template) else "~list" if isinstance(v, list) else None,
        "a template string or a non-empty list of them",
    ),
    AfterValidator(lambda labels: [labels] if isinstance(labels, Template) else labels),  # one form
]


_ELEMENT_OPTIONAL = (
    "true: left out of the record (counted in the report's graph.skippedVertices or graph.skippedEdges) "
    "when a field its id, label or endpoint templates name is missing, null or empty; false: such a "
    "record is rejected naming the field."
)


class Vertex(Model):
    """One vertex per record: its id, label(s) and properties (a template is a String property)."""

    id: KeyTemplateText
    label: Labels
    properties: Properties = Field(default_factory=dict, json_schema_extra={"additionalProperties": False})
    optional: bool = omit_default(False, description=_ELEMENT_OPTIONAL)

    @property
    def labels(self) -> tuple[Template, ...]:
        """The label templates, one or more (a single label is validated into a list of one)."""
        return (self.label,) if isinstance(self.label, Template) else tuple(self.label)


class Edge(Model):
    """One edge per record, from vertex id to vertex id; without `id`, a deterministic id made from
    the record's source and byte offset and the edge's position in graph.edges."""

    from_: KeyTemplateText = Field(alias="from")
    to: KeyTemplateText
    label: KeyTemplateText
    id: Annotated[KeyTemplateText | None, NotNull] = ABSENT
    properties: Properties = Field(default_factory=dict, json_schema_extra={"additionalProperties": False})
    optional: bool = omit_default(False, description=_ELEMENT_OPTIONAL)


class EdgeCheck(Model):
    """The property graph's edge endpoint check, before the load starts."""

    max_dangling_percent: float = Field(
        default=0,
        ge=0,
        le=100,
        description="The load does not start when more than this percentage of the staged edges has an "
        "endpoint that is neither a vertex of this job nor already in the graph.",
    )


class PropertyGraph(GraphOptions, EdgeCheck):
    """The property graph of CSV/JSON Lines records: each record's vertices and edges, staged as
    Neptune openCypher CSV (vertices and edges in separate files)."""

    model: Literal["property"]
    vertices: list[Vertex] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    statements: ClassVar[tuple[()]] = ()
    refused: ClassVar[dict[str, str]] = {
        "statements": 'not allowed when graph.model is "property": give vertices and edges'
    }
    model_config = ConfigDict(json_schema_extra=lambda schema: _property_graph_schema(schema))

    @model_validator(mode="after")
    def _has_vertices_or_edges(self) -> PropertyGraph:
        if not self.vertices and not self.edges:
            raise fail("required: a non-empty list of vertices or of edges", "vertices")
        _no_single_cardinality(self)
        _tolerance_needs_no_fail_on_error(self)
        return self


def _no_single_cardinality(graph: GraphOptions) -> None:
    if graph.update_single_cardinality_properties:
        raise fail(
            "not supported by Neptune's loader for openCypher (graph.model property, format opencypher)",
            "updateSingleCardinalityProperties",
        )


def _tolerance_needs_no_fail_on_error(graph: GraphOptions) -> None:
    if isinstance(graph, EdgeCheck) and graph.max_dangling_percent > 0 and graph.fail_on_error:
        raise fail(
            "a tolerance above 0 needs graph.failOnError false: with failOnError true the loader "
            "stops at the first edge whose vertex is missing",
            "maxDanglingPercent",
        )


def _opencypher_graph_schema(schema: JsonDict) -> None:
    """The schema form of `_no_single_cardinality` and `_tolerance_needs_no_fail_on_error`. Kept as
    json_schema_extra: rules between loader options that no field's type states."""
    properties = schema["properties"]
    assert isinstance(properties, dict)
    properties["updateSingleCardinalityProperties"] = {"const": False}
    schema["if"] = {
        "required": ["maxDanglingPercent"],
        "properties": {"maxDanglingPercent": {"exclusiveMinimum": 0}},
    }
    schema["then"] = {"required": ["failOnError"], "properties": {"failOnError": {"const": False}}}


def _property_graph_schema(schema: JsonDict) -> None:
    """The schema form of PropertyGraph's validator: vertices or edges, no single cardinality. Kept
    as json_schema_extra: one of two lists must be non-empty, which no field's type states."""
    schema["anyOf"] = [
        {"required": [name], "properties": {name: {"minItems": 1}}} for name in ("vertices", "edges")
    ]
    _opencypher_graph_schema(schema)


class OpencypherGraph(GraphOptions, EdgeCheck):
    """The graph target of openCypher CSV sources: each file already is a vertex or an edge file."""

    model: ClassVar[str] = "property"
    statements: ClassVar[tuple[()]] = ()
    vertices: ClassVar[tuple[()]] = ()
    edges: ClassVar[tuple[()]] = ()
    model_config = ConfigDict(
        title="OpencypherGraph", json_schema_extra=lambda schema: _opencypher_graph_schema(schema)
    )

    @model_validator(mode="after")
    def _single_cardinality(self) -> OpencypherGraph:
        _no_single_cardinality(self)
        _tolerance_needs_no_fail_on_error(self)
        return self


def _graph_model(value: Any) -> str | None:
    """graph.model picks the form; absent is "rdf"; a non-object is left to the rdf form to refuse
    (a validated graph, dumped, is its own form)."""
    if isinstance(value, RecordGraph | PropertyGraph):
        return f"~{value.model}"
    if not isinstance(value, Mapping):
        return "~rdf"
    chosen = value.get("model", "rdf")
    return f"~{chosen}" if chosen in GRAPH_MODELS else None


RecordGraphs = Annotated[
    Annotated[RecordGraph, Tag("~rdf")] | Annotated[PropertyGraph, Tag("~property")],
    Discriminator(
        _graph_model,
        custom_error_type="spec_graph_model",
        custom_error_message='graph.model must be "rdf" (the default) or "property"',
    ),
]


class RdfGraph(GraphOptions):
    """The graph target of N-Quads/N-Triples: each line already is a statement (`[]` is allowed)."""

    statements: list[Statement] = Field(default_factory=list, max_length=0)
    model: ClassVar[str] = "rdf"
    vertices: ClassVar[tuple[()]] = ()
    edges: ClassVar[tuple[()]] = ()


# The graph section in each form, as the runtime reads it: `model` ("rdf" or "property"),
# `statements`, `vertices` and `edges` (empty where the form has none), and the loader options.
Graph = RecordGraph | PropertyGraph | RdfGraph | OpencypherGraph
