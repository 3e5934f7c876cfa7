"""The Worker's BatchWriteItem sender against botocore's own client: the same request on the wire,
the same answers and errors; and against moto, items really written."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from decimal import Decimal
from io import BytesIO
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError, ClientError

from adapters.dynamodb import BatchWriter, RetryPolicy
from adapters.dynamodb_wire import BatchWriteClient
from logic.writemodes import insert_statement

pytestmark = pytest.mark.runtime

ITEMS: list[dict[str, Any]] = [
    {
        "pk": {"S": "POSTCODE#AB1 2CD"},
        "sk": {"S": 'ünïcode "quoted" \\ back\nslash'},
        "n": {"N": "-12.5000"},
        "b": {"B": b"\x00\x01binary\xff"},
        "flag": {"BOOL": True},
        "none": {"NULL": True},
        "list": {"L": [{"S": "a"}, {"N": "1"}, {"M": {"deep": {"B": b"\xfe"}}}]},
        "map": {"M": {"x": {"SS": ["a", "b"]}, "y": {"NS": ["1", "2.5"]}, "z": {"BS": [b"a", b"\x00"]}}},
    },
    {"pk": {"S": "2"}, "sk": {"S": ""}},
]


class Raw(BytesIO):
    def stream(self, **_kwargs: Any) -> Any:
        yield self.read()


def canned(status: int, body: bytes, headers: dict[str, str] | None = None) -> Callable[..., AWSResponse]:
    """A before-send handler that records the request and answers instead of the network."""

    def answer(request: AWSPreparedRequest, **_kwargs: Any) -> AWSResponse:
        answer.seen.append(request)  # type: ignore[attr-defined]
        return AWSResponse(request.url, status, headers or {}, Raw(body))  # type: ignore[arg-type]

    answer.seen = []  # type: ignore[attr-defined]
    return answer


def client(endpoint: str = "http://127.0.0.1:9") -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="eu-west-2",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}, parameter_validation=False),
    )


def both(handler: Callable[..., AWSResponse], endpoint: str = "http://127.0.0.1:9") -> tuple[Any, Any]:
    plain = client(endpoint)
    plain.meta.events.register("before-send.dynamodb.BatchWriteItem", handler)
    return plain, BatchWriteClient(plain, Credentials("AKIDEXAMPLE", "secret"))


def text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9", "https://proxy.example:8443/ddb"])
def test_the_request_is_the_one_botocore_sends(endpoint: str) -> None:
    handler = canned(200, b"{}")
    plain, fast = both(handler, endpoint)
    plain.batch_write_item(RequestItems={"T": [{"PutRequest": {"Item": i}} for i in ITEMS]})
    fast.batch_write_item(RequestItems={"T": [{"PutRequest": {"Item": i}} for i in ITEMS]})
    theirs, ours = handler.seen  # type: ignore[attr-defined]
    assert ours.url == theirs.url and ours.method == theirs.method == "POST"
    assert json.loads(ours.body) == json.loads(theirs.body)
    for header in ("Content-Type", "X-Amz-Target"):
        assert text(ours.headers[header]) == text(theirs.headers[header])
    # Signed for the same key, date, region and service; the signature covers the target.
    scope = text(theirs.headers["Authorization"]).split("Credential=")[1].split(",")[0]
    assert scope.startswith("AKIDEXAMPLE/") and scope.endswith("/eu-west-2/dynamodb/aws4_request")
    authorization = text(ours.headers["Authorization"])
    assert authorization.startswith(f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=")
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "x-amz-target", "content-type"} <= set(signed)


def test_a_value_that_is_no_attribute_value_is_refused_by_name() -> None:
    _plain, fast = both(canned(200, b"{}"))
    with pytest.raises(TypeError, match="Decimal is not a DynamoDB attribute value"):
        fast.batch_write_item(RequestItems={"T": [{"PutRequest": {"Item": {"n": Decimal(1)}}}]})


UNPROCESSED = {"T": [{"PutRequest": {"Item": {"pk": {"S": "1"}, "n": {"N": "2"}}}}]}
ERRORS = [
    (
        400,
        {"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "message": "m"},
    ),
    (400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "Message": "rate"}),
    (400, {"__type": "com.amazon.coral.validate#ValidationException", "message": "bad item"}),
    (400, {"__type": "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException", "message": "no table"}),
    (500, {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "oops"}),
]


@pytest.mark.parametrize(("status", "body"), ERRORS)
def test_errors_carry_the_code_and_message_botocore_gives(status: int, body: dict[str, str]) -> None:
    plain, fast = both(canned(status, json.dumps(body).encode()))
    request = {"T": [{"PutRequest": {"Item": ITEMS[1]}}]}
    with pytest.raises(ClientError) as theirs:
        plain.batch_write_item(RequestItems=request)
    with pytest.raises(ClientError) as ours:
        fast.batch_write_item(RequestItems=request)
    assert ours.value.response["Error"] == {
        "Code": theirs.value.response["Error"]["Code"],
        "Message": theirs.value.response["Error"]["Message"],
    }
    assert ours.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert ours.value.operation_name == "BatchWriteItem"


def test_unprocessed_items_come_back_as_botocore_returns_them() -> None:
    body = json.dumps({"UnprocessedItems": UNPROCESSED}).encode()
    plain, fast = both(canned(200, body, {"x-amz-crc32": str(zlib.crc32(body))}))
    request = {"T": [{"PutRequest": {"Item": ITEMS[1]}}]}
    assert (
        fast.batch_write_item(RequestItems=request)["UnprocessedItems"]
        == plain.batch_write_item(RequestItems=request)["UnprocessedItems"]
        == UNPROCESSED
    )


def test_a_body_that_fails_its_crc32_is_a_retryable_error_and_the_batch_is_written_on_retry() -> None:
    body = b'{"UnprocessedItems":{}}'
    answers = [(body, "12345"), (body, str(zlib.crc32(body)))]

    def handler(request: AWSPreparedRequest, **_kwargs: Any) -> AWSResponse:
        data, crc = answers.pop(0)
        return AWSResponse(request.url, 200, {"x-amz-crc32": crc}, Raw(data))  # type: ignore[arg-type]

    _plain, fast = both(handler)
    with pytest.raises(BotoCoreError):
        fast.batch_write_item(RequestItems={"T": []})
    answers[:0] = [(body, "12345")]
    writer = BatchWriter(fast, "T", in_flight=1, policy=RetryPolicy(base_seconds=0, cap_seconds=0))
    writer.submit([ITEMS[1]])
    stats = writer.close()
    assert (stats.requests, stats.retries) == (1, 1) and not answers


def test_items_are_written_to_moto_through_the_in_process_mock(aws: Any) -> None:
    from adapters import clients

    db = clients.dynamodb(4)
    items = [
        {"pk": {"S": f"P#{i}"}, "sk": {"S": "X"}, "b": {"B": bytes([i])}, "n": {"N": str(i)}}
        for i in range(60)
    ]
    writer = BatchWriter(clients.batch_writes(4), "target", in_flight=4)
    for start in range(0, 60, 25):
        writer.submit(items[start : start + 25])
    assert writer.close().requests == 3
    scanned = db.scan(TableName="target")["Items"]
    assert sorted(scanned, key=lambda i: int(i["n"]["N"])) == items


def test_the_http_session_is_configured_as_the_clients_own() -> None:
    config = Config(
        max_pool_connections=7,
        connect_timeout=3,
        read_timeout=9,
        tcp_keepalive=True,
        proxies={"https": "http://proxy.example:3128"},
        proxies_config={"proxy_use_forwarding_for_https": True},
    )
    plain = boto3.client(
        "dynamodb",
        endpoint_url="https://dynamodb.eu-west-2.amazonaws.com",
        region_name="eu-west-2",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=config,
        verify="/etc/ssl/certs/ca-certificates.crt",
    )
    ours = BatchWriteClient(
        plain, Credentials("AKIDEXAMPLE", "secret"), verify="/etc/ssl/certs/ca-certificates.crt"
    )._session
    theirs = plain._endpoint.http_session  # the test may look inside botocore; the adapter does not
    for attribute in ("_verify", "_max_pool_connections", "_socket_options", "_cert_file"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    assert (ours._timeout.connect_timeout, ours._timeout.read_timeout) == (3, 9)
    assert (theirs._timeout.connect_timeout, theirs._timeout.read_timeout) == (3, 9)
    assert ours._proxy_config._proxies == theirs._proxy_config._proxies
    assert ours._proxy_config._proxies_settings == theirs._proxy_config._proxies_settings


def test_the_sender_reads_no_private_attribute_of_botocore() -> None:
    """Only public APIs: a botocore upgrade that moves a private attribute cannot break it silently."""
    import ast

    from adapters import clients, dynamodb_wire

    for module in (dynamodb_wire, clients):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        private = [
            f"{ast.unparse(node.value)}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        ]
        assert private == [], module.__name__


def test_deletes_with_consumed_capacity_and_insert_statements_are_the_requests_botocore_sends() -> None:
    """delete's DeleteRequests (with ReturnConsumedCapacity) and putIfAbsent's INSERTs in
    BatchExecuteStatement: the same body and target as botocore's; each statement's answer as
    botocore parses it."""
    handler = canned(200, b"{}")
    plain, fast = both(handler)
    plain.meta.events.register("before-send.dynamodb.BatchExecuteStatement", handler)
    deletes = {"T": [{"DeleteRequest": {"Key": {"pk": i["pk"], "sk": i["sk"]}}} for i in ITEMS]}
    statements = [insert_statement("T", i) for i in ITEMS]
    for sender in (plain, fast):
        sender.batch_write_item(RequestItems=deletes, ReturnConsumedCapacity="TOTAL")
        sender.batch_execute_statement(Statements=statements)
    theirs_delete, theirs_insert, ours_delete, ours_insert = handler.seen  # type: ignore[attr-defined]
    for ours, theirs in ((ours_delete, theirs_delete), (ours_insert, theirs_insert)):
        assert json.loads(ours.body) == json.loads(theirs.body)
        assert text(ours.headers["X-Amz-Target"]) == text(theirs.headers["X-Amz-Target"])
    assert text(ours_insert.headers["X-Amz-Target"]) == "DynamoDB_20120810.BatchExecuteStatement"
    answers = {"Responses": [{"TableName": "T"}, {"Error": {"Code": "DuplicateItem", "Message": "m"}}]}
    body = json.dumps(answers).encode()
    plain, fast = both(canned(200, body))
    plain.meta.events.register("before-send.dynamodb.BatchExecuteStatement", canned(200, body))
    ours_answer = fast.batch_execute_statement(Statements=statements)
    assert ours_answer["Responses"] == plain.batch_execute_statement(Statements=statements)["Responses"]


SINGLE = [
    (
        "PutItem",
        "put_item",
        {
            "Item": ITEMS[0],
            "ConditionExpression": "attribute_not_exists(#k)",
            "ExpressionAttributeNames": {"#k": "pk"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    ),
    (
        "UpdateItem",
        "update_item",
        {
            "Key": {"pk": ITEMS[1]["pk"], "sk": ITEMS[1]["sk"]},
            "UpdateExpression": "SET #a = :a",
            "ExpressionAttributeNames": {"#a": "b"},
            "ExpressionAttributeValues": {":a": {"B": b"\xff\x00"}},
        },
    ),
    ("DeleteItem", "delete_item", {"Key": {"pk": ITEMS[1]["pk"], "sk": ITEMS[1]["sk"]}}),
]


def both_single(operation: str, handler: Callable[..., AWSResponse]) -> tuple[Any, Any]:
    plain = client()
    plain.meta.events.register(f"before-send.dynamodb.{operation}", handler)
    return plain, BatchWriteClient(plain, Credentials("AKIDEXAMPLE", "secret"))


@pytest.mark.parametrize(("operation", "method", "arguments"), SINGLE)
def test_a_single_item_request_is_the_one_botocore_sends(
    operation: str, method: str, arguments: dict[str, Any]
) -> None:
    handler = canned(200, b"{}")
    plain, fast = both_single(operation, handler)
    assert getattr(fast, method)(TableName="T", **arguments) == {}
    getattr(plain, method)(TableName="T", **arguments)
    ours, theirs = handler.seen  # type: ignore[attr-defined]
    assert ours.url == theirs.url and json.loads(ours.body) == json.loads(theirs.body)
    for header in ("Content-Type", "X-Amz-Target"):
        assert text(ours.headers[header]) == text(theirs.headers[header])
    assert text(ours.headers["X-Amz-Target"]) == f"DynamoDB_20120810.{operation}"
    assert (
        text(ours.headers["Authorization"]).split("Signature=")[0]
        == (text(theirs.headers["Authorization"]).split("Signature=")[0])
    )


STORED = {
    "pk": {"S": "a"},
    "b": {"B": "AAE="},
    "bs": {"BS": ["AA==", "/w=="]},
    "m": {"M": {"x": {"B": "AQ=="}, "l": {"L": [{"B": "Ag=="}, {"N": "1"}]}}},
}


def test_a_refused_condition_carries_the_stored_item_as_botocore_gives_it() -> None:
    body = json.dumps(
        {
            "__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
            "message": "The conditional request failed",
            "Item": STORED,
        }
    ).encode()
    plain, fast = both_single("PutItem", canned(400, body))
    with pytest.raises(ClientError) as theirs:
        plain.put_item(TableName="T", Item=ITEMS[1], ReturnValuesOnConditionCheckFailure="ALL_OLD")
    with pytest.raises(ClientError) as ours:
        fast.put_item(TableName="T", Item=ITEMS[1], ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert ours.value.response["Error"] == {
        "Code": "ConditionalCheckFailedException",
        "Message": theirs.value.response["Error"]["Message"],
    }
    assert ours.value.response["Item"] == theirs.value.response["Item"]
    assert ours.value.response["Item"]["b"] == {"B": b"\x00\x01"}
    assert ours.value.operation_name == "PutItem"


def test_returned_attributes_come_back_as_botocore_returns_them() -> None:
    body = json.dumps({"Attributes": STORED}).encode()
    plain, fast = both_single("DeleteItem", canned(200, body))
    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    assert (
        fast.delete_item(TableName="T", Key=key, ReturnValues="ALL_OLD")["Attributes"]
        == plain.delete_item(TableName="T", Key=key, ReturnValues="ALL_OLD")["Attributes"]
    )


def test_single_item_modes_write_to_moto_through_the_wire_client(aws: Any) -> None:
    from adapters import clients
    from adapters.dynamodb import ItemWriter
    from logic.spec.dynamodb import NewerWinsTarget
    from logic.writemodes import WritePlan

    db, fast = clients.dynamodb(4), clients.batch_writes(4)
    plan = WritePlan(NewerWinsTarget, ("pk", "sk"), version="n")
    writer = ItemWriter(fast, "target", plan, in_flight=4, policy=RetryPolicy(base_seconds=0, cap_seconds=0))
    items = [
        {"pk": {"S": f"P#{i}"}, "sk": {"S": "X"}, "b": {"B": bytes([i])}, "n": {"N": "2"}} for i in range(20)
    ]
    for item in items + [{**i, "n": {"N": "1"}} for i in items]:  # the older versions are refused
        writer.submit((item["pk"]["S"], "X"), item)
    stats = writer.close()
    assert (stats.requests, stats.skipped) == (40, 20)
    assert sorted(db.scan(TableName="target")["Items"], key=lambda i: i["b"]["B"]) == items
    # A retried request that finds its own item stored (binary value included) is not skipped.
    with pytest.raises(ClientError) as refused:
        fast.put_item(
            TableName="target",
            Item=items[3],
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    assert refused.value.response["Item"] == items[3]


def test_the_worker_sends_single_item_writes_through_the_wire_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline_support import ENV

    from adapters import clients
    from adapters.dynamodb_wire import BatchWriteClient as Wire
    from handlers import worker

    seen: dict[str, Any] = {}

    def process_shard(*arguments: Any, **_: Any) -> dict[str, Any]:
        seen["db"], seen["item_db"] = arguments[5], (arguments[6] if len(arguments) > 6 else arguments[5])
        return {}

    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "a"),
        ("AWS_SECRET_ACCESS_KEY", "b"),
    ):
        monkeypatch.setenv(name, value)
    clients.reset()
    monkeypatch.setattr(worker, "process_shard", process_shard)
    worker.handle({"shard": {}, "job": {}}, ENV)
    clients.reset()
    assert isinstance(seen["db"], Wire) and isinstance(seen["item_db"], Wire)
