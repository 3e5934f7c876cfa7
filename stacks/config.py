"""Typed, validated per-environment settings parsed from the cdk.json context `mapload` block."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

# Days CloudWatch Logs accepts as a retention period (anything else is rejected at deploy).
LOG_RETENTION_DAYS: Final[frozenset[int]] = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192}
    | {2557, 2922, 3288, 3653}
)
KEY_TYPES: Final[frozenset[str]] = frozenset({"S", "N", "B"})
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
# Context keys of the form `mapload:<field>` override one field of the selected environment
# (`cdk synth -c mapload:max_concurrency_cap=10`); CLI values arrive as strings.
OVERRIDE_PREFIX: Final[str] = "mapload:"

_ENV_NAME = re.compile(r"^[a-z][a-z0-9]{0,15}$")
_ACCOUNT = re.compile(r"^\d{12}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_TABLE_ARN = re.compile(r"^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/(?P<name>[A-Za-z0-9_.-]{3,255})$")
_NEPTUNE_CLASS = re.compile(r"^db\.(serverless|[a-z0-9]+\.[a-z0-9]+)$")
_ENGINE_VERSION = re.compile(r"^1\.\d+\.\d+\.\d+$")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

T = TypeVar("T")


class MaploadConfigError(ValueError):
    """A cdk.json `mapload` setting is missing or wrong; the message names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class KeyAttribute:
    """One DynamoDB key attribute (name and scalar type S, N or B)."""

    name: str
    type: str


@dataclass(frozen=True)
class DataConfig:
    """What the Data stack needs: the target table's shape, lifecycles, retention."""

    table_partition_key: KeyAttribute
    table_sort_key: KeyAttribute | None
    # Name or ARN of a table the loader writes to instead of creating one.
    table_existing: str | None
    staging_expiry_days: int
    source_noncurrent_expiry_days: int
    multipart_abort_days: int
    access_log_expiry_days: int
    retain_data: bool
    # The target table's capacity (a created table only; an existing table keeps its own):
    # "on_demand" (optionally pre-warmed) or "provisioned" with fixed read/write units.
    table_billing_mode: str = "on_demand"
    table_warm_write_units: int | None = None
    table_write_capacity: int | None = None
    table_read_capacity: int | None = None
    # Customer managed KMS key for the buckets (not the access-log bucket), the created tables
    # and the environment's log groups: None (S3-managed and AWS managed keys), DATA_KEY_CREATE
    # (the Data stack creates one) or the ARN of an existing key.
    data_key: str | None = None

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


@dataclass(frozen=True)
class LoaderConfig:
    """What the Loader stack needs: function sizing, concurrency, retries, log retention."""

    source_extra_buckets: tuple[str, ...]
    source_kms_keys: tuple[str, ...]
    max_concurrency_cap: int
    worker_memory_mib: int
    worker_timeout_seconds: int
    control_memory_mib: int
    control_timeout_seconds: int
    write_concurrency: int
    # The Worker's (and Prepare's) /tmp, where a shard's rejects and graph file spool past 8 MiB.
    worker_ephemeral_storage_mib: int
    # Finalize reads every shard's ledger item (up to 100,000) and merges every reject.
    finalize_memory_mib: int
    finalize_timeout_seconds: int
    retry_interval_seconds: int
    retry_max_attempts: int
    retry_backoff_rate: float
    ledger_ttl_days: int
    log_retention_days: int
    retain_logs: bool
    lambda_architecture: str = "arm64"
    # Child executions of the Distributed Map: STANDARD, or EXPRESS (cheaper; 5-minute limit).
    map_execution_type: str = "STANDARD"
    # Concurrent Lambda executions the account allows (its quota); bounds the Worker's reservation.
    lambda_concurrency_limit: int = 1000
    # Executions reserved for (and the most allowed to) the Worker; bounds max_concurrency_cap.
    worker_reserved_concurrency: int = 100


@dataclass(frozen=True)
class MonitoringConfig:
    """What the dashboard and alarms need: where alarms go and when they fire."""

    # Address subscribed to the alarm topic (None: alarms go to the topic only).
    alarm_email: str | None = None
    # Rejected records as a percentage of records read, per 5 minutes, above which to alarm.
    alarm_rejected_percent: float = 1.0
    # Throttled DynamoDB writes per 5 minutes that, three periods in a row, count as sustained.
    alarm_throttle_events: int = 1000


@dataclass(frozen=True)
class GraphConfig:
    """What the Graph stack needs: the Neptune cluster's size, engine, backups and protection."""

    # "db.serverless" sizes by Neptune capacity units (min/max); any other class is provisioned.
    instance_class: str
    instances: int
    serverless_min_capacity: float
    serverless_max_capacity: float
    engine_version: str
    backup_retention_days: int
    # Deletion protection on the cluster, snapshot on stack deletion (prod).
    retain: bool

    @property
    def serverless(self) -> bool:
        return self.instance_class == "db.serverless"

    @property
    def parameter_group_family(self) -> str:
        major_minor = ".".join(self.engine_version.split(".")[:2])
        return f"neptune{major_minor}"


@dataclass(frozen=True)
class EnvironmentConfig:
    """One deployment environment (dev, staging, prod)."""

    name: str
    account: str | None
    region: str | None
    data: DataConfig
    loader: LoaderConfig
    monitoring: MonitoringConfig = MonitoringConfig()
    # None: the environment has no Graph stack (graph_enabled false) and refuses graph inputs.
    graph: GraphConfig | None = None


# Per-environment defaults; cdk.json only states what differs. Prod keeps data and allows
# the large fan-out the design is for; dev and staging are disposable and smaller.
_COMMON_DEFAULTS: Final[Mapping[str, Any]] = {
    "account": None,
    "region": None,
    "partition_key": {"name": "pk", "type": "S"},
    "sort_key": {"name": "sk", "type": "S"},
    "existing_table": None,
    "extra_source_buckets": [],
    "source_kms_keys": [],
    "max_concurrency_cap": 100,
    "worker_memory_mib": 1024,
    "worker_timeout_seconds": 900,
    "control_memory_mib": 512,
    "control_timeout_seconds": 300,
    "worker_ephemeral_storage_mib": 2048,
    "finalize_memory_mib": 1024,
    "finalize_timeout_seconds": 900,
    "write_concurrency": 8,
    "table_billing_mode": "on_demand",
    "table_warm_write_units": None,
    "table_write_capacity": None,
    "table_read_capacity": None,
    "lambda_architecture": "arm64",
    "map_execution_type": "STANDARD",
    "lambda_concurrency_limit": 1000,
    "worker_reserved_concurrency": 100,
    "retry_interval_seconds": 2,
    "retry_max_attempts": 6,
    "retry_backoff_rate": 2.0,
    "ledger_ttl_days": 30,
    "staging_expiry_days": 14,
    "source_noncurrent_expiry_days": 7,
    "multipart_abort_days": 1,
    "access_log_expiry_days": 90,
    "log_retention_days": 30,
    "retain_data": False,
    "data_key": None,
    "alarm_email": None,
    "alarm_rejected_percent": 1.0,
    "alarm_throttle_events": 1000,
    "graph_enabled": True,
    "graph_instance_class": "db.serverless",
    "graph_instances": 1,
    "graph_serverless_min_capacity": 1.0,
    "graph_serverless_max_capacity": 8.0,
    "graph_engine_version": "1.4.5.1",
    "graph_backup_retention_days": 7,
}
_ENV_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
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


class _Reader:
    """Reads one environment's raw mapping, naming `mapload.environments.<env>.<field>` on error."""

    def __init__(self, env: str, raw: Mapping[str, Any], overridden: frozenset[str]) -> None:
        self.env = env
        self.raw = raw
        self.overridden = overridden

    def path(self, field: str) -> str:
        where = f"mapload.environments.{self.env}.{field}"
        if field.split(".")[0] in self.overridden:
            return f"{where} (context {OVERRIDE_PREFIX}{field.split('.')[0]})"
        return where

    def fail(self, field: str, message: str) -> MaploadConfigError:
        return MaploadConfigError(self.path(field), message)

    def int_(self, field: str, low: int, high: int) -> int:
        value = _coerce_int(self.raw[field])
        if value is None or not low <= value <= high:
            hint = "a positive integer" if low == 1 else "an integer"
            raise self.fail(field, f"must be {hint} between {low} and {high}, got {self.raw[field]!r}")
        return value

    def float_(self, field: str, low: float, high: float) -> float:
        value = self.raw[field]
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = float(value)
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise self.fail(field, f"must be a number between {low} and {high}, got {self.raw[field]!r}")
        return float(value)

    def bool_(self, field: str) -> bool:
        value = self.raw[field]
        if isinstance(value, str) and value.lower() in {"true", "false"}:
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise self.fail(field, f"must be true or false, got {value!r}")
        return value

    def optional(self, field: str, pattern: re.Pattern[str], what: str) -> str | None:
        value = self.raw[field]
        if value is None or value == "":
            return None
        if not isinstance(value, str) or not pattern.match(value):
            raise self.fail(field, f"must be {what} or null, got {value!r}")
        return value

    def key(self, field: str, *, nullable: bool) -> KeyAttribute | None:
        value = self.raw[field]
        if isinstance(value, str):
            value = _parse_json_or(value, value)
        if value is None and nullable:
            return None
        if not isinstance(value, Mapping) or set(value) != {"name", "type"}:
            raise self.fail(field, f'must be {{"name": ..., "type": "S"|"N"|"B"}}, got {value!r}')
        name, type_ = value["name"], value["type"]
        if not isinstance(name, str) or not 1 <= len(name) <= 255:
            raise self.fail(f"{field}.name", f"must be 1 to 255 characters, got {name!r}")
        if type_ not in KEY_TYPES:
            raise self.fail(f"{field}.type", f"must be one of S, N, B, got {type_!r}")
        return KeyAttribute(name=name, type=type_)

    def kms_key_arns(self, field: str) -> tuple[str, ...]:
        value = self.raw[field]
        if isinstance(value, str):
            value = _parse_json_or(value, [part.strip() for part in value.split(",") if part.strip()])
        if not isinstance(value, list | tuple):
            raise self.fail(field, f"must be a list of KMS key ARNs, got {value!r}")
        for index, arn in enumerate(value):
            if not isinstance(arn, str) or not _KMS_KEY_ARN.fullmatch(arn):
                raise self.fail(
                    f"{field}[{index}]",
                    f"must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID), got {arn!r}",
                )
        return tuple(value)

    def bucket_names(self, field: str) -> tuple[str, ...]:
        value = self.raw[field]
        if isinstance(value, str):
            value = _parse_json_or(value, [part.strip() for part in value.split(",") if part.strip()])
        if not isinstance(value, list | tuple):
            raise self.fail(field, f"must be a list of bucket names, got {value!r}")
        for index, name in enumerate(value):
            if not isinstance(name, str) or not _BUCKET_NAME.match(name) or ".." in name:
                raise self.fail(f"{field}[{index}]", f"must be an S3 bucket name, got {name!r}")
        if len(set(value)) != len(value):
            raise self.fail(field, "must not name a bucket twice")
        return tuple(value)


_KMS_KEY_ARN = re.compile(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+")


def _coerce_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _parse_json_or(text: str, fallback: T) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return fallback


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


def load_environment(
    context_block: Any,
    env: str,
    overrides: Mapping[str, Any] | None = None,
) -> EnvironmentConfig:
    """Parse and validate one environment from the `mapload` block.

    `overrides` maps field names to single values (from `-c mapload:<field>=...`); they win over
    the cdk.json block, which wins over the built-in defaults for that environment name.
    """
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
        block = {}
    if not isinstance(block, Mapping):
        raise MaploadConfigError(f"mapload.environments.{env}", "must be an object")
    overrides = dict(overrides or {})
    for field in [*block, *overrides]:
        if field not in _COMMON_DEFAULTS:
            where = (
                f"{OVERRIDE_PREFIX}{field}" if field in overrides else f"mapload.environments.{env}.{field}"
            )
            raise MaploadConfigError(where, f"unknown setting; known: {', '.join(sorted(_COMMON_DEFAULTS))}")
    raw = {**_COMMON_DEFAULTS, **_ENV_DEFAULTS.get(env, {}), **block, **overrides}
    read = _Reader(env, raw, frozenset(overrides))

    worker_timeout = read.int_("worker_timeout_seconds", 1, 900)
    data = DataConfig(
        table_partition_key=_required(read.key("partition_key", nullable=False)),
        table_sort_key=read.key("sort_key", nullable=True),
        table_existing=_existing_table(read),
        staging_expiry_days=read.int_("staging_expiry_days", 1, 3650),
        source_noncurrent_expiry_days=read.int_("source_noncurrent_expiry_days", 1, 3650),
        multipart_abort_days=read.int_("multipart_abort_days", 1, 365),
        access_log_expiry_days=read.int_("access_log_expiry_days", 1, 3650),
        retain_data=read.bool_("retain_data"),
        **_table_capacity(read),
        data_key=_data_key(read),
    )
    if data.table_sort_key and data.table_sort_key.name == data.table_partition_key.name:
        raise read.fail("sort_key.name", "must differ from partition_key.name")
    log_retention = read.int_("log_retention_days", 1, 3653)
    if log_retention not in LOG_RETENTION_DAYS:
        allowed = ", ".join(str(day) for day in sorted(LOG_RETENTION_DAYS))
        raise read.fail("log_retention_days", f"must be one of {allowed}, got {log_retention}")
    loader = LoaderConfig(
        source_extra_buckets=read.bucket_names("extra_source_buckets"),
        source_kms_keys=read.kms_key_arns("source_kms_keys"),
        max_concurrency_cap=read.int_("max_concurrency_cap", 1, MAX_MAP_CONCURRENCY),
        worker_memory_mib=read.int_("worker_memory_mib", 128, 10240),
        worker_timeout_seconds=worker_timeout,
        control_memory_mib=read.int_("control_memory_mib", 128, 10240),
        control_timeout_seconds=read.int_("control_timeout_seconds", 1, 900),
        # Lambda's limits: /tmp 512 MB to 10,240 MB; memory 128 to 10,240 MB; at most 900 s.
        worker_ephemeral_storage_mib=read.int_("worker_ephemeral_storage_mib", 512, 10240),
        finalize_memory_mib=read.int_("finalize_memory_mib", 128, 10240),
        finalize_timeout_seconds=read.int_("finalize_timeout_seconds", 1, 900),
        write_concurrency=read.int_("write_concurrency", 1, 256),
        # Step Functions rejects an IntervalSeconds below 1 (and so does moto's interpreter).
        retry_interval_seconds=read.int_("retry_interval_seconds", 1, 3600),
        retry_max_attempts=read.int_("retry_max_attempts", 0, 20),
        retry_backoff_rate=read.float_("retry_backoff_rate", 1.0, 10.0),
        ledger_ttl_days=read.int_("ledger_ttl_days", 1, 3650),
        log_retention_days=log_retention,
        retain_logs=data.retain_data,
        lambda_architecture=_choice(read, "lambda_architecture", LAMBDA_ARCHITECTURES),
        map_execution_type=_choice(read, "map_execution_type", MAP_EXECUTION_TYPES),
        lambda_concurrency_limit=read.int_("lambda_concurrency_limit", 1, 10_000_000),
        worker_reserved_concurrency=read.int_("worker_reserved_concurrency", 1, 10_000_000),
    )
    _check_concurrency_and_express(read, loader)
    return EnvironmentConfig(
        name=env,
        account=read.optional("account", _ACCOUNT, "a 12-digit AWS account id"),
        region=read.optional("region", _REGION, "an AWS region such as eu-west-2"),
        data=data,
        loader=loader,
        graph=_graph(read, retain=data.retain_data),
        monitoring=MonitoringConfig(
            alarm_email=read.optional("alarm_email", _EMAIL, "an e-mail address"),
            alarm_rejected_percent=read.float_("alarm_rejected_percent", 0.0, 100.0),
            alarm_throttle_events=read.int_("alarm_throttle_events", 1, 10_000_000),
        ),
    )


def _graph(read: _Reader, *, retain: bool) -> GraphConfig | None:
    if not read.bool_("graph_enabled"):
        return None
    instance_class = read.raw["graph_instance_class"]
    if not isinstance(instance_class, str) or not _NEPTUNE_CLASS.match(instance_class):
        raise read.fail(
            "graph_instance_class",
            f'must be "db.serverless" or a Neptune instance class like db.r6g.large, got {instance_class!r}',
        )
    engine = read.raw["graph_engine_version"]
    if not isinstance(engine, str) or not _ENGINE_VERSION.match(engine):
        raise read.fail(
            "graph_engine_version", f"must be a Neptune engine version like 1.4.5.1, got {engine!r}"
        )
    low = read.float_("graph_serverless_min_capacity", 1.0, 128.0)
    high = read.float_("graph_serverless_max_capacity", 2.5, 128.0)
    if low > high:
        raise read.fail(
            "graph_serverless_min_capacity", f"must not exceed graph_serverless_max_capacity ({high:g})"
        )
    return GraphConfig(
        instance_class=instance_class,
        instances=read.int_("graph_instances", 1, 16),
        serverless_min_capacity=low,
        serverless_max_capacity=high,
        engine_version=engine,
        # Neptune keeps automated backups 1 to 35 days.
        backup_retention_days=read.int_("graph_backup_retention_days", 1, 35),
        retain=retain,
    )


def _existing_table(read: _Reader) -> str | None:
    value = read.raw["existing_table"]
    if value is None or value == "":
        return None
    if isinstance(value, str) and (_TABLE_ARN.match(value) or _TABLE_NAME.match(value)):
        return value
    raise read.fail(
        "existing_table",
        "must be a DynamoDB table name or table ARN "
        f"(arn:aws:dynamodb:REGION:ACCOUNT:table/NAME), got {value!r}",
    )


def _data_key(read: _Reader) -> str | None:
    value = read.raw["data_key"]
    if value is None or value == "":
        return None
    if value == DATA_KEY_CREATE:
        return DATA_KEY_CREATE
    if isinstance(value, str) and _KMS_KEY_ARN.fullmatch(value):
        # S3, DynamoDB and CloudWatch Logs only use a key in their own region.
        region = read.optional("region", _REGION, "an AWS region such as eu-west-2")
        key_region = value.split(":")[3]
        if region is not None and key_region != region:
            raise read.fail("data_key", f"must be a key in the environment's region {region}, got {value!r}")
        return value
    raise read.fail(
        "data_key",
        f'must be null, "{DATA_KEY_CREATE}" (the Data stack creates a key) or a KMS key ARN '
        f"(arn:aws:kms:REGION:ACCOUNT:key/ID), got {value!r}",
    )


def _choice(read: _Reader, field: str, options: tuple[str, ...]) -> str:
    value = read.raw[field]
    if value not in options:
        raise read.fail(field, f"must be one of {', '.join(options)}, got {value!r}")
    return str(value)


def _optional_int(read: _Reader, field: str, low: int, high: int) -> int | None:
    if read.raw[field] is None or read.raw[field] == "":
        return None
    return read.int_(field, low, high)


def _table_capacity(read: _Reader) -> dict[str, Any]:
    mode = _choice(read, "table_billing_mode", TABLE_BILLING_MODES)
    warm = _optional_int(read, "table_warm_write_units", MIN_WARM_WRITE_UNITS, MAX_TABLE_UNITS)
    write = _optional_int(read, "table_write_capacity", 1, MAX_TABLE_UNITS)
    read_units = _optional_int(read, "table_read_capacity", 1, MAX_TABLE_UNITS)
    if mode == "provisioned" and (write is None or read_units is None):
        missing = "table_write_capacity" if write is None else "table_read_capacity"
        raise read.fail(missing, "required when table_billing_mode is provisioned (units per second)")
    if mode == "on_demand":
        for field, value in (("table_write_capacity", write), ("table_read_capacity", read_units)):
            if value is not None:
                raise read.fail(
                    field,
                    "only for table_billing_mode provisioned; an on-demand table is pre-warmed "
                    "with table_warm_write_units instead",
                )
    return {
        "table_billing_mode": mode,
        "table_warm_write_units": warm,
        "table_write_capacity": write,
        "table_read_capacity": read_units,
    }


def _check_concurrency_and_express(read: _Reader, loader: LoaderConfig) -> None:
    reservable = loader.lambda_concurrency_limit - LAMBDA_UNRESERVED_MINIMUM
    if loader.worker_reserved_concurrency > reservable:
        raise read.fail(
            "worker_reserved_concurrency",
            f"{loader.worker_reserved_concurrency} must leave Lambda's {LAMBDA_UNRESERVED_MINIMUM} "
            "unreserved executions of lambda_concurrency_limit (the account's quota) "
            f"{loader.lambda_concurrency_limit}: at most {reservable}; lower it, or raise the quota "
            "and lambda_concurrency_limit",
        )
    if loader.max_concurrency_cap > loader.worker_reserved_concurrency:
        raise read.fail(
            "max_concurrency_cap",
            f"{loader.max_concurrency_cap} shards in flight need as many Worker executions, but "
            f"worker_reserved_concurrency is {loader.worker_reserved_concurrency}: lower max_concurrency_cap "
            "or raise worker_reserved_concurrency",
        )
    limit = EXPRESS_MAX_SECONDS - WORKER_TASK_MARGIN_SECONDS
    if loader.map_execution_type == "EXPRESS" and loader.worker_timeout_seconds > limit:
        raise read.fail(
            "map_execution_type",
            f"EXPRESS child executions end after {EXPRESS_MAX_SECONDS} s, but a Worker may run "
            f"worker_timeout_seconds={loader.worker_timeout_seconds} (+{WORKER_TASK_MARGIN_SECONDS} s); "
            f"set worker_timeout_seconds to at most {limit} (and shardSizeMiB small enough) or use STANDARD",
        )


def _required(value: KeyAttribute | None) -> KeyAttribute:
    # key(..., nullable=False) never returns None; this narrows the type for mypy.
    assert value is not None
    return value


def overrides_from_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """Collect the `mapload:<field>` keys of a full context mapping as field overrides.

    Unknown fields are kept so that `load_environment` rejects the typo instead of ignoring it;
    a bare field name (`retry_interval_seconds` without the prefix) is refused for the same reason.
    """
    for key in context:
        if key in _COMMON_DEFAULTS:
            raise MaploadConfigError(key, f"a setting is overridden as {OVERRIDE_PREFIX}{key}, not {key}")
    return {
        key[len(OVERRIDE_PREFIX) :]: value
        for key, value in context.items()
        if key.startswith(OVERRIDE_PREFIX) and value is not None
    }
