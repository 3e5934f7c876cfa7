"""The settings of the `mapload` block of cdk.json's context, as one pydantic model.

Each setting is one field, defined once: its name in cdk.json (the alias), its default, its
bounds as plain `Field` constraints and its meaning (`description`). `EnvironmentConfig` is one
environment's flat block; the classes it is made of (`DataConfig`, `LoaderConfig`, ...) are the
views the stacks read, not copies. `PipelineConfig` is `mapload.pipeline`. `json_schema()` is
schemas/config.schema.json, and docs/SETTINGS.md's tables are generated from it
(`make schemas`; tests/infra/test_config.py fails when either is stale).

cdk.json values and CLI strings (`-c mapload:max_concurrency_cap=10`, `-c ...=true`, JSON lists
as strings) are coerced by the `before` validators below; a refusal is one line naming the
setting (`refusal`), worded from the field's own constraints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, Self, get_args

from annotated_types import Ge, Le
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.fields import FieldInfo
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

# Days CloudWatch Logs accepts as a retention period (anything else is rejected at deploy).
LOG_RETENTION_DAYS: Final[frozenset[int]] = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192}
    | {2557, 2922, 3288, 3653}
)
KeyType = Literal["S", "N", "B"]
BillingMode = Literal["on_demand", "provisioned"]
Architecture = Literal["arm64", "x86_64"]
MapExecutionType = Literal["STANDARD", "EXPRESS"]
KEY_TYPES: Final[tuple[str, ...]] = get_args(KeyType)
TABLE_BILLING_MODES: Final[tuple[str, ...]] = get_args(BillingMode)
LAMBDA_ARCHITECTURES: Final[tuple[str, ...]] = get_args(Architecture)
MAP_EXECUTION_TYPES: Final[tuple[str, ...]] = get_args(MapExecutionType)
# A Distributed Map runs at most 10,000 child executions at once.
MAX_MAP_CONCURRENCY: Final[int] = 10_000
# `data_key: "create"`: the Data stack creates the customer managed key (else a key ARN or null).
DATA_KEY_CREATE: Final[str] = "create"
# An on-demand table starts warm at 4,000 write units/s; warm throughput can only raise that.
MIN_WARM_WRITE_UNITS: Final[int] = 4000
# DynamoDB's default per-table quota is 40,000 units/s; the bound only catches a misplaced digit.
MAX_TABLE_UNITS: Final[int] = 10_000_000
# An EXPRESS execution lasts at most 5 minutes; the Worker Task's timeout is the function's + 60 s.
EXPRESS_MAX_SECONDS: Final[int] = 300
WORKER_TASK_MARGIN_SECONDS: Final[int] = 60
# Lambda refuses a reserved concurrency that leaves the account fewer than 100 unreserved executions.
LAMBDA_UNRESERVED_MINIMUM: Final[int] = 100
# The oldest Neptune engine the Graph stack works with. Its IAM grants Neptune's fine-grained data
# actions (neptune-db:StartLoaderJob, GetLoaderJobStatus, ReadDataViaQuery, ...), which Neptune
# supports from engine 1.2.0.0 (Neptune User Guide, "IAM actions for data access"); openCypher
# (the property graph's load format and the endpoint check's query) needs 1.1.1.0, so 1.2.0.0
# covers both. Releases before 1.2.0.0 also used parameter group family neptune1, not neptune1.x.
MIN_GRAPH_ENGINE_VERSION: Final[str] = "1.2.0.0"
# A Neptune DB subnet group needs subnets in at least two AZs.
GRAPH_MIN_AZS: Final[int] = 2
# Context keys of the form `mapload:<field>` override one field of the selected environment
# (`cdk synth -c mapload:max_concurrency_cap=10`); CLI values arrive as strings.
OVERRIDE_PREFIX: Final[str] = "mapload:"


_ENV_NAME = re.compile(r"^[a-z][a-z0-9]{0,15}$")
_TABLE_NAME = r"[A-Za-z0-9_.-]{3,255}"
_TABLE_ARN = re.compile(rf"^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{{12}}:table/(?P<name>{_TABLE_NAME})$")
_KMS_KEY_ARN = r"arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+"
_CONNECTION_ARN = (
    r"arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:[0-9]{12}:connection/[A-Za-z0-9-]+"
)
_PIPELINE = "mapload.pipeline"


class MaploadConfigError(ValueError):
    """A cdk.json `mapload` setting is missing or wrong; the message names the field."""

    def __init__(self, field: str, message: str, *, during: str = "") -> None:
        """`during`: what was being done, said first (another environment's check, say)."""
        super().__init__(f"{during}{field}: {message}")
        self.field = field
        self.message = message

    def during(self, what: str) -> MaploadConfigError:
        """The same error, saying first what was being done when it was found."""
        return MaploadConfigError(self.field, self.message, during=f"{what}: ")


def invalid(message: str, at: str = "") -> PydanticCustomError:
    """A refusal whose message is used as it is; `at` extends the path (`.name`, `[2]`)."""
    return PydanticCustomError("mapload", "{message}", {"message": message, "at": at})


def rule_error(field: str, message: str) -> PydanticCustomError:
    """A refusal by a rule between settings, naming the setting to change."""
    return PydanticCustomError("mapload", "{message}", {"message": message, "field": field})


@dataclass(frozen=True)
class Says:
    """What a setting must be, in words, for its refusal: `must be <what>, got <value>`.

    Metadata only (pydantic ignores it): the constraint itself is the field's `pattern`.
    `item` is what each item of a list must be.
    """

    what: str
    item: str = ""
    # Null or "" is refused as "is required" (a setting that has a default too, like `branch`).
    required: bool = False


# --- Coercion of cdk.json and CLI values (`-c` values arrive as strings) ---------------------


def _coerce_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value)
    return None


def _parse_json_or(text: str, fallback: Any) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return fallback


def _absent_is_none(value: Any) -> Any:
    """The one "not set" rule: null in cdk.json, or "" / "null" as a `-c` string, is null."""
    return None if isinstance(value, str) and value.strip().lower() in {"", "null"} else value


def _integer(value: Any) -> Any:
    """An integer, or a whole float or a string of digits (the CLI's); not a bool, not "5.0"."""
    if value is None or _coerce_int(value) is not None:
        return value
    raise ValueError("not an integer")


def _not_zero(value: Any) -> Any:
    if value is not None and _coerce_int(value) == 0:
        raise invalid(
            "0 would throttle every invocation of the Worker (Lambda runs none); null means no reservation"
        )
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("not a number")
    return float(value) if isinstance(value, str) else value


def _flag(value: Any) -> bool:
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ValueError("not a flag")
    return value


def _list(value: Any) -> Any:
    """A JSON list, or (from the CLI) a JSON string or comma-separated names, as a tuple."""
    if isinstance(value, str):
        value = _parse_json_or(value, [part.strip() for part in value.split(",") if part.strip()])
    if not isinstance(value, list | tuple):
        raise ValueError("not a list")
    return tuple(value)


def _once(noun: str) -> Callable[[tuple[str, ...]], tuple[str, ...]]:
    def check(names: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(names)) != len(names):
            raise invalid(f"must not name a {noun} twice")
        return names

    return check


def _key(value: Any) -> Any:
    return _parse_json_or(value, value) if isinstance(value, str) else value


def _retention(days: int) -> int:
    if days not in LOG_RETENTION_DAYS:
        raise invalid(
            f"must be one of {', '.join(str(day) for day in sorted(LOG_RETENTION_DAYS))}, got {days}"
        )
    return days


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _engine_at_least_minimum(version: str) -> str:
    if _version(version) < _version(MIN_GRAPH_ENGINE_VERSION):
        raise invalid(
            f"must be {MIN_GRAPH_ENGINE_VERSION} or later, got {version!r}: the stack's IAM grants Neptune's "
            "fine-grained data actions (neptune-db:StartLoaderJob, GetLoaderJobStatus, "
            "ReadDataViaQuery, ...), which older engines do not support (openCypher, too, "
            "needs 1.1.1.0)"
        )
    return version


# After a setting's type and constraints: what a cdk.json or CLI value may be given as.
INTEGER: Final[BeforeValidator] = BeforeValidator(_integer)
NUMBER: Final[BeforeValidator] = BeforeValidator(_number)
FLAG: Final[BeforeValidator] = BeforeValidator(_flag)
# After a nullable setting's type and constraints: "" and "null" (from the CLI) are null too.
NULLABLE: Final[BeforeValidator] = BeforeValidator(_absent_is_none)
Days = Annotated[int, Field(ge=1, le=3650), INTEGER]
MemoryMiB = Annotated[int, Field(ge=128, le=10240), INTEGER]
# Lambda's limit: at most 900 s.
TimeoutSeconds = Annotated[int, Field(ge=1, le=900), INTEGER]
TableUnits = Annotated[int | None, Field(ge=1, le=MAX_TABLE_UNITS), INTEGER, NULLABLE]
Count = Annotated[int, Field(ge=1, le=10_000_000), INTEGER]
BucketName = Annotated[
    str, Field(min_length=3, max_length=63, pattern=r"^[a-z0-9](\.?[a-z0-9-])*\.?[a-z0-9]$")
]
KmsKeyArn = Annotated[str, Field(pattern=rf"^{_KMS_KEY_ARN}$")]
EnvironmentName = Annotated[str, Field(pattern=_ENV_NAME.pattern)]
Stages = Annotated[
    tuple[EnvironmentName, ...],
    BeforeValidator(_list),
    Says("a list of environment names", item="an environment name"),
]


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class KeyAttribute:
    """One DynamoDB key attribute (name and scalar type S, N or B)."""

    name: Annotated[str, Field(min_length=1, max_length=255), Says("1 to 255 characters")]
    type: KeyType


KEY_SHAPE: Final[Says] = Says('{"name": ..., "type": "S"|"N"|"B"}')


class Section(BaseModel):
    """Frozen settings; a field's alias is its name in cdk.json."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_alias=True, validate_by_name=False)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name}")


class Site(Section):
    """Where an environment deploys, and whether its data outlives its stacks."""

    # The environment's name in cdk.json (its key under `environments`, not a setting).
    name: SkipJsonSchema[str]
    account: Annotated[
        str | None,
        Field(
            pattern=r"^[0-9]{12}$",
            description="the AWS account the environment deploys to (null: the CLI's current account)",
        ),
        NULLABLE,
        Says("a 12-digit AWS account id or null"),
    ] = None
    region: Annotated[
        str | None,
        Field(
            pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]+$",
            description="the AWS region the environment deploys to (null: the CLI's current region)",
        ),
        NULLABLE,
        Says("an AWS region such as eu-west-2 or null"),
    ] = None
    retain_data: Annotated[
        bool,
        Field(
            description="keep buckets, tables, logs and the alarm key when the stack is deleted; also "
            "turns on termination protection of the environment's stacks and deletion protection of its "
            "tables (and of the Neptune cluster, which leaves a final snapshot)"
        ),
        FLAG,
    ] = False


class DataConfig(Site):
    """What the Data stack reads: the target table's shape and capacity, lifecycles, the data key."""

    table_partition_key: Annotated[
        KeyAttribute,
        BeforeValidator(_key),
        KEY_SHAPE,
        Field(alias="partition_key", description="the target table's partition key (`S`, `N` or `B`)"),
    ] = KeyAttribute("pk", "S")
    table_sort_key: Annotated[
        KeyAttribute | None,
        BeforeValidator(_key),
        KEY_SHAPE,
        Field(alias="sort_key", description="the target table's sort key, or `null` for none"),
    ] = KeyAttribute("sk", "S")
    table_existing: Annotated[
        str | None,
        Field(
            alias="existing_table",
            pattern=rf"^({_TABLE_ARN.pattern[1:-1].replace('?P<name>', '')}|{_TABLE_NAME})$",
            description="load into this existing table (name or ARN) instead of creating one; IAM grants "
            "exactly that table. Its key must match `partition_key`/`sort_key`. An ARN must be of the "
            "environment's own account and region (synth fails otherwise, comparing with `account`/"
            "`region`, or with the CLI's when they are null): the functions write with the table's name in "
            "their own account and region, and a numeric add's TransactWriteItems cannot span accounts "
            "or regions. To load a table elsewhere, deploy an environment to its account and region",
        ),
        NULLABLE,
        Says("a DynamoDB table name or table ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)"),
    ] = None
    table_billing_mode: Annotated[
        BillingMode,
        Field(
            description="the target table's capacity: `on_demand` or `provisioned` (a created table only; "
            "an `existing_table` keeps its own)"
        ),
    ] = "on_demand"
    table_warm_write_units: Annotated[
        int | None,
        Field(
            ge=MIN_WARM_WRITE_UNITS,
            le=MAX_TABLE_UNITS,
            description="pre-warm the target table to this many write units/s (warm throughput, at least "
            "4000 — a new on-demand table starts at 4,000/s), so a large load does not wait for DynamoDB "
            "to scale up",
        ),
        INTEGER,
        NULLABLE,
    ] = None
    table_write_capacity: Annotated[
        TableUnits,
        Field(
            description="provisioned write units/s; required with `table_billing_mode: provisioned`, "
            "refused with `on_demand`"
        ),
    ] = None
    table_read_capacity: Annotated[
        TableUnits,
        Field(
            description="provisioned read units/s; required with `table_billing_mode: provisioned`, "
            "refused with `on_demand`"
        ),
    ] = None
    staging_expiry_days: Annotated[
        Days,
        Field(
            description="how long manifests, rejects and reports under `jobs/`, and decompressed sources "
            "under `prepared/`, are kept"
        ),
    ] = 14
    source_noncurrent_expiry_days: Annotated[
        Days,
        Field(
            description="how long replaced versions of source objects are kept (the source bucket is "
            "versioned)"
        ),
    ] = 7
    multipart_abort_days: Annotated[
        int,
        Field(
            ge=1,
            le=365,
            description="incomplete multipart uploads are aborted after this many days, in both buckets",
        ),
        INTEGER,
    ] = 1
    access_log_expiry_days: Annotated[Days, Field(description="S3 server access logs")] = 90
    data_key: Annotated[
        str | None,
        Field(
            pattern=f"^({DATA_KEY_CREATE}|{_KMS_KEY_ARN})$",
            description="a customer managed KMS key for the data at rest: `null` (SSE-S3 buckets, the AWS "
            f'managed DynamoDB key, CloudWatch Logs\' own encryption), `"{DATA_KEY_CREATE}"` (the Data '
            "stack creates one key with yearly rotation, kept with the data under `retain_data`; no "
            "alias) or the ARN of an existing key in the environment's region "
            "(`arn:aws:kms:REGION:ACCOUNT:key/ID`). With a key, the source and staging buckets use "
            "SSE-KMS with S3 Bucket Keys, the created target table and the ledger use it as their "
            "customer managed key, and so do the log groups of the functions, the state machine and the "
            "VPC flow logs; the access-log bucket stays SSE-S3 (S3 server access logging cannot deliver "
            'to an SSE-KMS bucket). See "The data key" below',
        ),
        NULLABLE,
        Says(
            f'null, "{DATA_KEY_CREATE}" (the Data stack creates a key) or a KMS key ARN '
            "(arn:aws:kms:REGION:ACCOUNT:key/ID)"
        ),
    ] = None

    @model_validator(mode="after")
    def _keys_and_capacity(self) -> Self:
        if self.table_sort_key and self.table_sort_key.name == self.table_partition_key.name:
            raise rule_error("sort_key.name", "must differ from partition_key.name")
        units = {
            "table_write_capacity": self.table_write_capacity,
            "table_read_capacity": self.table_read_capacity,
        }
        for field, value in units.items():
            if self.table_billing_mode == "provisioned" and value is None:
                raise rule_error(field, "required when table_billing_mode is provisioned (units per second)")
            if self.table_billing_mode == "on_demand" and value is not None:
                raise rule_error(
                    field,
                    "only for table_billing_mode provisioned; an on-demand table is pre-warmed "
                    "with table_warm_write_units instead",
                )
        return self

    @model_validator(mode="after")
    def _key_in_region(self) -> Self:
        # S3, DynamoDB and CloudWatch Logs only use a key in their own region.
        key = self.data_key_arn
        if key is not None and self.region is not None and key.split(":")[3] != self.region:
            raise rule_error(
                "data_key", f"must be a key in the environment's region {self.region}, got {key!r}"
            )
        return self

    @model_validator(mode="after")
    def _table_in_environment(self) -> Self:
        refused = existing_table_refusal(self, self.account, self.region)
        if refused:
            raise rule_error("existing_table", refused)
        return self

    @property
    def data_key_arn(self) -> str | None:
        """The configured existing key's ARN (None when the key is created, or there is none)."""
        return None if self.data_key in (None, DATA_KEY_CREATE) else self.data_key

    @property
    def table_key(self) -> dict[str, str]:
        """Key schema as the runtime reads it: partition key first."""
        key: dict[str, str] = {self.table_partition_key.name: self.table_partition_key.type}
        if self.table_sort_key is not None:
            key[self.table_sort_key.name] = self.table_sort_key.type
        return key

    @property
    def table_existing_name(self) -> str | None:
        """The configured existing table's name (parsed from the ARN when one was given)."""
        if self.table_existing is None:
            return None
        match = _TABLE_ARN.match(self.table_existing)
        return match.group("name") if match else self.table_existing


class LoaderConfig(Site):
    """What the Loader stack reads: function sizing, concurrency, retries, log retention."""

    source_extra_buckets: Annotated[
        tuple[BucketName, ...],
        BeforeValidator(_list),
        AfterValidator(_once("bucket")),
        Field(
            alias="extra_source_buckets",
            description="buckets, besides the stack's source bucket, that an execution's `source` may "
            "name; IAM grants read on exactly these",
        ),
        Says("a list of bucket names", item="an S3 bucket name"),
    ] = ()
    source_kms_keys: Annotated[
        tuple[KmsKeyArn, ...],
        BeforeValidator(_list),
        Field(
            description="KMS key ARNs that source objects may be encrypted with (SSE-KMS, customer managed "
            "keys); Prepare, Plan and Worker get `kms:Decrypt` on exactly these, only via S3 "
            "(`kms:ViaService`). The key policy must also allow the functions' roles"
        ),
        Says("a list of KMS key ARNs", item="a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"),
    ] = ()
    max_concurrency_cap: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_MAP_CONCURRENCY,
            description="upper bound for the input's `maxConcurrency` (Distributed Map child executions in "
            "flight); at most `worker_reserved_concurrency` when the Worker has one, else at most "
            "`lambda_concurrency_limit` (synth fails naming both)",
        ),
        INTEGER,
    ] = 100
    worker_reserved_concurrency: Annotated[
        int | None,
        Field(
            ge=1,
            le=10_000_000,
            description="concurrent executions reserved for the Worker function, or `null` (the default) for "
            "none. A reservation keeps a full-width load from starving the account's other functions and "
            "the Worker from being throttled below `max_concurrency_cap` (which must then be at most it); "
            "but Lambda refuses at deploy a reservation that leaves fewer than "
            f"{LAMBDA_UNRESERVED_MINIMUM} executions of the account's quota unreserved, counting every "
            "function of the account and region, and a new account's quota may be far below 1,000. So it "
            "may be at most `lambda_concurrency_limit` − "
            f"{LAMBDA_UNRESERVED_MINIMUM}, and the reservations of all environments of cdk.json that "
            "deploy to one account and region (`account`/`region` null: the CLI's, so one group with "
            "an environment naming the same) add up "
            "against it (synth fails naming them). 0 is refused: it would throttle every invocation. "
            "Without one, a throttled invocation still waits (the state machine retries "
            "`Lambda.TooManyRequestsException` 40 times, at most 60 s apart) rather than failing the "
            'job. To reserve: raise the account\'s quota (Service Quotas, "Concurrent executions"), '
            "set `lambda_concurrency_limit` to it, then this",
        ),
        BeforeValidator(lambda value: _not_zero(_integer(value))),
        NULLABLE,
    ] = None
    worker_memory_mib: Annotated[
        MemoryMiB,
        Field(
            description="the Worker function's memory, and Prepare's. A property graph Worker holds its "
            "shard's ids in memory, so Plan (which gets this setting as `WORKER_MEMORY_MIB`) refuses a "
            "property graph input whose `shardSizeMiB` is more than the Worker holds, naming the largest "
            "allowed: 26 at 512 MiB, 71 at 1,024, 86 at 1,536, 153 at 2,048, 213 at 3,008, 691 at 10,240, "
            "for ids that are a field as it is (longer ids a template makes allow less; measured by "
            '`bench/shard_memory.py`: docs/NEPTUNE.md, "Edge endpoints are checked before the load", Size); '
            "a property graph input that gives no `shardSizeMiB` gets the largest, up to the default 64"
        ),
    ] = 1024
    worker_timeout_seconds: Annotated[
        TimeoutSeconds,
        Field(
            description="the Worker function's timeout, and Prepare's (decompression of gzip/zip sources: "
            'the timeout bounds how much one execution can decompress, docs/INPUT.md, "Compressed sources")'
        ),
    ] = 900
    control_memory_mib: Annotated[
        MemoryMiB, Field(description="the memory of Plan (and of the graph-load functions)")
    ] = 512
    control_timeout_seconds: Annotated[
        TimeoutSeconds, Field(description="the timeout of Plan (and of the graph-load functions)")
    ] = 300
    worker_ephemeral_storage_mib: Annotated[
        int,
        Field(
            ge=512,
            le=10240,
            description="the Worker's and Prepare's `/tmp` (Lambda allows 512 to 10,240 MB). Neither spools "
            "data there: a shard's rejects and staged graph file stream to staging as multipart uploads "
            "while the shard is read (one 8 MiB part in memory each), Prepare streams decompressed data "
            "the same way; the setting is headroom for the runtime and libraries",
        ),
        INTEGER,
    ] = 2048
    finalize_memory_mib: Annotated[
        MemoryMiB,
        Field(
            description="Finalize's memory: it reads every shard's ledger item (up to 100,000) and streams "
            "the merged rejects to S3 in 8 MiB parts (`tests/runtime/test_finalize_scale.py` measures it "
            "at 100,000 shards)"
        ),
    ] = 1024
    finalize_timeout_seconds: Annotated[TimeoutSeconds, Field(description="Finalize's timeout")] = 900
    write_concurrency: Annotated[
        int,
        Field(
            ge=1,
            le=256,
            description="write requests in flight per worker for a 20 ms round trip; each worker narrows it "
            "while DynamoDB throttles (AIMD) and widens it again as requests succeed. At 20 ms round trip, "
            "8–16 keep one worker busy (see docs/PERFORMANCE.md); a longer quickest round trip widens the "
            "cap in proportion, up to `max_write_concurrency`",
        ),
        INTEGER,
    ] = 8
    max_write_concurrency: Annotated[
        int,
        Field(
            ge=1,
            le=256,
            description="the most write requests in flight per worker however long the round trip: the "
            "cap `write_concurrency` × (quickest round trip ÷ 20 ms) stops here (at least "
            "`write_concurrency`; the Worker's sending threads and HTTP connections follow it)",
        ),
        INTEGER,
    ] = 64
    lambda_concurrency_limit: Annotated[
        Count,
        Field(
            description="the account's concurrent Lambda executions (its quota) available to this loader; "
            f"`worker_reserved_concurrency` may be at most this − {LAMBDA_UNRESERVED_MINIMUM} (synth fails "
            "naming both), so a job never asks for more Workers than Lambda would run — raise it together "
            "with the quota"
        ),
    ] = 1000
    lambda_architecture: Annotated[
        Architecture,
        Field(description="`arm64` or `x86_64`, for every function (arm64 costs less per GB-s)"),
    ] = "arm64"
    map_execution_type: Annotated[
        MapExecutionType,
        Field(
            description="the Distributed Map's child executions: `STANDARD`, or `EXPRESS` (cheaper per "
            f"shard, but an EXPRESS execution ends after {EXPRESS_MAX_SECONDS // 60} minutes, "
            "retries included: the Worker's retry schedule (every attempt and wait at its longest) "
            "is cut to fit them, throttling and CSV start retries first, so a shorter "
            "`worker_timeout_seconds` keeps more retries; it must keep at least 3 throttling "
            "retries and 1 CSV start retry, so `worker_timeout_seconds` must be at most 146 with "
            "the default retry settings — synth fails otherwise, naming the largest — and "
            "`shardSizeMiB` small enough for a shard to finish in that time; a shard whose retries "
            "ran out fails the job, and a re-run of the jobId resumes it)"
        ),
    ] = "STANDARD"
    # Step Functions rejects an IntervalSeconds below 1 (and so does moto's interpreter).
    retry_interval_seconds: Annotated[
        int,
        Field(
            ge=1,
            le=3600,
            description="seconds before the state machine's first retry of Lambda service errors and "
            "throttling (full jitter)",
        ),
        INTEGER,
    ] = 2
    retry_max_attempts: Annotated[
        int,
        Field(
            ge=0,
            le=20,
            description="attempts of the state machine's retry of Lambda service errors and throttling",
        ),
        INTEGER,
    ] = 6
    retry_backoff_rate: Annotated[
        float,
        Field(
            ge=1.0,
            le=10.0,
            description="backoff rate of the state machine's retry of Lambda service errors and throttling",
        ),
        NUMBER,
    ] = 2.0
    ledger_ttl_days: Annotated[Days, Field(description="how long ledger items (jobs, shards) are kept")] = 30
    log_retention_days: Annotated[
        int,
        Field(
            ge=1,
            le=3653,
            description="CloudWatch Logs retention of the functions and the state machine (a value "
            f"CloudWatch accepts: {', '.join(str(day) for day in sorted(LOG_RETENTION_DAYS))})",
        ),
        INTEGER,
        AfterValidator(_retention),
    ] = 30

    @property
    def retain_logs(self) -> bool:
        """Log groups outlive the stack with the data (`retain_data`)."""
        return self.retain_data

    @model_validator(mode="after")
    def _concurrency_and_express(self) -> Self:
        if self.max_write_concurrency < self.write_concurrency:
            raise rule_error(
                "max_write_concurrency",
                f"{self.max_write_concurrency} must be at least write_concurrency {self.write_concurrency}",
            )
        reserved = self.worker_reserved_concurrency
        reservable = self.lambda_concurrency_limit - LAMBDA_UNRESERVED_MINIMUM
        if reserved is not None and reserved > reservable:
            raise rule_error(
                "worker_reserved_concurrency",
                f"{reserved} must leave Lambda's {LAMBDA_UNRESERVED_MINIMUM} "
                "unreserved executions of lambda_concurrency_limit (the account's quota) "
                f"{self.lambda_concurrency_limit}: at most {reservable}; lower it, set it to null (no "
                "reservation), or raise the quota and lambda_concurrency_limit",
            )
        if reserved is not None and self.max_concurrency_cap > reserved:
            raise rule_error(
                "max_concurrency_cap",
                f"{self.max_concurrency_cap} shards in flight need as many Worker executions, but "
                f"worker_reserved_concurrency is {reserved}: lower "
                "max_concurrency_cap or raise worker_reserved_concurrency",
            )
        if reserved is None and self.max_concurrency_cap > self.lambda_concurrency_limit:
            raise rule_error(
                "max_concurrency_cap",
                f"{self.max_concurrency_cap} shards in flight need as many Worker executions, but "
                f"lambda_concurrency_limit (the account's quota) is {self.lambda_concurrency_limit}: lower "
                "max_concurrency_cap or raise the quota and lambda_concurrency_limit",
            )
        limit = EXPRESS_MAX_SECONDS - WORKER_TASK_MARGIN_SECONDS
        if self.map_execution_type == "EXPRESS" and self.worker_timeout_seconds > limit:
            raise rule_error(
                "map_execution_type",
                f"EXPRESS child executions end after {EXPRESS_MAX_SECONDS} s, but a Worker may run "
                f"worker_timeout_seconds={self.worker_timeout_seconds} (+{WORKER_TASK_MARGIN_SECONDS} s); "
                f"set worker_timeout_seconds to at most {limit} (and shardSizeMiB small enough) "
                "or use STANDARD",
            )
        return self


class GraphConfig(Site):
    """What the Graph stack reads: whether there is one, the cluster's size, engine and backups."""

    graph_enabled: Annotated[
        bool,
        Field(
            description="build the Graph stack (VPC, Neptune, loader role) and the graph-load functions; "
            "`false`: no Neptune, and Plan refuses a graph input"
        ),
        FLAG,
    ] = True
    instance_class: Annotated[
        str,
        Field(
            alias="graph_instance_class",
            pattern=r"^db\.(serverless|[a-z0-9]+\.[a-z0-9]+)$",
            description="`db.serverless` (capacity from the two settings below) or a provisioned Neptune "
            "class such as `db.r6g.large`",
        ),
        Says('"db.serverless" or a Neptune instance class like db.r6g.large'),
    ] = "db.serverless"
    instances: Annotated[
        int,
        Field(
            alias="graph_instances",
            ge=1,
            le=16,
            description="cluster instances (1..16); a second one is a failover reader in the other AZ",
        ),
        INTEGER,
    ] = 1
    serverless_min_capacity: Annotated[
        float,
        Field(
            alias="graph_serverless_min_capacity",
            ge=1.0,
            le=128.0,
            description="the fewest Neptune capacity units when serverless (1..128, at most "
            "`graph_serverless_max_capacity`)",
        ),
        NUMBER,
    ] = 1.0
    serverless_max_capacity: Annotated[
        float,
        Field(
            alias="graph_serverless_max_capacity",
            ge=2.5,
            le=128.0,
            description="the most Neptune capacity units when serverless (2.5..128)",
        ),
        NUMBER,
    ] = 8.0
    engine_version: Annotated[
        str,
        Field(
            alias="graph_engine_version",
            pattern=r"^1\.[0-9]+\.[0-9]+\.[0-9]+$",
            description=f"the Neptune engine version, at least {MIN_GRAPH_ENGINE_VERSION} (synth fails "
            "otherwise, naming the minimum): the functions hold Neptune's fine-grained data actions "
            "(`neptune-db:StartLoaderJob`, `GetLoaderJobStatus`, `ReadDataViaQuery`, ...), which older "
            "engines do not support, and openCypher needs 1.1.1.0. The cluster parameter group family "
            "follows it (`neptune1.4`)",
        ),
        AfterValidator(_engine_at_least_minimum),
        Says("a Neptune engine version like 1.4.5.1"),
    ] = "1.4.5.1"
    backup_retention_days: Annotated[
        int,
        Field(
            alias="graph_backup_retention_days",
            ge=1,
            le=35,
            description="automated backups kept (1..35, as Neptune allows); with `retain_data` the cluster "
            "also has deletion protection and leaves a final snapshot",
        ),
        INTEGER,
    ] = 7
    availability_zones: Annotated[
        tuple[str, ...],
        BeforeValidator(_list),
        AfterValidator(_once("zone")),
        Field(
            alias="graph_availability_zones",
            description="the Graph VPC's availability zones by name (two or more of the environment's "
            "region, e.g. `eu-west-2a`); empty: the region's first two, picked at deploy. Set it where "
            "Lambda does not support an AZ id that the first two map to in your account (the graph "
            "functions' subnets would fail to create): see docs/DEPLOY.md",
        ),
        Says("a list of availability zone names", item="an availability zone name like eu-west-2a"),
    ] = ()

    @model_validator(mode="after")
    def _zones_of_the_region(self) -> Self:
        zones = self.availability_zones
        if zones and len(zones) < GRAPH_MIN_AZS:
            raise rule_error(
                "graph_availability_zones",
                f"must name at least {GRAPH_MIN_AZS} zones (a Neptune subnet group spans two AZs), "
                f"got {len(zones)}",
            )
        for zone in zones:
            if not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]", zone) or (
                self.region is not None and zone[:-1] != self.region
            ):
                raise rule_error(
                    "graph_availability_zones",
                    f"must be zone names of the environment's region ({self.region or 'any region'}, "
                    f"like eu-west-2a; not zone ids), got {zone!r}",
                )
        return self

    @property
    def retain(self) -> bool:
        """Deletion protection on the cluster, snapshot on stack deletion (`retain_data`)."""
        return self.retain_data

    @model_validator(mode="after")
    def _capacity_range(self) -> Self:
        if self.serverless_min_capacity > self.serverless_max_capacity:
            raise rule_error(
                "graph_serverless_min_capacity",
                f"must not exceed graph_serverless_max_capacity ({self.serverless_max_capacity:g})",
            )
        return self

    @property
    def serverless(self) -> bool:
        return self.instance_class == "db.serverless"

    @property
    def parameter_group_family(self) -> str:
        major_minor = ".".join(self.engine_version.split(".")[:2])
        return f"neptune{major_minor}"


class MonitoringConfig(Section):
    """What the dashboard and alarms read: where alarms go and when they fire."""

    alarm_email: Annotated[
        str | None,
        Field(
            pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
            description="e-mail address subscribed to the environment's alarm topic (null: the topic has no "
            "subscription; add your own)",
        ),
        NULLABLE,
        Says("an e-mail address or null"),
    ] = None
    alarm_rejected_percent: Annotated[
        float,
        Field(
            ge=0.0,
            le=100.0,
            description="alarm when rejected records exceed this percentage of records read in 5 minutes "
            "(0..100)",
        ),
        NUMBER,
    ] = 1.0
    alarm_throttle_events: Annotated[
        Count,
        Field(
            description="alarm when more than this many DynamoDB writes are throttled per 5 minutes, three "
            "periods in a row"
        ),
    ] = 1000


class EnvironmentConfig(MonitoringConfig, GraphConfig, LoaderConfig, DataConfig):
    """One deployment environment (dev, staging, prod): its flat cdk.json block, every setting once.

    A stack reads the view of it that it needs (`config.data`, `config.loader`, ...): the same
    object, typed as the section.
    """

    @model_validator(mode="before")
    @classmethod
    def _without_graph(cls, raw: Any) -> Any:
        """`graph_enabled: false`: the graph settings are not read (there is no Graph stack)."""
        if isinstance(raw, Mapping) and str(raw.get("graph_enabled")).lower() == "false":
            return {key: value for key, value in raw.items() if key not in _GRAPH_SETTINGS}
        return raw

    @property
    def data(self) -> DataConfig:
        return self

    @property
    def loader(self) -> LoaderConfig:
        return self

    @property
    def monitoring(self) -> MonitoringConfig:
        return self

    @property
    def graph(self) -> GraphConfig | None:
        """None when the environment has no Graph stack (`graph_enabled: false`)."""
        return self if self.graph_enabled else None


def _aliases(model: type[BaseModel]) -> dict[str, str]:
    """Each field's name in cdk.json (its alias) → its attribute name."""
    return {str(field.alias or name): name for name, field in model.model_fields.items()}


_GRAPH_SETTINGS: Final[frozenset[str]] = frozenset(_aliases(GraphConfig)) - {
    "graph_enabled",
    *_aliases(Site),
}


class PipelineConfig(Section):
    """The `mapload.pipeline` block of cdk.json: where the pipeline lives and what it promotes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    account: Annotated[
        str,
        Field(
            pattern=r"^[0-9]{12}$",
            description="the AWS account the pipeline itself runs in (CodePipeline, CodeBuild, the "
            "artifact bucket)",
        ),
        Says("the 12-digit AWS account the pipeline runs in"),
    ]
    region: Annotated[
        str,
        Field(
            pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]+$",
            description="the AWS region the pipeline itself runs in (CodePipeline, CodeBuild, the "
            "artifact bucket)",
        ),
        Says("the AWS region the pipeline runs in, such as eu-west-2"),
    ]
    connection_arn: Annotated[
        str,
        Field(
            pattern=f"^{_CONNECTION_ARN}$",
            description="a CodeStar/CodeConnections connection (`arn:aws:codeconnections:…:connection/…`) "
            "that can read the repository",
        ),
        Says("the ARN of a CodeStar/CodeConnections connection to the repository host"),
    ]
    repository: Annotated[
        str,
        Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", description="the repository as `owner/name`"),
        Says("the repository as owner/name"),
    ]
    branch: Annotated[
        str,
        Field(pattern=r"^[A-Za-z0-9._/-]{1,255}$", description="the branch whose commits are promoted"),
        Says("the branch to deploy", required=True),
    ] = "main"
    stages: Annotated[
        Stages,
        Field(
            description="environments deployed, in this order (each once, each defined under `environments`)"
        ),
    ] = ("dev", "staging", "prod")
    smoke_test_after: Annotated[
        Stages,
        Field(
            description="after these stages deploy, a CodeBuild step runs `mapload start` on a sample and "
            "stops the promotion unless it SUCCEEDED and reconciles"
        ),
    ] = ("staging",)
    approval_before: Annotated[
        Stages,
        Field(description="these stages start with a manual approval (`PromoteTo<Env>`)"),
    ] = ("prod",)
    smoke_test_rows: Annotated[
        int,
        Field(
            ge=1,
            le=1_000_000,
            description="rows in the smoke test's generated sample (1..1,000,000)",
        ),
        INTEGER,
    ] = 2000

    @model_validator(mode="after")
    def _stages(self, info: ValidationInfo) -> Self:
        """Each listed name is an environment of cdk.json; smoke tests and approvals are of stages."""
        defined: Sequence[str] = (info.context or {}).get("environments", ())
        for field in ("stages", "smoke_test_after", "approval_before"):
            for name in getattr(self, field):
                if name not in defined:
                    raise rule_error(
                        field,
                        f"names {name!r}, which mapload.environments does not define ({', '.join(defined)})",
                    )
        if not self.stages or len(set(self.stages)) != len(self.stages):
            raise rule_error("stages", "must name at least one environment, each once")
        for field in ("smoke_test_after", "approval_before"):
            outside = [name for name in getattr(self, field) if name not in self.stages]
            if outside:
                raise rule_error(field, f"names {outside[0]!r}, which is not in stages")
        return self


class MaploadSettings(Section):
    """The `mapload` block of cdk.json's context: the pipeline and the environments by name.

    The published schema (schemas/config.schema.json). It is read in parts: `load_environment`
    validates one environment (with its name's defaults and the `-c` overrides laid over it),
    `load_pipeline` the pipeline, only under `-c pipeline=true`.
    """

    pipeline: Annotated[
        PipelineConfig | None,
        Field(description="read only when the app is synthesized with -c pipeline=true"),
    ] = None
    environments: Annotated[
        dict[EnvironmentName, EnvironmentConfig],
        Field(
            min_length=1, description="the deployment environments, by name (1-16 lowercase letters/digits)"
        ),
    ]


SCHEMA_ID: Final[str] = "https://mapload.example/schemas/config.schema.json"


def json_schema() -> dict[str, Any]:
    """schemas/config.schema.json: the `mapload` block's JSON Schema, generated from the models."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **MaploadSettings.model_json_schema(),
    }


def setting_defaults() -> dict[str, Any]:
    """Every field an environment's cdk.json block may set, with its default (before ENVIRONMENT_DEFAULTS)."""
    return {
        str(field.alias or name): field.default
        for name, field in EnvironmentConfig.model_fields.items()
        if name != "name"
    }


SETTING_NAMES: Final[frozenset[str]] = frozenset(setting_defaults())

# Per-environment defaults (the models hold the common ones); cdk.json only states what differs.
# Prod keeps data and allows the large fan-out the design is for; dev and staging are smaller.
ENVIRONMENT_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "dev": {},
    # Up to 800 Workers of a 1,000 quota. No reservation by default (worker_reserved_concurrency):
    # Lambda would refuse one at deploy on an account whose quota is below it + 100.
    "staging": {"max_concurrency_cap": 800},
    "prod": {
        "max_concurrency_cap": 800,
        "ledger_ttl_days": 90,
        "staging_expiry_days": 30,
        "log_retention_days": 365,
        "retain_data": True,
        # A second instance in the other AZ: failover without waiting for a new instance.
        "graph_instances": 2,
        "graph_serverless_min_capacity": 2.5,
        "graph_serverless_max_capacity": 64.0,
        "graph_backup_retention_days": 35,
    },
}


def environment_names(context_block: Any) -> tuple[str, ...]:
    """Names of the environments the `mapload` context block defines."""
    return tuple(_environments(context_block))


def _environments(context_block: Any) -> Mapping[str, Any]:
    if not isinstance(context_block, Mapping):
        raise MaploadConfigError("mapload", "must be an object with an `environments` object")
    environments = context_block.get("environments")
    if not isinstance(environments, Mapping) or not environments:
        raise MaploadConfigError("mapload.environments", "must be a non-empty object")
    return environments


def _block(context_block: Any, env: str) -> Mapping[str, Any]:
    environments = _environments(context_block)
    if env not in environments:
        known = ", ".join(sorted(environments))
        raise MaploadConfigError("env", f"unknown environment {env!r}; cdk.json defines {known}")
    if not _ENV_NAME.match(env):
        raise MaploadConfigError(
            f"mapload.environments.{env}", "environment names are 1-16 lowercase letters/digits"
        )
    block = environments[env]
    if block is None:
        return {}
    if not isinstance(block, Mapping):
        raise MaploadConfigError(f"mapload.environments.{env}", "must be an object")
    return block


def load_environment(
    context_block: Any,
    env: str,
    overrides: Mapping[str, Any] | None = None,
) -> EnvironmentConfig:
    """Parse and validate one environment from the `mapload` block.

    `overrides` maps field names to single values (from `-c mapload:<field>=...`); they win over
    the cdk.json block, which wins over the built-in defaults for that environment name.
    """
    block = _block(context_block, env)
    overrides = dict(overrides or {})
    for field in [*block, *overrides]:
        if field not in SETTING_NAMES:
            where = (
                f"{OVERRIDE_PREFIX}{field}" if field in overrides else f"mapload.environments.{env}.{field}"
            )
            raise MaploadConfigError(where, f"unknown setting; known: {', '.join(sorted(SETTING_NAMES))}")
    raw = {**ENVIRONMENT_DEFAULTS.get(env, {}), **block, **overrides}
    try:
        return EnvironmentConfig.model_validate({**raw, "name": env})
    except ValidationError as error:
        field, message = refusal(EnvironmentConfig, error, raw)
        where = f"mapload.environments.{env}.{field}"
        setting = re.split(r"[.\[]", field, maxsplit=1)[0]
        if setting in overrides:
            where += f" (context {OVERRIDE_PREFIX}{setting})"
        raise MaploadConfigError(where, message) from None


# A part missing or extra: the structured setting is refused as a whole.
_WHOLE: Final[frozenset[str]] = frozenset({"missing", "extra_forbidden", "unexpected_keyword_argument"})


def refusal(
    model: type[BaseModel], error: ValidationError, given: Mapping[str, Any], required: str = ""
) -> tuple[str, str]:
    """The first refusal as (setting path, message): `max_concurrency_cap`, `must be ...`.

    A rule's own refusal (`invalid`, `rule_error`) is used as it is; any other is worded from the
    field it is about: its `Says`, its bounds, its options, and the value as `given` (before a
    CLI string was coerced). `required` completes "is required" for a
    required field that was left out or null.
    """
    first = error.errors()[0]
    context = first.get("ctx") or {}
    loc = [str(part) if isinstance(part, str) else f"[{part}]" for part in first["loc"]]
    if first["type"] == "mapload":
        path = str(context.get("field") or ".".join(loc)) + str(context.get("at", ""))
        return path, str(context["message"])
    field = {str(info.alias or name): info for name, info in model.model_fields.items()}[loc[0]]
    path, says, value = loc[0], _says(field), first["input"]
    if loc[0] in given and (len(loc) == 1 or first["type"] in _WHOLE):
        # A setting refused as a whole is shown as given (a key parsed from its JSON, as checked).
        value = given[loc[0]]
        value = _key(value) if _structure(field.annotation) is not None else value
    needed = field.is_required() or (says is not None and says.required)
    if needed and (first["type"] == "missing" or value in (None, "")):
        return path, f"is required{required}: {says.what if says else 'a value'}"
    if len(loc) > 1 and loc[1].startswith("["):
        path, what = path + loc[1], says.item if says else ""
        return path, f"must be {what}, got {value!r}"
    if len(loc) > 1 and first["type"] not in _WHOLE:
        # A part of a structured setting (partition_key.type): worded from that part's field.
        inner = _structure(field.annotation)
        if inner is not None and loc[1] in inner:
            return f"{path}.{loc[1]}", _must_be(inner[loc[1]], value)
    return path, _must_be(field, value)


def _structure(annotation: Any) -> dict[str, FieldInfo] | None:
    for candidate in (annotation, *get_args(annotation)):
        fields = getattr(candidate, "__pydantic_fields__", None)
        if fields is not None:
            return dict(fields)
    return None


def _says(field: FieldInfo) -> Says | None:
    return next((item for item in field.metadata if isinstance(item, Says)), None)


def _must_be(field: FieldInfo, value: Any) -> str:
    says = _says(field)
    if says is not None:
        return f"must be {says.what}, got {value!r}"
    low = next((item.ge for item in field.metadata if isinstance(item, Ge)), None)
    high = next((item.le for item in field.metadata if isinstance(item, Le)), None)
    types = {field.annotation, *get_args(field.annotation)}
    if low is not None and high is not None:
        if float in types:
            return f"must be a number between {low} and {high}, got {value!r}"
        hint = "a positive integer" if low == 1 else "an integer"
        return f"must be {hint} between {low} and {high}, got {value!r}"
    if bool in types:
        return f"must be true or false, got {value!r}"
    return f"must be one of {', '.join(map(str, get_args(field.annotation)))}, got {value!r}"


def overrides_from_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """Collect the `mapload:<field>` keys of a full context mapping as field overrides.

    Unknown fields are kept so that `load_environment` rejects the typo instead of ignoring it;
    a bare field name (`retry_interval_seconds` without the prefix) is refused for the same reason.
    """
    for key in context:
        if key in SETTING_NAMES:
            raise MaploadConfigError(key, f"a setting is overridden as {OVERRIDE_PREFIX}{key}, not {key}")
    return {
        key[len(OVERRIDE_PREFIX) :]: value
        for key, value in context.items()
        if key.startswith(OVERRIDE_PREFIX)
    }


def load_pipeline(context_block: Any, environment_names: Sequence[str]) -> PipelineConfig:
    """Parse `mapload.pipeline`; every error names the missing or wrong field."""
    block = context_block.get("pipeline") if isinstance(context_block, Mapping) else None
    if not isinstance(block, Mapping):
        raise MaploadConfigError(
            _PIPELINE,
            "is required with -c pipeline=true: an object with account, region, connection_arn "
            "(a CodeStar/CodeConnections connection), repository (owner/name) and branch",
        )
    known = sorted(PipelineConfig.model_fields)
    unknown = sorted(set(block) - set(known))
    if unknown:
        raise MaploadConfigError(f"{_PIPELINE}.{unknown[0]}", f"unknown setting; known: {', '.join(known)}")
    try:
        return PipelineConfig.model_validate(block, context={"environments": tuple(environment_names)})
    except ValidationError as error:
        field, message = refusal(PipelineConfig, error, block, required=" for the pipeline")
        raise MaploadConfigError(f"{_PIPELINE}.{field}", message) from None


def require_target(config: EnvironmentConfig) -> tuple[str, str]:
    """A promoted environment must say where it goes: the pipeline deploys across accounts."""
    for field, value in (("account", config.account), ("region", config.region)):
        if not value:
            raise MaploadConfigError(
                f"mapload.environments.{config.name}.{field}",
                f"is required when the pipeline deploys {config.name!r} (-c pipeline=true)",
            )
    assert config.account and config.region
    return config.account, config.region


def check_reservations(
    environments: Sequence[EnvironmentConfig], cli_account: str | None = None, cli_region: str | None = None
) -> None:
    """Lambda's unreserved minimum is per account and region: the Worker reservations of the
    environments that deploy to one account and region add up against it.

    An environment whose `account` (or `region`) is null deploys to the CLI's (`cli_account`,
    `cli_region`: CDK_DEFAULT_*, as `check_existing_table` compares), so it shares a group with
    an environment that names that account; when the CLI's is unknown too, those are taken as one
    account (region), the case of one user deploying them all. The group's quota is the least
    `lambda_concurrency_limit` among them.
    """
    unknown = "null, the CLI's"
    groups: dict[tuple[str | None, str | None], list[EnvironmentConfig]] = {}
    for config in environments:
        groups.setdefault((config.account or cli_account, config.region or cli_region), []).append(config)
    for (account, region), members in groups.items():
        reserving = [config for config in members if config.worker_reserved_concurrency is not None]
        if len(reserving) < 2:
            continue  # one environment's reservation is checked against its own limit
        total = sum(config.worker_reserved_concurrency or 0 for config in reserving)
        quota = min(config.lambda_concurrency_limit for config in members)
        if total > quota - LAMBDA_UNRESERVED_MINIMUM:
            here = {"account": account, "region": region}
            where = ", ".join(f"{key} {value or unknown}" for key, value in here.items())
            shares = " + ".join(f"{c.name} {c.worker_reserved_concurrency}" for c in reserving)
            raise MaploadConfigError(
                f"mapload.environments.{reserving[-1].name}.worker_reserved_concurrency",
                f"environments deploying to one account and region ({where}) reserve {shares} = "
                f"{total} Worker executions, but Lambda keeps {LAMBDA_UNRESERVED_MINIMUM} of the "
                f"account's quota (lambda_concurrency_limit {quota}) unreserved: at most "
                f"{quota - LAMBDA_UNRESERVED_MINIMUM} in all; lower them, set some to null (no "
                "reservation), or give the environments their own account or region",
            )


def existing_table_refusal(config: DataConfig, account: str | None, region: str | None) -> str | None:
    """Why an `existing_table` ARN cannot be loaded from the `account` and `region` the environment
    deploys to (either None: unknown, not compared); None when it can."""
    match = _TABLE_ARN.match(config.table_existing or "")
    if match is None:
        return None
    table_region, table_account = match.group(0).split(":")[3:5]
    for what, table_value, own in (("account", table_account, account), ("region", table_region, region)):
        if own is not None and table_value != own:
            return (
                f"names a table in {what} {table_value}, but the environment deploys to {what} {own}: "
                "the functions write to a table of their own account and region (a numeric add's "
                "TransactWriteItems cannot span accounts or regions); deploy an environment to the "
                "table's account and region"
            )
    return None


def check_existing_table(config: EnvironmentConfig, cli_account: str | None, cli_region: str | None) -> None:
    """At synth: an environment whose `account`/`region` is null deploys to the CLI's."""
    refused = existing_table_refusal(config, config.account or cli_account, config.region or cli_region)
    if refused:
        raise MaploadConfigError(f"mapload.environments.{config.name}.existing_table", refused)
