"""The tests' moto server and `mapload serve`: they come up on a port of their own choosing and
apply DynamoDB writes atomically, as DynamoDB does (moto's own threaded server loses concurrent
updates)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import boto3
import pytest
from servers import mapload_serve, moto_server

pytestmark = [pytest.mark.runtime]


@contextmanager
def _tests_server(log: Path) -> Iterator[str]:
    with moto_server(log) as server:
        yield server.endpoint


@pytest.mark.parametrize("start", [_tests_server, mapload_serve], ids=["tests' moto server", "mapload serve"])
def test_concurrent_updates_of_one_item_are_all_applied(
    tmp_path: Path, start: Callable[[Path], AbstractContextManager[str]]
) -> None:
    with start(tmp_path / "server.log") as endpoint:
        db = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        db.create_table(
            TableName="counter",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )

        def add(i: int) -> None:
            db.update_item(
                TableName="counter",
                Key={"pk": {"S": "one"}},
                UpdateExpression="ADD n :one, done :i",
                ExpressionAttributeValues={":one": {"N": "1"}, ":i": {"NS": [str(i)]}},
            )

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(add, range(400)))
        item = db.get_item(TableName="counter", Key={"pk": {"S": "one"}})["Item"]

    assert (item["n"]["N"], len(item["done"]["NS"])) == ("400", 400)


def test_a_server_that_cannot_start_is_an_error_naming_it(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="did not come up"),
        moto_server(
            tmp_path / "server.log", {"PYTHONPATH": str(tmp_path / "nowhere"), "PYTHONHOME": "/nowhere"}
        ),
    ):
        pass
