"""Per-environment settings: defaults, overrides, and errors that name the field."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from scripts.config_schema import SCHEMA, SETTINGS, render_schema, render_settings
from stacks.config import (
    ENVIRONMENT_DEFAULTS,
    SETTING_NAMES,
    EnvironmentConfig,
    load_environment,
    overrides_from_context,
    setting_defaults,
)
from stacks.data_settings import KeyAttribute
from stacks.pipeline_settings import PipelineConfig
from stacks.settings import MaploadConfigError

pytestmark = pytest.mark.infra


def load(env: str = "dev", overrides: dict[str, Any] | None = None, **settings: Any) -> EnvironmentConfig:
    return load_environment({"environments": {env: settings}}, env, overrides)


def error(env: str = "dev", overrides: dict[str, Any] | None = None, **settings: Any) -> str:
    with pytest.raises(MaploadConfigError) as raised:
        load(env, overrides, **settings)
    return str(raised.value)


def test_cdk_json_defines_dev_staging_prod_and_each_loads(cdk_json: dict[str, Any]) -> None:
    block = cdk_json["context"]["mapload"]
    assert set(block["environments"]) == {"dev", "staging", "prod"}
    for env in ("dev", "staging", "prod"):
        assert load_environment(block, env).name == env


def test_defaults_per_environment() -> None:
    dev, prod = load("dev"), load("prod")
    assert dev.data.table_partition_key == KeyAttribute("pk", "S")
    assert dev.data.table_sort_key == KeyAttribute("sk", "S")
    assert dev.data.table_key == {"pk": "S", "sk": "S"}
    assert dev.data.table_existing is None
    assert dev.loader.source_extra_buckets == ()
    assert (dev.loader.max_concurrency_cap, prod.loader.max_concurrency_cap) == (100, 800)
    assert (dev.data.retain_data, prod.data.retain_data) == (False, True)
    assert prod.loader.retain_logs is True
    assert dev.loader.write_concurrency == 8
    assert dev.loader.retry_interval_seconds == 2
    assert dev.account is None and dev.region is None


def test_key_schema_without_sort_key_and_numeric_partition_key() -> None:
    config = load(partition_key={"name": "postcode", "type": "N"}, sort_key=None)
    assert config.data.table_sort_key is None
    assert config.data.table_key == {"postcode": "N"}


def test_overrides_win_and_arrive_as_strings_from_the_cli() -> None:
    config = load(
        "prod",
        overrides_from_context(
            {
                "mapload:retry_interval_seconds": "1",
                "mapload:retain_data": "false",
                "mapload:extra_source_buckets": "a-bucket, b-bucket",
                "mapload:existing_table": "arn:aws:dynamodb:eu-west-2:123456789012:table/T01",
                "@aws-cdk/core:target-partitions": ["aws"],
            }
        ),
    )
    assert config.loader.retry_interval_seconds == 1
    assert config.data.retain_data is False
    assert config.loader.source_extra_buckets == ("a-bucket", "b-bucket")
    assert config.data.table_existing_name == "T01"


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"max_concurrency_cap": 0},
            "mapload.environments.dev.max_concurrency_cap: must be a positive integer",
        ),
        ({"max_concurrency_cap": "lots"}, "mapload.environments.dev.max_concurrency_cap: must be"),
        ({"max_concurrency_cap": 10_001}, "mapload.environments.dev.max_concurrency_cap: must be"),
        ({"worker_timeout_seconds": 901}, "mapload.environments.dev.worker_timeout_seconds: must be"),
        ({"worker_memory_mib": 64}, "mapload.environments.dev.worker_memory_mib: must be"),
        (
            {"worker_ephemeral_storage_mib": 256},
            "mapload.environments.dev.worker_ephemeral_storage_mib: must be",
        ),
        (
            {"worker_ephemeral_storage_mib": 20480},
            "mapload.environments.dev.worker_ephemeral_storage_mib: must be",
        ),
        ({"finalize_memory_mib": 64}, "mapload.environments.dev.finalize_memory_mib: must be"),
        ({"finalize_timeout_seconds": 901}, "mapload.environments.dev.finalize_timeout_seconds: must be"),
        ({"retry_interval_seconds": 0}, "mapload.environments.dev.retry_interval_seconds: must be"),
        ({"retry_backoff_rate": 0.5}, "mapload.environments.dev.retry_backoff_rate: must be"),
        ({"retain_data": "yes"}, "mapload.environments.dev.retain_data: must be true or false"),
        ({"log_retention_days": 10}, "mapload.environments.dev.log_retention_days: must be one of"),
        ({"partition_key": {"name": "pk", "type": "X"}}, "mapload.environments.dev.partition_key.type:"),
        ({"partition_key": None}, "mapload.environments.dev.partition_key: must be"),
        ({"sort_key": {"name": "pk", "type": "S"}}, "mapload.environments.dev.sort_key.name: must differ"),
        ({"existing_table": "no spaces allowed"}, "mapload.environments.dev.existing_table: must be"),
        (
            {"existing_table": "arn:aws:s3:::not-a-table"},
            "mapload.environments.dev.existing_table: must be",
        ),
        (
            {"existing_table_key": "arn:aws:kms:eu-west-2:123456789012:key/k1"},
            "mapload.environments.dev.existing_table_key: only with existing_table",
        ),
        (
            {"existing_table": "People", "existing_table_key": "alias/mine"},
            "mapload.environments.dev.existing_table_key: must be null or a KMS key ARN",
        ),
        (
            {
                "region": "eu-west-2",
                "existing_table": "People",
                "existing_table_key": "arn:aws:kms:us-east-1:123456789012:key/k1",
            },
            "mapload.environments.dev.existing_table_key: must be a key in the environment's region",
        ),
        ({"extra_source_buckets": ["Bad_Name"]}, "mapload.environments.dev.extra_source_buckets[0]:"),
        ({"extra_source_buckets": ["a-b", "a-b"]}, "mapload.environments.dev.extra_source_buckets: must"),
        ({"extra_source_buckets": 3}, "mapload.environments.dev.extra_source_buckets: must be a list"),
        ({"account": "12345"}, "mapload.environments.dev.account: must be a 12-digit"),
        ({"region": "mars"}, "mapload.environments.dev.region: must be an AWS region"),
        ({"max_concurency_cap": 5}, "mapload.environments.dev.max_concurency_cap: unknown setting"),
    ],
)
def test_errors_name_the_environment_and_field(settings: dict[str, Any], expected: str) -> None:
    assert error(**settings).startswith(expected)


def test_error_for_prod_names_prod() -> None:
    assert error("prod", write_concurrency=0).startswith(
        "mapload.environments.prod.write_concurrency: must be a positive integer"
    )


def test_error_in_an_override_names_the_context_key() -> None:
    message = error(overrides={"max_concurrency_cap": "-3"})
    assert message.startswith(
        "mapload.environments.dev.max_concurrency_cap (context mapload:max_concurrency_cap): must be"
    )
    assert error(overrides={"nope": 1}).startswith("mapload:nope: unknown setting")


def test_a_bare_setting_name_in_context_is_refused() -> None:
    with pytest.raises(MaploadConfigError, match=r"overridden as mapload:retry_interval_seconds"):
        overrides_from_context({"retry_interval_seconds": 1})


def test_unknown_environment_and_missing_block() -> None:
    with pytest.raises(MaploadConfigError, match=r"^env: unknown environment 'qa'; cdk.json defines dev$"):
        load_environment({"environments": {"dev": {}}}, "qa")
    with pytest.raises(MaploadConfigError, match=r"^mapload: must be an object"):
        load_environment(None, "dev")
    with pytest.raises(MaploadConfigError, match=r"^mapload.environments: must be a non-empty object"):
        load_environment({"environments": {}}, "dev")


def test_config_is_frozen() -> None:
    config = load()
    with pytest.raises(AttributeError):
        config.name = "prod"  # type: ignore[misc]


def _settings_table() -> list[tuple[list[str], str]]:
    """docs/SETTINGS.md's environment table as (setting names, default cell) rows."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "SETTINGS.md").read_text(encoding="utf-8")
    table = text.split("| field | default | meaning |", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in table.strip().splitlines()[1:]:
        names, default = line.split(" | ")[:2]
        rows.append((re.findall(r"`(\w+)`", names), default))
    return rows


def _documented_values(cell: str, count: int) -> list[Any]:
    """`1 / 8` or `2, 6, 2.0` or `{"name": ...}` as values (backticks off, JSON where it parses);
    one value for several names is the default of each."""
    parts = [cell] if count == 1 else re.split(r" / |, ", cell)
    parts = parts * count if len(parts) == 1 else parts
    assert len(parts) == count, cell
    values = []
    for part in parts:
        part = part.strip().strip("`")
        try:
            values.append(json.loads(part))
        except ValueError:
            values.append(part)
    return values


def _model_value(value: Any) -> Any:
    if isinstance(value, KeyAttribute):
        return asdict(value)
    return list(value) if isinstance(value, tuple) else value


def test_the_settings_page_documents_every_setting_with_its_defaults() -> None:
    """docs/SETTINGS.md is checked against the models: names, defaults, per-environment defaults."""
    defaults = setting_defaults()
    documented: set[str] = set()
    per_environment: dict[str, dict[str, Any]] = {}
    for names, cell in _settings_table():
        documented.update(names)
        match = re.fullmatch(r"(.+?)(?: \((.+): (.+)\))?", cell)
        assert match, cell
        common, envs, env_values = match.groups()
        assert _documented_values(common, len(names)) == [_model_value(defaults[n]) for n in names], names
        for env in (envs or "").split(", ") if envs else []:
            for name, value in zip(names, _documented_values(env_values, len(names)), strict=True):
                per_environment.setdefault(env.strip("`"), {})[name] = value
    assert documented == set(defaults) == SETTING_NAMES
    assert per_environment == {env: dict(values) for env, values in ENVIRONMENT_DEFAULTS.items() if values}


def test_an_override_of_a_list_names_the_context_key_at_the_item() -> None:
    message = error(overrides={"extra_source_buckets": "good-bucket,Bad_Name"})
    assert message.startswith(
        "mapload.environments.dev.extra_source_buckets[1] (context mapload:extra_source_buckets): "
        "must be an S3 bucket name, got 'Bad_Name'"
    )


def test_an_empty_sort_key_is_refused_only_null_means_none() -> None:
    assert error(overrides={"sort_key": ""}).startswith(
        "mapload.environments.dev.sort_key (context mapload:sort_key): must be"
    )
    assert load(overrides={"sort_key": "null"}).data.table_sort_key is None


def test_a_graph_engine_older_than_neptunes_fine_grained_iam_is_refused_naming_the_minimum() -> None:
    # Given an engine before 1.2.0.0, whose IAM knows only neptune-db:* (no StartLoaderJob,
    # ReadDataViaQuery, ... as the stack grants them)
    for old in ("1.1.1.0", "1.0.5.0"):
        # When the environment is loaded, from cdk.json or from the command line
        # (dev states graph_enabled: false, so its graph settings are not read unless it is on)
        message = error(graph_engine_version=old, graph_enabled=True)
        override = error(overrides={"graph_engine_version": old}, graph_enabled=True)
        # Then it is refused, naming the setting, the minimum and why
        assert message.startswith(
            f"mapload.environments.dev.graph_engine_version: must be 1.2.0.0 or later, got '{old}'"
        )
        assert "neptune-db:StartLoaderJob" in message and "openCypher" in message
        assert override.startswith(
            "mapload.environments.dev.graph_engine_version (context mapload:graph_engine_version): "
            "must be 1.2.0.0 or later"
        )
    # ... while the minimum itself is accepted, and versions compare as numbers, not as text
    for new, family in (("1.2.0.0", "neptune1.2"), ("1.10.0.0", "neptune1.10")):
        graph = load(graph_engine_version=new, graph_enabled=True).graph
        assert graph is not None and graph.parameter_group_family == family
    short = error(graph_engine_version="1.4", graph_enabled=True)
    assert "must be a Neptune engine version like 1.4.5.1" in short


def test_the_schema_and_the_settings_tables_are_generated_from_the_one_model() -> None:
    # `make schemas` writes both; scripts/config_schema.py --check is the same test for CI scripts.
    schema, stale = render_schema(), "is stale: run `make schemas`"
    assert SCHEMA.read_text(encoding="utf-8") == schema, f"schemas/config.schema.json {stale}"
    page = SETTINGS.read_text(encoding="utf-8")
    assert page == render_settings(page, json.loads(schema)), f"docs/SETTINGS.md {stale}"
    # The published schema is the models' own, and each model is defined once in stacks/.
    published = json.loads(schema)["$defs"]
    for model in (EnvironmentConfig, PipelineConfig):
        own = model.model_json_schema()
        assert {**own, "$defs": None} == {**published[model.__name__], "$defs": None}
        sources = (Path(__file__).resolve().parents[2] / "stacks").glob("*.py")
        definitions = [
            path for path in sources if f"class {model.__name__}(" in path.read_text(encoding="utf-8")
        ]
        assert len(definitions) == 1, definitions
