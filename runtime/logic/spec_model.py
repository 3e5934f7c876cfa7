"""The execution input (version 1) as pydantic models: the one definition of its shape.

schemas/input.schema.json is generated from these models (`make schemas`), and the validated model
is the JobSpec the runtime reads (logic.spec parses and words the errors). Checks no schema can
state are validators here too (the table's key, given as validation context; the poll budget), or
in logic.spec when they need the data (columns named by templates). A rule the schema states is
written here once:
a constraint, a regex pattern (exact in ECMA-262 and Python `re`: ends are `(?![\\s\\S])`, since
Python's `$` also matches before a trailing newline), or a cross-field rule with its schema form.
Checks that raise ValueError name no field: pydantic's location of the error names it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NamedTuple, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PrivateAttr,
    Tag,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from logic import polling
from logic.s3uri import S3_URI_PATTERN, s3_parts

VERSION = 1
FORMATS = ("csv", "jsonl", "nquads", "ntriples", "opencypher", "dynamodb-json", "parquet")
# Formats whose lines are RDF statements: they go to the graph target only.
RdfFormat = Literal["nquads", "ntriples"]
RDF_FORMATS = get_args(RdfFormat)
Parallelism = Literal["LOW", "MEDIUM", "HIGH", "OVERSUBSCRIBE"]
PARALLELISM = get_args(Parallelism)
AttributeType = Literal["S", "N", "BOOL", "NULL", "B", "SS", "NS", "BS", "L", "M"]
ATTRIBUTE_TYPES = get_args(AttributeType)
SET_TYPES = ("SS", "NS", "BS")
# logic/writemodes.py's MODES and UPDATE_ACTIONS (a test holds them equal).
WriteMode = Literal["put", "putIfAbsent", "newerWins", "update", "delete"]
WRITE_MODES = get_args(WriteMode)
UpdateAction = Literal["set", "add", "setIfAbsent"]
UPDATE_ACTIONS = get_args(UpdateAction)
# graph.model: RDF statements (N-Quads) or a property graph (Neptune's openCypher CSV).
GraphModel = Literal["rdf", "property"]
GRAPH_MODELS = get_args(GraphModel)
# A property's type as the input names it (logic/opencypher.py maps each to its column type).
PropertyType = Literal["String", "Int", "Long", "Double", "Float", "Bool", "Date", "DateTime"]
PROPERTY_TYPES = get_args(PropertyType)
COPY_ALL = "*"
# What splits a set's CSV cell into elements when the attribute names no separator.
SET_SEPARATOR = "|"
MAX_SHARD_SIZE_MIB = 10240
# csv.maxRecordBytes: a CSV record's bound, and so its longest quoted field (a quote left open at a
# field's start costs at most this much).
DEFAULT_MAX_RECORD_BYTES = 1024 * 1024
MIN_MAX_RECORD_BYTES = 64
MAX_MAX_RECORD_BYTES = 64 * 1024 * 1024
# The Distributed Map's own limit (tests/contract ties it to stacks.config.MAX_MAP_CONCURRENCY).
MAX_CONCURRENCY = 10000
# A job-wide write budget above DynamoDB's default per-table quota (40,000 WCU) needs a quota
# increase first; the bound only catches a misplaced digit.
MAX_WRITE_UNITS_PER_SECOND = 10_000_000
MAX_DEPENDENCIES = 64  # the loader's queue length
MAX_POLL_SECONDS = polling.MAX_WAIT_SECONDS  # a poll never waits longer than an hour anyway
DEFAULT_POLL_SECONDS = 30
DEFAULT_TIMEOUT_MINUTES = 720
MAX_TIMEOUT_MINUTES = 525_600  # a year

# The end of the string in both ECMA-262 and Python `re` (no multiline flag in either).
END = r"(?![\s\S])"
JOB_ID_PATTERN = r"^[A-Za-z0-9._-]{1,80}" + END
_FIELD = r"\{[^{}]+\}"
TEMPLATE_PATTERN = r"^(?:[^{}]|\{\{|\}\}|" + _FIELD + ")*" + END
# An absolute IRI: a scheme first; literal parts hold no character an IRI cannot (nor braces).
IRI_TEMPLATE_PATTERN = r'^[A-Za-z][A-Za-z0-9+.-]*:(?:[^{}\u0000-\u0020<>"|\\^`]|' + _FIELD + ")*" + END
IRI_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*:"
DATATYPE_PATTERN = r'^(?:xsd:[A-Za-z]+|[A-Za-z][A-Za-z0-9+.-]*:[^\s<>"{}|\\^`]+)' + END
LANGUAGE_PATTERN = r"^[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*" + END
LOAD_ID_PATTERN = r"^[A-Za-z0-9-]{1,64}" + END
DELIMITER_PATTERN = r'^[^\n\r"]' + END
COMMENT_PATTERN = r"^[^\n\r]+" + END
# A property name in an openCypher CSV header: no space, comma or line break (Neptune), and no
# ':' or backslash (the header's type separator and its escape).
PROPERTY_NAME_PATTERN = r"^[^\u0000-\u0020,:\\]+" + END


def kind(value: object) -> str:
    """How an unexpected JSON value is named in an error."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def fail(message: str, *at: str | int) -> PydanticCustomError:
    """An error `message` at the validated value's location, plus `at` (e.g. a sub-field)."""
    return PydanticCustomError("spec", "{message}", {"message": message, "at": at})


@dataclass(frozen=True)
class Checked:
    """A string that `check` accepts (it raises ValueError naming what is wrong); the schema states
    `pattern`, which accepts exactly the same strings (tests/runtime/test_input_schema.py)."""

    pattern: str
    check: Callable[[object], object]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "pattern": self.pattern}


class _NotNull:
    """An Optional field whose None means absent: the input may leave it out but not give null."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(_not_null, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        generated = handler(schema)
        branches = [branch for branch in generated.get("anyOf", ()) if branch != {"type": "null"}]
        return branches[0] if len(branches) == 1 else generated


def _not_null(value: object) -> object:
    if value is None:
        raise ValueError("must not be null (leave the field out instead)")
    return value


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def absent(description: str | None = None, *, alias: str | None = None) -> Any:
    """A field whose absence is None and whose null is refused (with NotNull). Kept as
    json_schema_extra: the schema shows no default, since null is not a value the input may give."""
    return Field(default=None, alias=alias, description=description, json_schema_extra=_no_default)


ABSENT: Any = absent()
NotNull = _NotNull()


def matches(pattern: str, message: Callable[[object], str]) -> Checked:
    """A string matching `pattern` (run with `re.search`, as Python's jsonschema does)."""
    compiled = re.compile(pattern)

    def check(value: object) -> object:
        if not isinstance(value, str) or compiled.search(value) is None:
            raise ValueError(message(value))
        return value

    return Checked(pattern, check)


def split_template(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`{field}` template -> (literals, fields); `{{`/`}}` are literal braces. Raises ValueError.

    Rendering is `literals[0] + value(fields[0]) + literals[1] + ... + literals[-1]`.
    """
    literals: list[str] = []
    fields: list[str] = []
    buf: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "{}" and text.startswith(c * 2, i):
            buf.append(c)
            i += 2
        elif c == "{":
            close = text.find("}", i + 1)
            name = text[i + 1 : close]
            if close < 0 or "{" in name:
                raise ValueError(
                    f"unclosed '{{' at position {i} in {text!r} (write '{{{{' for a literal brace)"
                )
            if not name:
                raise ValueError(f"empty field name '{{}}' at position {i} in {text!r}")
            literals.append("".join(buf))
            buf = []
            fields.append(name)
            i = close + 1
        elif c == "}":
            raise ValueError(f"unmatched '}}' at position {i} in {text!r} (write '}}}}' for a literal brace)")
        else:
            buf.append(c)
            i += 1
    literals.append("".join(buf))
    return tuple(literals), tuple(fields)


def template_check(*, allow_empty: bool, iri: bool = False) -> Callable[[object], object]:
    def check(value: object) -> object:
        if not isinstance(value, str):
            raise ValueError(f'must be a template string like "ITEM#{{id}}", got {kind(value)}')
        if not value and not allow_empty:
            raise ValueError("must not be empty")
        literals, _ = split_template(value)
        if iri:
            check_iri_literals(value, literals)
        return value

    return check


def check_iri_literals(text: str, literals: tuple[str, ...]) -> None:
    """An IRI template starts with a scheme, and its literal parts hold no character an IRI cannot."""
    if not re.match(IRI_SCHEME, literals[0]):
        raise ValueError(
            f"an IRI template must start with a scheme such as http://example.org/, got {text!r}"
        )
    for literal in literals:
        bad = re.search(r'[\x00-\x20<>"{}|\\^`]', literal)
        if bad:
            raise ValueError(f"{bad.group()!r} may not appear in an IRI (in {text!r})")


@dataclass(frozen=True)
class Template:
    """A `{field}` template (`{{` and `}}` are literal braces), split once into literals and fields.

    Rendering is `literals[0] + value(fields[0]) + literals[1] + ... + literals[-1]`. In the input
    and its normalized form a template is its text (`TemplateSyntax` validates and serializes it).
    """

    text: str
    literals: tuple[str, ...]
    fields: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Template:
        """Split `text` (raises ValueError when it is not a template)."""
        literals, fields = split_template(text)
        return cls(text, literals, fields)


@dataclass(frozen=True)
class TemplateSyntax:
    """A template string that `check` accepts, validated into a Template and dumped as its text; the
    schema states `pattern` (and `minLength`), which accept exactly the same strings."""

    pattern: str
    check: Callable[[object], object]
    min_length: int | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        text = core_schema.no_info_before_validator_function(
            self.check, core_schema.str_schema(min_length=self.min_length)
        )
        return core_schema.no_info_after_validator_function(
            Template.parse, text, serialization=core_schema.plain_serializer_function_ser_schema(_text)
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "pattern": self.pattern}


def _text(template: Template) -> str:
    return template.text


TemplateText = Annotated[Template, TemplateSyntax(TEMPLATE_PATTERN, template_check(allow_empty=True))]
KeyTemplateText = Annotated[
    Template, TemplateSyntax(TEMPLATE_PATTERN, template_check(allow_empty=False), min_length=1)
]
IriTemplateText = Annotated[
    Template, TemplateSyntax(IRI_TEMPLATE_PATTERN, template_check(allow_empty=False, iri=True))
]


def _whole_number(value: object) -> object:
    if isinstance(value, float) and not isinstance(value, bool):
        if not value.is_integer():
            raise ValueError(f"must be a whole number, got {value!r}")
        return int(value)
    return value


def _version(value: object) -> object:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == VERSION:
        return VERSION
    raise ValueError(f"unsupported version {value!r}; this loader reads version {VERSION}")


def s3_uri_message(value: object) -> str:
    if not isinstance(value, str):
        return f"must be a string like s3://bucket/key, got {kind(value)}"
    if not value.startswith("s3://"):
        return f"must start with s3:// (s3://bucket/key or s3://bucket/prefix/), got {value!r}"
    bucket = value[5:].split("/", 1)[0]
    return (
        f"{bucket!r} is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens, "
        "starting and ending with a letter or digit)"
    )


def _delimiter_message(value: object) -> str:
    if not isinstance(value, str) or len(value) != 1:
        return f"must be one character, got {value!r}"
    return f"{value!r} cannot be a delimiter (newlines and '\"' have other meanings)"


WholeNumber = BeforeValidator(_whole_number)
S3Uri = Annotated[str, matches(S3_URI_PATTERN, s3_uri_message)]
JobId = Annotated[
    str, matches(JOB_ID_PATTERN, lambda v: f"must be 1-80 letters, digits, '.', '_' or '-', got {v!r}")
]
Delimiter = Annotated[str, matches(DELIMITER_PATTERN, _delimiter_message)]
Comment = Annotated[
    str,
    matches(COMMENT_PATTERN, lambda v: f"must be null or a non-empty one-line prefix like '#', got {v!r}"),
]
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


def _unknown_field(name: str, allowed: list[str]) -> str:
    hint = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    suggestion = f"did you mean {hint[0]!r}?" if hint else f"allowed: {', '.join(allowed)}"
    return f"unknown field {name!r} ({suggestion})"


class _Given(dict[str, Any]):
    """What a refused field's message names from the input; a name it cannot see here (e.g. the
    writeMode of the target holding an attribute) is left for the error formatter to fill in."""

    def __missing__(self, name: str) -> str:
        return f"{{{name}}}"


class Model(BaseModel):
    """A JSON object of the input: strict JSON types, unknown fields are errors."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, alias_generator=to_camel, allow_inf_nan=False
    )
    # Fields another form of the input has, and why they are refused here ({format} is filled in;
    # {writeMode} by the error formatter, from the target branch the input named).
    refused: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            allowed = [field.alias or name for name, field in cls.model_fields.items()]
            for name in data:
                if name not in allowed:
                    why = cls.refused.get(name)
                    message = (
                        why.format_map(_Given(format=data.get("format")))
                        if why
                        else _unknown_field(str(name), allowed)
                    )
                    raise fail(message, str(name))
        return data


def _shape(choose: Callable[[Any], str | None], shape: str) -> Discriminator:
    return Discriminator(choose, custom_error_type="spec_shape", custom_error_message=f"must be {shape}")


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

    return _shape(choose, f"an IRI template or an object with exactly one of: {', '.join(kinds)}")


_NO_COLUMNS = "only allowed when csv.header is false (the header line names the columns)"
COLUMNS_REQUIRED = "required when csv.header is false: list the column names in order"


def _header(value: object) -> object:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {kind(value)}")
    return value


def _no_columns(value: object) -> object:
    if value is not None:
        raise ValueError(_NO_COLUMNS)
    return value


def _columns_given(value: object) -> object:
    if value is None:
        raise ValueError(COLUMNS_REQUIRED)
    return value


class _CsvLines(Model):
    """How CSV lines split into fields (named by a header line, or by `columns`)."""

    delimiter: Delimiter = Field(default=",", description="One character between fields.")
    comment: Comment | None = Field(default=None, description="Lines starting with this prefix are skipped.")
    max_record_bytes: Annotated[int, WholeNumber] = Field(
        default=DEFAULT_MAX_RECORD_BYTES,
        ge=MIN_MAX_RECORD_BYTES,
        le=MAX_MAX_RECORD_BYTES,
        description="A record whose quoted field is still open past this many bytes is rejected "
        "(record_too_large) and parsing resumes at its next line; a quoted field up to this size loads. "
        "Each shard also reads this much before its start.",
    )


class CsvOptions(_CsvLines):
    """CSV whose first line (after blank and comment lines) names the columns (header true, the
    default); with header false, the input lists them (HeaderlessCsvOptions)."""

    header: Annotated[Literal[True], BeforeValidator(_header)] = Field(
        default=True, description="The first line (after blank and comment lines) names the columns."
    )
    columns: Annotated[None, BeforeValidator(_no_columns)] = Field(
        default=None, description="null: the header line names the columns."
    )
    model_config = ConfigDict(title="CsvOptions")


class HeaderlessCsvOptions(_CsvLines):
    """CSV without a header line: `columns` names the fields in order."""

    header: Literal[False]
    columns: Annotated[
        list[Annotated[str, Field(min_length=1)]], Field(min_length=1), BeforeValidator(_columns_given)
    ] = Field(
        description="Column names in order.",
        # Kept: uniqueItems, which no type states (the validator below names the duplicate).
        json_schema_extra={"uniqueItems": True},
    )

    @model_validator(mode="after")
    def _columns_are_unique(self) -> HeaderlessCsvOptions:
        seen: set[str] = set()
        for index, name in enumerate(self.columns):
            if name in seen:
                raise fail(f"duplicate column name {name!r}", "columns", index)
            seen.add(name)
        return self


def _csv_header(value: Any) -> str:
    """csv.header picks the form: false has columns; anything else is left to the header form."""
    if isinstance(value, HeaderlessCsvOptions) or (
        isinstance(value, Mapping) and value.get("header") is False
    ):
        return "~headerless"
    return "~header"


Csv = Annotated[
    Annotated[CsvOptions, Tag("~header")] | Annotated[HeaderlessCsvOptions, Tag("~headerless")],
    Discriminator(_csv_header),
]


def _when(name: str, value: str) -> JsonDict:
    """The JSON Schema condition "field `name` is given and equals `value`"."""
    return {"required": [name], "properties": {name: {"const": value}}}


_TYPE_IN_SETS: JsonDict = {"required": ["type"], "properties": {"type": {"enum": list(SET_TYPES)}}}
# What DynamoDB's ADD takes: a number (added exactly once per record: logic/writemodes.py) or a set.
_ADDABLE = ("N", *SET_TYPES)


# Kept: a rule between two fields (which options a typed field's `type` takes) that no field's
# type states; the schema form of TypedField._options_fit_the_type.
_OPTIONS_FIT_THE_TYPE: JsonDict = {
    "dependentSchemas": {
        "separator": _TYPE_IN_SETS,
        "from": {"required": ["type"], "properties": {"type": {"const": "N"}}},
    },
}


class TypedField(Model):
    """One field copied as a typed attribute; an optional attribute is left out when the field is
    missing, null or empty."""

    field: str = Field(min_length=1)
    type: AttributeType = "S"
    optional: bool = False
    separator: Annotated[Annotated[str, Field(min_length=1)] | None, NotNull] = absent(
        f'Sets (SS, NS, BS) only: what splits a CSV cell into elements; default "{SET_SEPARATOR}".'
    )
    from_: Annotated[Literal["iso8601"] | None, NotNull] = absent(
        "N only: the cell is an ISO-8601 timestamp with an offset; stored as epoch seconds.", alias="from"
    )
    # `update` belongs to writeMode update's attributes (UpdateField); the formatter fills in the
    # mode from the branch the input named.
    refused = {"update": "only allowed when writeMode is update (writeMode is {writeMode})"}
    model_config = ConfigDict(json_schema_extra=_OPTIONS_FIT_THE_TYPE)

    @property
    def update_action(self) -> UpdateAction:
        """How writeMode update writes it: SET unless it says otherwise."""
        return "set"

    @property
    def set_separator(self) -> str:
        """What splits a set's cell into elements."""
        return SET_SEPARATOR if self.separator is None else self.separator

    @model_validator(mode="after")
    def _options_fit_the_type(self) -> TypedField:
        sets = ", ".join(SET_TYPES)
        if self.separator is not None and self.type not in SET_TYPES:
            raise fail(f"only for sets ({sets}), not type {self.type}", "separator")
        if self.from_ is not None and self.type != "N":
            raise fail(f"only for type N (epoch seconds), not type {self.type}", "from")
        return self


class UpdateField(TypedField):
    """A typed attribute of writeMode update, with the update action that writes it."""

    update: Annotated[UpdateAction | None, NotNull] = absent(
        "SET (default), ADD (numbers: exactly once per record; sets) or set if absent (if_not_exists)."
    )
    # Kept: ADD needs a number or set `type`, a rule between two fields that no field's type states
    # (the schema form of _add_fits_the_type), beside TypedField's own.
    model_config = ConfigDict(
        json_schema_extra={
            **_OPTIONS_FIT_THE_TYPE,
            "if": _when("update", "add"),
            "then": {"required": ["type"], "properties": {"type": {"enum": list(_ADDABLE)}}},
        }
    )

    @property
    def update_action(self) -> UpdateAction:
        return self.update or "set"

    @model_validator(mode="after")
    def _add_fits_the_type(self) -> UpdateField:
        if self.update == "add" and self.type not in _ADDABLE:
            raise fail(
                f"add is only for numbers (N) and sets ({', '.join(SET_TYPES)}), not type {self.type}",
                "update",
            )
        return self


def _value_shape(value: Any) -> str | None:
    return (
        "~text"
        if isinstance(value, str | Template)
        else "~field"
        if isinstance(value, Mapping | Model)
        else None
    )


def _attributes_shape(value: Any) -> str | None:
    if value == COPY_ALL:
        return "~all"
    return "~map" if isinstance(value, Mapping) else None


_Typed = TypeVar("_Typed", bound=TypedField)
# The attributes of a write mode that writes them: a template string (type S) or a typed field
# per name, or "*".
Attributes = Annotated[
    Annotated[Literal["*"], Tag("~all")]
    | Annotated[
        dict[
            Annotated[str, Field(min_length=1)],
            Annotated[
                Annotated[TemplateText, Tag("~text")] | Annotated[_Typed, Tag("~field")],
                _shape(_value_shape, 'a template string or {"field": ..., "type": "S", "optional": false}'),
            ],
        ],
        Tag("~map"),
    ],
    _shape(_attributes_shape, 'an object of attributes or "*" (copy every field)'),
]
_ATTRIBUTES: Any = Field(
    default_factory=dict,
    description="The other attributes: a template string (type S) or a typed field per attribute name; "
    'or "*" to copy every field (CSV as strings, JSON Lines keeping JSON types). '
    "Absent: items hold the key attributes alone.",
)


class KeyTemplate(NamedTuple):
    """One key attribute of the target table (partition key first) and the template that fills it."""

    name: str
    type: str  # S, N or B
    template: Template


def shown_name(name: str) -> str:
    """A name as a path part: quoted when it holds a newline or other unprintable character, so
    the error stays one line."""
    return name if name.isprintable() else repr(name)


class DynamoDbTarget(Model):
    """How a record becomes a DynamoDB item: the fields and checks every writeMode shares. Each
    mode is its own model below (`writeMode` is their discriminator; absent is put), holding the
    fields that mode allows: `version` with newerWins only, no `attributes` with delete, `update`
    actions with update only."""

    # Validated with the target table's key as context (`context={"table_key": ((name, S|N|B), ...)}`,
    # partition key first), `key` names exactly the table's key attributes, in its order; without
    # that context (a schema check alone) the key is left as given.

    key: dict[str, KeyTemplateText] = Field(
        description="A template for each key attribute of the target table (and no other).",
        examples=[{"pk": "POSTCODE#{postcode}", "sk": "LOCATION"}],
    )

    if TYPE_CHECKING:  # each mode's own field or class variable

        @property
        def write_mode(self) -> WriteMode: ...

        @property
        def attributes(self) -> Literal["*"] | Mapping[str, Template | TypedField]: ...

        @property
        def version(self) -> str | None: ...

    @model_validator(mode="after")
    def _defaults_written_out(self) -> DynamoDbTarget:
        """Each typed attribute with the defaults its mode and type use (update, a set's separator),
        as the normalized spec writes them: parsing that gives back an equal target."""
        attributes = {
            name: value.model_copy(
                update={
                    **({"update": value.update_action} if isinstance(value, UpdateField) else {}),
                    **({"separator": value.set_separator} if value.type in SET_TYPES else {}),
                }
            )
            if isinstance(value, TypedField)
            else value
            for name, value in self.mapped.items()
        }
        return self.model_copy(update={"attributes": attributes}) if attributes != self.mapped else self

    _key_types: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _fits_the_table(self, info: ValidationInfo) -> DynamoDbTarget:
        table_key: tuple[tuple[str, str], ...] | None = (info.context or {}).get("table_key")
        if table_key is None:
            return self
        names = [name for name, _ in table_key]
        described = ", ".join(f"{name} ({kind})" for name, kind in table_key)
        # format dynamodb-json without a key: each key attribute is the item's own (`{pk}`), and
        # without attributes every other attribute is copied (writeMode delete needs the key alone).
        as_is = self.key is None
        given = {name: Template.parse(f"{{{name}}}") for name in names} if self.key is None else self.key
        for name in given:
            if name not in names:
                hint = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
                suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise fail(
                    f"not a key attribute of the table{suggestion}; its key is {described}", "key", name
                )
        for name in names:
            if name not in given:
                raise fail(
                    f"missing: give a template for each key attribute of the table: {described}", "key", name
                )
        has_attributes = "attributes" in type(self).model_fields
        copy_all = self.copy_all or (as_is and has_attributes and "attributes" not in self.model_fields_set)
        for name in {} if copy_all else self.mapped:
            if name in names:
                raise fail(
                    "is a key attribute of the table; key attributes are filled from dynamodb.key",
                    "attributes",
                    name,
                )
        update: dict[str, Any] = {"key": {name: given[name] for name in names}}
        if has_attributes:
            update["attributes"] = COPY_ALL if copy_all else self.attributes
        target = self.model_copy(update=update)
        target._check_version()
        target._key_types = dict(table_key)
        return target

    def _check_version(self) -> None:
        """newerWins compares versions in a condition: every item must hold one, a number."""
        if self.version is None:
            return
        found = self.mapped.get(self.version)
        if not isinstance(found, TypedField) or found.type != "N" or found.optional:
            numbers = [
                shown_name(name)
                for name, value in self.mapped.items()
                if isinstance(value, TypedField) and value.type == "N" and not value.optional
            ]
            raise fail(
                f"{self.version!r} is not a mapped attribute of type N that is not optional "
                f"(in dynamodb.attributes; such attributes: {', '.join(numbers) or 'none'})",
                "version",
            )

    @property
    def key_attributes(self) -> tuple[KeyTemplate, ...]:
        """The table's key attributes, partition key first, each with its type and template."""
        return tuple(
            KeyTemplate(name, self._key_types[name], template) for name, template in self.key.items()
        )

    @property
    def copy_all(self) -> bool:
        """The `"attributes": "*"` form: every field is copied."""
        return self.attributes == COPY_ALL

    @property
    def mapped(self) -> Mapping[str, Template | TypedField]:
        """The attributes mapped one by one (none when every field is copied)."""
        return {} if isinstance(self.attributes, str) else self.attributes


_NEWER_WINS_ONLY = "only allowed when writeMode is newerWins (writeMode is {mode!r})"


class PutTarget(DynamoDbTarget):
    """writeMode put (the default): BatchWriteItem, the later write wins."""

    write_mode: Literal["put"] = "put"
    attributes: Attributes[TypedField] = _ATTRIBUTES
    version: ClassVar[None] = None
    refused = {"version": _NEWER_WINS_ONLY.format(mode="put")}


class PutIfAbsentTarget(DynamoDbTarget):
    """writeMode putIfAbsent: only keys not in the table."""

    write_mode: Literal["putIfAbsent"]
    attributes: Attributes[TypedField] = _ATTRIBUTES
    version: ClassVar[None] = None
    refused = {"version": _NEWER_WINS_ONLY.format(mode="putIfAbsent")}


class NewerWinsTarget(DynamoDbTarget):
    """writeMode newerWins: only when the stored item's version is lower."""

    write_mode: Literal["newerWins"]
    attributes: Attributes[TypedField] = _ATTRIBUTES
    version: Annotated[str, Field(min_length=1)] = Field(
        description="The attribute that orders records: a mapped attribute of type N, not optional."
    )


class UpdateTarget(DynamoDbTarget):
    """writeMode update: UpdateItem keeping other attributes; each typed attribute may name its
    update action."""

    write_mode: Literal["update"]
    attributes: Attributes[UpdateField] = _ATTRIBUTES
    version: ClassVar[None] = None
    refused = {"version": _NEWER_WINS_ONLY.format(mode="update")}


class DeleteTarget(DynamoDbTarget):
    """writeMode delete: DeleteItem by the key (no attributes)."""

    write_mode: Literal["delete"]
    attributes: ClassVar[dict[str, Template | TypedField]] = {}
    version: ClassVar[None] = None
    refused = {
        "attributes": "not allowed when writeMode is delete: items are deleted by their key alone",
        "version": _NEWER_WINS_ONLY.format(mode="delete"),
    }


def _write_mode(value: Any) -> str | None:
    """writeMode picks the branch; absent is put; a non-object is left to the put branch to refuse."""
    if isinstance(value, DynamoDbTarget):
        return f"~{value.write_mode}"
    if not isinstance(value, Mapping):
        return "~put"
    mode = value.get("writeMode", "put")
    return f"~{mode}" if isinstance(mode, str) and mode in WRITE_MODES else None


_BY_WRITE_MODE = Discriminator(
    _write_mode, custom_error_type="spec_write_mode", custom_error_message="writeMode"
)


# The DynamoDB target of CSV/JSON Lines records, one model per writeMode.
RecordTarget = Annotated[
    Annotated[PutTarget, Tag("~put")]
    | Annotated[PutIfAbsentTarget, Tag("~putIfAbsent")]
    | Annotated[NewerWinsTarget, Tag("~newerWins")]
    | Annotated[UpdateTarget, Tag("~update")]
    | Annotated[DeleteTarget, Tag("~delete")],
    _BY_WRITE_MODE,
]

# format dynamodb-json: how an exported item is written. Without key and attributes, the item is
# written as it is (each key attribute is `{name}`, attributes `"*"`).
_EXPORT_KEY: Any = absent(
    "A template for each key attribute of the target table; absent: the item's own "
    "attributes of those names (they must have the key's types)."
)
# Optional here, required in the record targets: pydantic validates each model by its own fields.
ExportKey = Annotated[dict[str, KeyTemplateText] | None, NotNull]


class ExportPutTarget(PutTarget):
    key: ExportKey = _EXPORT_KEY  # type: ignore[assignment]


class ExportPutIfAbsentTarget(PutIfAbsentTarget):
    key: ExportKey = _EXPORT_KEY  # type: ignore[assignment]


class ExportNewerWinsTarget(NewerWinsTarget):
    key: ExportKey = _EXPORT_KEY  # type: ignore[assignment]


class ExportUpdateTarget(UpdateTarget):
    key: ExportKey = _EXPORT_KEY  # type: ignore[assignment]


class ExportDeleteTarget(DeleteTarget):
    key: ExportKey = _EXPORT_KEY  # type: ignore[assignment]


ExportTarget = Annotated[
    Annotated[ExportPutTarget, Tag("~put")]
    | Annotated[ExportPutIfAbsentTarget, Tag("~putIfAbsent")]
    | Annotated[ExportNewerWinsTarget, Tag("~newerWins")]
    | Annotated[ExportUpdateTarget, Tag("~update")]
    | Annotated[ExportDeleteTarget, Tag("~delete")],
    _BY_WRITE_MODE,
]


def _not_optional(value: object) -> object:
    if value is not False:
        raise ValueError(f"only the object of a statement may be optional, got {kind(value)}")
    return value


# A subject, predicate or graph name is never optional: `"optional": false` is all it may say.
NeverOptional = Annotated[Literal[False], BeforeValidator(_not_optional)]


class IriNode(Model):
    iri: IriTemplateText
    optional: NeverOptional = False
    kind: ClassVar[str] = "iri"

    @property
    def template(self) -> Template:
        return self.iri


class BlankNode(Model):
    blank: KeyTemplateText
    optional: NeverOptional = False
    kind: ClassVar[str] = "blank"

    @property
    def template(self) -> Template:
        return self.blank


class OptionalIri(IriNode):
    """An object's IRI; optional: the statement is left out when a field it names is empty."""

    optional: bool = False  # type: ignore[assignment]


class OptionalBlank(BlankNode):
    optional: bool = False  # type: ignore[assignment]


class _Literal(Model):
    """A literal; optional: left out when its fields are empty."""

    literal: TemplateText
    optional: bool = False
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

    datatype: Datatype | None = None
    language: None = None  # null: no language, as when absent
    model_config = ConfigDict(title="Literal")


class LanguageLiteral(_Literal):
    """A literal in a language (a language-tagged string); optional: left out when its fields are
    empty."""

    language: Language
    datatype: Annotated[None, BeforeValidator(_no_datatype)] = None  # null: as when absent


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


class Statement(Model):
    """subject, predicate, object (and optional graph name) templates: one statement per record.
    Only the object may be optional (a subject, predicate or graph has no `optional`)."""

    subject: Subject
    predicate: Predicate
    object: Object
    graph: Predicate | None = None  # null: no graph name, as when absent


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

    model: Literal["rdf"] = Field(
        default="rdf", description='"rdf": statements staged as N-Quads; "property": vertices and edges.'
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
    _shape(
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
    _shape(
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
    optional: bool = Field(default=False, description=_ELEMENT_OPTIONAL)

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
    optional: bool = Field(default=False, description=_ELEMENT_OPTIONAL)


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
    refused = {"statements": 'not allowed when graph.model is "property": give vertices and edges'}
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
    """graph.model picks the form; absent is "rdf"; a non-object is left to the rdf form to refuse."""
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
        json_schema_extra=_no_default,
    )
    dry_run: bool = Field(
        default=False, description="Parse, map and count every record without writing to the table."
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
_NEEDS_TARGET: JsonDict = {"anyOf": [{"required": ["dynamodb"]}, {"required": ["graph"]}]}


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
        return self


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
    refused = _CSV_ONLY
    model_config = ConfigDict(title="JSON Lines", json_schema_extra=_NEEDS_TARGET)


class ParquetInput(RecordInput):
    """Parquet files (one object, or every data file under a prefix): rows to DynamoDB items, graph
    statements, or both, as JSON Lines records are; sharded by row group (docs/INPUT.md)."""

    format: Literal["parquet"]
    csv: ClassVar[None] = None
    refused = _CSV_ONLY
    model_config = ConfigDict(title="Parquet", json_schema_extra=_NEEDS_TARGET)


class RdfInput(Common):
    """N-Quads or N-Triples lines: RDF statements, to the graph target only (`"graph": {}` is implied)."""

    format: RdfFormat
    graph: RdfGraph = RdfGraph()
    csv: ClassVar[None] = None
    dynamodb: ClassVar[None] = None
    refused = {
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
    refused = {
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
    refused = {
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
                "Generated from runtime/logic/spec_model.py (make schemas); do not edit.",
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
