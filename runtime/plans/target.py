"""The job's target table, checked before any shard is cut: the input's `dynamodb.table` among those
the environment allows, existing and ACTIVE, with the key the input fills (logic/tables.py); absent,
the environment's own table, as its settings describe it (no DynamoDB request)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from logic import tables
from plans.settings import PlanningSettings

# DescribeTable's `Table` of a table name; None when there is no such table.
Describe = Callable[[str], Mapping[str, Any] | None]


class Target(NamedTuple):
    """The table a job writes and its key ({name: S|N|B}, partition key first); `named`: whether
    the input named it (the planned job then carries the name to every Worker)."""

    name: str
    key: dict[str, str]
    named: bool


def target(raw_input: Mapping[str, Any], settings: PlanningSettings, describe: Describe) -> Target:
    """The job's table, refused in one line when the environment does not allow it, it does not
    exist or is not ACTIVE, or its key is not the one `dynamodb.key` fills."""
    name = tables.named_table(raw_input)
    if name is None or name == settings.table_name:
        return Target(settings.table_name, dict(settings.table_key), named=name is not None)
    tables.check_not_ledger(name, settings.ledger_table)
    tables.check_allowed(name, {settings.table_name, *settings.tables})
    key = tables.check_ready(name, describe(name))
    tables.check_key(name, key, raw_input)
    return Target(name, key, named=True)
