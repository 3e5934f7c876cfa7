"""The input's bounds (schemas/input.schema.json, generated from runtime/logic/spec/) and
the AWS limits stacks/*_settings.py check the deployment against are the same numbers.

stacks/ may not import runtime code, so neither side imports the other: this test reads both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stacks import data_settings, loader_settings

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
SCHEMA: dict[str, Any] = json.loads((ROOT / "schemas" / "input.schema.json").read_text())


def _properties(name: str) -> dict[str, Any]:
    return dict(SCHEMA["$defs"][name]["properties"])


@pytest.mark.parametrize("branch", ["CsvInput", "JsonlInput", "RdfInput"])
def test_max_concurrency_is_the_distributed_maps_limit(branch: str) -> None:
    # A deployment's max_concurrency_cap and an input's maxConcurrency both stop at the Map's limit.
    assert _properties(branch)["maxConcurrency"]["maximum"] == loader_settings.MAX_MAP_CONCURRENCY


@pytest.mark.parametrize("branch", ["CsvInput", "JsonlInput", "RdfInput"])
def test_the_write_budget_stops_where_a_tables_capacity_does(branch: str) -> None:
    # A job-wide budget above what any table can be given only catches a misplaced digit.
    budget, null = _properties(branch)["writeUnitsPerSecond"]["anyOf"]
    assert (budget["maximum"], null) == (data_settings.MAX_TABLE_UNITS, {"type": "null"})


def test_the_table_key_types_a_deployment_may_declare_are_the_ones_plan_accepts() -> None:
    # stacks/*_settings.py check cdk.json's partition_key/sort_key types; runtime/logic/spec/parse.py checks
    # the TABLE_KEY the Loader passes to Plan (from those same settings) against its own list.
    import sys

    sys.path.insert(0, str(ROOT / "runtime"))
    from logic.spec import parse as spec

    assert tuple(data_settings.KEY_TYPES) == tuple(spec.KEY_TYPES)


def test_mapload_estimates_with_the_environments_defaults() -> None:
    # The installed `mapload` command cannot import stacks/: its defaults are checked here.
    from mapload import estimate

    loader = loader_settings.LoaderConfig.model_fields
    assert loader["worker_memory_mib"].default == estimate.DEFAULT_MEMORY_MIB
    assert loader["lambda_architecture"].default == estimate.DEFAULT_ARCHITECTURE
    assert loader["worker_timeout_seconds"].default == estimate.DEFAULT_WORKER_TIMEOUT_SECONDS
    assert estimate.ARCHITECTURES == loader_settings.LAMBDA_ARCHITECTURES


def test_plan_refuses_a_shard_longer_than_an_express_child_by_the_deployments_limit() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "runtime"))
    from logic import shardtime

    assert shardtime.EXPRESS_CHILD_SECONDS == loader_settings.EXPRESS_MAX_SECONDS
