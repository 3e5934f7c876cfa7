"""The input's `dynamodb` target: one model per writeMode, each stating what its mode does.

A record becomes an item by `key` and `attributes` (DynamoDbTarget); each writeMode is its own
model (PutTarget, PutIfAbsentTarget, NewerWinsTarget, UpdateTarget, DeleteTarget; `writeMode` is
their discriminator) with the fields it allows and, as class attributes, how its items are
written: batched or not, items per request, conditional, counters (a numeric add), the engines
that may write it, and how `mapload estimate` models it. Code outside logic/spec/ asks the mode's
model these; it never compares a mode by its name (tests/runtime/test_write_mode_types.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, NamedTuple, TypeVar, get_args

from pydantic import ConfigDict, Discriminator, Field, PrivateAttr, Tag, ValidationInfo, model_validator
from pydantic.config import JsonDict

from logic.batching import BATCH_ITEMS
from logic.spec.fields import (
    END,
    KeyTemplateText,
    Model,
    NotNull,
    Template,
    TemplateText,
    absent,
    fail,
    matches,
    omit_default,
    shape,
    shown_name,
)

# A DynamoDB table name (3-255 letters, digits, `_`, `.`, `-`).
TABLE_NAME_PATTERN = r"^[A-Za-z0-9_.-]{3,255}" + END
TableName = Annotated[
    str,
    matches(
        TABLE_NAME_PATTERN,
        lambda value: f"not a DynamoDB table name (3-255 letters, digits, '_', '.', '-'), got {value!r}",
    ),
]

AttributeType = Literal["S", "N", "BOOL", "NULL", "B", "SS", "NS", "BS", "L", "M"]
ATTRIBUTE_TYPES = get_args(AttributeType)
SET_TYPES = ("SS", "NS", "BS")
WriteMode = Literal["put", "putIfAbsent", "newerWins", "update", "delete", "sync"]
WRITE_MODES = get_args(WriteMode)
# A sync's dataset name: what its baseline is kept under (letters, digits, `_`, `.`, `-`).
DATASET_PATTERN = r"^[A-Za-z0-9_.-]{1,100}" + END
DatasetName = Annotated[
    str,
    matches(
        DATASET_PATTERN,
        lambda value: f"not a dataset name (1-100 letters, digits, '_', '.', '-'), got {value!r}",
    ),
]
_SYNC_ONLY = "only allowed when writeMode is sync (writeMode is {mode!r})"
# How writeMode update writes an attribute: SET, ADD, or SET if absent (if_not_exists).
UpdateAction = Literal["set", "add", "setIfAbsent"]
UPDATE_ACTIONS = get_args(UpdateAction)
SET: Final = "set"
ADD: Final = "add"
SET_IF_ABSENT: Final = "setIfAbsent"
# The engines that write a job's items (`dynamodb.engine`; runtime/shards/writing.py maps a mode
# and engine to its writer). "lambda": the Workers send them in DynamoDB's write requests
# (BatchWriteItem, PutItem, ...). "bulkPutItems": the Workers stage them in S3 as DynamoDB JSON
# Lines (runtime/shards/bulk_staging.py) and DynamoDB's bulk put items operation writes them.
Engine = Literal["lambda", "bulkPutItems"]
ENGINES = get_args(Engine)
LAMBDA: Final = "lambda"
BULK_PUT_ITEMS: Final = "bulkPutItems"
# StartBulkPutItems' PerformanceTier (API reference; STANDARD when not given).
PerformanceTier = Literal["STANDARD", "ACCELERATED"]
STANDARD: Final = "STANDARD"
# Why a mode that bulk put items cannot write is refused with it (the service only puts whole
# items: docs/BULK_PUT_ITEMS.md).
_ONLY_PUTS = "bulk put items only puts whole items"
_NO_CONDITION = (
    "bulk put items' per-item condition syntax is not confirmed in AWS's documentation reachable "
    'here (docs/INPUT.md, "Which engine"), so the mode\'s condition stays on the lambda engine'
)
# The request that writes one item of a mode (in a batch, or alone).
Operation = Literal["PutItem", "UpdateItem", "DeleteItem"]


COPY_ALL = "*"
# What splits a set's CSV cell into elements when the attribute names no separator.
SET_SEPARATOR = "|"


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
    refused: ClassVar[dict[str, str]] = {
        "update": "only allowed when writeMode is update (writeMode is {writeMode})"
    }
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
                shape(_value_shape, 'a template string or {"field": ..., "type": "S", "optional": false}'),
            ],
        ],
        Tag("~map"),
    ],
    shape(_attributes_shape, 'an object of attributes or "*" (copy every field)'),
]
_ATTRIBUTES: Any = Field(
    default_factory=dict,
    description="The other attributes: a template string (type S) or a typed field per attribute name; "
    'or "*" to copy every field (CSV as strings, JSON Lines keeping JSON types). '
    "Absent: items hold the key attributes alone.",
)


@dataclass(frozen=True)
class EstimateModel:
    """How `mapload estimate` models a write mode: the requests that carry its items, and a note on
    what else its estimate assumes (None: nothing)."""

    requests: str
    note: str | None = None


class KeyTemplate(NamedTuple):
    """One key attribute of the target table (partition key first) and the template that fills it."""

    name: str
    type: str  # S, N or B
    template: Template


def _engine_schema(schema: dict[str, Any], model: type[Any]) -> None:
    """Kept as json_schema_extra: the engines a mode allows (its `engines`) and performanceTier
    with engine bulkPutItems alone, rules the field types do not state (the schema form of
    DynamoDbTarget._engine_fits_the_mode)."""
    engine = schema.get("properties", {}).get("engine")
    if engine is not None:
        engine["enum"] = list(model.engines)
    schema["dependentSchemas"] = {
        **schema.get("dependentSchemas", {}),
        "performanceTier": {"required": ["engine"], "properties": {"engine": {"const": BULK_PUT_ITEMS}}},
    }


class DynamoDbTarget(Model):
    """How a record becomes a DynamoDB item: the fields and checks every writeMode shares. Each
    mode is its own model below (`writeMode` is their discriminator; absent is put), holding the
    fields that mode allows: `version` with newerWins only, no `attributes` with delete, `update`
    actions with update only."""

    model_config = ConfigDict(json_schema_extra=_engine_schema)

    # Validated with the target table's key as context (`context={"table_key": ((name, S|N|B), ...)}`,
    # partition key first), `key` names exactly the table's key attributes, in its order; without
    # that context (a schema check alone) the key is left as given.

    key: dict[str, KeyTemplateText] = Field(
        description="A template for each key attribute of the target table (and no other).",
        examples=[{"pk": "POSTCODE#{postcode}", "sk": "LOCATION"}],
    )
    # The target table by name; absent: the environment's own. Plan checks it is among the tables
    # the environment may load, exists, is ACTIVE and has the key `key` fills (plans/target.py).
    table: Annotated[TableName | None, NotNull] = absent(
        "The target table's name: one of the tables the environment allows (its `tables` setting). "
        "Absent: the environment's own table."
    )
    engine: Engine = omit_default(
        LAMBDA,
        description='What writes the items: "lambda", the Workers in DynamoDB write requests; '
        '"bulkPutItems", DynamoDB\'s bulk put items operation from the items the Workers stage '
        "(writeMode put only; docs/INPUT.md).",
    )
    performance_tier: PerformanceTier = omit_default(
        STANDARD,
        description="engine bulkPutItems only: the bulk put items operation's performance tier "
        "(ACCELERATED only in some Regions).",
    )

    # How the mode writes its items (each mode's model sets them; a test checks every one does).
    # Its name, as writeMode spells it (from the model's `write_mode` literal).
    name: ClassVar[WriteMode]
    # Put alone: whole items, unconditionally, in BatchWriteItem, so the later of two records with
    # one key wins (a batch keeps the later) and no single-item request is built (WritePlan).
    later_wins: ClassVar[bool] = False
    # Items go in batches of BATCH_ITEMS (BatchWriteItem, or PartiQL in BatchExecuteStatement).
    batched: ClassVar[bool]
    items_per_request: ClassVar[int]
    # A refused condition skips a record (ConditionalCheckFailed: counted skipped, not rejected).
    conditional: ClassVar[bool] = False
    # Has `version`, the number the condition compares (newerWins).
    versioned: ClassVar[bool] = False
    # May ADD numbers (`counters`): each record's write is then a transaction with its marker.
    counts: ClassVar[bool] = False
    # The request that writes one item alone (what a single-item write plan sends).
    operation: ClassVar[Operation]
    # Staged, not written, by the Workers: the Sync Map writes the difference from the dataset's
    # baseline (writeMode sync: logic/sync.py, runtime/shards/sync_buckets.py).
    staged: ClassVar[bool] = False
    # The engines that may write this mode, and why bulkPutItems is refused when it is not one.
    engines: ClassVar[tuple[Engine, ...]] = (LAMBDA,)
    bulk_refused: ClassVar[str] = _ONLY_PUTS
    # How `mapload estimate` models the mode's load.
    estimate: ClassVar[EstimateModel]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        given = cls.model_fields.get("write_mode")
        if given is not None:
            (cls.name,) = get_args(given.annotation)

    if TYPE_CHECKING:  # each mode's own field or class variable

        @property
        def write_mode(self) -> WriteMode: ...

        @property
        def attributes(self) -> Literal["*"] | Mapping[str, Template | TypedField]: ...

        @property
        def version(self) -> str | None: ...

        @property
        def dataset(self) -> str | None: ...

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

    @model_validator(mode="after")
    def _engine_fits_the_mode(self) -> DynamoDbTarget:
        if self.engine not in self.engines:
            why = self.bulk_refused
            raise fail(f"writeMode {self.name} cannot use engine {self.engine}: {why}", "engine")
        if "performance_tier" in self.model_fields_set and not self.bulk:
            raise fail(f"only with engine {BULK_PUT_ITEMS} (engine is {self.engine!r})", "performanceTier")
        return self

    @property
    def bulk(self) -> bool:
        """Whether DynamoDB's bulk put items writes the items (the Workers stage them)."""
        return self.engine == BULK_PUT_ITEMS

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

    @property
    def counters(self) -> tuple[str, ...]:
        """The attributes of type N the mode ADDs (writeMode update's numeric add), in order."""
        return tuple(
            name
            for name, value in self.mapped.items()
            if isinstance(value, TypedField) and value.update_action == ADD and value.type == "N"
        )


_NEWER_WINS_ONLY = "only allowed when writeMode is newerWins (writeMode is {mode!r})"


class PutTarget(DynamoDbTarget):
    """writeMode put (the default): BatchWriteItem, the later write wins."""

    write_mode: Literal["put"] = "put"
    attributes: Attributes[TypedField] = _ATTRIBUTES
    version: ClassVar[None] = None
    later_wins = True
    batched = True
    items_per_request = BATCH_ITEMS
    operation = "PutItem"
    engines = (LAMBDA, BULK_PUT_ITEMS)
    estimate = EstimateModel("BatchWriteItem")
    refused: ClassVar[dict[str, str]] = {
        "version": _NEWER_WINS_ONLY.format(mode="put"),
        "dataset": _SYNC_ONLY.format(mode="put"),
    }


class PutIfAbsentTarget(DynamoDbTarget):
    """writeMode putIfAbsent: only keys not in the table."""

    write_mode: Literal["putIfAbsent"]
    attributes: Attributes[TypedField] = _ATTRIBUTES
    version: ClassVar[None] = None
    # PartiQL INSERTs in BatchExecuteStatement (logic/writemodes.py insert_statement).
    batched = True
    items_per_request = BATCH_ITEMS
    conditional = True
    operation = "PutItem"
    bulk_refused = _NO_CONDITION
    estimate = EstimateModel("BatchExecuteStatement of PartiQL INSERTs")
    refused: ClassVar[dict[str, str]] = {
        "version": _NEWER_WINS_ONLY.format(mode="putIfAbsent"),
        "dataset": _SYNC_ONLY.format(mode="putIfAbsent"),
    }


class NewerWinsTarget(DynamoDbTarget):
    """writeMode newerWins: only when the stored item's version is lower."""

    write_mode: Literal["newerWins"]
    attributes: Attributes[TypedField] = _ATTRIBUTES
    version: Annotated[str, Field(min_length=1)] = Field(
        description="The attribute that orders records: a mapped attribute of type N, not optional."
    )
    batched = False
    items_per_request = 1
    conditional = True
    versioned = True
    operation = "PutItem"
    bulk_refused = _NO_CONDITION
    estimate = EstimateModel("PutItem/UpdateItem")
    refused: ClassVar[dict[str, str]] = {"dataset": _SYNC_ONLY.format(mode="newerWins")}


class UpdateTarget(DynamoDbTarget):
    """writeMode update: UpdateItem keeping other attributes; each typed attribute may name its
    update action."""

    write_mode: Literal["update"]
    attributes: Attributes[UpdateField] = _ATTRIBUTES
    version: ClassVar[None] = None
    batched = False
    items_per_request = 1
    counts = True
    operation = "UpdateItem"
    bulk_refused = f"{_ONLY_PUTS}; it cannot update (keep other attributes, add numbers)"
    estimate = EstimateModel("PutItem/UpdateItem")
    refused: ClassVar[dict[str, str]] = {
        "version": _NEWER_WINS_ONLY.format(mode="update"),
        "dataset": _SYNC_ONLY.format(mode="update"),
    }


class DeleteTarget(DynamoDbTarget):
    """writeMode delete: DeleteItem by the key (no attributes)."""

    write_mode: Literal["delete"]
    attributes: ClassVar[dict[str, Template | TypedField]] = {}
    version: ClassVar[None] = None
    refused: ClassVar[dict[str, str]] = {
        "attributes": "not allowed when writeMode is delete: items are deleted by their key alone",
        "version": _NEWER_WINS_ONLY.format(mode="delete"),
        "dataset": _SYNC_ONLY.format(mode="delete"),
    }
    batched = True
    items_per_request = BATCH_ITEMS
    operation = "DeleteItem"
    bulk_refused = f"{_ONLY_PUTS}; it cannot delete"
    estimate = EstimateModel(
        "BatchWriteItem of DeleteRequests",
        note="writeMode delete: a delete consumes the write units of the item it deletes (1 when none "
        "is stored), so give --item-bytes as the stored items' size.",
    )


class SyncTarget(DynamoDbTarget):
    """writeMode sync: the table's items of `dataset` follow the file. Workers stage the mapped
    items by a hash of their key; the Sync Map then puts the new and changed ones and deletes the
    keys the dataset's previous successful sync wrote and the file no longer has
    (BatchWriteItem of PutRequests and DeleteRequests)."""

    write_mode: Literal["sync"]
    attributes: Attributes[TypedField] = _ATTRIBUTES
    version: ClassVar[None] = None
    dataset: DatasetName = Field(
        description="The dataset the items belong to: its baseline (what its last successful sync "
        "wrote) is what the file is compared with, and only its items are ever deleted."
    )
    batched = True
    items_per_request = BATCH_ITEMS
    staged = True
    operation = "PutItem"
    bulk_refused = f"{_ONLY_PUTS}; a sync also deletes the keys the file no longer has"
    estimate = EstimateModel(
        "BatchWriteItem of the changed items (and DeleteRequests)",
        note="writeMode sync: the table above is a dataset's first sync (every item written); a "
        "later sync writes only new, changed and removed items (--change-rate, below) and stages "
        "every item through S3 each run (its S3 requests below; the comparison's Lambda time is "
        "not modelled).",
    )
    refused: ClassVar[dict[str, str]] = {"version": _NEWER_WINS_ONLY.format(mode="sync")}


# Each write mode's model, by the name writeMode gives it.
WRITE_MODE_TYPES: Mapping[str, type[DynamoDbTarget]] = {
    mode.name: mode
    for mode in (PutTarget, PutIfAbsentTarget, NewerWinsTarget, UpdateTarget, DeleteTarget, SyncTarget)
}


def write_mode_type(name: str) -> type[DynamoDbTarget]:
    """The model of the write mode `name` (a command-line option's, say); ValueError for no mode."""
    found = WRITE_MODE_TYPES.get(name)
    if found is None:
        raise ValueError(f"unknown write mode {name!r}")
    return found


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
    | Annotated[DeleteTarget, Tag("~delete")]
    | Annotated[SyncTarget, Tag("~sync")],
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


class ExportSyncTarget(SyncTarget):
    key: ExportKey = _EXPORT_KEY  # type: ignore[assignment]


ExportTarget = Annotated[
    Annotated[ExportPutTarget, Tag("~put")]
    | Annotated[ExportPutIfAbsentTarget, Tag("~putIfAbsent")]
    | Annotated[ExportNewerWinsTarget, Tag("~newerWins")]
    | Annotated[ExportUpdateTarget, Tag("~update")]
    | Annotated[ExportDeleteTarget, Tag("~delete")]
    | Annotated[ExportSyncTarget, Tag("~sync")],
    _BY_WRITE_MODE,
]
