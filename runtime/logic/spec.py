"""Validate the execution input (version 1) into a normalized JobSpec; schemas/input.schema.json documents it.

Validation is written out by hand (stdlib only, so the Lambda bundle needs no jsonschema); a test
checks that the JSON Schema accepts and rejects the same examples. Every error is an
InputValidationError whose `field` is the path of the offending value, e.g. `dynamodb.key.sk`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from logic import polling
from logic.errors import InputValidationError, SourceNotAllowedError

VERSION = 1
FORMATS = ("csv", "jsonl", "nquads", "ntriples")
# Formats whose lines are RDF statements: they go to the graph target only.
RDF_FORMATS = ("nquads", "ntriples")
# Neptune loader settings (POST /loader) and the poll loop; defaults are Neptune's own.
PARALLELISM = ("LOW", "MEDIUM", "HIGH", "OVERSUBSCRIBE")
XSD = "http://www.w3.org/2001/XMLSchema#"
KEY_TYPES = ("S", "N", "B")
ATTRIBUTE_TYPES = ("S", "N", "BOOL")
COPY_ALL = "*"
MAX_SHARD_SIZE_MIB = 10240
MAX_CONCURRENCY = 10000
# A job-wide write budget above DynamoDB's default per-table quota (40,000 WCU) needs a quota
# increase first; the bound only catches a misplaced digit.
MAX_WRITE_UNITS_PER_SECOND = 10_000_000
JOB_ID_PATTERN = "[A-Za-z0-9._-]{1,80}"

_JOB_ID = re.compile(JOB_ID_PATTERN)
# Bucket naming rules (3-63 characters of lowercase letters, digits, dots and hyphens, starting
# and ending with a letter or digit); the key is anything, including nothing (a prefix).
_S3_URI = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?", re.DOTALL)

_TOP_FIELDS = (
    "version",
    "source",
    "format",
    "csv",
    "dynamodb",
    "shardSizeMiB",
    "maxConcurrency",
    "maxRejectedPercent",
    "jobId",
    "dryRun",
    "graph",
    "writeUnitsPerSecond",
)
_GRAPH_FIELDS = (
    "statements",
    "gzip",
    "parallelism",
    "failOnError",
    "queueRequest",
    "updateSingleCardinalityProperties",
    "dependencies",
    "pollSeconds",
    "timeoutMinutes",
)
_STATEMENT_FIELDS = ("subject", "predicate", "object", "graph")
_TERM_FIELDS = ("iri", "blank", "literal", "datatype", "language", "optional")
_LANGUAGE = re.compile(r"[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*")
_CSV_FIELDS = ("header", "delimiter", "columns", "comment")
_DYNAMODB_FIELDS = ("key", "attributes")
_ATTRIBUTE_FIELDS = ("field", "type", "optional")


@dataclass(frozen=True)
class Template:
    """A `{field}` template (`{{` and `}}` are literal braces), split once into literals and fields.

    Rendering is `literals[0] + value(fields[0]) + literals[1] + ... + literals[-1]`.
    """

    text: str
    literals: tuple[str, ...]
    fields: tuple[str, ...]


@dataclass(frozen=True)
class CsvOptions:
    """How CSV lines split into fields."""

    header: bool = True
    delimiter: str = ","
    columns: tuple[str, ...] | None = None
    comment: str | None = None


@dataclass(frozen=True)
class KeyAttribute:
    """One key attribute of the target table (partition key first) and the template that fills it."""

    name: str
    type: str
    template: Template


@dataclass(frozen=True)
class Attribute:
    """One non-key attribute: a template (type S) or a typed copy of one field."""

    name: str
    type: str
    template: Template | None = None
    field: str | None = None
    optional: bool = False


@dataclass(frozen=True)
class DynamoDbTarget:
    """How a record becomes a DynamoDB item; `copy_all` is the `"attributes": "*"` form."""

    key: tuple[KeyAttribute, ...]
    attributes: tuple[Attribute, ...] = ()
    copy_all: bool = False


@dataclass(frozen=True)
class Term:
    """A template for one RDF term: an IRI, a blank node label, or a literal.

    Field values substituted into an IRI or blank node template are percent-encoded, so no
    value can end the IRI or change its structure; literal text is escaped when serialized.
    """

    kind: str  # "iri" | "blank" | "literal"
    template: Template
    datatype: str | None = None
    language: str | None = None
    optional: bool = False


@dataclass(frozen=True)
class Statement:
    """subject, predicate, object (and optional graph name) templates: one statement per record."""

    subject: Term
    predicate: Term
    object: Term
    graph: Term | None = None


@dataclass(frozen=True)
class GraphTarget:
    """The `graph` section: statements for CSV/JSON Lines records, staging and loader options."""

    statements: tuple[Statement, ...] = ()
    gzip: bool = False
    parallelism: str = "HIGH"
    fail_on_error: bool = True
    queue_request: bool = True
    update_single_cardinality_properties: bool = False
    dependencies: tuple[str, ...] = ()
    poll_seconds: int = 30
    timeout_minutes: int = 720


@dataclass(frozen=True)
class JobSpec:
    """A validated execution input with every default filled in."""

    source: str
    format: str
    dynamodb: DynamoDbTarget | None
    job_id: str
    csv: CsvOptions | None = None
    shard_size_mib: float = 64
    max_concurrency: int = 100
    max_rejected_percent: float = 1
    dry_run: bool = False
    version: int = VERSION
    graph: GraphTarget | None = None
    # Job-wide DynamoDB write units per second shared by the running shards; None: no budget.
    write_units_per_second: float | None = None

    @property
    def bucket(self) -> str:
        return parse_s3_uri(self.source)[0]

    @property
    def key(self) -> str:
        """The object key, or the prefix when `is_prefix`."""
        return parse_s3_uri(self.source)[1]

    @property
    def is_prefix(self) -> bool:
        key = self.key
        return key == "" or key.endswith("/")

    @property
    def shard_size_bytes(self) -> int:
        return max(1, int(self.shard_size_mib * 1024 * 1024))


def parse_s3_uri(uri: object, field: str = "source") -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key); the key is a prefix when it is empty or ends with "/"."""
    if not isinstance(uri, str):
        raise InputValidationError(field, f"must be a string like s3://bucket/key, got {_kind(uri)}")
    match = _S3_URI.fullmatch(uri)
    if match is None:
        if not uri.startswith("s3://"):
            raise InputValidationError(
                field, f"must start with s3:// (s3://bucket/key or s3://bucket/prefix/), got {uri!r}"
            )
        bucket = uri[5:].split("/", 1)[0]
        raise InputValidationError(
            field,
            f"{bucket!r} is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens, "
            "starting and ending with a letter or digit)",
        )
    return match.group(1), match.group(2) or ""


def parse_template(text: object, field: str, *, allow_empty: bool = True) -> Template:
    """Split a template once, so that rendering per record is a join of prepared parts."""
    if not isinstance(text, str):
        raise InputValidationError(field, f'must be a template string like "ITEM#{{id}}", got {_kind(text)}')
    if not text and not allow_empty:
        raise InputValidationError(field, "must not be empty")
    literals: list[str] = []
    fields: list[str] = []
    buf: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "{":
            if text.startswith("{{", i):
                buf.append("{")
                i += 2
                continue
            close = text.find("}", i + 1)
            name = text[i + 1 : close]
            if close < 0 or "{" in name:
                raise InputValidationError(
                    field, f"unclosed '{{' at position {i} in {text!r} (write '{{{{' for a literal brace)"
                )
            if not name:
                raise InputValidationError(field, f"empty field name '{{}}' at position {i} in {text!r}")
            literals.append("".join(buf))
            buf = []
            fields.append(name)
            i = close + 1
        elif c == "}":
            if text.startswith("}}", i):
                buf.append("}")
                i += 2
                continue
            raise InputValidationError(
                field, f"unmatched '}}' at position {i} in {text!r} (write '}}}}' for a literal brace)"
            )
        else:
            buf.append(c)
            i += 1
    literals.append("".join(buf))
    return Template(text, tuple(literals), tuple(fields))


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
        raise InputValidationError("$", f"the execution input must be a JSON object, got {_kind(raw)}")
    _no_unknown(raw, _TOP_FIELDS, "")

    version = raw.get("version", VERSION)
    if _is_number(version) and version == VERSION:
        version = VERSION
    else:
        raise InputValidationError(
            "version", f"unsupported version {version!r}; this loader reads version {VERSION}"
        )

    if "source" not in raw:
        raise InputValidationError(
            "source", "required: the object or prefix to load, like s3://bucket/data.csv"
        )
    source = raw["source"]
    parse_s3_uri(source)

    if "format" not in raw:
        raise InputValidationError("format", f"required: one of {', '.join(FORMATS)}")
    fmt = raw["format"]
    if fmt not in FORMATS or not isinstance(fmt, str):
        raise InputValidationError("format", f"{fmt!r} is not supported; use one of: {', '.join(FORMATS)}")

    csv_options: CsvOptions | None = None
    if fmt == "csv":
        csv_options = _csv(raw.get("csv", {}))
    elif "csv" in raw:
        raise InputValidationError("csv", f"only allowed when format is 'csv' (format is {fmt!r})")

    graph: GraphTarget | None = None
    if "graph" in raw:
        graph = _graph(raw["graph"], rdf=fmt in RDF_FORMATS)
    elif fmt in RDF_FORMATS:
        graph = GraphTarget()  # N-Quads/N-Triples statements go to the graph: `"graph": {}` is implied
    target: DynamoDbTarget | None = None
    if fmt in RDF_FORMATS:
        if "dynamodb" in raw:
            raise InputValidationError(
                "dynamodb", f"not allowed with format {fmt!r}: RDF statements go to the graph target only"
            )
    elif "dynamodb" in raw or graph is None:
        if "dynamodb" not in raw:
            raise InputValidationError(
                "dynamodb",
                'required (unless "graph" is given): {"key": {...}, "attributes": {...} or "*"}',
            )
        target = _dynamodb(raw["dynamodb"], key_schema)

    shard_size = _number(raw, "shardSizeMiB", 64, low=0, low_inclusive=False, high=MAX_SHARD_SIZE_MIB)
    concurrency = int(_number(raw, "maxConcurrency", 100, low=1, high=MAX_CONCURRENCY, integer=True))
    rejected = _number(raw, "maxRejectedPercent", 1, low=0, high=100)

    dry_run = raw.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise InputValidationError("dryRun", f"must be true or false, got {_kind(dry_run)}")

    spec = JobSpec(
        source=source,
        format=fmt,
        dynamodb=target,
        job_id=_job_id(raw, execution_name),
        csv=csv_options,
        shard_size_mib=shard_size,
        max_concurrency=concurrency,
        max_rejected_percent=rejected,
        dry_run=dry_run,
        version=version,
        graph=graph,
        write_units_per_second=_write_budget(raw),
    )
    if csv_options is not None and csv_options.columns is not None:
        check_fields(spec, csv_options.columns)
    return spec


def check_source_bucket(bucket: str, allowed: Collection[str]) -> None:
    """Refuse a source bucket this loader may not read (Prepare and Plan ask the same)."""
    if bucket not in allowed:
        names = ", ".join(sorted(allowed))
        raise SourceNotAllowedError(
            f"source: bucket {bucket!r} is not one this loader may read (allowed: {names}); "
            "add it to extra_source_buckets in cdk.json to allow it"
        )


def check_fields(spec: JobSpec, columns: Sequence[str]) -> None:
    """Raise InputValidationError when a template or attribute names a field that is not a column.

    parse_spec calls it for `csv.columns`; Plan calls it with each object's CSV header, so a typo
    fails the job at once instead of rejecting every record.
    """
    known = set(columns)
    for path, name in [*references(spec), *graph_references(spec)]:
        if name not in known:
            hint = difflib.get_close_matches(name, list(columns), n=1, cutoff=0.6)
            shown = ", ".join(list(columns)[:20]) + (", ..." if len(columns) > 20 else "")
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputValidationError(
                path, f"names field {name!r}, which is not a column{suggestion}; columns: {shown}"
            )


def references(spec: JobSpec) -> Iterator[tuple[str, str]]:
    """Every (field path, record field name) the item mapping reads."""
    if spec.dynamodb is None:
        return
    for key in spec.dynamodb.key:
        for name in key.template.fields:
            yield f"dynamodb.key.{key.name}", name
    for attribute in spec.dynamodb.attributes:
        if attribute.template is not None:
            for name in attribute.template.fields:
                yield f"dynamodb.attributes.{attribute.name}", name
        elif attribute.field is not None:
            yield f"dynamodb.attributes.{attribute.name}.field", attribute.field


def graph_references(spec: JobSpec) -> Iterator[tuple[str, str]]:
    """Every (field path, record field name) the graph statements read."""
    if spec.graph is None:
        return
    for index, statement in enumerate(spec.graph.statements):
        for part in _STATEMENT_FIELDS:
            term = getattr(statement, part)
            if term is not None:
                for name in term.template.fields:
                    yield f"graph.statements[{index}].{part}", name


def spec_to_json(spec: JobSpec) -> dict[str, Any]:
    """The normalized input, every default explicit; parse_spec of it gives back an equal JobSpec."""
    out: dict[str, Any] = {"version": spec.version, "source": spec.source, "format": spec.format}
    if spec.csv is not None:
        out["csv"] = {
            "header": spec.csv.header,
            "delimiter": spec.csv.delimiter,
            "columns": None if spec.csv.columns is None else list(spec.csv.columns),
            "comment": spec.csv.comment,
        }
    if spec.dynamodb is not None:
        out["dynamodb"] = _dynamodb_to_json(spec.dynamodb)
    if spec.graph is not None:
        out["graph"] = _graph_to_json(spec.graph)
    out["shardSizeMiB"] = spec.shard_size_mib
    out["maxConcurrency"] = spec.max_concurrency
    out["maxRejectedPercent"] = spec.max_rejected_percent
    out["jobId"] = spec.job_id
    out["dryRun"] = spec.dry_run
    out["writeUnitsPerSecond"] = spec.write_units_per_second
    return out


def _dynamodb_to_json(target: DynamoDbTarget) -> dict[str, Any]:
    attributes: str | dict[str, Any]
    if target.copy_all:
        attributes = COPY_ALL
    else:
        attributes = {}
        for attribute in target.attributes:
            if attribute.template is not None:
                attributes[attribute.name] = attribute.template.text
            else:
                attributes[attribute.name] = {
                    "field": attribute.field,
                    "type": attribute.type,
                    "optional": attribute.optional,
                }
    return {"key": {k.name: k.template.text for k in target.key}, "attributes": attributes}


def _term_to_json(term: Term) -> str | dict[str, Any]:
    if term.kind == "iri" and not term.optional:
        return term.template.text
    out: dict[str, Any] = {term.kind: term.template.text}
    if term.datatype is not None:
        out["datatype"] = term.datatype
    if term.language is not None:
        out["language"] = term.language
    if term.optional:
        out["optional"] = True
    return out


def _graph_to_json(graph: GraphTarget) -> dict[str, Any]:
    statements = []
    for statement in graph.statements:
        item = {
            "subject": _term_to_json(statement.subject),
            "predicate": _term_to_json(statement.predicate),
            "object": _term_to_json(statement.object),
        }
        if statement.graph is not None:
            item["graph"] = _term_to_json(statement.graph)
        statements.append(item)
    return {
        "statements": statements,
        "gzip": graph.gzip,
        "parallelism": graph.parallelism,
        "failOnError": graph.fail_on_error,
        "queueRequest": graph.queue_request,
        "updateSingleCardinalityProperties": graph.update_single_cardinality_properties,
        "dependencies": list(graph.dependencies),
        "pollSeconds": graph.poll_seconds,
        "timeoutMinutes": graph.timeout_minutes,
    }


def _table_key(table_key: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    # A bad TABLE_KEY is a deployment error, not the user's input: ValueError, not InputValidationError.
    items = tuple(table_key.items())
    if not 1 <= len(items) <= 2 or any(t not in KEY_TYPES for _, t in items):
        raise ValueError(f"table_key must map 1 or 2 key attribute names to S|N|B, got {dict(table_key)!r}")
    return items


def _csv(raw: object) -> CsvOptions:
    if not isinstance(raw, Mapping):
        raise InputValidationError(
            "csv", f'must be an object like {{"header": true, "delimiter": ","}}, got {_kind(raw)}'
        )
    _no_unknown(raw, _CSV_FIELDS, "csv")
    header = raw.get("header", True)
    if not isinstance(header, bool):
        raise InputValidationError("csv.header", f"must be true or false, got {_kind(header)}")
    delimiter = raw.get("delimiter", ",")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise InputValidationError("csv.delimiter", f"must be one character, got {delimiter!r}")
    if delimiter in '\n\r"':
        raise InputValidationError(
            "csv.delimiter", f"{delimiter!r} cannot be a delimiter (newlines and '\"' have other meanings)"
        )
    comment = raw.get("comment")
    if comment is not None and (
        not isinstance(comment, str) or not comment or "\n" in comment or "\r" in comment
    ):
        raise InputValidationError(
            "csv.comment", f"must be null or a non-empty one-line prefix like '#', got {comment!r}"
        )
    columns_raw = raw.get("columns")
    columns: tuple[str, ...] | None = None
    if columns_raw is not None:
        if isinstance(columns_raw, str) or not isinstance(columns_raw, Sequence):
            raise InputValidationError(
                "csv.columns", f"must be a list of column names, got {_kind(columns_raw)}"
            )
        if not columns_raw:
            raise InputValidationError("csv.columns", "must name at least one column")
        seen: set[str] = set()
        for i, name in enumerate(columns_raw):
            if not isinstance(name, str) or not name:
                raise InputValidationError(f"csv.columns[{i}]", f"must be a non-empty string, got {name!r}")
            if name in seen:
                raise InputValidationError(f"csv.columns[{i}]", f"duplicate column name {name!r}")
            seen.add(name)
        columns = tuple(columns_raw)
    if header and columns is not None:
        raise InputValidationError(
            "csv.columns", "only allowed when csv.header is false (the header line names the columns)"
        )
    if not header and columns is None:
        raise InputValidationError(
            "csv.columns", "required when csv.header is false: list the column names in order"
        )
    return CsvOptions(header=header, delimiter=delimiter, columns=columns, comment=comment)


def _dynamodb(raw: object, key_schema: tuple[tuple[str, str], ...]) -> DynamoDbTarget:
    if not isinstance(raw, Mapping):
        raise InputValidationError(
            "dynamodb", f'must be an object {{"key": ..., "attributes": ...}}, got {_kind(raw)}'
        )
    _no_unknown(raw, _DYNAMODB_FIELDS, "dynamodb")
    described = ", ".join(f"{name} ({kind})" for name, kind in key_schema)
    key_raw = raw.get("key")
    if not isinstance(key_raw, Mapping):
        raise InputValidationError(
            "dynamodb.key",
            f"required: an object with a template for each key attribute of the table: {described}",
        )
    key_names = [name for name, _ in key_schema]
    for name in key_raw:
        if name not in key_names:
            hint = difflib.get_close_matches(str(name), key_names, n=1, cutoff=0.6)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise InputValidationError(
                f"dynamodb.key.{name}",
                f"not a key attribute of the table{suggestion}; its key is {described}",
            )
    keys = []
    for name, kind in key_schema:
        path = f"dynamodb.key.{name}"
        if name not in key_raw:
            raise InputValidationError(
                path, f"missing: give a template for each key attribute of the table: {described}"
            )
        keys.append(KeyAttribute(name, kind, parse_template(key_raw[name], path, allow_empty=False)))

    attributes_raw = raw.get("attributes", {})  # absent: items of the key attributes alone
    if attributes_raw == COPY_ALL:
        return DynamoDbTarget(key=tuple(keys), copy_all=True)
    if not isinstance(attributes_raw, Mapping):
        raise InputValidationError(
            "dynamodb.attributes",
            f'must be an object of attributes or "*" (copy every field), got {attributes_raw!r}',
        )
    attributes = []
    for name, value in attributes_raw.items():
        path = f"dynamodb.attributes.{name}"
        if not isinstance(name, str) or not name:
            raise InputValidationError("dynamodb.attributes", "attribute names must be non-empty strings")
        if name in key_names:
            raise InputValidationError(
                path, "is a key attribute of the table; key attributes are filled from dynamodb.key"
            )
        attributes.append(_attribute(name, value, path))
    return DynamoDbTarget(key=tuple(keys), attributes=tuple(attributes))


def _attribute(name: str, raw: object, path: str) -> Attribute:
    if isinstance(raw, str):
        return Attribute(name, "S", template=parse_template(raw, path))
    if not isinstance(raw, Mapping):
        raise InputValidationError(
            path,
            'must be a template string or {"field": ..., "type": "S"|"N"|"BOOL", "optional": false}, '
            f"got {_kind(raw)}",
        )
    _no_unknown(raw, _ATTRIBUTE_FIELDS, path)
    field = raw.get("field")
    if not isinstance(field, str) or not field:
        raise InputValidationError(f"{path}.field", f"required: the name of the field to copy, got {field!r}")
    kind = raw.get("type", "S")
    if kind not in ATTRIBUTE_TYPES or not isinstance(kind, str):
        raise InputValidationError(
            f"{path}.type", f"{kind!r} is not an attribute type; use one of: {', '.join(ATTRIBUTE_TYPES)}"
        )
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        raise InputValidationError(f"{path}.optional", f"must be true or false, got {_kind(optional)}")
    return Attribute(name, kind, field=field, optional=optional)


def _bool(raw: Mapping[str, Any], name: str, default: bool, path: str) -> bool:
    value = raw.get(name, default)
    if not isinstance(value, bool):
        raise InputValidationError(f"{path}.{name}", f"must be true or false, got {_kind(value)}")
    return value


def _graph(raw: object, *, rdf: bool) -> GraphTarget:
    if not isinstance(raw, Mapping):
        raise InputValidationError(
            "graph", f'must be an object (`"graph": {{}}` takes every default), got {_kind(raw)}'
        )
    _no_unknown(raw, _GRAPH_FIELDS, "graph")
    statements: list[Statement] = []
    if rdf:
        if raw.get("statements"):  # `[]` is what spec_to_json writes for an RDF format
            raise InputValidationError(
                "graph.statements", "not allowed with an RDF format: each line already is a statement"
            )
    else:
        listed = raw.get("statements")
        if isinstance(listed, str) or not isinstance(listed, Sequence) or not listed:
            raise InputValidationError(
                "graph.statements",
                "required for CSV/JSON Lines: a non-empty list of "
                '{"subject": ..., "predicate": ..., "object": ...}',
            )
        for index, item in enumerate(listed):
            statements.append(_statement(item, f"graph.statements[{index}]"))
    parallelism = raw.get("parallelism", "HIGH")
    if parallelism not in PARALLELISM or not isinstance(parallelism, str):
        raise InputValidationError(
            "graph.parallelism",
            f"{parallelism!r} is not a loader parallelism; use one of: {', '.join(PARALLELISM)}",
        )
    dependencies = raw.get("dependencies", [])
    if isinstance(dependencies, str) or not isinstance(dependencies, Sequence):
        raise InputValidationError(
            "graph.dependencies", f"must be a list of load ids, got {_kind(dependencies)}"
        )
    for index, load_id in enumerate(dependencies):
        if not isinstance(load_id, str) or not re.fullmatch(r"[A-Za-z0-9-]{1,64}", load_id):
            raise InputValidationError(
                f"graph.dependencies[{index}]", f"must be a loader load id, got {load_id!r}"
            )
    if len(dependencies) > 64:
        raise InputValidationError("graph.dependencies", "at most 64 load ids (the loader's queue length)")
    poll = int(_number(raw, "pollSeconds", 30, low=1, high=3600, integer=True, path="graph."))
    timeout = int(_number(raw, "timeoutMinutes", 720, low=1, high=525600, integer=True, path="graph."))
    if polling.poll_count(timeout, poll) > polling.MAX_POLLS:
        raise InputValidationError(
            "graph.timeoutMinutes",
            f"{timeout} minutes would poll the load {polling.poll_count(timeout, poll)} times; the execution "
            f"history ({polling.HISTORY_EVENTS:,} events) allows {polling.MAX_POLLS} polls: at pollSeconds "
            f"{poll}, at most {polling.longest_timeout_minutes(poll, timeout)} minutes",
        )
    return GraphTarget(
        statements=tuple(statements),
        gzip=_bool(raw, "gzip", False, "graph"),
        parallelism=parallelism,
        fail_on_error=_bool(raw, "failOnError", True, "graph"),
        queue_request=_bool(raw, "queueRequest", True, "graph"),
        update_single_cardinality_properties=_bool(raw, "updateSingleCardinalityProperties", False, "graph"),
        dependencies=tuple(dependencies),
        poll_seconds=poll,
        timeout_minutes=timeout,
    )


def _statement(raw: object, path: str) -> Statement:
    if not isinstance(raw, Mapping):
        raise InputValidationError(
            path, f'must be an object {{"subject": ..., "predicate": ..., "object": ...}}, got {_kind(raw)}'
        )
    _no_unknown(raw, _STATEMENT_FIELDS, path)
    for part in ("subject", "predicate", "object"):
        if part not in raw:
            raise InputValidationError(f"{path}.{part}", "required: an IRI template or a term object")
    subject = _term(raw["subject"], f"{path}.subject", kinds=("iri", "blank"))
    predicate = _term(raw["predicate"], f"{path}.predicate", kinds=("iri",))
    obj = _term(raw["object"], f"{path}.object", kinds=("iri", "blank", "literal"))
    graph = _term(raw["graph"], f"{path}.graph", kinds=("iri",)) if raw.get("graph") is not None else None
    for part, term in (("subject", subject), ("predicate", predicate), ("graph", graph)):
        if term is not None and term.optional:
            raise InputValidationError(
                f"{path}.{part}.optional", "only the object of a statement may be optional"
            )
    return Statement(subject, predicate, obj, graph)


def _term(raw: object, path: str, *, kinds: tuple[str, ...]) -> Term:
    if isinstance(raw, str):
        return Term("iri", _iri_template(raw, path))
    if not isinstance(raw, Mapping):
        raise InputValidationError(
            path, f"must be an IRI template or an object with one of {', '.join(kinds)}, got {_kind(raw)}"
        )
    _no_unknown(raw, _TERM_FIELDS, path)
    given = [kind for kind in ("iri", "blank", "literal") if kind in raw]
    if len(given) != 1 or given[0] not in kinds:
        raise InputValidationError(path, f"must have exactly one of: {', '.join(kinds)}")
    kind = given[0]
    optional = _bool(raw, "optional", False, path)
    if kind != "literal":
        if "datatype" in raw or "language" in raw:
            raise InputValidationError(path, "datatype and language belong to a literal")
        template = (
            _iri_template(raw[kind], f"{path}.{kind}")
            if kind == "iri"
            else parse_template(raw[kind], f"{path}.{kind}", allow_empty=False)
        )
        return Term(kind, template, optional=optional)
    template = parse_template(raw["literal"], f"{path}.literal")
    datatype = raw.get("datatype")
    language = raw.get("language")
    if datatype is not None and language is not None:
        raise InputValidationError(path, "a literal has a datatype or a language, not both")
    if datatype is not None:
        if isinstance(datatype, str) and re.fullmatch(r"xsd:[A-Za-z]+", datatype):
            datatype = XSD + datatype[4:]
        if not isinstance(datatype, str) or not re.fullmatch(
            r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`]+", datatype
        ):
            raise InputValidationError(
                f"{path}.datatype", f"must be an absolute IRI or xsd:NAME, got {datatype!r}"
            )
    if language is not None and (not isinstance(language, str) or not _LANGUAGE.fullmatch(language)):
        raise InputValidationError(
            f"{path}.language", f"must be a language tag like en or en-GB, got {language!r}"
        )
    return Term("literal", template, datatype=datatype, language=language, optional=optional)


def _iri_template(raw: object, path: str) -> Template:
    template = parse_template(raw, path, allow_empty=False)
    prefix = template.literals[0]
    if not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", prefix):
        raise InputValidationError(
            path,
            f"an IRI template must start with a scheme such as http://example.org/, got {template.text!r}",
        )
    for literal in template.literals:
        bad = re.search(r'[\x00-\x20<>"{}|\\^`]', literal)
        if bad:
            raise InputValidationError(
                path, f"{bad.group()!r} may not appear in an IRI (in {template.text!r})"
            )
    return template


def _number(
    raw: Mapping[str, Any],
    name: str,
    default: float,
    *,
    low: float,
    high: float,
    low_inclusive: bool = True,
    integer: bool = False,
    path: str = "",
) -> Any:
    value = raw.get(name, default)
    if not _is_number(value) or not math.isfinite(value):
        raise InputValidationError(path + name, f"must be a number, got {_kind(value)}")
    if integer:
        if value != int(value):
            raise InputValidationError(path + name, f"must be a whole number, got {value!r}")
        value = int(value)
    too_low = value < low if low_inclusive else value <= low
    if too_low or value > high:
        bound = f"{'at least' if low_inclusive else 'more than'} {low:g} and at most {high:g}"
        raise InputValidationError(path + name, f"must be {bound}, got {value!r}")
    return value


def _write_budget(raw: Mapping[str, Any]) -> float | None:
    if raw.get("writeUnitsPerSecond") is None:
        return None
    value = _number(
        raw, "writeUnitsPerSecond", 0, low=0, low_inclusive=False, high=MAX_WRITE_UNITS_PER_SECOND
    )
    return float(value)


def _job_id(raw: Mapping[str, Any], execution_name: str | None) -> str:
    if "jobId" in raw:
        job_id = raw["jobId"]
        if not isinstance(job_id, str) or _JOB_ID.fullmatch(job_id) is None:
            raise InputValidationError(
                "jobId", f"must be 1-80 letters, digits, '.', '_' or '-', got {job_id!r}"
            )
        return job_id
    if execution_name is None:
        raise InputValidationError("jobId", "required when the execution has no name")
    if _JOB_ID.fullmatch(execution_name) is None:
        raise InputValidationError(
            "jobId",
            f"not given, and the execution name {execution_name!r} is not a valid jobId "
            f"({JOB_ID_PATTERN}); give jobId",
        )
    return execution_name


def _no_unknown(raw: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    for name in raw:
        if name not in allowed:
            hint = difflib.get_close_matches(str(name), allowed, n=1, cutoff=0.6)
            suggestion = f"did you mean {hint[0]!r}?" if hint else f"allowed: {', '.join(allowed)}"
            where = f"{path}.{name}" if path else str(name)
            raise InputValidationError(where, f"unknown field {name!r} ({suggestion})")


def _is_number(value: object) -> bool:
    # bool is an int subclass in Python, but `true` is not a number in JSON.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"string {value!r}"
    if _is_number(value):
        return f"number {value!r}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence):
        return "a list"
    return type(value).__name__
