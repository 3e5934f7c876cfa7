"""mapload/emulator/moto_patches.py: a cancelled transaction in moto no longer undoes (or trips over)
other threads' writes."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

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
