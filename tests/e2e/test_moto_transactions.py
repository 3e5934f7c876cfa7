"""mapload/emulator/moto_patches.py: a cancelled transaction in moto no longer undoes (or trips over)
other threads' writes."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends

from mapload.emulator import moto_patches
from mapload.tables import create_pk_sk_table

pytestmark = pytest.mark.e2e


def _race(db: Any) -> int:
    """8 threads: 4 send transactions cancelled by a stored marker, 4 put new items; the items
    the puts left."""
    create_pk_sk_table(db, "t")
    db.put_item(TableName="t", Item={"pk": {"S": "MARK"}, "sk": {"S": "0"}})
    cancelled = {
        "TransactItems": [
            {
                "Update": {
                    "TableName": "t",
                    "Key": {"pk": {"S": "N"}, "sk": {"S": "0"}},
                    "UpdateExpression": "ADD n :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
            {
                "Put": {
                    "TableName": "t",
                    "Item": {"pk": {"S": "MARK"}, "sk": {"S": "0"}},
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            },
        ]
    }
    failures: list[BaseException] = []

    def transactions() -> None:
        for _ in range(40):
            try:
                db.transact_write_items(**cancelled)
            except ClientError as error:
                assert error.response["Error"]["Code"] == "TransactionCanceledException"
            except BaseException as error:  # moto's copy racing a put
                failures.append(error)

    def puts(worker: int) -> None:
        for n in range(40):
            db.put_item(TableName="t", Item={"pk": {"S": f"P{worker}"}, "sk": {"S": str(n)}})

    threads = [threading.Thread(target=transactions) for _ in range(4)]
    threads += [threading.Thread(target=puts, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[0]
    items = db.scan(TableName="t")["Items"]
    return sum(1 for item in items if item["pk"]["S"].startswith("P"))


def test_cancelled_transactions_keep_every_concurrent_put_and_uninstall_restores_moto() -> None:
    original = DynamoDBBackend.transact_write_items
    with mock_aws():
        moto_patches.TRANSACTIONS.install()
        try:
            assert _race(boto3.client("dynamodb", region_name="us-east-1")) == 4 * 40
        finally:
            moto_patches.TRANSACTIONS.uninstall()
    assert DynamoDBBackend.transact_write_items is original


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _key(pk: str, sk: str = "0") -> dict[str, Any]:
    return {"pk": _s(pk), "sk": _s(sk)}


def _add(table: str, key: dict[str, Any], n: str = "1", **extra: Any) -> dict[str, Any]:
    update = {"TableName": table, "Key": key, "UpdateExpression": "ADD n :n SET w = :w"}
    return {"Update": {**update, "ExpressionAttributeValues": {":n": {"N": n}, ":w": _s("x")}, **extra}}


def _put(table: str, item: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": item, **extra}}


_ABSENT = {"ConditionExpression": "attribute_not_exists(pk)"}
# Each op type, on a table with a sort key ("t") and one without ("h", with a stream).
_TRANSACTIONS: list[list[dict[str, Any]]] = [
    [  # succeeds: each op type
        _put("t", {**_key("new"), "a": _s("1")}),
        _add("h", {"id": _s("h1")}, "5"),
        {"Delete": {"TableName": "t", "Key": _key("gone")}},
        {
            "ConditionCheck": {
                "TableName": "t",
                "Key": _key("kept"),
                "ConditionExpression": "attribute_exists(pk)",
            }
        },
    ],
    [  # cancelled by its 2nd op: the 1st (an ADD in place), 3rd and 4th are undone
        _add("t", _key("kept"), "7"),
        _put("t", {**_key("new"), "a": _s("2")}, **_ABSENT, ReturnValuesOnConditionCheckFailure="ALL_OLD"),
        _put("h", {"id": _s("h9"), "b": _s("2")}),
        {"Delete": {"TableName": "h", "Key": {"id": _s("h1")}}},
    ],
    [  # cancelled by a ConditionCheck after an update that created an item in a new partition
        _add("t", _key("fresh", "1")),
        _add("h", {"id": _s("h2")}),
        {
            "ConditionCheck": {
                "TableName": "h",
                "Key": {"id": _s("h1")},
                "ConditionExpression": "n > :m",
                "ExpressionAttributeValues": {":m": {"N": "100"}},
            }
        },
    ],
    [  # refused: two ops on one item (the 1st undone)
        _put("t", {**_key("dup"), "a": _s("3")}),
        _add("h", {"id": _s("h1")}),
        _add("t", _key("dup")),
    ],
    [  # refused: a table that does not exist
        _put("t", {**_key("lost"), "a": _s("4")}),
        _put("nope", {"pk": _s("x")}),
    ],
    [  # refused inside moto's loop: an update expression it cannot parse (the 1st undone)
        _add("h", {"id": _s("h1")}),
        {"Update": {"TableName": "t", "Key": _key("kept"), "UpdateExpression": "SET = oops"}},
    ],
    [  # refused before any op: an item with two ops
        {"Put": {"TableName": "t", "Item": _key("two")}, "Delete": {"TableName": "t", "Key": _key("two")}},
    ],
    [  # succeeds after all that: an ADD on an item the cancelled transactions left alone
        _add("t", _key("kept"), "2"),
        _put("t", {**_key("mark"), "a": _s("5")}, **_ABSENT),
    ],
]


def _answers(db: Any, streams: Any) -> list[Any]:
    """Each transaction's answer, then both tables, their item counts and the stream's records."""
    create_pk_sk_table(db, "t")
    db.create_table(
        TableName="h",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    for pk in ("kept", "gone"):
        db.put_item(TableName="t", Item={**_key(pk), "n": {"N": "1"}})
    db.put_item(TableName="h", Item={"id": _s("h1"), "n": {"N": "1"}})
    found: list[Any] = []
    for transaction in _TRANSACTIONS:
        try:
            found.append(
                db.transact_write_items(TransactItems=transaction)["ResponseMetadata"]["HTTPStatusCode"]
            )
        except ClientError as error:
            found.append((error.response["Error"], error.response.get("CancellationReasons")))
    for table in ("t", "h"):
        items = db.scan(TableName=table)["Items"]
        found.append((sorted(items, key=repr), db.describe_table(TableName=table)["Table"]["ItemCount"]))
    arn = db.describe_table(TableName="h")["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    at = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=at["ShardIterator"])["Records"]
    found.append([(r["eventName"], r["dynamodb"]["Keys"], r["dynamodb"].get("NewImage")) for r in records])
    return found


def _clients() -> tuple[Any, Any]:
    return (
        boto3.client("dynamodb", region_name="us-east-1"),
        boto3.client("dynamodbstreams", region_name="us-east-1"),
    )


def test_a_transaction_answers_and_leaves_the_tables_as_moto_s_own_does() -> None:
    """transactions: every op type, success, a cancellation by a later op (earlier and later ops
    undone, ALL_OLD returned), two ops on one item, a missing table, a validation error in moto's
    loop and one before it: the same answers, items, item counts and stream records as unpatched
    moto; and a cancelled transaction no longer replaces the table with a copy."""
    with mock_aws():
        plain = _answers(*_clients())
    with mock_aws():
        moto_patches.TRANSACTIONS.install()
        try:
            patched = _answers(*_clients())
            backend = next(iter(next(iter(dynamodb_backends.values())).values()))
            table = backend.tables["t"]
            db = _clients()[0]
            with pytest.raises(ClientError):
                db.transact_write_items(TransactItems=_TRANSACTIONS[1])
            assert backend.tables["t"] is table
        finally:
            moto_patches.TRANSACTIONS.uninstall()
    assert patched == plain
    codes = [a[0]["Code"] if isinstance(a, tuple) else a for a in plain[: len(_TRANSACTIONS)]]
    assert codes == [
        200,
        "TransactionCanceledException",
        "TransactionCanceledException",
        "ValidationException",
        "ResourceNotFoundException",
        "ValidationException",
        "ValidationException",
        200,
    ]
    t_items = {item["pk"]["S"]: item.get("n") for item in plain[len(_TRANSACTIONS)][0]}
    assert t_items == {"kept": {"N": "3"}, "new": None, "mark": None}  # the cancelled ADD of 7 undone


def _counter_add(key: str = "N") -> dict[str, Any]:
    return {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": key}, "sk": {"S": "0"}},
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }


def _marker(n: int) -> dict[str, Any]:
    return {"Put": {"TableName": "t", "Item": {"pk": {"S": "MARK"}, "sk": {"S": str(n)}}}}


def test_a_write_to_an_item_of_a_transaction_in_progress_conflicts_as_dynamodb_answers() -> None:
    """DynamoDB (developer guide, "Transaction conflict handling"): a TransactWriteItems with an
    item of another one in progress is cancelled with reason TransactionConflict for that item; a
    PutItem, UpdateItem or DeleteItem of it fails with TransactionConflictException. Neither
    changes anything; once the first is answered the item is free, and one thread's transactions
    one after another never conflict."""
    transactions = moto_patches.TRANSACTIONS
    with mock_aws():
        transactions.install()
        moto_patches.PARTIQL_INSERT.install()
        saved = transactions.hold_seconds
        try:
            db = boto3.client("dynamodb", region_name="us-east-1")
            create_pk_sk_table(db, "t")
            for n in range(5):  # one after another: no conflict, each applied
                db.transact_write_items(TransactItems=[_counter_add(), _marker(n)])
            transactions.hold_seconds = 0.5
            first = threading.Thread(
                target=lambda: db.transact_write_items(TransactItems=[_counter_add(), _marker(100)])
            )
            first.start()
            deadline = 50
            while not transactions.held.items and deadline:
                threading.Event().wait(0.01)
                deadline -= 1
            with pytest.raises(ClientError) as cancelled:
                db.transact_write_items(TransactItems=[_marker(200), _counter_add()])
            assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
            assert [r["Code"] for r in cancelled.value.response["CancellationReasons"]] == [
                "None",
                "TransactionConflict",
            ]
            key = {"pk": {"S": "N"}, "sk": {"S": "0"}}
            for write in (
                lambda: db.put_item(TableName="t", Item={**key, "n": {"N": "0"}}),
                lambda: db.update_item(
                    TableName="t",
                    Key=key,
                    UpdateExpression="ADD n :one",
                    ExpressionAttributeValues={":one": {"N": "1"}},
                ),
                lambda: db.delete_item(TableName="t", Key=key),
            ):
                with pytest.raises(ClientError) as conflict:
                    write()
                assert conflict.value.response["Error"]["Code"] == "TransactionConflictException"
            # A PartiQL INSERT of it answers TransactionConflict in its statement (putIfAbsent's
            # batches); a BatchWriteItem's items are not modelled (written).
            insert = {
                "Statement": """INSERT INTO "t" VALUE {'pk': ?, 'sk': ?}""",
                "Parameters": [key["pk"], key["sk"]],
            }
            (answer,) = db.batch_execute_statement(Statements=[insert])["Responses"]
            assert answer["Error"]["Code"] == "TransactionConflict"
            # (the first transaction applied before its hold ends: the item holds 6, written again)
            db.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": {**key, "n": {"N": "6"}}}}]})
            # Another item is free meanwhile.
            db.transact_write_items(TransactItems=[_counter_add("M"), _marker(300)])
            first.join()
            transactions.hold_seconds = saved
            db.transact_write_items(TransactItems=[_marker(200), _counter_add()])
            stored = db.get_item(TableName="t", Key=key, ConsistentRead=True)["Item"]
            assert stored["n"] == {"N": "7"}  # 5 + the first + the one sent again, nothing else
            markers = db.query(
                TableName="t",
                KeyConditionExpression="pk = :m",
                ExpressionAttributeValues={":m": {"S": "MARK"}},
            )["Items"]
            assert sorted(int(m["sk"]["S"]) for m in markers) == [0, 1, 2, 3, 4, 100, 200, 300]
            assert not transactions.held.items
        finally:
            transactions.hold_seconds = saved
            moto_patches.PARTIQL_INSERT.uninstall()
            transactions.uninstall()
