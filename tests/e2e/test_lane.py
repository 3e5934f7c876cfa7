"""mapload/emulator/lane.py: a BatchWriteItem answered by the lane is answered as moto answers it.

Two servers in this process share moto's backends and the server's patches: one with the lane
(as `mapload serve` runs), one with moto's application alone. Each request goes to both, each in
its own region (the same table name, the same items), and everything that reaches the caller is
compared: the status, the body to the byte, every header but the request id and the date, and the
table's items afterwards."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from mapload.emulator import lane, moto_patches
from mapload.emulator import server as serve
from mapload.emulator.lane import DynamoDbLane

pytestmark = pytest.mark.e2e

_VARYING = {"x-amzn-requestid", "date"}


@contextmanager
def _server(app: Any) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


class _Caller:
    """A DynamoDB client that keeps what the server sent: status, headers and body."""

    def __init__(self, endpoint: str, region: str) -> None:
        self.client = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id="lane",
            aws_secret_access_key="lane",
            config=Config(retries={"max_attempts": 1}),
        )
        self.sent: tuple[int, dict[str, str], bytes] | None = None
        self.client.meta.events.register("after-call.dynamodb", self._keep)

    def _keep(self, http_response: Any, **_: Any) -> None:
        headers = {k.lower(): v for k, v in http_response.headers.items() if k.lower() not in _VARYING}
        self.sent = (http_response.status_code, headers, http_response.content)

    def batch(self, **request: Any) -> tuple[int, dict[str, str], bytes]:
        return self.call("batch_write_item", **request)

    def call(self, operation: str, **request: Any) -> tuple[int, dict[str, str], bytes]:
        self.sent = None
        with contextlib.suppress(ClientError):  # a refusal's answer is compared like any other
            getattr(self.client, operation)(**request)
        assert self.sent is not None
        return self.sent

    def items(self) -> list[dict[str, Any]]:
        found = self.client.scan(TableName="t")["Items"]
        return sorted(found, key=lambda item: json.dumps(item, sort_keys=True, default=str))


@pytest.fixture
def callers() -> Iterator[tuple[_Caller, _Caller, DynamoDbLane]]:
    moto_patches.install(*serve.SERVE_PATCHES)
    taken = DynamoDbLane(DomainDispatcherApplication(create_backend_app))
    plain = DomainDispatcherApplication(create_backend_app)
    try:
        with _server(taken) as lane_url, _server(plain) as moto_url:
            pair = (_Caller(lane_url, "eu-west-3"), _Caller(moto_url, "eu-north-1"))
            for caller in pair:
                caller.client.create_table(
                    TableName="t",
                    KeySchema=[
                        {"AttributeName": "pk", "KeyType": "HASH"},
                        {"AttributeName": "sk", "KeyType": "RANGE"},
                    ],
                    AttributeDefinitions=[
                        {"AttributeName": "pk", "AttributeType": "S"},
                        {"AttributeName": "sk", "AttributeType": "N"},
                    ],
                    BillingMode="PAY_PER_REQUEST",
                )
            yield pair[0], pair[1], taken
            for caller in pair:
                caller.client.delete_table(TableName="t")
    finally:
        moto_patches.uninstall(*serve.SERVE_PATCHES)


def _put(pk: str, sk: int, **attributes: Any) -> dict[str, Any]:
    return {"PutRequest": {"Item": {"pk": {"S": pk}, "sk": {"N": str(sk)}, **attributes}}}


def _delete(pk: str, sk: int) -> dict[str, Any]:
    return {"DeleteRequest": {"Key": {"pk": {"S": pk}, "sk": {"N": str(sk)}}}}


_BLOB = b"\x00\xffbytes"
# (request, whether the lane answers it): each is sent to both servers in turn, so the later
# ones meet the items the earlier ones stored.
_REQUESTS: list[tuple[dict[str, Any], bool]] = [
    ({"RequestItems": {"t": [_put("a", 1, n={"N": "1.50"}), _put("b", 2)]}}, True),
    (
        {
            "RequestItems": {"t": [_put("a", 1, big={"S": "é" * 3000}), _put("c", 3)]},
            "ReturnConsumedCapacity": "TOTAL",
        },
        True,
    ),
    (
        {
            "RequestItems": {
                "t": [
                    _put("d", 4, m={"M": {"x": {"L": [{"N": "1"}, {"S": "y"}, {"BOOL": True}]}}}),
                    _put("e", 5, b={"B": _BLOB}, bs={"BS": [_BLOB]}, ss={"SS": ["p", "q"]}),
                    _delete("b", 2),
                    _delete("nobody", 9),
                ]
            },
            "ReturnConsumedCapacity": "INDEXES",
            "ReturnItemCollectionMetrics": "SIZE",
        },
        True,
    ),
    ({"RequestItems": {"missing": [_put("a", 1)]}}, True),  # no such table
    ({"RequestItems": {"t": [_put("f", 6), {"PutRequest": {"Item": {"pk": {"S": "g"}}}}]}}, True),
    ({"RequestItems": {"t": [_put("h", 7), _put("", 8)]}}, True),  # an empty key
    (
        {
            "RequestItems": {
                "t": [_put("i", 9), {"PutRequest": {"Item": {"pk": {"S": "i"}, "sk": {"S": "9"}}}}]
            }
        },
        True,
    ),  # a key of the wrong type, after a put moto has applied
    ({"RequestItems": {"t": [_put("j", 10), _put("j", 10)]}}, True),  # the same item twice
    ({"RequestItems": {"t": [_put("k", 11, huge={"S": "x" * 409_600})]}}, True),  # past 400 KB
    (
        {"RequestItems": {"t": [_put("l", 12, nothing={"NULL": True})]}, "ReturnConsumedCapacity": "NONE"},
        True,
    ),
]


def test_every_answer_and_stored_item_is_moto_s(callers: Callers) -> None:
    through_lane, through_moto, taken = callers
    for request, answered_by_lane in _REQUESTS:
        before = taken.taken
        got, want = through_lane.batch(**request), through_moto.batch(**request)
        assert got == want, request
        assert taken.taken == before + answered_by_lane, request
        assert through_lane.items() == through_moto.items(), request
    assert {item["pk"]["S"] for item in through_lane.items()} >= {"a", "c", "d", "e", "f", "i", "l"}


Callers = tuple[_Caller, _Caller, DynamoDbLane]

_KEY = {"pk": {"S": "u"}, "sk": {"N": "1"}}
_ONE = {":one": {"N": "1"}}
_ADD = {"UpdateExpression": "ADD n :one", "ExpressionAttributeValues": _ONE}
_MARKER = {"pk": {"S": "marker"}, "sk": {"N": "1"}}
_INSERT = "INSERT INTO \"t\" VALUE {'pk': ?, 'sk': ?}"
_TRANSACTION = {
    "TransactItems": [
        {"Update": {"TableName": "t", "Key": _KEY, **_ADD}},
        {"Put": {"TableName": "t", "Item": _MARKER, "ConditionExpression": "attribute_not_exists(pk)"}},
    ]
}
# Single-item requests as mapload's writers and ledger and a user's tools send them, refusals too.
_SINGLE: list[tuple[str, dict[str, Any]]] = [
    ("put_item", {"TableName": "t", "Item": {**_KEY, "a": {"S": "x"}}, "ReturnValues": "ALL_OLD"}),
    (
        "put_item",
        {
            "TableName": "t",
            "Item": {**_KEY, "a": {"S": "y"}},
            "ConditionExpression": "attribute_not_exists(pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    ),
    ("put_item", {"TableName": "t", "Item": {"pk": {"S": "u"}}}),  # no sort key
    ("update_item", {"TableName": "t", "Key": _KEY, **_ADD, "ReturnValues": "ALL_NEW"}),
    ("update_item", {"TableName": "t", "Key": _KEY, **_ADD, "ReturnValues": "UPDATED_OLD"}),
    (
        "update_item",
        {
            "TableName": "t",
            "Key": _KEY,
            "UpdateExpression": "SET #a = :v, m = :m REMOVE gone",
            "ConditionExpression": "n > :zero",
            "ExpressionAttributeNames": {"#a": "a"},
            "ExpressionAttributeValues": {
                ":v": {"S": "z"},
                ":m": {"M": {"k": {"L": [{"N": "2"}]}}},
                ":zero": {"N": "0"},
            },
            "ReturnConsumedCapacity": "TOTAL",
        },
    ),
    ("update_item", {"TableName": "t", "Key": _KEY, "UpdateExpression": "SET a = :missing"}),
    ("update_item", {"TableName": "t", "Key": _KEY, **_ADD, "ConditionExpression": "n > :one"}),
    (
        "get_item",
        {"TableName": "t", "Key": _KEY, "ProjectionExpression": "a, m.k[0]", "ConsistentRead": True},
    ),
    ("get_item", {"TableName": "t", "Key": {"pk": {"S": "nobody"}, "sk": {"N": "1"}}}),
    ("get_item", {"TableName": "missing", "Key": _KEY}),
    (
        "query",
        {
            "TableName": "t",
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": "u"}},
            "Limit": 1,
        },
    ),
    ("transact_write_items", _TRANSACTION),
    ("transact_write_items", _TRANSACTION),  # again: the marker is there, the transaction cancelled
    (
        "batch_execute_statement",
        {
            "Statements": [
                {"Statement": _INSERT, "Parameters": [{"S": "new"}, {"N": "5"}]},
                {"Statement": _INSERT, "Parameters": [{"S": "u"}, {"N": "1"}]},
            ]
        },
    ),
    (
        "delete_item",
        {
            "TableName": "t",
            "Key": _KEY,
            "ConditionExpression": "a = :b",
            "ExpressionAttributeValues": {":b": {"S": "b"}},
        },
    ),
    ("delete_item", {"TableName": "t", "Key": _KEY, "ReturnValues": "ALL_OLD"}),
    ("delete_item", {"TableName": "t", "Key": {"pk": {"N": "1"}, "sk": {"N": "1"}}}),  # a mistyped key
]


def test_a_single_item_request_is_answered_as_moto_answers_it(callers: Callers) -> None:
    """Each request of `_SINGLE`, sent to both servers in turn (the later ones meet what the
    earlier ones stored), is answered by the lane as by moto: status, body, headers, items."""
    through_lane, through_moto, taken = callers
    for operation, request in _SINGLE:
        before = taken.taken
        assert through_lane.call(operation, **request) == through_moto.call(operation, **request), request
        assert taken.taken == before + 1, request
        assert through_lane.items() == through_moto.items(), request
    assert {item["pk"]["S"] for item in through_lane.items()} == {"marker", "new"}


def test_a_request_the_lane_does_not_model_is_moto_s(callers: Callers) -> None:
    """A body the plain reader does not take (a member the shape lacks), a compressed one and a
    browser's are sent to moto's application whole, and answered as it answers them."""
    through_lane, through_moto, taken = callers
    odd = {"RequestItems": {"t": [_put("m", 13)]}, "ReturnConsumedCapacity": "TOTAL"}
    for caller in (through_lane, through_moto):
        caller.client.meta.events.register_first(
            "before-sign.dynamodb.BatchWriteItem", _with_unknown_member, unique_id="lane-odd"
        )
    assert through_lane.batch(**odd) == through_moto.batch(**odd)
    assert taken.taken == 0
    for header in ("Origin", "Content-Encoding"):
        assert not lane._plain_request(
            {"CONTENT_LENGTH": "10", f"HTTP_{header.upper().replace('-', '_')}": "x"}
        )
    assert lane._plain_request({"CONTENT_LENGTH": "10"})
    assert not lane._plain_request({})  # no stated length
    assert through_lane.items() == through_moto.items()


def _with_unknown_member(request: Any, **_: Any) -> None:
    document = json.loads(request.body)
    document["SomethingNew"] = "x"
    request.data = json.dumps(document).encode()


def test_mapload_serve_answers_a_batch_through_the_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    answered: list[int] = []
    answer = lane._answer

    def counted(handler: Any) -> Any:
        answered.append(1)
        return answer(handler)

    monkeypatch.setattr(lane, "_answer", counted)
    with serve.serving(0) as endpoint:
        caller = _Caller(endpoint, "ap-south-2")
        caller.client.create_table(
            TableName="served",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        caller.client.batch_write_item(
            RequestItems={"served": [{"PutRequest": {"Item": {"pk": {"S": "z"}}}}]}
        )
        assert caller.client.get_item(TableName="served", Key={"pk": {"S": "z"}})["Item"] == {
            "pk": {"S": "z"}
        }
        caller.client.delete_table(TableName="served")
    assert answered == [1]
