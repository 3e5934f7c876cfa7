"""The single-item request that writes one item in a conditional or update write mode.

`put` (the default) goes through BatchWriteItem and has no request here. The others:
- `putIfAbsent`: PutItem if no item has the key yet; an existing item is left untouched.
- `newerWins`: PutItem if no item has the key, or the stored item's version (a number) is
  strictly lower: for each key the record with the highest version stays, whatever the order
  of shards, retries and re-runs (for equal versions, the one already stored stays).
- `update`: UpdateItem that SETs the item's attributes (or ADDs them: numbers and sets, or sets
  them only if absent: `if_not_exists`) and keeps every other attribute of the stored item,
  creating the item when absent. An attribute the record does not have is left as stored.
  A numeric ADD is not idempotent: with one, each record's UpdateItem goes in a transaction
  with a Put of a marker item (the ledger's, keyed by job, plan, shard and the record's byte
  offset) on `attribute_not_exists`, so a retried shard or a re-run applies it once; a marker
  found stored cancels the transaction and the record is skipped (`counted_update`).
- `delete`: DeleteItem by the key.
A refused condition (ConditionalCheckFailedException) means the record is skipped, not rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from logic.batching import BATCH_ITEMS
from logic.ratecontrol import write_units
from logic.spec_model import DynamoDbTarget, TypedField

PUT: Final = "put"
PUT_IF_ABSENT: Final = "putIfAbsent"
NEWER_WINS: Final = "newerWins"
UPDATE: Final = "update"
DELETE: Final = "delete"
MODES: Final = (PUT, PUT_IF_ABSENT, NEWER_WINS, UPDATE, DELETE)
# Modes whose refused condition skips a record (the others have no condition).
CONDITIONAL: Final = frozenset({PUT_IF_ABSENT, NEWER_WINS})

SET: Final = "set"
ADD: Final = "add"
SET_IF_ABSENT: Final = "setIfAbsent"
UPDATE_ACTIONS: Final = (SET, ADD, SET_IF_ABSENT)


@dataclass(frozen=True)
class WritePlan:
    """What a single-item write needs beyond the item: the key's attribute names, the version
    attribute (newerWins) and how update treats each attribute (default SET)."""

    mode: str
    key: tuple[str, ...]
    version: str | None = None
    actions: Mapping[str, str] = field(default_factory=dict)
    # Attributes of type N that update ADDs: each record's write is then a marked transaction.
    counters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES or self.mode == PUT:
            raise ValueError(f"no single-item request for write mode {self.mode!r}")
        if (self.mode == NEWER_WINS) != (self.version is not None):
            raise ValueError("newerWins needs a version attribute, and only newerWins has one")
        unknown = sorted(set(self.actions.values()) - set(UPDATE_ACTIONS))
        if unknown:
            raise ValueError(f"unknown update actions {unknown}")
        if any(self.actions.get(name) != ADD for name in self.counters):
            raise ValueError("a counter is an attribute that update ADDs")

    def units(self, item_size: int) -> int:
        """Write units one record's request consumes: a transaction (counters) costs twice the
        units of its two items, the item and its marker (one unit: a few dozen bytes)."""
        units = write_units((item_size,))
        return 2 * (units + MARKER_UNITS) if self.counters else units


def write_plan(target: DynamoDbTarget) -> WritePlan | None:
    """The spec's single-item write plan; None for `put` (batches, no plan)."""
    if target.write_mode == PUT:
        return None
    typed = {name: a for name, a in target.mapped.items() if isinstance(a, TypedField)}
    return WritePlan(
        mode=target.write_mode,
        key=tuple(target.key),
        version=target.version,
        actions={name: a.update_action for name, a in typed.items() if a.update_action != SET},
        counters=tuple(name for name, a in typed.items() if a.update_action == ADD and a.type == "N"),
    )


def items_per_request(mode: str) -> int:
    """Items one write request carries in `mode`: a batch for put, one item for the others (the
    same write units either way; mapload estimate and make bench model a worker's rate by it)."""
    if mode not in MODES:
        raise ValueError(f"unknown write mode {mode!r}")
    return BATCH_ITEMS if mode == PUT else 1


MARKER_UNITS: Final = 1


def counted_update(
    plan: WritePlan, item: Mapping[str, dict[str, Any]], table: str, marker_table: str, marker: dict[str, Any]
) -> dict[str, Any]:
    """TransactWriteItems arguments that apply `item`'s update (with its numeric ADDs) together
    with a Put of `marker` (its key attributes `pk` and `sk`) if no marker has that key: both or
    neither, so a record is added once however often it is sent."""
    return {
        "TransactItems": [
            {"Update": {"TableName": table, **_update(plan, item)}},
            {
                "Put": {
                    "TableName": marker_table,
                    "Item": marker,
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            },
        ]
    }


Request = tuple[str, dict[str, Any]]
"""A client method name (put_item, update_item, delete_item) and its arguments, TableName aside."""


def single_item_request(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> Request:
    """The request that writes `item` (low-level form, key attributes included) in `plan.mode`."""
    if plan.mode == DELETE:
        return "delete_item", {"Key": _key(plan, item)}
    if plan.mode == UPDATE:
        return "update_item", _update(plan, item)
    names = {"#k": plan.key[0]}
    condition = "attribute_not_exists(#k)"
    values: dict[str, Any] = {}
    if plan.mode == NEWER_WINS:
        assert plan.version is not None
        names["#v"] = plan.version
        values[":v"] = item[plan.version]
        condition = "attribute_not_exists(#k) OR #v < :v"
    arguments: dict[str, Any] = {
        "Item": dict(item),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        # What is stored, when the condition fails: a retry after a lost answer finds its own
        # item there and counts it written, not skipped (written_by_us below).
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if values:
        arguments["ExpressionAttributeValues"] = values
    return "put_item", arguments


def written_by_us(item: Mapping[str, dict[str, Any]], stored: Mapping[str, dict[str, Any]] | None) -> bool:
    """Whether the item a refused condition found stored is the one this request writes (an
    earlier attempt whose answer was lost wrote it)."""
    return stored is not None and _canonical(stored) == _canonical(item)


def _canonical(item: Mapping[str, Any]) -> Any:
    """Low-level values compared as DynamoDB stores them: sets unordered, numbers by value."""

    def value(typed: Mapping[str, Any]) -> Any:
        ((kind, inner),) = typed.items()
        if kind == "N":
            return (kind, Decimal(inner))
        if kind == "NS":
            return (kind, frozenset(Decimal(n) for n in inner))
        if kind in ("SS", "BS"):
            return (kind, frozenset(bytes(b) if kind == "BS" else b for b in inner))
        if kind == "B":
            return (kind, bytes(inner))
        if kind == "L":
            return (kind, tuple(value(v) for v in inner))
        if kind == "M":
            return (kind, frozenset((k, value(v)) for k, v in inner.items()))
        return (kind, inner)

    return frozenset((name, value(typed)) for name, typed in item.items())


def _key(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: item[name] for name in plan.key}


def _update(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    sets: list[str] = []
    adds: list[str] = []
    for index, (name, typed) in enumerate(
        (name, typed) for name, typed in item.items() if name not in plan.key
    ):
        names[f"#a{index}"] = name
        values[f":a{index}"] = typed
        action = plan.actions.get(name, SET)
        if action == ADD:
            adds.append(f"#a{index} :a{index}")
        elif action == SET_IF_ABSENT:
            sets.append(f"#a{index} = if_not_exists(#a{index}, :a{index})")
        else:
            sets.append(f"#a{index} = :a{index}")
    arguments: dict[str, Any] = {"Key": _key(plan, item)}
    clauses = ([f"SET {', '.join(sets)}"] if sets else []) + ([f"ADD {', '.join(adds)}"] if adds else [])
    if clauses:  # without one, UpdateItem creates the item with its key only, or leaves it as is
        arguments.update(
            UpdateExpression=" ".join(clauses),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
    return arguments
