"""One environment's settings (`EnvironmentConfig`, made of each unit's) and cdk.json's `mapload` block.

Each setting is one field, defined once beside the unit that reads it: its name in cdk.json (the
alias), its default, its bounds as plain `Field` constraints and its meaning (`description`).
`EnvironmentConfig` is one environment's flat block; the classes it is made of (`DataConfig` in
data_settings.py, `LoaderConfig` in loader_settings.py, `GraphConfig`, `MonitoringConfig`) are the
views the stacks read, not copies. `PipelineConfig` (pipeline_settings.py) is `mapload.pipeline`.
`json_schema()` is schemas/config.schema.json, and docs/SETTINGS.md's tables are generated from it
(`make schemas`; tests/infra/test_config.py fails when either is stale). The coercions and the
refusal's wording they share are in settings.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import BaseModel, Field, ValidationError, model_validator

from stacks.data_settings import DataConfig
from stacks.graph_settings import GraphConfig
from stacks.loader_settings import LoaderConfig
from stacks.monitoring_settings import MonitoringConfig
from stacks.pipeline_settings import PipelineConfig
from stacks.settings import ENV_NAME, EnvironmentName, MaploadConfigError, Section, Site, refusal

# Context keys of the form `mapload:<field>` override one field of the selected environment
# (`cdk synth -c mapload:max_concurrency_cap=10`); CLI values arrive as strings.
OVERRIDE_PREFIX: Final[str] = "mapload:"


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
    # No Neptune in dev unless asked for: its cluster costs ~$117 a month idle (docs/DEPLOY.md);
    # cdk.json states the choice in each environment's block, and `mapload run-local` keeps
    # every graph path whatever it says (mapload/local.py LOCAL_CONTEXT).
    "dev": {"graph_enabled": False},
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
    if not ENV_NAME.match(env):
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
