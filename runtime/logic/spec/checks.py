"""The input's checks that need more than its models: the columns a template names (the data), the
graph database and the Worker's memory (the deployment), the source bucket (the loader's role).

Each raises InputValidationError naming the field (SourceNotAllowedError for a bucket).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from logic import bulk_items, endpoints, opencypher
from logic.errors import InputValidationError, SourceNotAllowedError
from logic.spec.fields import Template, shown_name
from logic.spec.graph import STATEMENT_PARTS, Edge, Properties, Vertex, property_type, term_template
from logic.spec.inputs import MAX_SHARD_SIZE_MIB, JobSpec


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
    and the execution's output all have it. A bulkPutItems input likewise gets the largest its
    Worker holds of its staged items (`bulk_items.max_shard_mib`)."""
    if "shard_size_mib" in spec.model_fields_set:
        return spec
    if spec.dynamodb is not None and spec.dynamodb.bulk:
        largest = bulk_items.max_shard_mib(worker_memory_mib)
        fits = largest == 0 or spec.shard_size_mib <= largest
        return spec if fits else spec.model_copy(update={"shard_size_mib": float(largest)})
    if spec.graph is None or spec.graph.model != "property":
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
    load it rehearses. A bulkPutItems Worker holds its shard's staged items likewise
    (runtime/shards/bulk_staging.py)."""
    if spec.dynamodb is not None and spec.dynamodb.bulk:
        _check_bulk_shard(spec, worker_memory_mib)
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


def _check_bulk_shard(spec: JobSpec, worker_memory_mib: int) -> None:
    largest = bulk_items.max_shard_mib(worker_memory_mib)
    if spec.shard_size_mib > largest:
        allowed = f"at most {largest}" if largest else "less than 1"
        raise InputValidationError(
            "shardSizeMiB",
            f"{spec.shard_size_mib:g} MiB is more than a bulkPutItems Worker holds here: {allowed} with "
            f"worker_memory_mib {worker_memory_mib} (it keeps its shard's staged items until the shard's "
            f"end: up to ~{bulk_items.HELD_PER_SOURCE_BYTE} bytes a source byte); lower shardSizeMiB, or "
            "raise worker_memory_mib in cdk.json",
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
            shown = ", ".join(shown_name(column) for column in list(columns)[:20]) + (
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
            yield f"dynamodb.key.{shown_name(key)}", name
    for attribute, value in spec.dynamodb.mapped.items():
        if isinstance(value, Template):
            for name in value.fields:
                yield f"dynamodb.attributes.{shown_name(attribute)}", name
        else:
            yield f"dynamodb.attributes.{shown_name(attribute)}.field", value.field


def graph_references(spec: JobSpec) -> Iterator[tuple[str, str]]:
    """Every (field path, record field name) the graph statements, vertices and edges read."""
    if spec.graph is None:
        return
    for index, statement in enumerate(spec.graph.statements):
        for part in STATEMENT_PARTS:
            term = getattr(statement, part)
            if term is not None:
                for name in term_template(term).fields:
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


def _property_references(where: str, properties: Properties) -> Iterator[tuple[str, str]]:
    for name, value in properties.items():
        path = f"{where}.properties.{shown_name(name)}"
        if isinstance(value, Template):
            yield from _template_references(path, value)
        else:
            yield f"{path}.field", value.field


def required_fields(spec: JobSpec) -> frozenset[str] | None:
    """The record fields a record must have: those a key, a template, a typed attribute that is not
    optional or a graph term, vertex or edge that is not optional reads (a short CSV row may leave
    out only the others: logic/parsing.py). None: every field (`"attributes": "*"` copies each)."""
    required: set[str] = set()
    target = spec.dynamodb
    if target is not None:
        if target.copy_all:
            return None
        for value in [*target.key.values(), *target.mapped.values()]:
            if isinstance(value, Template):
                required.update(value.fields)
            elif not value.optional:
                required.add(value.field)
    graph = spec.graph
    if graph is None:
        return frozenset(required)
    for statement in graph.statements:
        for part in STATEMENT_PARTS:
            term = getattr(statement, part)
            if term is not None and not getattr(term, "optional", False):
                required.update(term_template(term).fields)
    for element in [*graph.vertices, *graph.edges]:
        if not element.optional:
            required.update(_element_reads(element))
    return frozenset(required)


def _element_reads(element: Vertex | Edge) -> Iterator[str]:
    """The fields a vertex or edge must have: its templates' and its properties' (not optional)."""
    if isinstance(element, Vertex):
        templates: list[Template | None] = [element.id, *element.labels]
    else:
        templates = [element.from_, element.to, element.label, element.id]
    for template in templates:
        if template is not None:
            yield from template.fields
    for value in element.properties.values():
        if isinstance(value, Template):
            yield from value.fields
        elif not value.optional:
            yield value.field


def check_property_types(section: str, elements: Sequence[Vertex | Edge]) -> None:
    """A staged file has one column per property name: one type per name across the section."""
    first: dict[str, tuple[str, int]] = {}
    for index, element in enumerate(elements):
        for name, value in element.properties.items():
            kind = property_type(value)
            seen = first.setdefault(name, (kind, index))
            if seen[0] != kind:
                raise InputValidationError(
                    f"graph.{section}[{index}].properties.{shown_name(name)}",
                    f"is type {kind} here but {seen[0]} in graph.{section}[{seen[1]}]: "
                    "the staged file has one column per property name, so one type",
                )
