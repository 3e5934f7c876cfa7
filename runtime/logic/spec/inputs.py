"""The execution input (version 1) as a whole: the fields every format has, one model per format
(`Input`, tagged by `format`), the JobSpec the runtime reads, and the published JSON Schema.

schemas/input.schema.json is generated from these models (`make schemas`: json_schema below);
logic/spec/parse.py validates an input into a JobSpec and words the errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic.json_schema import GenerateJsonSchema

from logic import polling
from logic.s3uri import S3_URI_PATTERN, s3_parts, s3_uri_message
from logic.spec.csv_options import Csv, CsvOptions
from logic.spec.dynamodb import ExportTarget, RecordTarget
from logic.spec.fields import (
    ABSENT,
    END,
    Model,
    NotNull,
    WholeNumber,
    fail,
    matches,
    no_default,
    omit_default,
)
from logic.spec.graph import OpencypherGraph, RdfGraph, RecordGraphs

VERSION = 1
FORMATS = ("csv", "jsonl", "nquads", "ntriples", "opencypher", "dynamodb-json", "parquet")
# Formats whose lines are RDF statements: they go to the graph target only.
RdfFormat = Literal["nquads", "ntriples"]
RDF_FORMATS = get_args(RdfFormat)


MAX_SHARD_SIZE_MIB = 10240


# The Distributed Map's own limit (tests/contract ties it to stacks.loader_settings.MAX_MAP_CONCURRENCY).
MAX_CONCURRENCY = 10000
# A job-wide write budget above DynamoDB's default per-table quota (40,000 WCU) needs a quota
# increase first; the bound only catches a misplaced digit.
MAX_WRITE_UNITS_PER_SECOND = 10_000_000


JOB_ID_PATTERN = r"^[A-Za-z0-9._-]{1,80}" + END


def _version(value: object) -> object:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == VERSION:
        return VERSION
    raise ValueError(f"unsupported version {value!r}; this loader reads version {VERSION}")


S3Uri = Annotated[str, matches(S3_URI_PATTERN, s3_uri_message)]
JobId = Annotated[
    str, matches(JOB_ID_PATTERN, lambda v: f"must be 1-80 letters, digits, '.', '_' or '-', got {v!r}")
]


class Common(Model):
    """The fields every format has."""

    version: Annotated[Literal[1], BeforeValidator(_version)] = Field(
        default=1, description="Input format version."
    )
    source: S3Uri = Field(
        description="The object (s3://bucket/key) or every object under a prefix (s3://bucket/prefix/, or "
        "s3://bucket) to load.",
        examples=["s3://my-source-bucket/ukpostcodes.csv", "s3://my-source-bucket/exports/2026-11/"],
    )
    shard_size_mib: float = Field(
        default=64,
        alias="shardSizeMiB",
        gt=0,
        le=MAX_SHARD_SIZE_MIB,
        description="Bytes of source per shard (one Worker invocation), in MiB; fractions make small shards. "
        "Absent: Plan chooses a shard per maxConcurrency worker, 1 to 64 MiB (the default shown). "
        "A property graph's shard is also bounded by the Worker's memory (Plan names the largest).",
    )
    max_concurrency: Annotated[int, WholeNumber] = Field(
        default=100,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Shards processed at once (capped by the deployment's MAX_CONCURRENCY_CAP).",
    )
    max_rejected_percent: float = Field(
        default=1,
        ge=0,
        le=100,
        description="The job fails when more than this percentage of records is rejected.",
    )
    job_id: JobId = Field(
        default="",  # absent: the execution name (defaults are not validated; the schema shows none)
        description="Names the job in the ledger and the staging bucket; defaults to the execution name.",
        json_schema_extra=no_default,
    )
    dry_run: bool = Field(
        default=False, description="Parse, map and count every record without writing to the table."
    )
    reload: bool = omit_default(
        False,
        description="Process every shard again although a run of the same jobId already loaded this plan "
        "(same objects and spec), which is otherwise refused (JobAlreadyLoadedError); not with a numeric "
        "update `add`.",
    )
    write_units_per_second: Annotated[float, Field(gt=0, le=MAX_WRITE_UNITS_PER_SECOND)] | None = Field(
        default=None,
        description="Job-wide DynamoDB write units per second, shared by the running shards (re-balanced as "
        "shards start and finish); null: no budget, each worker backs off only when throttled.",
    )

    @property
    def bucket(self) -> str:
        return s3_parts(self.source)[0]

    @property
    def key(self) -> str:
        """The object key, or the prefix when `is_prefix`."""
        return s3_parts(self.source)[1]

    @property
    def is_prefix(self) -> bool:
        key = self.key
        return key == "" or key.endswith("/")

    @property
    def shard_size_bytes(self) -> int:
        return max(1, int(self.shard_size_mib * 1024 * 1024))


_CSV_ONLY = {"csv": "only allowed when format is 'csv' (format is {format!r})"}
# Kept as json_schema_extra: records go to DynamoDB, the graph or both (RecordInput._has_a_target),
# a rule between two fields that no field's type states.
# Also kept: engine bulkPutItems is not with a graph target (RecordInput._has_a_target).
_NEEDS_TARGET: JsonDict = {
    "anyOf": [{"required": ["dynamodb"]}, {"required": ["graph"]}],
    "if": {
        "required": ["dynamodb"],
        "properties": {
            "dynamodb": {"required": ["engine"], "properties": {"engine": {"const": "bulkPutItems"}}}
        },
    },
    "then": {"not": {"required": ["graph"]}},
}


class RecordInput(Common):
    """CSV or JSON Lines records: to DynamoDB items, graph statements, or both."""

    dynamodb: Annotated[RecordTarget | None, NotNull] = ABSENT
    graph: Annotated[RecordGraphs | None, NotNull] = ABSENT

    @model_validator(mode="after")
    def _has_a_target(self) -> RecordInput:
        if self.dynamodb is None and self.graph is None:
            raise fail(
                'required (unless "graph" is given): {"key": {...}, "attributes": {...} or "*"}', "dynamodb"
            )
        if self.dynamodb is not None and self.dynamodb.bulk and self.graph is not None:
            raise fail(
                "bulkPutItems not with a graph target: a job that also loads Neptune writes its items "
                'with engine "lambda"',
                "dynamodb",
                "engine",
            )
        return self

    @model_validator(mode="after")
    def _polls_fit_beside_a_sync(self) -> RecordInput:
        # A sync's Sync Map takes its share of the execution history (logic/polling.py).
        if self.dynamodb is None or self.graph is None or not self.dynamodb.staged:
            return self
        timeout, poll = self.graph.timeout_minutes, self.graph.poll_seconds
        polls = polling.poll_count(timeout, poll)
        if polls > polling.MAX_POLLS_WITH_SYNC:
            longest = polling.longest_timeout_minutes(poll, timeout, polling.MAX_POLLS_WITH_SYNC)
            raise fail(
                f"{timeout} minutes would poll the load {polls} times; beside writeMode sync's Sync Map "
                f"the execution history allows {polling.MAX_POLLS_WITH_SYNC} polls: at pollSeconds "
                f"{poll}, at most {longest} minutes",
                "graph",
                "timeoutMinutes",
            )
        return self

    @model_serializer(mode="wrap")
    def _targets_last(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The dump (the normalized form) names the targets after the format's own fields, in the
        order the normalized form has always had (Plan hands it to the Workers as it is)."""
        dumped: dict[str, Any] = handler(self)
        for name in ("dynamodb", "graph"):
            if name in dumped:
                dumped[name] = dumped.pop(name)
        return dumped


class CsvInput(RecordInput):
    format: Literal["csv"]
    csv: Csv = Field(
        CsvOptions(),
        description="CSV options; only with format csv. Quoted fields may hold newlines (RFC 4180).",
    )
    model_config = ConfigDict(title="CSV", json_schema_extra=_NEEDS_TARGET)


class JsonlInput(RecordInput):
    format: Literal["jsonl"]
    csv: ClassVar[None] = None
    refused: ClassVar[dict[str, str]] = _CSV_ONLY
    model_config = ConfigDict(title="JSON Lines", json_schema_extra=_NEEDS_TARGET)


class ParquetInput(RecordInput):
    """Parquet files (one object, or every data file under a prefix): rows to DynamoDB items, graph
    statements, or both, as JSON Lines records are; sharded by row group (docs/INPUT.md)."""

    format: Literal["parquet"]
    csv: ClassVar[None] = None
    refused: ClassVar[dict[str, str]] = _CSV_ONLY
    model_config = ConfigDict(title="Parquet", json_schema_extra=_NEEDS_TARGET)


class RdfInput(Common):
    """N-Quads or N-Triples lines: RDF statements, to the graph target only (`"graph": {}` is implied)."""

    format: RdfFormat
    graph: RdfGraph = RdfGraph()
    csv: ClassVar[None] = None
    dynamodb: ClassVar[None] = None
    refused: ClassVar[dict[str, str]] = {
        **_CSV_ONLY,
        "dynamodb": "not allowed with format {format!r}: RDF statements go to the graph target only",
    }
    model_config = ConfigDict(title="RDF")


class OpencypherInput(Common):
    """Neptune openCypher CSV files (a node or a relationship file each): every row checked against
    the format's rules and staged as it is, to the graph target only (`"graph": {}` is implied)."""

    format: Literal["opencypher"]
    graph: OpencypherGraph = OpencypherGraph()
    csv: ClassVar[CsvOptions] = CsvOptions()  # Neptune's CSV: a header line, comma-separated
    dynamodb: ClassVar[None] = None
    refused: ClassVar[dict[str, str]] = {
        **_CSV_ONLY,
        "dynamodb": "not allowed with format {format!r}: openCypher rows go to the graph target only",
    }
    model_config = ConfigDict(title="openCypher CSV")


class DynamoDbJsonInput(Common):
    """DynamoDB JSON lines (`{"Item": {...}}`, as DynamoDB's export to S3 writes them): to DynamoDB
    items, written as they are unless `dynamodb.key`/`attributes` map them."""

    format: Literal["dynamodb-json"]
    dynamodb: Annotated[ExportTarget, NotNull] = Field(
        default_factory=dict,  # validated (with the table's key) as ExportTarget
        validate_default=True,
        description="Absent: each item is written as it is, with writeMode put.",
    )
    csv: ClassVar[None] = None
    graph: ClassVar[None] = None
    refused: ClassVar[dict[str, str]] = {
        **_CSV_ONLY,
        "graph": "not allowed with format {format!r}: DynamoDB JSON items go to the table only",
    }
    model_config = ConfigDict(title="DynamoDB JSON")


def _format(value: Any) -> str | None:
    fmt = value.get("format") if isinstance(value, Mapping) else None
    return (
        {
            "csv": "csv",
            "jsonl": "jsonl",
            "nquads": "rdf",
            "ntriples": "rdf",
            "opencypher": "opencypher",
            "dynamodb-json": "dynamodb-json",
            "parquet": "parquet",
        }.get(fmt)
        if isinstance(fmt, str)
        else None
    )


# A validated execution input, as the runtime reads it: every form has `csv`, `dynamodb` and
# `graph` (None where it has none; format opencypher's csv is Neptune's header-and-comma form).
JobSpec = CsvInput | JsonlInput | RdfInput | OpencypherInput | DynamoDbJsonInput | ParquetInput
Input = Annotated[
    Annotated[CsvInput, Tag("csv")]
    | Annotated[JsonlInput, Tag("jsonl")]
    | Annotated[RdfInput, Tag("rdf")]
    | Annotated[OpencypherInput, Tag("opencypher")]
    | Annotated[DynamoDbJsonInput, Tag("dynamodb-json")]
    | Annotated[ParquetInput, Tag("parquet")],
    Discriminator(_format, custom_error_type="spec_format", custom_error_message="format"),
]


SCHEMA_ID = "https://mapload.example/schemas/input.schema.json"


class _Untitled(GenerateJsonSchema):
    """pydantic's generated titles ("Shardsizemib") say less than the field names: leave them out."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def json_schema() -> dict[str, Any]:
    """The published JSON Schema (Draft 2020-12) of the input, generated from the models above."""
    from pydantic import TypeAdapter

    generated = TypeAdapter(Input).json_schema(mode="validation", schema_generator=_Untitled)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "mapload execution input, version 1",
        "description": " ".join(
            (
                "What a Step Functions execution of the mapload state machine takes as input.",
                # (Worded as when the models were one module: the published schema is unchanged.)
                "Generated from runtime/logic/spec/ (make schemas); do not edit.",
                "Rules that depend on the deployment or the data are checked by the loader only:",
                "dynamodb.key must name exactly the target table's key attributes,",
                "no attribute may be named like a key attribute, jobId defaults to the execution name,",
                "templates may only name columns of the CSV header,",
                "graph.timeoutMinutes at graph.pollSeconds must fit the execution history,",
                "and a property name has one type across graph.vertices (and one across graph.edges).",
            )
        ),
        **generated,
    }
