"""Parse the execution input (version 1) into the JobSpec, and word its errors.

The JobSpec is the validated input model itself (logic.spec_model, the one definition of the input;
schemas/input.schema.json is generated from it), validated with the table's key as context. Here:
parse_spec, the first pydantic error as one line naming the field, the checks that need the
execution (jobId from its name), the data (columns) or the deployment (graph database, Worker
memory), and the normalized form Plan hands the Workers (spec_to_json: the model's dump, every
default explicit). Every error is an InputValidationError whose `field` is the path of the
offending value, e.g. `dynamodb.key.sk`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from logic import endpoints, opencypher
from logic import spec_model as model
from logic.errors import InputValidationError, SourceNotAllowedError
from logic.s3uri import s3_parts
from logic.spec_model import (
    ATTRIBUTE_TYPES,
    COPY_ALL,
    FORMATS,
    JOB_ID_PATTERN,
    MAX_CONCURRENCY,
    MAX_SHARD_SIZE_MIB,
    MAX_WRITE_UNITS_PER_SECOND,
    PARALLELISM,
    RDF_FORMATS,
    VERSION,
    XSD,
    CsvOptions,
    DynamoDbTarget,
    Edge,
    JobSpec,
    Template,
    Term,
    Vertex,
)

__all__ = [
    "ATTRIBUTE_TYPES",
    "COPY_ALL",
    "FORMATS",
    "JOB_ID_PATTERN",
    "MAX_CONCURRENCY",
    "MAX_SHARD_SIZE_MIB",
    "MAX_WRITE_UNITS_PER_SECOND",
    "PARALLELISM",
    "RDF_FORMATS",
    "VERSION",
    "XSD",
    "CsvOptions",
    "JobSpec",
    "Template",
    "check_fields",
    "check_source_bucket",
    "fit_shard_size",
    "parse_s3_uri",
    "parse_spec",
    "parse_template",
    "spec_to_json",
]

KEY_TYPES = ("S", "N", "B")
_STATEMENT_FIELDS = ("subject", "predicate", "object", "graph")
_INPUT: TypeAdapter[JobSpec] = TypeAdapter(model.Input)
_JOB_ID = re.compile(model.JOB_ID_PATTERN)


def parse_s3_uri(uri: object, field: str = "source") -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key); the key is a prefix when it is empty or ends with "/"."""
    try:
        return s3_parts(uri)
    except ValueError as error:
        raise InputValidationError(field, str(error)) from None


def parse_template(text: object, field: str, *, allow_empty: bool = True) -> Template:
    """Split a template once, so that rendering per record is a join of prepared parts."""
    try:
        model.template_check(allow_empty=allow_empty)(text)
        return Template.parse(str(text))
    except ValueError as error:
        raise InputValidationError(field, str(error)) from None


def parse_spec(
    raw: Mapping[str, Any],
    *,
    table_key: Mapping[str, str],
    execution_name: str | None = None,
) -> JobSpec:
    """Validate an execution input against the target table's key schema.

    `table_key` maps key attribute names to S|N|B, partition key first (the TABLE_KEY setting).
    `execution_name` is the jobId when the input gives none. Raises InputValidationError.
    """
    key_schema = _table_key(table_key)
    if not isinstance(raw, Mapping):
        raise InputValidationError("$", f"the execution input must be a JSON object, got {model.kind(raw)}")
    try:
        given = _INPUT.validate_python(dict(raw), context={"table_key": key_schema})
    except ValidationError as error:
        raise _input_error(error.errors()[0], _described(key_schema)) from None
    spec = given.model_copy(update={"job_id": _job_id(given.job_id or None, execution_name)})
    if isinstance(spec.graph, model.PropertyGraph):
        _check_property_types("vertices", spec.graph.vertices)
        _check_property_types("edges", spec.graph.edges)
    if spec.csv is not None and spec.csv.columns is not None:
        check_fields(spec, spec.csv.columns)
    return spec


def check_source_bucket(bucket: str, allowed: Collection[str]) -> None:
    """Refuse a source bucket this loader may not read (Prepare and Plan ask the same)."""
    if bucket not in allowed:
        names = ", ".join(sorted(allowed))
        raise SourceNotAllowedError(
            f"source: bucket {bucket!r} is not one this loader may read (allowed: {names}); "
            "add it to extra_source_buckets in cdk.json to allow it"
        )


def check_graph_database(spec: JobSpec, raw: Mapping[str, Any], *, graph_enabled: bool) -> None:
    """Raise InputValidationError for a graph input where the environment has no graph database."""
    if spec.graph is not None and not graph_enabled:
        raise InputValidationError(
            "graph" if "graph" in raw else "format",
            "this environment has no graph database (graph_enabled is false in cdk.json): "
            "it loads csv, jsonl, parquet and dynamodb-json into DynamoDB only",
        )


def fit_shard_size(spec: JobSpec, *, worker_memory_mib: int) -> JobSpec:
    """The spec with the shard size its Worker holds: a property graph input that gives no
    shardSizeMiB gets the largest whole MiB a Worker of `worker_memory_mib` holds of its ids, up
    to the default (`check_shard_memory` then refuses only a size the user gave, or a Worker that
    holds less than 1 MiB). The chosen size is in the normalized spec, so the plan id, the Workers
    and the execution's output all have it."""
    if spec.graph is None or spec.graph.model != "property" or "shard_size_mib" in spec.model_fields_set:
        return spec
    shape = id_shape(spec)
    if endpoints.worker_peak_mib(spec.shard_size_mib, shape) <= worker_memory_mib:
        return spec
    largest = endpoints.max_shard_mib(worker_memory_mib, int(spec.shard_size_mib), shape)
    return spec.model_copy(update={"shard_size_mib": float(largest)}) if largest else spec


def check_shard_memory(spec: JobSpec, *, worker_memory_mib: int) -> None:
    """Raise InputValidationError (shardSizeMiB) for a property graph shard larger than the Worker
    holds: it keeps every vertex id and edge endpoint of its shard in memory for the edge endpoint
    check (logic/endpoints.py), so it would end with Runtime.OutOfMemory, and again on every retry.
    DynamoDB and RDF shards stream in flat memory. A dry run is held to it too: it answers for the
    load it rehearses."""
    if spec.graph is None or spec.graph.model != "property":
        return
    shape = id_shape(spec)
    peak = endpoints.worker_peak_mib(spec.shard_size_mib, shape)
    if peak > worker_memory_mib:
        largest = endpoints.max_shard_mib(worker_memory_mib, MAX_SHARD_SIZE_MIB, shape)
        allowed = f"at most {largest}" if largest else "less than 1"
        raise InputValidationError(
            "shardSizeMiB",
            f"{spec.shard_size_mib:g} MiB is more than a property graph Worker holds here: {allowed} "
            f"with worker_memory_mib {worker_memory_mib} (it keeps every vertex id and edge endpoint of "
            f"its shard in memory: up to ~{peak:,.0f} MiB for this size); lower shardSizeMiB, or raise "
            "worker_memory_mib in cdk.json",
        )


def id_shape(spec: JobSpec) -> endpoints.IdShape:
    """How the job's vertex id and edge endpoint templates make ids (openCypher sources: one a
    field, as they are): the ids a field makes and the most text a template adds."""
    graph = spec.graph
    if graph is None:
        return endpoints.IdShape()
    templates = {
        t.text: t for t in [v.id for v in graph.vertices] + [e for g in graph.edges for e in (g.from_, g.to)]
    }
    reading = [t for t in templates.values() if t.fields]
    fields = {name for t in reading for name in t.fields}
    if not fields:
        return endpoints.IdShape()

    def added(template: Template) -> int:  # non-ASCII text: up to 4 bytes a character in a str
        text = "".join(template.literals)
        width = 1 if text.isascii() else 4
        return width * len(text) + endpoints.ID_SOURCE_BYTES * (len(template.fields) - 1)

    return endpoints.IdShape(per_field=len(reading) / len(fields), fixed_bytes=max(map(added, reading)))


def check_fields(spec: JobSpec, columns: Sequence[str]) -> None:
    """Raise InputValidationError when a template or attribute names a field that is not a column.

    parse_spec calls it for `csv.columns`; Plan calls it with each object's CSV header, so a typo
    fails the job at once instead of rejecting every record. For format opencypher the header
    itself must follow Neptune's openCypher CSV rules.
    """
    if spec.format == "opencypher":
        try:
            opencypher.parse_header(columns)
        except opencypher.FormatError as error:
            raise InputValidationError("source", f"not an openCypher CSV header: {error}") from None
    known = set(columns)
    for path, name in [*references(spec), *graph_references(spec)]:
        if name not in known:
            hint = difflib.get_close_matches(name, list(columns), n=1, cutoff=0.6)
            shown = ", ".join(_name(column) for column in list(columns)[:20]) + (
                ", ..." if len(columns) > 20 else ""
            )
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputValidationError(
                path, f"names field {name!r}, which is not a column{suggestion}; columns: {shown}"
            )


def references(spec: JobSpec) -> Iterator[tuple[str, str]]:
    """Every (field path, record field name) the item mapping reads."""
    if spec.dynamodb is None:
        return
    for key, template in spec.dynamodb.key.items():
        for name in template.fields:
            yield f"dynamodb.key.{_name(key)}", name
    for attribute, value in spec.dynamodb.mapped.items():
        if isinstance(value, Template):
            for name in value.fields:
                yield f"dynamodb.attributes.{_name(attribute)}", name
        else:
            yield f"dynamodb.attributes.{_name(attribute)}.field", value.field


def graph_references(spec: JobSpec) -> Iterator[tuple[str, str]]:
    """Every (field path, record field name) the graph statements, vertices and edges read."""
    if spec.graph is None:
        return
    for index, statement in enumerate(spec.graph.statements):
        for part in _STATEMENT_FIELDS:
            term = getattr(statement, part)
            if term is not None:
                for name in model.term_template(term).fields:
                    yield f"graph.statements[{index}].{part}", name
    for index, vertex in enumerate(spec.graph.vertices):
        where = f"graph.vertices[{index}]"
        yield from _template_references(f"{where}.id", vertex.id)
        for number, label in enumerate(vertex.labels):
            yield from _template_references(f"{where}.label[{number}]", label)
        yield from _property_references(where, vertex.properties)
    for index, edge in enumerate(spec.graph.edges):
        where = f"graph.edges[{index}]"
        parts = (("from", edge.from_), ("to", edge.to), ("label", edge.label), ("id", edge.id))
        for part, template in parts:
            if template is not None:
                yield from _template_references(f"{where}.{part}", template)
        yield from _property_references(where, edge.properties)


def _template_references(path: str, template: Template) -> Iterator[tuple[str, str]]:
    for name in template.fields:
        yield path, name


def _property_references(where: str, properties: model.Properties) -> Iterator[tuple[str, str]]:
    for name, value in properties.items():
        path = f"{where}.properties.{_name(name)}"
        if isinstance(value, Template):
            yield from _template_references(path, value)
        else:
            yield f"{path}.field", value.field


def spec_to_json(spec: JobSpec) -> dict[str, Any]:
    """The normalized input, every default explicit; parse_spec of it gives back an equal JobSpec."""
    out = spec.model_dump(by_alias=True, exclude={"dynamodb", "graph"})
    if spec.dynamodb is not None:
        out["dynamodb"] = _dynamodb_to_json(spec.dynamodb)
    if spec.graph is not None:
        out["graph"] = _graph_to_json(spec.graph)
    return out


def _dynamodb_to_json(target: DynamoDbTarget) -> dict[str, Any]:
    """The item mapping as validated (a typed attribute holds the defaults its mode and type use)."""
    return target.model_dump(by_alias=True, exclude_none=True)


def _term_to_json(term: Term) -> str | dict[str, Any]:
    """An IRI that is not optional as its template's text; any other term without its defaults."""
    if isinstance(term, Template) or (term.kind == "iri" and not term.optional):
        return model.term_template(term).text
    return term.model_dump(by_alias=True, exclude_defaults=True)


def _graph_to_json(graph: model.Graph) -> dict[str, Any]:
    """The graph section; "model" is left out for RDF (N-Quads/N-Triples inputs have no such field)."""
    rdf = isinstance(graph, model.RecordGraph)
    out = graph.model_dump(
        by_alias=True, exclude={"model", "edges", "statements"} if rdf else {"vertices", "edges"}
    )
    if isinstance(graph, model.PropertyGraph):
        # `optional` only when true: the normalized form (and the plan id) of an input without it
        # is as before the flag existed.
        out["vertices"] = [_element_to_json(vertex) for vertex in graph.vertices]
        out["edges"] = [_element_to_json(edge) for edge in graph.edges]
    elif isinstance(graph, model.RecordGraph | model.RdfGraph):
        out["statements"] = [
            {
                part: _term_to_json(term)
                for part in _STATEMENT_FIELDS
                if (term := getattr(statement, part)) is not None
            }
            for statement in graph.statements
        ]
    return out


def _element_to_json(element: Vertex | Edge) -> dict[str, Any]:
    return element.model_dump(
        by_alias=True, exclude_none=True, exclude=None if element.optional else {"optional"}
    )


def _table_key(table_key: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    # A bad TABLE_KEY is a deployment error, not the user's input: ValueError, not InputValidationError.
    items = tuple(table_key.items())
    if not 1 <= len(items) <= 2 or any(t not in KEY_TYPES for _, t in items):
        raise ValueError(f"table_key must map 1 or 2 key attribute names to S|N|B, got {dict(table_key)!r}")
    return items


def _described(key_schema: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{name} ({kind})" for name, kind in key_schema)


def _check_property_types(section: str, elements: Sequence[Vertex | Edge]) -> None:
    """A staged file has one column per property name: one type per name across the section."""
    first: dict[str, tuple[str, int]] = {}
    for index, element in enumerate(elements):
        for name, value in element.properties.items():
            kind = model.property_type(value)
            seen = first.setdefault(name, (kind, index))
            if seen[0] != kind:
                raise InputValidationError(
                    f"graph.{section}[{index}].properties.{_name(name)}",
                    f"is type {kind} here but {seen[0]} in graph.{section}[{seen[1]}]: "
                    "the staged file has one column per property name, so one type",
                )


def _job_id(given: str | None, execution_name: str | None) -> str:
    if given is not None:
        return given
    if execution_name is None:
        raise InputValidationError("jobId", "required when the execution has no name")
    if _JOB_ID.search(execution_name) is None:
        raise InputValidationError(
            "jobId",
            f"not given, and the execution name {execution_name!r} is not a valid jobId "
            "(1-80 letters, digits, '.', '_' or '-'); give jobId",
        )
    return execution_name


# How a pydantic error type reads (ctx holds the constraint, e.g. `gt`); `{kind}` names the value.
_MESSAGES = {
    "missing": "required",
    "bool_type": "must be true or false, got {kind}",
    "float_type": "must be a number, got {kind}",
    "int_type": "must be a number, got {kind}",
    "finite_number": "must be a finite number, got {kind}",
    "string_type": "must be a string, got {kind}",
    "list_type": "must be a list, got {kind}",
    "model_type": "must be an object, got {kind}",
    "dict_type": "must be an object, got {kind}",
    "greater_than": "must be more than {gt}, got {shown}",
    "greater_than_equal": "must be at least {ge}, got {shown}",
    "less_than_equal": "must be at most {le}, got {shown}",
    "too_short": "must have at least one item",
    "too_long": "must have at most {max_length} items, got {actual_length}",
    "string_too_short": "must be a non-empty string",
    "literal_error": "must be one of {expected}, got {shown}",
    "spec_shape": "{msg}, got {kind}",
}
# What an error means at one field, where the generic wording says too little.
_AT_FIELD = {
    ("source", "missing"): "required: the object or prefix to load, like s3://bucket/data.csv",
    ("graph.statements", "missing"): "required for CSV/JSON Lines: a non-empty list of "
    '{{"subject": ..., "predicate": ..., "object": ...}}',
    ("graph.statements", "too_short"): "required for CSV/JSON Lines: a non-empty list of "
    '{{"subject": ..., "predicate": ..., "object": ...}}',
    ("graph.statements", "too_long"): "not allowed with an RDF format: each line already is a statement",
    ("dynamodb.key", "missing"): "required: an object with a template for each key attribute of the table: "
    "{described}",
    ("dynamodb.version", "missing"): "required when writeMode is newerWins: the attribute (type N) "
    "that orders records",
    ("csv.columns", "missing"): model.COLUMNS_REQUIRED,
    ("csv", "model_type"): 'must be an object like {{"header": true, "delimiter": ","}}, got {kind}',
}
# The longest value an error message repeats; a longer one is cut (a 400-digit number, a long text).
_SHOWN_CHARS = 60


def _input_error(error: ErrorDetails, described: str) -> InputValidationError:
    """pydantic's error as one line naming the field (its tags, `~...` and the format, left out)."""
    kind, ctx, value = error["type"], dict(error.get("ctx") or {}), error["input"]
    if kind == "spec_format":
        fmt = value.get("format") if isinstance(value, Mapping) else None
        if fmt is None:
            given = isinstance(value, Mapping) and "format" in value
            return InputValidationError(
                "format", f"{'must not be null' if given else 'required'}: one of {', '.join(FORMATS)}"
            )
        return InputValidationError(
            "format", f"{_shown(fmt)} is not supported; use one of: {', '.join(FORMATS)}"
        )
    loc = [part for part in error["loc"][1:] if not (isinstance(part, str) and part.startswith("~"))]
    if kind == "spec_graph_model":
        return InputValidationError(
            _path([*loc, "model"]),
            f'must be "rdf" (the default) or "property", got {_shown(value.get("model"))}',
        )
    if kind == "spec_write_mode":
        return InputValidationError(
            _path([*loc, "writeMode"]),
            f"must be one of {', '.join(model.WRITE_MODES)}, got {_shown(value.get('writeMode'))}",
        )
    if "[key]" in loc:  # a dict's key: the error is about the object holding it
        why = str(ctx["error"]) if kind == "value_error" else "names must be non-empty strings"
        return InputValidationError(_path(loc[: loc.index("[key]") - 1]), why)
    if kind == "spec":
        return InputValidationError(_path([*loc, *ctx["at"]]), _in_mode(ctx["message"], error["loc"]))
    path = _path(loc)
    if kind == "value_error":
        return InputValidationError(path, str(ctx["error"]))
    if kind == "literal_error":
        ctx["expected"] = ", ".join(re.findall(r"'([^']*)'", ctx["expected"]))
    template = _AT_FIELD.get((path, kind)) or _MESSAGES.get(kind, "{msg}")
    for bound in ("gt", "ge", "le"):
        if bound in ctx:
            ctx[bound] = _number(ctx[bound])
    return InputValidationError(
        path,
        template.format(
            **ctx,
            kind=model.kind(value),
            shown=_shown(value),
            msg=error["msg"],
            described=described,
        ),
    )


_MODE_TAGS = {f"~{mode}" for mode in model.WRITE_MODES}


def _in_mode(message: str, loc: Sequence[str | int]) -> str:
    """A message naming `{writeMode}`, with the mode of the target branch the input named."""
    modes = [part[1:] for part in loc if isinstance(part, str) and part in _MODE_TAGS]
    return message.replace("{writeMode}", repr(modes[-1])) if modes else message


def _number(bound: Any) -> Any:
    """A bound as people write it: 0 rather than 0.0."""
    return int(bound) if isinstance(bound, float) and bound.is_integer() else bound


def _shown(value: Any) -> str:
    """A value as an error message repeats it: its repr, cut to _SHOWN_CHARS characters."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 3]}... ({len(text)} characters)"


def _path(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{_name(part)}" if path else _name(part)
    return path or "$"


_name = model.shown_name
