"""The functions' settings models: variables named once, one-line errors naming the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from handlers import finalize, plan, poll_graph_load, prepare, start_graph_load, worker
from handlers.settings import (
    FunctionSettings,
    PlanSettings,
    SettingsError,
    StartGraphLoadSettings,
    WorkerSettings,
)

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = {
    "Prepare": prepare,
    "Plan": plan,
    "Worker": worker,
    "Finalize": finalize,
    "StartGraphLoad": start_graph_load,
    "PollGraphLoad": poll_graph_load,
}
PLAN_ENV = {
    "SOURCE_BUCKETS": "src, other-src",
    "STAGING_BUCKET": "stg",
    "LEDGER_TABLE": "ledger",
    "TABLE_NAME": "target",
    "TABLE_KEY": '{"pk": "S", "sk": "S"}',
    "MAX_CONCURRENCY_CAP": "50",
    "LEDGER_TTL_DAYS": "30",
    "GRAPH_ENABLED": "false",
    "WORKER_MEMORY_MIB": "1024",
    "WORKER_TIMEOUT_SECONDS": "900",
    "PLAN_TIMEOUT_SECONDS": "300",
    "PLAN_MEMORY_MIB": "512",
    "MAP_EXECUTION_TYPE": "STANDARD",
    "AWS_REGION": "eu-west-2",
}


def plan_error(**changed: str) -> str:
    with pytest.raises(SettingsError) as raised:
        PlanSettings.from_env({**PLAN_ENV, **changed})
    return str(raised.value)


def test_given_the_template_variables_when_parsed_then_typed_values_and_other_variables_ignored() -> None:
    settings = PlanSettings.from_env(PLAN_ENV)
    assert settings.source_buckets == frozenset({"src", "other-src"})
    assert settings.table_key == {"pk": "S", "sk": "S"}
    assert list(settings.table_key) == ["pk", "sk"]  # partition key first
    assert (settings.max_concurrency_cap, settings.ledger_ttl_days) == (50, 30)
    assert settings.graph_enabled is False


def test_each_variable_is_the_upper_case_field_name_and_listed_once() -> None:
    for module in HANDLERS.values():
        cls: type[FunctionSettings] = module.SETTINGS_CLASS
        assert tuple(name.upper() for name in cls.model_fields) == cls.ENV_NAMES
        assert len(set(cls.ENV_NAMES)) == len(cls.ENV_NAMES)
    assert "LOADER_ROLE_ARN" in StartGraphLoadSettings.ENV_NAMES
    assert "LEDGER_TTL_DAYS" in WorkerSettings.ENV_NAMES


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ({"TABLE_NAME": ""}, "environment variable TABLE_NAME is not set"),
        (
            {"MAX_CONCURRENCY_CAP": "0"},
            "environment variable MAX_CONCURRENCY_CAP: Input should be greater than 0",
        ),
        (
            {"LEDGER_TTL_DAYS": "soon"},
            "environment variable LEDGER_TTL_DAYS: Input should be a valid integer",
        ),
        ({"TABLE_KEY": "{pk"}, "environment variable TABLE_KEY: not JSON: "),
        ({"TABLE_KEY": "[]"}, "environment variable TABLE_KEY: Input should be a valid dictionary"),
        ({"SOURCE_BUCKETS": " , "}, "environment variable SOURCE_BUCKETS: "),
        ({"GRAPH_ENABLED": "maybe"}, "environment variable GRAPH_ENABLED: Input should be a valid boolean"),
    ],
)
def test_a_wrong_variable_is_one_line_naming_it(changed: dict[str, str], expected: str) -> None:
    message = plan_error(**changed)
    assert message.startswith(expected)
    assert "\n" not in message


def test_a_missing_variable_is_named_and_every_problem_is_on_the_one_line() -> None:
    env = {k: v for k, v in PLAN_ENV.items() if k not in {"STAGING_BUCKET", "LEDGER_TABLE"}}
    with pytest.raises(SettingsError) as raised:
        PlanSettings.from_env(env)
    assert str(raised.value) == (
        "environment variable STAGING_BUCKET is not set; environment variable LEDGER_TABLE is not set"
    )


def test_a_neptune_port_out_of_range_is_refused() -> None:
    env = {
        "NEPTUNE_ENDPOINT": "cluster.example",
        "NEPTUNE_PORT": "70000",
        "NEPTUNE_REGION": "eu-west-2",
        "LOADER_ROLE_ARN": "arn:aws:iam::123456789012:role/loader",
        "STAGING_BUCKET": "stg",
        "LEDGER_TABLE": "ledger",
        "LEDGER_TTL_DAYS": "30",
    }
    assert StartGraphLoadSettings.from_env({**env, "NEPTUNE_PORT": "8182"}).neptune_port == 8182
    with pytest.raises(
        SettingsError, match=r"^environment variable NEPTUNE_PORT: .*less than or equal to 65535"
    ):
        StartGraphLoadSettings.from_env(env)


def test_settings_are_frozen() -> None:
    settings = PlanSettings.from_env(PLAN_ENV)
    with pytest.raises(ValueError, match="frozen"):
        settings.table_name = "other"


def test_the_contracts_page_lists_exactly_each_functions_variables() -> None:
    """docs/CONTRACTS.md "Environment variables" is checked against the models (their one source)."""
    text = (ROOT / "docs" / "CONTRACTS.md").read_text(encoding="utf-8")
    section = text.split("## Environment variables", 1)[1].split("\n\n", 1)[0]
    rows = {
        match.group(1): match.group(2)
        for match in re.finditer(r"^\| (\w+) \| (.+) \|$", section, flags=re.MULTILINE)
        if match.group(1) in HANDLERS
    }
    assert set(rows) == set(HANDLERS)
    for function, module in HANDLERS.items():
        # A variable is the first backticked upper-case word of a comma-separated entry.
        listed = set(re.findall(r"(?:^|, )`([A-Z_]+)`", rows[function]))
        assert listed == set(module.SETTINGS_CLASS.ENV_NAMES), function
