"""A job's target table: the one its input names (`dynamodb.table`) or the environment's own, whether
the environment allows it (its `tables` setting: names, or prefixes ending in `*`), and whether
its key is the one the input's `dynamodb.key` fills. Plan checks these before any shard runs
(plans/target.py); each refusal is one line."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Final

from logic.errors import InputValidationError
from logic.spec.dynamodb import TABLE_NAME_PATTERN

# The setting the allowed names come from (stacks/data_settings.py `tables`), as refusals name it.
SETTING: Final = "tables"
# A prefix entry ends in this: "catalog-*" allows every table whose name starts "catalog-".
PREFIX: Final = "*"
_NAME = re.compile(TABLE_NAME_PATTERN)
# DescribeTable's KeyType of the partition key, and of the sort key.
_HASH, _RANGE = "HASH", "RANGE"


def named_table(raw: object) -> str | None:
    """The table the raw input names (`dynamodb.table`), when it is a valid table name; None when
    it names none, or something the input's parsing refuses with its own message."""
    target = raw.get("dynamodb") if isinstance(raw, Mapping) else None
    name = target.get("table") if isinstance(target, Mapping) else None
    return name if isinstance(name, str) and _NAME.search(name) else None


def allows(allowed: Collection[str], name: str) -> bool:
    """Whether `name` is one of `allowed`: a name, or a prefix ending in `*`."""
    return any(
        name.startswith(entry.removesuffix(PREFIX)) if entry.endswith(PREFIX) else name == entry
        for entry in allowed
    )


def check_not_ledger(name: str, ledger_table: str) -> None:
    """Refuse the environment's ledger as a target (a `tables` prefix may match its name)."""
    if name == ledger_table:
        raise InputValidationError(
            "dynamodb.table",
            f"table {name!r} is this environment's ledger, which holds mapload's own records",
        )


def check_allowed(name: str, allowed: Collection[str]) -> None:
    """Refuse a table the environment may not load, naming the setting and what it allows."""
    if not allows(allowed, name):
        raise InputValidationError(
            "dynamodb.table",
            f"table {name!r} is not one this environment may load: its `{SETTING}` setting allows "
            f"{', '.join(sorted(allowed))}",
        )


def described_key(table: Mapping[str, Any]) -> dict[str, str]:
    """The key schema of DescribeTable's `Table`: {name: S|N|B}, partition key first."""
    types = {d["AttributeName"]: d["AttributeType"] for d in table.get("AttributeDefinitions") or ()}
    ordered = sorted(table.get("KeySchema") or (), key=lambda k: k["KeyType"] != _HASH)
    return {k["AttributeName"]: types[k["AttributeName"]] for k in ordered}


def check_ready(name: str, table: Mapping[str, Any] | None) -> dict[str, str]:
    """The key of table `name` (DescribeTable's `Table`, None when it does not exist), refusing one
    that does not exist or is not ACTIVE."""
    if table is None:
        raise InputValidationError(
            "dynamodb.table", f"table {name!r} does not exist in this environment's account and region"
        )
    status = table.get("TableStatus")
    if status != "ACTIVE":
        raise InputValidationError(
            "dynamodb.table", f"table {name!r} is {status}, not ACTIVE: start the load once it is ACTIVE"
        )
    return described_key(table)


def check_key(name: str, table_key: Mapping[str, str], raw: object) -> None:
    """Refuse an input whose `dynamodb.key` does not name exactly the table's key attributes,
    naming both keys. An input without a key (dynamodb-json: the items' own) is not refused here."""
    target = raw.get("dynamodb") if isinstance(raw, Mapping) else None
    given = target.get("key") if isinstance(target, Mapping) else None
    if not isinstance(given, Mapping) or set(given) == set(table_key):
        return
    described = ", ".join(f"{attribute} ({kind})" for attribute, kind in table_key.items())
    spec_key = ", ".join(map(str, given)) or "none"
    raise InputValidationError(
        "dynamodb.key",
        f"table {name!r} has the key {described}, but dynamodb.key gives {spec_key}: "
        "give a template for exactly the table's key attributes",
    )


def table_arn(environment_arn: str, name: str) -> str:
    """The ARN of table `name` beside the environment's own table (same partition, region, account)."""
    return f"{environment_arn.rsplit(':table/', 1)[0]}:table/{name}"


def key_schema(table_key: Mapping[str, str]) -> dict[str, Any]:
    """CreateTable's KeySchema and AttributeDefinitions of `table_key` (partition key first)."""
    kinds = (_HASH, _RANGE)
    return {
        "KeySchema": [{"AttributeName": a, "KeyType": k} for a, k in zip(table_key, kinds, strict=False)],
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": t} for a, t in table_key.items()],
    }
