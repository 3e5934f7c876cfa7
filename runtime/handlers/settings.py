"""Each function's settings, parsed once from its environment variables."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

# Read by Powertools (Logger/Metrics) in lambda_handler, not by the settings classes; every
# function's template sets exactly these besides its SETTINGS_CLASS.ENV_NAMES (contract test).
POWERTOOLS_ENV_NAMES: tuple[str, ...] = ("POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE")


class SettingsError(Exception):
    """A function's environment is not what its stack promised (a deployment bug)."""


def _need(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if value is None or value == "":
        raise SettingsError(f"environment variable {name} is not set")
    return value


def _int(env: Mapping[str, str], name: str) -> int:
    raw = _need(env, name)
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"environment variable {name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise SettingsError(f"environment variable {name} must be positive, got {value}")
    return value


def _buckets(env: Mapping[str, str]) -> frozenset[str]:
    return frozenset(b.strip() for b in _need(env, "SOURCE_BUCKETS").split(",") if b.strip())


@dataclass(frozen=True)
class PlanSettings:
    ENV_NAMES: ClassVar[tuple[str, ...]] = (
        "SOURCE_BUCKETS",
        "STAGING_BUCKET",
        "LEDGER_TABLE",
        "TABLE_NAME",
        "TABLE_KEY",
        "MAX_CONCURRENCY_CAP",
        "LEDGER_TTL_DAYS",
        "GRAPH_ENABLED",
    )
    source_buckets: frozenset[str]
    staging_bucket: str
    ledger_table: str
    table_name: str
    table_key: dict[str, str]
    max_concurrency_cap: int
    ledger_ttl_days: int
    # false: the environment has no Neptune cluster, so a graph input is refused at once.
    graph_enabled: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PlanSettings:
        try:
            table_key = json.loads(_need(env, "TABLE_KEY"))
        except json.JSONDecodeError as error:
            raise SettingsError(f"environment variable TABLE_KEY is not JSON: {error}") from None
        return cls(
            source_buckets=_buckets(env),
            staging_bucket=_need(env, "STAGING_BUCKET"),
            ledger_table=_need(env, "LEDGER_TABLE"),
            table_name=_need(env, "TABLE_NAME"),
            table_key=dict(table_key),
            max_concurrency_cap=_int(env, "MAX_CONCURRENCY_CAP"),
            ledger_ttl_days=_int(env, "LEDGER_TTL_DAYS"),
            graph_enabled=env.get("GRAPH_ENABLED", "true").lower() == "true",
        )


@dataclass(frozen=True)
class PrepareSettings:
    ENV_NAMES: ClassVar[tuple[str, ...]] = ("SOURCE_BUCKETS", "STAGING_BUCKET", "TABLE_KEY")
    source_buckets: frozenset[str]
    staging_bucket: str
    table_key: dict[str, str]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PrepareSettings:
        try:
            table_key = json.loads(_need(env, "TABLE_KEY"))
        except json.JSONDecodeError as error:
            raise SettingsError(f"environment variable TABLE_KEY is not JSON: {error}") from None
        return cls(
            source_buckets=_buckets(env),
            staging_bucket=_need(env, "STAGING_BUCKET"),
            table_key=dict(table_key),
        )


@dataclass(frozen=True)
class WorkerSettings:
    ENV_NAMES: ClassVar[tuple[str, ...]] = (
        "SOURCE_BUCKETS",
        "STAGING_BUCKET",
        "LEDGER_TABLE",
        "TABLE_NAME",
        "LEDGER_TTL_DAYS",
        "WRITE_CONCURRENCY",
    )
    source_buckets: frozenset[str]
    staging_bucket: str
    ledger_table: str
    table_name: str
    ledger_ttl_days: int
    write_concurrency: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        return cls(
            source_buckets=_buckets(env),
            staging_bucket=_need(env, "STAGING_BUCKET"),
            ledger_table=_need(env, "LEDGER_TABLE"),
            table_name=_need(env, "TABLE_NAME"),
            ledger_ttl_days=_int(env, "LEDGER_TTL_DAYS"),
            write_concurrency=_int(env, "WRITE_CONCURRENCY"),
        )


@dataclass(frozen=True)
class FinalizeSettings:
    ENV_NAMES: ClassVar[tuple[str, ...]] = (
        "STAGING_BUCKET",
        "LEDGER_TABLE",
        "TABLE_NAME",
        "TABLE_ARN",
        "LEDGER_TTL_DAYS",
    )
    staging_bucket: str
    ledger_table: str
    table_name: str
    # The report names the table by ARN too: its region and account say where the items went.
    table_arn: str
    ledger_ttl_days: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> FinalizeSettings:
        return cls(
            staging_bucket=_need(env, "STAGING_BUCKET"),
            ledger_table=_need(env, "LEDGER_TABLE"),
            table_name=_need(env, "TABLE_NAME"),
            table_arn=_need(env, "TABLE_ARN"),
            ledger_ttl_days=_int(env, "LEDGER_TTL_DAYS"),
        )


def _port(env: Mapping[str, str], name: str) -> int:
    value = _int(env, name)
    if value > 65535:
        raise SettingsError(f"environment variable {name} must be a TCP port, got {value}")
    return value


@dataclass(frozen=True)
class StartGraphLoadSettings:
    ENV_NAMES: ClassVar[tuple[str, ...]] = (
        "NEPTUNE_ENDPOINT",
        "NEPTUNE_PORT",
        "NEPTUNE_REGION",
        "LOADER_ROLE_ARN",
        "STAGING_BUCKET",
        "LEDGER_TABLE",
        "LEDGER_TTL_DAYS",
    )
    neptune_endpoint: str
    neptune_port: int
    neptune_region: str
    loader_role_arn: str
    staging_bucket: str
    ledger_table: str
    ledger_ttl_days: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StartGraphLoadSettings:
        return cls(
            neptune_endpoint=_need(env, "NEPTUNE_ENDPOINT"),
            neptune_port=_port(env, "NEPTUNE_PORT"),
            neptune_region=_need(env, "NEPTUNE_REGION"),
            loader_role_arn=_need(env, "LOADER_ROLE_ARN"),
            staging_bucket=_need(env, "STAGING_BUCKET"),
            ledger_table=_need(env, "LEDGER_TABLE"),
            ledger_ttl_days=_int(env, "LEDGER_TTL_DAYS"),
        )


@dataclass(frozen=True)
class PollGraphLoadSettings:
    ENV_NAMES: ClassVar[tuple[str, ...]] = (
        "NEPTUNE_ENDPOINT",
        "NEPTUNE_PORT",
        "NEPTUNE_REGION",
        "STAGING_BUCKET",
        "LEDGER_TABLE",
        "LEDGER_TTL_DAYS",
    )
    neptune_endpoint: str
    neptune_port: int
    neptune_region: str
    staging_bucket: str
    ledger_table: str
    ledger_ttl_days: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PollGraphLoadSettings:
        return cls(
            neptune_endpoint=_need(env, "NEPTUNE_ENDPOINT"),
            neptune_port=_port(env, "NEPTUNE_PORT"),
            neptune_region=_need(env, "NEPTUNE_REGION"),
            staging_bucket=_need(env, "STAGING_BUCKET"),
            ledger_table=_need(env, "LEDGER_TABLE"),
            ledger_ttl_days=_int(env, "LEDGER_TTL_DAYS"),
        )
