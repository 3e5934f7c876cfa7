"""The single-item requests of the write modes, run against moto's DynamoDB: the stored table
equals a sequential model of each mode (logic/writemodes.py)."""

from __future__ import annotations

import contextlib
from decimal import Decimal
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from logic.errors import InputValidationError
from logic.spec.dynamodb import (
    ADD,
    SET_IF_ABSENT,
    DeleteTarget,
    DynamoDbTarget,
    NewerWinsTarget,
    PutIfAbsentTarget,
    PutTarget,
    UpdateTarget,
)
from logic.spec.parse import parse_spec
from logic.writemodes import (
    MAX_COUNTED_RECORDS,
    WritePlan,
    check_update_limits,
    combined,
    counted_update,
    single_item_request,
    single_item_requests,
    update_requests,
    written_by_us,
)
from mapload.emulator import limits, moto_patches
from mapload.tables import create_pk_sk_table

pytestmark = pytest.mark.runtime

REGION = "eu-west-2"
KEY = ("pk", "sk")

# A record: key number, version, a text attribute (or absent), a count to add.
RECORDS = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.integers(0, 4),
        st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
        st.integers(-5, 5),
    ),
    max_size=25,
)


def item(key: int, version: int, text: str | None, count: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "pk": {"S": f"K#{key}"},
        "sk": {"S": "ITEM"},
        "version": {"N": str(version)},
        "count": {"N": str(count)},
        "tags": {"SS": [f"t{version}"]},
    }
    if text is not None:
        out["text"] = {"S": text}
    return out


def model(plan: WritePlan, records: list[tuple[int, int, str | None, int]]) -> dict[str, dict[str, Any]]:
    """Each mode applied one record after another, in plain Python."""
    table: dict[str, dict[str, Any]] = {}
    for key, version, text, count in records:
        name = f"K#{key}"
        stored = table.get(name)
        new = {"version": Decimal(version), "count": Decimal(count), "tags": {f"t{version}"}}
        if text is not None:
            new["text"] = text
        if plan.mode == PutIfAbsentTarget:
            if stored is None:
                table[name] = new
        elif plan.mode == NewerWinsTarget:
            if stored is None or stored["version"] < version:
                table[name] = new
        elif plan.mode == DeleteTarget:
            table.pop(name, None)
        else:  # update: count is ADDed, tags ADDed (set union), version set if absent, text SET
            merged = dict(stored or {})
            merged["count"] = merged.get("count", Decimal(0)) + count
            merged["tags"] = set(merged.get("tags", set())) | {f"t{version}"}
            merged.setdefault("version", Decimal(version))
            if text is not None:
                merged["text"] = text
            table[name] = merged
    return table


def stored(db: Any) -> dict[str, dict[str, Any]]:
    from boto3.dynamodb.types import TypeDeserializer

    python = TypeDeserializer()
    out = {}
    for row in db.scan(TableName="target")["Items"]:
        values = {k: python.deserialize(v) for k, v in row.items() if k not in KEY}
        out[row["pk"]["S"]] = values
    return out


PLANS = {
    PutIfAbsentTarget: WritePlan(PutIfAbsentTarget, KEY),
    NewerWinsTarget: WritePlan(NewerWinsTarget, KEY, version="version"),
    UpdateTarget: WritePlan(UpdateTarget, KEY, actions={"count": ADD, "tags": ADD, "version": SET_IF_ABSENT}),
    DeleteTarget: WritePlan(DeleteTarget, KEY),
}


@pytest.mark.parametrize("mode", sorted(PLANS, key=lambda mode: mode.name), ids=lambda mode: mode.name)
@settings(max_examples=40, deadline=None)
@given(before=RECORDS, records=RECORDS)
def test_each_mode_leaves_the_table_its_sequential_model_leaves(
    mode: type[DynamoDbTarget], before: list[Any], records: list[Any]
) -> None:
    plan = PLANS[mode]
    with mock_aws():
        db = boto3.client("dynamodb", region_name=REGION)
        create_pk_sk_table(db, "target")
        for record in before:  # a table that already holds items, written by plain puts
            db.put_item(TableName="target", Item=item(*record))
        initial = {f"K#{k}": (k, v, t, c) for k, v, t, c in before}
        skipped = 0
        for record in records:
            method, arguments = single_item_request(plan, item(*record))
            try:
                getattr(db, method)(TableName="target", **arguments)
            except db.exceptions.ConditionalCheckFailedException:
                skipped += 1
        expected = model(plan, list(initial.values()) + records)
        if plan.mode == PutIfAbsentTarget:
            # The model's first write of a key is the table's; each later record is skipped.
            assert skipped == len(records) - len({k for k, *_ in records} - {k for k, *_ in initial.values()})
        if plan.mode == DeleteTarget:
            # The initial items came from puts, not from the mode: model them as stored first.
            expected = {
                k: v for k, v in model(WritePlan(PutIfAbsentTarget, KEY), list(initial.values())).items()
            }
            for key, *_ in records:
                expected.pop(f"K#{key}", None)
        assert stored(db) == expected


def test_newer_wins_is_the_same_in_any_order() -> None:
    records = [(1, 3, "x", 0), (1, 5, "y", 0), (1, 5, "z", 0), (1, 4, "w", 0), (2, 1, None, 0)]
    tables = []
    for order in (records, list(reversed(records)), records[2:] + records[:2]):
        with mock_aws():
            db = boto3.client("dynamodb", region_name=REGION)
            create_pk_sk_table(db, "target")
            for record in order:
                method, arguments = single_item_request(PLANS[NewerWinsTarget], item(*record))
                with contextlib.suppress(db.exceptions.ConditionalCheckFailedException):
                    getattr(db, method)(TableName="target", **arguments)
            tables.append(stored(db))
    # Highest version per key; of equal versions the first stored stays.
    assert tables[0]["K#1"]["version"] == 5 and tables[0]["K#1"]["text"] == "y"
    assert tables[1]["K#1"]["text"] == "z"  # reversed: "z" was stored first
    assert all(t["K#1"]["version"] == 5 and set(t) == {"K#1", "K#2"} for t in tables)


def test_a_retry_after_a_lost_answer_finds_its_own_item_and_counts_it_written() -> None:
    with mock_aws():
        db = boto3.client("dynamodb", region_name=REGION)
        create_pk_sk_table(db, "target")
        mine = item(1, 2, "x", 0)
        _method, arguments = single_item_request(PLANS[PutIfAbsentTarget], mine)
        db.put_item(TableName="target", **arguments)  # the answer of this attempt is "lost"
        with pytest.raises(db.exceptions.ConditionalCheckFailedException) as refused:
            db.put_item(TableName="target", **arguments)
        found = refused.value.response.get("Item")
        assert written_by_us(mine, found)
        assert not written_by_us(item(1, 2, "other", 0), found)
        assert not written_by_us(mine, None)


def test_update_without_attributes_and_delete_send_only_the_key() -> None:
    plan = WritePlan(UpdateTarget, KEY)
    assert single_item_request(plan, {"pk": {"S": "a"}, "sk": {"S": "b"}}) == (
        "update_item",
        {"Key": {"pk": {"S": "a"}, "sk": {"S": "b"}}},
    )
    assert single_item_request(PLANS[DeleteTarget], item(1, 1, "x", 1)) == (
        "delete_item",
        {"Key": {"pk": {"S": "K#1"}, "sk": {"S": "ITEM"}}},
    )
    with pytest.raises(ValueError, match="version"):
        WritePlan(NewerWinsTarget, KEY)
    with pytest.raises(ValueError, match="single-item"):
        WritePlan(PutTarget, KEY)


def test_a_counted_update_is_the_update_and_its_marker_in_one_transaction() -> None:
    plan = WritePlan(UpdateTarget, KEY, actions={"n": ADD}, counters=("n",))
    item = {"pk": {"S": "K"}, "sk": {"S": "S"}, "n": {"N": "2"}}
    marker = {"pk": {"S": "MARK#j"}, "sk": {"S": "OFFSET#7"}}
    update, put = counted_update(plan, item, "target", "ledger", marker)["TransactItems"]
    assert update["Update"]["TableName"] == "target" and update["Update"]["Key"] == {
        "pk": {"S": "K"},
        "sk": {"S": "S"},
    }
    assert update["Update"]["UpdateExpression"] == "ADD #a0 :a0"
    # A marker found stored comes back (ALL_OLD): its run id says whether this run applied it.
    assert put == {
        "Put": {
            "TableName": "ledger",
            "Item": marker,
            "ConditionExpression": "attribute_not_exists(sk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def test_records_of_one_key_combine_into_the_update_that_does_what_theirs_do_in_order() -> None:
    """Issue 42 item 5: a counted transaction carries the records of its key waiting behind each
    other: a SET takes the later value, a set-if-absent the earlier, an ADD the sum or the union."""
    plan = WritePlan(
        UpdateTarget,
        KEY,
        actions={"n": ADD, "tags": ADD, "first": "setIfAbsent"},
        counters=("n",),
    )
    key = {"pk": {"S": "K"}, "sk": {"S": "S"}}
    earlier = {**key, "n": {"N": "1.5"}, "tags": {"SS": ["a", "b"]}, "name": {"S": "x"}, "first": {"S": "1"}}
    later = {**key, "n": {"N": "-0.5"}, "tags": {"SS": ["b", "c"]}, "name": {"S": "y"}, "first": {"S": "2"}}
    later["only"] = {"S": "z"}
    assert combined(plan, earlier, later) == {
        **key,
        "n": {"N": "1"},
        "tags": {"SS": ["a", "b", "c"]},
        "name": {"S": "y"},
        "first": {"S": "1"},
        "only": {"S": "z"},
    }
    # A sum DynamoDB would not store (past 38 digits) or an ADD of two kinds: not one update.
    assert combined(plan, {**key, "n": {"N": "1" + "0" * 37}}, {**key, "n": {"N": "0.1"}}) is None
    assert combined(plan, {**key, "n": {"N": "1"}}, {**key, "n": {"NS": ["1"]}}) is None
    markers = [{"pk": {"S": "M"}, "sk": {"S": f"OFFSET#{n}"}} for n in range(MAX_COUNTED_RECORDS)]
    assert len(counted_update(plan, earlier, "t", "l", markers)["TransactItems"]) == 100  # DynamoDB's most
    with pytest.raises(ValueError, match="1 to 99 markers"):
        counted_update(plan, earlier, "t", "l", [*markers, markers[0]])


def test_a_transaction_costs_twice_the_units_of_the_item_and_its_marker() -> None:
    counting = WritePlan(UpdateTarget, KEY, actions={"n": ADD}, counters=("n",))
    assert counting.units(100) == 2 * (1 + 1) and counting.units(1500) == 2 * (2 + 1)
    assert WritePlan(UpdateTarget, KEY, actions={"n": ADD}).units(1500) == 2  # a set ADD: no marker
    with pytest.raises(ValueError, match="counter"):
        WritePlan(UpdateTarget, KEY, counters=("n",))


def wide(count: int, text: str = "v") -> dict[str, Any]:
    return {
        "pk": {"S": "W"},
        "sk": {"S": "S"},
        **{f"attribute_{i}": {"S": f"{text}{i}"} for i in range(count)},
    }


def whole(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """The split SET requests as one UpdateItem."""
    return {
        "Key": requests[0]["Key"],
        "UpdateExpression": "SET " + ", ".join(r["UpdateExpression"].removeprefix("SET ") for r in requests),
        "ExpressionAttributeNames": {
            k: v for r in requests for k, v in r["ExpressionAttributeNames"].items()
        },
        "ExpressionAttributeValues": {
            k: v for r in requests for k, v in r["ExpressionAttributeValues"].items()
        },
    }


@pytest.mark.parametrize("action", [None, SET_IF_ABSENT])
def test_an_update_past_the_expression_limits_is_split_into_requests_within_them(action: str | None) -> None:
    """400 attributes (SET, or set only if absent) are ~6 KB or ~15 KB of UpdateExpression:
    several UpdateItems on the key, each within DynamoDB's limits as the emulator enforces them,
    together SET every attribute once; applied over a stored item they give what one would."""
    item = wide(400)
    plan = WritePlan(
        UpdateTarget, KEY, actions={name: action for name in item if name not in KEY} if action else {}
    )
    requests = update_requests(plan, item)
    assert len(requests) > 1
    for arguments in requests:
        assert arguments["Key"] == {"pk": {"S": "W"}, "sk": {"S": "S"}}
        assert limits.expression_error("UpdateExpression", arguments["UpdateExpression"]) is None
    names = [name for arguments in requests for name in arguments["ExpressionAttributeNames"].values()]
    assert sorted(names) == sorted(name for name in item if name not in KEY)
    with pytest.raises(ValueError, match="single_item_requests"):
        single_item_request(plan, item)
    assert [m for m, _ in single_item_requests(plan, item)] == ["update_item"] * len(requests)

    moto_patches.DYNAMODB_EXPRESSIONS.install()
    try:
        with mock_aws():
            db = boto3.client("dynamodb", region_name=REGION)
            create_pk_sk_table(db, "target")
            db.put_item(TableName="target", Item={**wide(3, "stored"), "other": {"S": "kept"}})
            with pytest.raises(db.exceptions.ClientError, match="Expression size has exceeded"):
                db.update_item(TableName="target", **whole(requests))  # what one request would be
            for arguments in requests:
                db.update_item(TableName="target", **arguments)
            stored = db.get_item(TableName="target", Key=requests[0]["Key"])["Item"]
    finally:
        moto_patches.DYNAMODB_EXPRESSIONS.uninstall()
    expected = {**item, "other": {"S": "kept"}}
    if action == SET_IF_ABSENT:
        expected |= wide(3, "stored")
    assert stored == expected


def test_an_update_within_the_limits_is_one_request() -> None:
    item = wide(200)
    assert len(update_requests(WritePlan(UpdateTarget, KEY), item)) == 1


def target(attributes: dict[str, Any]) -> DynamoDbTarget:
    """The input's DynamoDB target in writeMode update, keys filled by fixed templates."""
    spec = parse_spec(
        {
            "version": 1,
            "source": "s3://src/data.jsonl",
            "jobId": "wide",
            "format": "jsonl",
            "dynamodb": {
                "key": {n: "x" for n in KEY},
                "attributes": attributes,
                "writeMode": UpdateTarget.name,
            },
        },
        table_key={n: "S" for n in KEY},
    )
    assert spec.dynamodb is not None
    return spec.dynamodb


def test_a_numeric_add_past_the_limits_is_refused_at_plan_and_never_split() -> None:
    """A numeric add's update goes in one transaction with its marker: it cannot be split."""
    counter = {"n": {"field": "n", "type": "N", "update": ADD}}
    others = {f"first_{i}": {"field": "id", "type": "S", "update": SET_IF_ABSENT} for i in range(150)}
    with pytest.raises(InputValidationError) as refused:
        check_update_limits(target({**counter, **others}))
    assert refused.value.field == "dynamodb.attributes" and "4096 bytes" in refused.value.message
    check_update_limits(target({**counter, **dict(list(others.items())[:100])}))  # ~3.7 KB: one transaction
    check_update_limits(target(others))  # no numeric add: split when past the limits
    plan = WritePlan(UpdateTarget, KEY, actions={"n": ADD}, counters=("n",))
    with pytest.raises(ValueError, match="numeric add"):
        update_requests(plan, {**wide(300), "n": {"N": "1"}})


@given(st.lists(st.sampled_from([None, SET_IF_ABSENT, ADD]), min_size=1, max_size=700))
@settings(max_examples=40, deadline=None)
def test_every_split_request_is_within_the_limits_and_as_full_as_it_can_be(actions: list[str | None]) -> None:
    item = wide(len(actions))
    names = [name for name in item if name not in KEY]
    plan = WritePlan(UpdateTarget, KEY, actions={n: a for n, a in zip(names, actions, strict=True) if a})
    requests = update_requests(plan, item)
    for arguments in requests:
        assert limits.expression_error("UpdateExpression", arguments["UpdateExpression"]) is None
        assert len(arguments["UpdateExpression"]) <= 4096
    assert [n for r in requests for n in r["ExpressionAttributeNames"].values()] == names
    # Each request but the last was cut because the next action would not fit: at least 3.9 KB
    # or 290 operators.
    for arguments in requests[:-1]:
        expression = arguments["UpdateExpression"]
        operators = len(arguments["ExpressionAttributeNames"]) + expression.count("if_not_exists")
        assert len(expression) > 4096 - 40 or operators > 300 - 2
