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
  found stored cancels the transaction and the record is skipped (`counted_update`). Records of
  one key that wait behind each other go in one transaction (`combined`): one update that does
  what theirs do one after another, with every record's marker (a hot counter takes one
  transaction per group, not per record; each record still applied once).
- `delete`: DeleteItem by the key.
A refused condition (ConditionalCheckFailedException) means the record is skipped, not rejected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Context, Decimal, Inexact
from typing import Any, Final, NamedTuple

from logic.errors import InputValidationError
from logic.ratecontrol import write_units
from logic.spec.dynamodb import ADD, SET, SET_IF_ABSENT, UPDATE_ACTIONS, DynamoDbTarget, TypedField

# DynamoDB's expression limits (developer guide, "Constraints in Amazon DynamoDB", Expression
# parameters): any expression string at most 4 KB, an UpdateExpression at most 300 operators or
# functions. At about 14 bytes a SET action (37 with if_not_exists), an update of ~280 attributes
# (~110 set only if absent) is past them: update_requests splits it where that stays correct.
MAX_EXPRESSION_BYTES: Final = 4 * 1024
MAX_EXPRESSION_OPERATORS: Final = 300
LIMITS: Final = (
    f"{MAX_EXPRESSION_BYTES} bytes and {MAX_EXPRESSION_OPERATORS} operators or functions per expression"
)


class _Action(NamedTuple):
    """One attribute's action in an UpdateExpression: its clause (SET or ADD), text, functions,
    placeholder number, attribute name and value."""

    clause: str
    text: str
    functions: int
    number: int
    name: str
    value: Any


@dataclass(frozen=True)
class WritePlan:
    """What a single-item write needs beyond the item: the key's attribute names, the version
    attribute (newerWins) and how update treats each attribute (default SET)."""

    mode: type[DynamoDbTarget]  # the write mode's model: what the mode does
    key: tuple[str, ...]
    version: str | None = None
    actions: Mapping[str, str] = field(default_factory=dict)
    # Attributes of type N that update ADDs: each record's write is then a marked transaction.
    counters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode.later_wins:
            raise ValueError(f"no single-item request for write mode {self.mode.name!r}")
        if self.mode.versioned != (self.version is not None):
            raise ValueError("newerWins needs a version attribute, and only newerWins has one")
        unknown = sorted(set(self.actions.values()) - set(UPDATE_ACTIONS))
        if unknown:
            raise ValueError(f"unknown update actions {unknown}")
        if any(self.actions.get(name) != ADD for name in self.counters):
            raise ValueError("a counter is an attribute that update ADDs")

    def units(self, item_size: int) -> int:
        """Write units one record's request consumes (`record_units`)."""
        return record_units(item_size, numeric_add=bool(self.counters))


def record_units(item_size: int, numeric_add: bool = False) -> int:
    """Write units one record consumes: its item's (one per started KB); with a numeric add, a
    transaction's, twice the units of its two items, the item and its ledger marker (one unit: a
    few dozen bytes). The one rule for the Worker's budget, Plan's shard time and `mapload estimate`."""
    units = write_units((item_size,))
    return 2 * (units + MARKER_UNITS) if numeric_add else units


def write_plan(target: DynamoDbTarget) -> WritePlan | None:
    """The spec's single-item write plan; None for `put` (batches, no plan)."""
    if target.later_wins:
        return None
    typed = {name: a for name, a in target.mapped.items() if isinstance(a, TypedField)}
    return WritePlan(
        mode=type(target),
        key=tuple(target.key),
        version=target.version,
        actions={name: a.update_action for name, a in typed.items() if a.update_action != SET},
        counters=target.counters,
    )


# PartiQL for DynamoDB (developer guide, "PartiQL insert statements", "Running batch operations
# with PartiQL", API reference BatchExecuteStatement / BatchStatementRequest / BatchStatementError),
# what putIfAbsent relies on: `INSERT INTO table VALUE item` inserts one item, and answers
# DuplicateItem (in a batch: that statement's Error.Code) when an item with its primary key is
# stored, leaving it untouched; attribute names are case-sensitive, in single quotes; values may
# be `?` parameters, given typed (AttributeValue) in the statement's Parameters, in order, so no
# value is quoted or inlined; a batch holds at most 25 statements, all writes or all reads, and
# each statement answers for itself (a 200 does not mean every statement succeeded); a statement
# is at most 8,192 characters.
MAX_STATEMENT_CHARS: Final = 8192


def insert_statement(table: str, item: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """A BatchStatementRequest that inserts `item` (low-level form) into `table` unless an item
    with its key is stored. Names are quoted ('' for a quote inside one), values are parameters."""
    names = ", ".join("'" + name.replace("'", "''") + "': ?" for name in item)
    return {
        "Statement": f'INSERT INTO "{table}" VALUE {{{names}}}',
        "Parameters": list(item.values()),
    }


MARKER_UNITS: Final = 1


# The most records one counted transaction carries: DynamoDB's 100 actions (developer guide,
# "TransactWriteItems API") less the update.
MAX_COUNTED_RECORDS: Final = 99


def counted_update(
    plan: WritePlan,
    item: Mapping[str, dict[str, Any]],
    table: str,
    marker_table: str,
    markers: dict[str, Any] | Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """TransactWriteItems arguments that apply `item`'s update (with its numeric ADDs) together
    with a Put of each marker (its key attributes `pk` and `sk`; one, or one per record `item`
    combines) if no marker has that key: all or none, so a record is added once however often it
    is sent. A marker found stored is returned in the cancellation (ALL_OLD): who stored it."""
    markers = [markers] if isinstance(markers, Mapping) else list(markers)
    if not 1 <= len(markers) <= MAX_COUNTED_RECORDS:
        raise ValueError(f"a counted update carries 1 to {MAX_COUNTED_RECORDS} markers, got {len(markers)}")
    return {
        "TransactItems": [
            {"Update": {"TableName": table, **_update(plan, item)}},
            *(
                {
                    "Put": {
                        "TableName": marker_table,
                        "Item": marker,
                        "ConditionExpression": "attribute_not_exists(sk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
                for marker in markers
            ),
        ]
    }


# DynamoDB's numbers (developer guide, "Supported data types", Number): up to 38 significant
# digits, magnitudes from 1E-130 to 9.9999999999999999999999999999999999999E+125.
NUMBER_DIGITS: Final = 38
_EXACT = Context(prec=2 * NUMBER_DIGITS + 260, traps=[Inexact])


def _number(value: Decimal) -> str | None:
    """`value` as DynamoDB stores a number (None when it would not: too many digits, out of range)."""
    if value.is_zero():
        return "0"
    digits = len(value.normalize(_EXACT).as_tuple().digits)
    if digits > NUMBER_DIGITS or not Decimal("1E-130") <= abs(value) < Decimal("1E+126"):
        return None
    return format(value.normalize(_EXACT), "f")  # plain digits: 10, not 1E+1


def _add(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> dict[str, Any] | None:
    """One ADD value that adds what `earlier` then `later` add; None when none does alike."""
    ((kind, first),), ((then_kind, then),) = earlier.items(), later.items()
    if kind != then_kind:
        return None
    if kind == "N":
        try:
            total = _number(_EXACT.add(Decimal(first), Decimal(then)))
        except (ArithmeticError, ValueError):
            return None
        return None if total is None else {"N": total}
    if kind in ("NS", "SS", "BS"):
        seen = {(Decimal(v) if kind == "NS" else bytes(v) if kind == "BS" else v) for v in first}
        union = list(first)
        for v in then:
            canonical = Decimal(v) if kind == "NS" else bytes(v) if kind == "BS" else v
            if canonical not in seen:
                seen.add(canonical)
                union.append(v)
        return {kind: union}
    return None


def combined(
    plan: WritePlan, earlier: Mapping[str, dict[str, Any]], later: Mapping[str, dict[str, Any]]
) -> dict[str, dict[str, Any]] | None:
    """The item whose update (`update_requests`) leaves the stored item as `earlier`'s update then
    `later`'s (one key) do: a SET takes the later value, a set-if-absent the earlier, an ADD the
    sum (numbers) or union (sets). None where no one update does: an ADD of two kinds, or a sum
    DynamoDB would not store (past 38 digits or its range: sent alone, the later one is refused)."""
    merged = dict(earlier)
    for name, value in later.items():
        if name in plan.key or name not in merged:
            merged.setdefault(name, value)
            continue
        action = plan.actions.get(name, SET)
        if action == ADD:
            added = _add(merged[name], value)
            if added is None:
                return None
            merged[name] = added
        elif action != SET_IF_ABSENT:
            merged[name] = value
    return merged


Request = tuple[str, dict[str, Any]]
"""A client method name (put_item, update_item, delete_item) and its arguments, TableName aside."""


def single_item_requests(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> list[Request]:
    """The requests that write `item` (low-level form, key attributes included) in `plan.mode`,
    one after another: one, except an update past DynamoDB's expression limits (update_requests)."""
    if plan.mode.operation == "UpdateItem":
        return [("update_item", arguments) for arguments in update_requests(plan, item)]
    return [_conditional_or_delete(plan, item)]


def single_item_request(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> Request:
    """The one request that writes `item` in `plan.mode` (ValueError for an update that takes
    several: single_item_requests)."""
    requests = single_item_requests(plan, item)
    if len(requests) > 1:
        raise ValueError(f"the update takes {len(requests)} requests: use single_item_requests")
    return requests[0]


def _conditional_or_delete(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> Request:
    if plan.mode.operation == "DeleteItem":
        return "delete_item", {"Key": _key(plan, item)}
    names = {"#k": plan.key[0]}
    condition = "attribute_not_exists(#k)"
    values: dict[str, Any] = {}
    if plan.version is not None:  # newerWins: the stored version must be lower
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


def _actions(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> list[_Action]:
    """The update's actions for `item`'s non-key attributes, in the item's order."""
    actions = []
    for index, (name, typed) in enumerate(
        (name, typed) for name, typed in item.items() if name not in plan.key
    ):
        action = plan.actions.get(name, SET)
        if action == ADD:
            text, functions = f"#a{index} :a{index}", 0
        elif action == SET_IF_ABSENT:
            text, functions = f"#a{index} = if_not_exists(#a{index}, :a{index})", 1
        else:
            text, functions = f"#a{index} = :a{index}", 0
        actions.append(_Action(ADD if action == ADD else SET, text, functions, index, name, typed))
    return actions


def _expression(actions: Sequence[_Action]) -> str:
    sets = [a.text for a in actions if a.clause == SET]
    adds = [a.text for a in actions if a.clause == ADD]
    return " ".join(
        ([f"SET {', '.join(sets)}"] if sets else []) + ([f"ADD {', '.join(adds)}"] if adds else [])
    )


def _operators(actions: Sequence[_Action]) -> int:
    """An upper bound of the operators and functions DynamoDB counts: each action (its `=`, which
    AWS's example does not count) and each function."""
    return sum(1 + a.functions for a in actions)


def _within_limits(actions: Sequence[_Action]) -> bool:
    return (
        len(_expression(actions).encode()) <= MAX_EXPRESSION_BYTES
        and _operators(actions) <= MAX_EXPRESSION_OPERATORS
    )


def _arguments(
    plan: WritePlan, item: Mapping[str, dict[str, Any]], actions: Sequence[_Action]
) -> dict[str, Any]:
    arguments: dict[str, Any] = {"Key": _key(plan, item)}
    if actions:  # without one, UpdateItem creates the item with its key only, or leaves it as is
        arguments.update(
            UpdateExpression=_expression(actions),
            ExpressionAttributeNames={f"#a{a.number}": a.name for a in actions},
            ExpressionAttributeValues={f":a{a.number}": a.value for a in actions},
        )
    return arguments


def _update(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    return _arguments(plan, item, _actions(plan, item))


def update_requests(plan: WritePlan, item: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """UpdateItem arguments that apply `item`'s update: one request, or, past DynamoDB's expression
    limits (4 KB, 300 operators or functions), several on the same key, each within them. The
    split is correct for SET, if_not_exists and a set's ADD, each of which gives the same item
    applied once or again, in one request or several; a numeric ADD (`plan.counters`) goes in one
    transaction with its marker and is never split (check_update_limits refuses it at Plan)."""
    actions = _actions(plan, item)
    if _within_limits(actions):
        return [_arguments(plan, item, actions)]
    if plan.counters:
        raise ValueError(f"the update of {len(actions)} attributes with a numeric add is past {LIMITS}")
    return [_arguments(plan, item, chunk) for chunk in _chunks(actions)]


def _chunks(actions: Sequence[_Action]) -> list[list[_Action]]:
    """`actions` in order, cut into runs whose expression is within the limits (counted as
    _expression writes it: "SET " and "ADD " with their actions joined by ", ", one space between)."""
    chunks: list[list[_Action]] = [[]]
    # Per clause: the actions' bytes and count; and the operators.
    size = {SET: 0, ADD: 0}
    count = {SET: 0, ADD: 0}
    operators = 0
    for action in actions:
        size[action.clause] += len(action.text)
        count[action.clause] += 1
        operators += 1 + action.functions
        clauses = [4 + size[c] + 2 * (count[c] - 1) for c in (SET, ADD) if count[c]]
        if len(chunks[-1]) and (
            sum(clauses) + len(clauses) - 1 > MAX_EXPRESSION_BYTES or operators > MAX_EXPRESSION_OPERATORS
        ):
            chunks.append([])
            size, count = {SET: 0, ADD: 0}, {SET: 0, ADD: 0}
            size[action.clause], count[action.clause] = len(action.text), 1
            operators = 1 + action.functions
        chunks[-1].append(action)
    return chunks


def check_update_limits(target: DynamoDbTarget) -> None:
    """Raise InputValidationError (dynamodb.attributes) when writeMode update adds numbers and the
    mapping's update, all attributes present, is past DynamoDB's expression limits: a numeric ADD
    goes in one transaction with its marker (a transaction cannot touch an item twice), so it
    cannot be split as other updates are (update_requests)."""
    plan = write_plan(target)
    if plan is None or not plan.counters:
        return
    names = [*target.key, *target.mapped]
    item = {name: {"NULL": True} for name in names}
    actions = _actions(plan, item)
    if _within_limits(actions):
        return
    size, operators = len(_expression(actions).encode()), _operators(actions)
    raise InputValidationError(
        "dynamodb.attributes",
        f"writeMode update with a numeric add ({', '.join(plan.counters)}) writes each record in one "
        f"transaction with its marker, whose UpdateExpression for these {len(actions)} attributes is "
        f"{size} bytes and up to {operators} operators; DynamoDB allows {LIMITS}: map fewer "
        "attributes here, and load the others in a job of their own",
    )
