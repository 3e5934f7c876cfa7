"""Each function's settings: one pydantic model per handler, parsed once from its environment.

A field's environment variable is its name in upper case (`staging_bucket` ← `STAGING_BUCKET`),
so each variable is named once; `ENV_NAMES` (what the contract test compares with the template)
is derived from the fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from adapters.executions import LAMBDA_MAX_TIMEOUT_SECONDS
from logic.bulk_put import DEFAULT_TIMEOUT_MINUTES as DEFAULT_BULK_PUT_TIMEOUT_MINUTES

# Read by Powertools (Logger/Metrics) in lambda_handler, not by the settings classes; every
# function's template sets exactly these besides its SETTINGS_CLASS.ENV_NAMES (contract test).
POWERTOOLS_ENV_NAMES: tuple[str, ...] = ("POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE")


class SettingsError(Exception):
    """A function's environment is not what its stack promised (a deployment bug)."""


def _bucket_list(value: Any) -> Any:
    if isinstance(value, str):
        return frozenset(name.strip() for name in value.split(",") if name.strip())
    return value


def _json_object(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"not JSON: {error}") from None
    return value


Name = Annotated[str, Field(min_length=1)]
Positive = Annotated[int, Field(gt=0)]
Port = Annotated[int, Field(gt=0, le=65535)]
# Comma-separated bucket names a source may name.
Buckets = Annotated[frozenset[str], BeforeValidator(_bucket_list), Field(min_length=1)]
# Comma-separated table names, or prefixes ending in `*`, a job may name (logic/tables.py).
Tables = Annotated[frozenset[str], BeforeValidator(_bucket_list)]
# JSON object, partition key first: {"pk": "S", "sk": "S"}.
TableKey = Annotated[dict[str, str], BeforeValidator(_json_object), Field(min_length=1)]


class FunctionSettings(BaseModel):
    """Base of every handler's settings: frozen, built from the variables its fields name."""

    # defer_build: a cold start builds only the one model its handler validates (~10 ms each).
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=str.upper,
        validate_by_name=True,
        validate_by_alias=True,
        defer_build=True,
    )
    ENV_NAMES: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.ENV_NAMES = tuple(str(field.alias) for field in cls.model_fields.values())

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Self:
        """Read this function's variables (an empty one counts as not set); one-line error."""
        present = {name: env[name] for name in cls.ENV_NAMES if env.get(name)}
        try:
            return cls.model_validate(present)
        except ValidationError as error:
            raise SettingsError("; ".join(_describe(item) for item in error.errors())) from None


def _describe(item: Mapping[str, Any]) -> str:
    name = ".".join(str(part) for part in item["loc"])
    if item["type"] == "missing":
        return f"environment variable {name} is not set"
    message = str(item["msg"]).removeprefix("Value error, ")
    return f"environment variable {name}: {message}, got {item['input']!r}"


class _Staging(FunctionSettings):
    staging_bucket: Name


class _Ledger(_Staging):
    ledger_table: Name
    ledger_ttl_days: Positive


class PrepareSettings(_Staging):
    source_buckets: Buckets
    table_key: TableKey


class PlanSettings(_Ledger):
    source_buckets: Buckets
    table_name: Name
    table_key: TableKey
    # The tables a job may name besides TABLE_NAME (the `tables` setting; empty: that one alone).
    tables: Tables = frozenset()
    max_concurrency_cap: Positive
    # false: the environment has no Neptune cluster, so a graph input is refused at once.
    graph_enabled: bool = True
    # The Worker function's memory: a property graph shard larger than it holds is refused.
    worker_memory_mib: Positive
    # The Worker function's timeout: a jobId is taken over only when the run holding it stopped
    # longer ago than this (+60 s), since its Workers run on until then.
    worker_timeout_seconds: Positive
    # Plan's own timeout and memory (control_timeout_seconds, control_memory_mib): it refuses a
    # source with more objects to read than fit in half of that time (plans/reads.py).
    plan_timeout_seconds: Positive
    plan_memory_mib: Positive
    # The Shards Map's child executions (map_execution_type): an EXPRESS child ends after 5
    # minutes, so Plan refuses a job whose shard would take longer (logic/shardtime.py).
    map_execution_type: Literal["STANDARD", "EXPRESS"] = "STANDARD"


class WorkerSettings(_Ledger):
    source_buckets: Buckets
    table_name: Name
    # Requests in flight for a 20 ms round trip, and the most however long it is (unset: the same).
    write_concurrency: Positive
    max_write_concurrency: Positive | None = None

    @property
    def write_ceiling(self) -> int:
        """The most write requests in flight (the sending threads, and the HTTP pool's size - 2)."""
        return max(self.write_concurrency, self.max_write_concurrency or self.write_concurrency)


class FinalizeSettings(_Ledger):
    table_name: Name
    # The report names the table by ARN too: its region and account say where the items went.
    table_arn: Name
    # The Worker function's timeout: after a failed Map Run, the job's Workers may still write
    # until this (+60 s) after Finalize, which records when (Plan refuses a re-run before then).
    worker_timeout_seconds: Positive = LAMBDA_MAX_TIMEOUT_SECONDS


class PollGraphLoadSettings(_Ledger):
    # Cluster endpoint host, or a base URL with scheme (the embedded run's http://127.0.0.1).
    neptune_endpoint: Name
    neptune_port: Port
    # SigV4 region and the load's `region`.
    neptune_region: Name


class StartGraphLoadSettings(PollGraphLoadSettings):
    loader_role_arn: Name


class StartBulkPutSettings(_Ledger):
    # The job's table when it names none (its `table` otherwise).
    table_name: Name
    # The data key (`data_key`): the staging bucket's objects are SSE-KMS with it, and so is the
    # operation's output; unset: SSE-S3.
    data_key_arn: str | None = None
    # The environment's bulk_put_timeout_minutes: PollBulkPut cancels an operation running longer.
    bulk_put_timeout_minutes: Positive = DEFAULT_BULK_PUT_TIMEOUT_MINUTES


class PollBulkPutSettings(FunctionSettings):
    """PollBulkPut reads nothing of its environment: the operation's ARN and deadline are in its input."""
