"""Typed, validated per-environment settings parsed from the cdk.json context `mapload` block.

One declarative definition: each setting is a field of a pydantic model below (the section a
stack reads), named in cdk.json by its alias, with its default and a check that coerces CLI
strings (`-c mapload:max_concurrency_cap=10`) and fails with one line naming the setting. The
rules between settings are the models' `after` validators. docs/SETTINGS.md is checked against
these models (tests/infra/test_config.py).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Self

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, ValidationError, model_validator
from pydantic_core import PydanticCustomError, core_schema

# Days CloudWatch Logs accepts as a retention period (anything else is rejected at deploy).
LOG_RETENTION_DAYS: Final[frozenset[int]] = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192}
    | {2557, 2922, 3288, 3653}
)
KEY_TYPES: Final[tuple[str, ...]] = ("S", "N", "B")
# A Distributed Map runs at most 10,000 child executions at once.
MAX_MAP_CONCURRENCY: Final[int] = 10_000
TABLE_BILLING_MODES: Final[tuple[str, ...]] = ("on_demand", "provisioned")
LAMBDA_ARCHITECTURES: Final[tuple[str, ...]] = ("arm64", "x86_64")
MAP_EXECUTION_TYPES: Final[tuple[str, ...]] = ("STANDARD", "EXPRESS")
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
# Context keys of the form `mapload:<field>` override one field of the selected environment
# (`cdk synth -c mapload:max_concurrency_cap=10`); CLI values arrive as strings.
OVERRIDE_PREFIX: Final[str] = "mapload:"

_ENV_NAME = re.compile(r"^[a-z][a-z0-9]{0,15}$")
_ACCOUNT = re.compile(r"^[0-9]{12}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")
_TABLE_NAME = r"[A-Za-z0-9_.-]{3,255}"
_TABLE_ARN = re.compile(rf"^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{{12}}:table/(?P<name>{_TABLE_NAME})$")
_KMS_KEY_ARN = r"arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+"
_BUCKET_NAME = re.compile(r"^(?!.*\.\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class MaploadConfigError(ValueError):
    """A cdk.json `mapload` setting is missing or wrong; the message names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def invalid(message: str, at: str = "") -> PydanticCustomError:
    """A refusal whose message is used as it is; `at` extends the path (`.name`, `[2]`)."""
    return PydanticCustomError("mapload", "{message}", {"message": message, "at": at})


def rule_error(field: str, message: str) -> PydanticCustomError:
    """A refusal by a rule between settings, naming the setting to change."""
    return PydanticCustomError("mapload", "{message}", {"message": message, "field": field})


def _absent(value: Any) -> bool:
    return value is None or value == ""


class _Check:
    """A field's check: coerces a cdk.json (or CLI string) value, or refuses it in one line."""

    nullable: bool = False

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self._validate)

    def _validate(self, value: Any) -> Any:
        return None if self.nullable and _absent(value) else self.coerce(value)

    def coerce(self, value: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class IntIn(_Check):
    low: int
    high: int
    nullable: bool = False
    allowed: frozenset[int] | None = None

    def coerce(self, value: Any) -> int:
        number = _coerce_int(value)
        if number is None or not self.low <= number <= self.high:
            hint = "a positive integer" if self.low == 1 else "an integer"
            raise invalid(f"must be {hint} between {self.low} and {self.high}, got {value!r}")
        if self.allowed is not None and number not in self.allowed:
            listed = ", ".join(str(day) for day in sorted(self.allowed))
            raise invalid(f"must be one of {listed}, got {number}")
        return number


@dataclass(frozen=True)
class NumberIn(_Check):
    low: float
    high: float

    def coerce(self, value: Any) -> float:
        number = value
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                number = float(value)
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not self.low <= number <= self.high
        ):
            raise invalid(f"must be a number between {self.low} and {self.high}, got {value!r}")
        return float(number)


@dataclass(frozen=True)
class Flag(_Check):
    def coerce(self, value: Any) -> bool:
        if isinstance(value, str) and value.lower() in {"true", "false"}:
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise invalid(f"must be true or false, got {value!r}")
        return value


@dataclass(frozen=True)
class OneOf(_Check):
    options: tuple[str, ...]

    def coerce(self, value: Any) -> str:
        if value not in self.options:
            raise invalid(f"must be one of {', '.join(self.options)}, got {value!r}")
        return str(value)


@dataclass(frozen=True)
class Matches(_Check):
    """A string matching `pattern` (`expected` says what it must be, in the error)."""

    pattern: str
    expected: str
    nullable: bool = True

    def coerce(self, value: Any) -> str:
        if not isinstance(value, str) or not re.fullmatch(self.pattern, value):
            raise invalid(f"must be {self.expected}, got {value!r}")
        return value


@dataclass(frozen=True)
class EngineVersion(_Check):
    """A Neptune engine version (four numbers, 1.x.y.z) no older than `minimum`."""

    minimum: str

    def coerce(self, value: Any) -> str:
        if not isinstance(value, str) or not re.fullmatch(r"1\.[0-9]+\.[0-9]+\.[0-9]+", value):
            raise invalid(f"must be a Neptune engine version like 1.4.5.1, got {value!r}")
        if _version(value) < _version(self.minimum):
            raise invalid(
                f"must be {self.minimum} or later, got {value!r}: the stack's IAM grants Neptune's "
                "fine-grained data actions (neptune-db:StartLoaderJob, GetLoaderJobStatus, "
                "ReadDataViaQuery, ...), which older engines do not support (openCypher, too, "
                "needs 1.1.1.0)"
            )
        return value


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@dataclass(frozen=True)
class NameList(_Check):
    """A list (JSON, or comma-separated from the CLI) of names each matching `pattern`."""

    pattern: str
    what: str
    item: str
    # The noun of the error when a name appears twice; "" allows repeats.
    unique: str = ""

    def coerce(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = _parse_json_or(value, [part.strip() for part in value.split(",") if part.strip()])
        if not isinstance(value, list | tuple):
            raise invalid(f"must be a list of {self.what}, got {value!r}")
        for index, name in enumerate(value):
            if not isinstance(name, str) or not re.fullmatch(self.pattern, name):
                raise invalid(f"must be {self.item}, got {name!r}", at=f"[{index}]")
        if self.unique and len(set(value)) != len(value):
            raise invalid(f"must not name a {self.unique} twice")
        return tuple(value)


@dataclass(frozen=True)
class KeyAttribute:
    """One DynamoDB key attribute (name and scalar type S, N or B)."""

    name: str
    type: str


@dataclass(frozen=True)
class KeyCheck(_Check):
    """`{"name": ..., "type": "S"|"N"|"B"}` (a JSON string from the CLI) as a KeyAttribute."""

    nullable: bool = False

    def _validate(self, value: Any) -> Any:
        value = _parse_json_or(value, value) if isinstance(value, str) else value
        # Only null means "no sort key": an empty string is refused like any other non-key.
        return None if self.nullable and value is None else self.coerce(value)

    def coerce(self, value: Any) -> KeyAttribute:
        if not isinstance(value, Mapping) or set(value) != {"name", "type"}:
            raise invalid(f'must be {{"name": ..., "type": "S"|"N"|"B"}}, got {value!r}')
        name, type_ = value["name"], value["type"]
        if not isinstance(name, str) or not 1 <= len(name) <= 255:
            raise invalid(f"must be 1 to 255 characters, got {name!r}", at=".name")
        if type_ not in KEY_TYPES:
            raise invalid(f"must be one of {', '.join(KEY_TYPES)}, got {type_!r}", at=".type")
        return KeyAttribute(name=name, type=type_)


Days = Annotated[int, IntIn(1, 3650)]
MemoryMiB = Annotated[int, IntIn(128, 10240)]
# Lambda's limit: at most 900 s.
TimeoutSeconds = Annotated[int, IntIn(1, 900)]
TableUnits = Annotated[int | None, IntIn(1, MAX_TABLE_UNITS, nullable=True)]
Count = Annotated[int, IntIn(1, 10_000_000)]
Region = Annotated[str | None, Matches(_REGION.pattern, "an AWS region such as eu-west-2 or null")]
RetainData = Annotated[bool, Flag(), Field(alias="retain_data")]


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


class Section(BaseModel):
    """A frozen group of settings; a field's alias is its name in cdk.json."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_alias=True, validate_by_name=False)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name}")


class DataConfig(Section):
    """What the Data stack needs: the target table's shape, lifecycles, retention."""

    table_partition_key: Annotated[KeyAttribute, KeyCheck(), Field(alias="partition_key")] = KeyAttribute(
        "pk", "S"
    )
    table_sort_key: Annotated[KeyAttribute | None, KeyCheck(nullable=True), Field(alias="sort_key")] = (
        KeyAttribute("sk", "S")
    )
    # Name or ARN of a table the loader writes to instead of creating one.
    table_existing: Annotated[
        str | None,
        Matches(
            rf"{_TABLE_ARN.pattern[1:-1]}|{_TABLE_NAME}",
            "a DynamoDB table name or table ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)",
        ),
        Field(alias="existing_table"),
    ] = None
    staging_expiry_days: Days = 14
    source_noncurrent_expiry_days: Days = 7
    multipart_abort_days: Annotated[int, IntIn(1, 365)] = 1
    access_log_expiry_days: Days = 90
    retain_data: RetainData = False
    # The target table's capacity (a created table only; an existing table keeps its own):
    # "on_demand" (optionally pre-warmed) or "provisioned" with fixed read/write units.
    table_billing_mode: Annotated[str, OneOf(TABLE_BILLING_MODES)] = "on_demand"
    table_warm_write_units: Annotated[
        int | None, IntIn(MIN_WARM_WRITE_UNITS, MAX_TABLE_UNITS, nullable=True)
    ] = None
    table_write_capacity: TableUnits = None
    table_read_capacity: TableUnits = None
    # Customer managed KMS key for the buckets (not the access-log bucket), the created tables
    # and the environment's log groups: None (S3-managed and AWS managed keys), DATA_KEY_CREATE
    # (the Data stack creates one) or the ARN of an existing key.
    data_key: Annotated[
        str | None,
        Matches(
            f"{DATA_KEY_CREATE}|{_KMS_KEY_ARN}",
            f'null, "{DATA_KEY_CREATE}" (the Data stack creates a key) or a KMS key ARN '
            "(arn:aws:kms:REGION:ACCOUNT:key/ID)",
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

    @property
    def data_key_arn(self) -> str | None:
        """The configured existing key's ARN (None when the key is created, or there is none)."""
        return None if self.data_key in (None, DATA_KEY_CREATE) else self.data_key

    @property
    def table_key(self) -> dict[str, str]:
        """Key schema as the runtime reads it: partition key first."""
        key = {self.table_partition_key.name: self.table_partition_key.type}
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


class LoaderConfig(Section):
    """What the Loader stack needs: function sizing, concurrency, retries, log retention."""

    source_extra_buckets: Annotated[
        tuple[str, ...],
        NameList(_BUCKET_NAME.pattern, "bucket names", "an S3 bucket name", unique="bucket"),
        Field(alias="extra_source_buckets"),
    ] = ()
    source_kms_keys: Annotated[
        tuple[str, ...],
        NameList(_KMS_KEY_ARN, "KMS key ARNs", "a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"),
    ] = ()
    max_concurrency_cap: Annotated[int, IntIn(1, MAX_MAP_CONCURRENCY)] = 100
    worker_memory_mib: MemoryMiB = 1024
    worker_timeout_seconds: TimeoutSeconds = 900
    control_memory_mib: MemoryMiB = 512
    control_timeout_seconds: TimeoutSeconds = 300
    write_concurrency: Annotated[int, IntIn(1, 256)] = 8
    # The Worker's (and Prepare's) /tmp: Lambda allows 512 to 10,240 MB.
    worker_ephemeral_storage_mib: Annotated[int, IntIn(512, 10240)] = 2048
    # Finalize reads every shard's ledger item (up to 100,000) and merges every reject.
    finalize_memory_mib: MemoryMiB = 1024
    finalize_timeout_seconds: TimeoutSeconds = 900
    # Step Functions rejects an IntervalSeconds below 1 (and so does moto's interpreter).
    retry_interval_seconds: Annotated[int, IntIn(1, 3600)] = 2
    retry_max_attempts: Annotated[int, IntIn(0, 20)] = 6
    retry_backoff_rate: Annotated[float, NumberIn(1.0, 10.0)] = 2.0
    ledger_ttl_days: Days = 30
    log_retention_days: Annotated[int, IntIn(1, 3653, allowed=LOG_RETENTION_DAYS)] = 30
    retain_logs: RetainData = False
    lambda_architecture: Annotated[str, OneOf(LAMBDA_ARCHITECTURES)] = "arm64"
    # Child executions of the Distributed Map: STANDARD, or EXPRESS (cheaper; 5-minute limit).
    map_execution_type: Annotated[str, OneOf(MAP_EXECUTION_TYPES)] = "STANDARD"
    # Concurrent Lambda executions the account allows (its quota); bounds the Worker's reservation.
    lambda_concurrency_limit: Count = 1000
    # Executions reserved for (and the most allowed to) the Worker; bounds max_concurrency_cap.
    worker_reserved_concurrency: Count = 100

    @model_validator(mode="after")
    def _concurrency_and_express(self) -> Self:
        reservable = self.lambda_concurrency_limit - LAMBDA_UNRESERVED_MINIMUM
        if self.worker_reserved_concurrency > reservable:
            raise rule_error(
                "worker_reserved_concurrency",
                f"{self.worker_reserved_concurrency} must leave Lambda's {LAMBDA_UNRESERVED_MINIMUM} "
                "unreserved executions of lambda_concurrency_limit (the account's quota) "
                f"{self.lambda_concurrency_limit}: at most {reservable}; lower it, or raise the quota "
                "and lambda_concurrency_limit",
            )
        if self.max_concurrency_cap > self.worker_reserved_concurrency:
            raise rule_error(
                "max_concurrency_cap",
                f"{self.max_concurrency_cap} shards in flight need as many Worker executions, but "
                f"worker_reserved_concurrency is {self.worker_reserved_concurrency}: lower "
                "max_concurrency_cap or raise worker_reserved_concurrency",
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


class MonitoringConfig(Section):
    """What the dashboard and alarms need: where alarms go and when they fire."""

    # Address subscribed to the alarm topic (None: alarms go to the topic only).
    alarm_email: Annotated[str | None, Matches(r"[^@\s]+@[^@\s]+\.[^@\s]+", "an e-mail address or null")] = (
        None
    )
    # Rejected records as a percentage of records read, per 5 minutes, above which to alarm.
    alarm_rejected_percent: Annotated[float, NumberIn(0.0, 100.0)] = 1.0
    # Throttled DynamoDB writes per 5 minutes that, three periods in a row, count as sustained.
    alarm_throttle_events: Count = 1000


class GraphConfig(Section):
    """What the Graph stack needs: the Neptune cluster's size, engine, backups and protection."""

    # "db.serverless" sizes by Neptune capacity units (min/max); any other class is provisioned.
    instance_class: Annotated[
        str,
        Matches(
            r"db\.(serverless|[a-z0-9]+\.[a-z0-9]+)",
            '"db.serverless" or a Neptune instance class like db.r6g.large',
            nullable=False,
        ),
        Field(alias="graph_instance_class"),
    ] = "db.serverless"
    instances: Annotated[int, IntIn(1, 16), Field(alias="graph_instances")] = 1
    serverless_min_capacity: Annotated[
        float, NumberIn(1.0, 128.0), Field(alias="graph_serverless_min_capacity")
    ] = 1.0
    serverless_max_capacity: Annotated[
        float, NumberIn(2.5, 128.0), Field(alias="graph_serverless_max_capacity")
    ] = 8.0
    engine_version: Annotated[
        str, EngineVersion(MIN_GRAPH_ENGINE_VERSION), Field(alias="graph_engine_version")
    ] = "1.4.5.1"
    # Neptune keeps automated backups 1 to 35 days.
    backup_retention_days: Annotated[int, IntIn(1, 35), Field(alias="graph_backup_retention_days")] = 7
    # Deletion protection on the cluster, snapshot on stack deletion (prod).
    retain: RetainData = False

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


_SECTIONS: Final[dict[str, type[Section]]] = {
    "data": DataConfig,
    "loader": LoaderConfig,
    "monitoring": MonitoringConfig,
    "graph": GraphConfig,
}


class EnvironmentConfig(Section):
    """One deployment environment (dev, staging, prod), validated from its flat cdk.json block."""

    name: str
    account: Annotated[str | None, Matches(_ACCOUNT.pattern, "a 12-digit AWS account id or null")] = None
    region: Region = None
    # false: the environment has no Graph stack (graph is None) and refuses graph inputs.
    graph_enabled: Annotated[bool, Flag()] = True
    data: DataConfig
    loader: LoaderConfig
    monitoring: MonitoringConfig = MonitoringConfig()
    graph: GraphConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _sections(cls, raw: Any) -> Any:
        """Hand each section the settings its fields name (retain_data goes to several)."""
        flat = dict(raw)
        sections: dict[str, Any] = {section: _pick(model, flat) for section, model in _SECTIONS.items()}
        if str(flat.get("graph_enabled")).lower() == "false":
            sections["graph"] = None
        own = {name: flat[name] for name in ("name", "account", "region", "graph_enabled") if name in flat}
        return {**own, **sections}

    @model_validator(mode="after")
    def _key_in_region(self) -> Self:
        # S3, DynamoDB and CloudWatch Logs only use a key in their own region.
        key = self.data.data_key_arn
        if key is not None and self.region is not None and key.split(":")[3] != self.region:
            raise rule_error(
                "data_key", f"must be a key in the environment's region {self.region}, got {key!r}"
            )
        return self


def _pick(model: type[Section], flat: Mapping[str, Any]) -> dict[str, Any]:
    aliases = {str(field.alias or name) for name, field in model.model_fields.items()}
    return {alias: flat[alias] for alias in aliases if alias in flat}


def setting_defaults() -> dict[str, Any]:
    """Every field an environment's cdk.json block may set, with its default (before ENVIRONMENT_DEFAULTS)."""
    defaults: dict[str, Any] = {}
    models: tuple[type[Section], ...] = (EnvironmentConfig, *_SECTIONS.values())
    for model in models:
        for name, field in model.model_fields.items():
            if name not in {"name", *_SECTIONS}:
                defaults[str(field.alias or name)] = field.default
    return defaults


SETTING_NAMES: Final[frozenset[str]] = frozenset(setting_defaults())

# Per-environment defaults (the models hold the common ones); cdk.json only states what differs.
# Prod keeps data and allows the large fan-out the design is for; dev and staging are smaller.
ENVIRONMENT_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "dev": {},
    # 800 Workers of a 1,000 quota: Lambda keeps 100 unreserved, the rest serves other functions.
    "staging": {"max_concurrency_cap": 800, "worker_reserved_concurrency": 800},
    "prod": {
        "max_concurrency_cap": 800,
        "worker_reserved_concurrency": 800,
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
        raise _named(error.errors()[0], env, frozenset(overrides)) from None


def _named(error: Mapping[str, Any], env: str, overridden: frozenset[str]) -> MaploadConfigError:
    """The first refusal as `mapload.environments.<env>.<setting>[ (context ...)]: message`."""
    context = error.get("ctx") or {}
    # A section's field is named by its alias (the setting); the section's own name is dropped.
    loc = [str(part) for part in error["loc"] if part not in _SECTIONS]
    field = str(context.get("field") or ".".join(loc)) + str(context.get("at", ""))
    where = f"mapload.environments.{env}.{field}"
    setting = re.split(r"[.\[]", field, maxsplit=1)[0]
    if setting in overridden:
        where += f" (context {OVERRIDE_PREFIX}{setting})"
    return MaploadConfigError(where, str(context.get("message", error["msg"])))


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
        if key.startswith(OVERRIDE_PREFIX) and value is not None
    }
