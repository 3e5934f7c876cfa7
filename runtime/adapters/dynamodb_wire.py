"""BatchWriteItem, BatchExecuteStatement (putIfAbsent's INSERTs), PutItem, UpdateItem and
DeleteItem on the worker's hot path: the session's credentials, botocore's SigV4 signer and an HTTP
session configured as the client's, the request body encoded once by the C JSON encoder.

A botocore client spends most of a worker's CPU per item on its generic call pipeline - some
twenty events, model-driven serialization of every attribute value, a user-agent string,
model-driven parsing - for a request whose items the mapper already built in wire form
(logic/mapping.py). This sends the same request (the same JSON body, the same SigV4 signature,
connection pool size, timeouts, proxy and TLS settings as the client it is built from, read
through public APIs only, so a botocore upgrade cannot silently change them) and
answers like the client: the parsed response on 200, `botocore.exceptions.ClientError` with the
error code otherwise (and a refused condition's stored `Item`, binary values decoded, as botocore
gives it for `ReturnValuesOnConditionCheckFailure`), `BotoCoreError`s for connection failures.
tests/runtime/test_dynamodb_wire.py holds it to botocore's own serialization and error parsing;
`make bench` measures what it saves (a third of botocore's CPU for a single-item write).
"""

from __future__ import annotations

import base64
import json
import socket
import zlib
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSPreparedRequest, AWSRequest
from botocore.exceptions import ChecksumError, ClientError
from botocore.httpsession import URLLib3Session
from botocore.utils import get_environ_proxies

OPERATION = "BatchWriteItem"
TARGET_PREFIX = "DynamoDB_20120810."
TARGET = f"{TARGET_PREFIX}{OPERATION}"
STATEMENTS = "BatchExecuteStatement"
CONTENT_TYPE = "application/x-amz-json-1.0"


def _binary(value: object) -> str:
    """JSON has no bytes: B and BS values travel base64-encoded (as botocore sends them)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not a DynamoDB attribute value")


def encode(request_items: dict[str, Any], **fields: Any) -> bytes:
    """A BatchWriteItem body (`fields`: ReturnConsumedCapacity and the like, as given)."""
    return encode_request({"RequestItems": request_items, **fields})


def encode_request(arguments: dict[str, Any]) -> bytes:
    return json.dumps(arguments, separators=(",", ":"), default=_binary).encode()


def _decoded(value: Any) -> Any:
    """An attribute value from an answer's JSON with its binary values as bytes (botocore's form)."""
    (kind, inner), *_ = value.items()
    if kind == "B":
        return {"B": base64.b64decode(inner)}
    if kind == "BS":
        return {"BS": [base64.b64decode(v) for v in inner]}
    if kind == "M":
        return {"M": {name: _decoded(v) for name, v in inner.items()}}
    if kind == "L":
        return {"L": [_decoded(v) for v in inner]}
    return value


class BatchWriteClient:
    """`batch_write_item(RequestItems=...)`, `put_item`, `update_item` and `delete_item` (keyword
    arguments as the client's, low-level attribute values) with the contract of a botocore DynamoDB
    client's; `transact_write_items` is the wrapped client's own.

    `client` gives the endpoint, region, signing name, event hooks and configuration;
    `credentials` are the session's (`botocore.session.Session.get_credentials()`, refreshed by
    botocore as the client's are); `verify` is what the client verifies TLS with (the session's
    `ca_bundle`, else True).
    """

    def __init__(self, client: Any, credentials: Any, *, verify: bool | str = True) -> None:
        meta = client.meta
        # BatchWriteItem's path is "/": the endpoint's own path, or "/" (as botocore joins them).
        endpoint = urlsplit(meta.endpoint_url)
        self._url = urlunsplit((endpoint.scheme, endpoint.netloc, endpoint.path or "/", endpoint.query, ""))
        self._region = meta.region_name
        self._signing_name = meta.service_model.signing_name or "dynamodb"
        self._events = meta.events
        if credentials is None:
            raise ValueError("no AWS credentials found for DynamoDB")
        self._credentials = credentials
        self._session = http_session(meta.config, meta.endpoint_url, verify)

        self.transact_write_items = client.transact_write_items

    def batch_write_item(self, RequestItems: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return self._call(OPERATION, encode(RequestItems, **fields))

    def batch_execute_statement(self, Statements: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        """PartiQL statements (putIfAbsent's INSERTs: logic/writemodes.py insert_statement)."""
        return self._call(STATEMENTS, encode_request({"Statements": Statements, **fields}))

    def put_item(self, **arguments: Any) -> dict[str, Any]:
        return self._call("PutItem", encode_request(arguments))

    def update_item(self, **arguments: Any) -> dict[str, Any]:
        return self._call("UpdateItem", encode_request(arguments))

    def delete_item(self, **arguments: Any) -> dict[str, Any]:
        return self._call("DeleteItem", encode_request(arguments))

    def _prepared(self, operation: str, data: bytes) -> AWSPreparedRequest:
        credentials = self._credentials.get_frozen_credentials()
        request = AWSRequest(
            method="POST",
            url=self._url,
            data=data,
            headers={"Content-Type": CONTENT_TYPE, "X-Amz-Target": TARGET_PREFIX + operation},
        )
        SigV4Auth(credentials, self._signing_name, self._region).add_auth(request)
        return request.prepare()

    def _call(self, operation: str, data: bytes) -> dict[str, Any]:
        prepared = self._prepared(operation, data)
        # Handlers of botocore's before-send event may answer instead of the network (moto's
        # in-process mock does), as they would for the client's own requests.
        answered = [
            response
            for _handler, response in self._events.emit(f"before-send.dynamodb.{operation}", request=prepared)
            if response is not None
        ]
        response = answered[0] if answered else self._session.send(prepared)
        body: bytes = response.content
        expected = response.headers.get("x-amz-crc32")
        if expected is not None and zlib.crc32(body) != int(expected):
            raise ChecksumError(
                checksum_type="crc32", expected_checksum=expected, actual_checksum=zlib.crc32(body)
            )
        parsed: dict[str, Any] = json.loads(body) if body else {}
        status = int(response.status_code)
        if status < 300:
            if "Attributes" in parsed:  # ReturnValues of a PutItem, UpdateItem or DeleteItem
                parsed["Attributes"] = {name: _decoded(v) for name, v in parsed["Attributes"].items()}
            return parsed
        error = _error(parsed, status, response.headers)
        if "Item" in parsed:  # ConditionalCheckFailedException's stored item (ALL_OLD)
            error["Item"] = {name: _decoded(value) for name, value in parsed["Item"].items()}
        raise ClientError(error, operation)


def http_session(config: Any, endpoint_url: str, verify: bool | str) -> URLLib3Session:
    """An HTTP session as botocore builds a client's (botocore/args.py, endpoint.py), from the
    client's public `meta.config`: pool size, timeouts, proxies, client certificate, keep-alive."""
    socket_options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    if config.tcp_keepalive:
        socket_options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    return URLLib3Session(
        verify=verify,
        proxies=config.proxies or get_environ_proxies(endpoint_url),
        timeout=(config.connect_timeout, config.read_timeout),
        max_pool_connections=config.max_pool_connections,
        socket_options=socket_options,
        client_cert=config.client_cert,
        proxies_config=config.proxies_config,
    )


def _error(parsed: dict[str, Any], status: int, headers: Any) -> Any:
    """The error shape botocore's JSON parser gives: code after the '#', message, status."""
    code = str(parsed.get("__type") or headers.get("x-amzn-ErrorType") or f"HTTP{status}")
    code = code.rsplit("#", 1)[-1].split(":", 1)[0]
    message = str(parsed.get("message") or parsed.get("Message") or "")
    return {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {
            "HTTPStatusCode": status,
            "RequestId": headers.get("x-amzn-RequestId", ""),
        },
    }
