"""BatchWriteItem on the worker's hot path: botocore's credentials, signer and HTTP session, the
request body encoded once by the C JSON encoder.

A botocore client spends most of a worker's CPU per item on its generic call pipeline - some
twenty events, model-driven serialization of every attribute value, a user-agent string,
model-driven parsing - for a request whose items the mapper already built in wire form
(logic/mapping.py). This sends the same request (the same JSON body, the same SigV4 signature,
the same connection pool, proxy and TLS settings: those of the client it is built from) and
answers like the client: the parsed response on 200, `botocore.exceptions.ClientError` with the
error code otherwise, `BotoCoreError`s for connection failures. tests/runtime/test_dynamodb_wire.py
holds it to botocore's own serialization and error parsing; `make bench` measures what it saves.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ChecksumError, ClientError

OPERATION = "BatchWriteItem"
TARGET = f"DynamoDB_20120810.{OPERATION}"
CONTENT_TYPE = "application/x-amz-json-1.0"


def _binary(value: object) -> str:
    """JSON has no bytes: B and BS values travel base64-encoded (as botocore sends them)."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not a DynamoDB attribute value")


def encode(request_items: dict[str, Any]) -> bytes:
    return json.dumps({"RequestItems": request_items}, separators=(",", ":"), default=_binary).encode()


class BatchWriteClient:
    """`batch_write_item(RequestItems=...)` with the contract of a botocore DynamoDB client's."""

    def __init__(self, client: Any) -> None:
        meta = client.meta
        # BatchWriteItem's path is "/": the endpoint's own path, or "/" (as botocore joins them).
        endpoint = urlsplit(meta.endpoint_url)
        self._url = urlunsplit((endpoint.scheme, endpoint.netloc, endpoint.path or "/", endpoint.query, ""))
        self._region = meta.region_name
        self._signing_name = meta.service_model.signing_name or "dynamodb"
        self._events = meta.events
        self._credentials = client._request_signer._credentials
        # The client's own HTTP session: its connection pool, timeouts, proxies and CA bundle.
        self._session = client._endpoint.http_session
        if self._credentials is None:
            raise ValueError("no AWS credentials found for DynamoDB")

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        request = AWSRequest(
            method="POST",
            url=self._url,
            data=encode(RequestItems),
            headers={"Content-Type": CONTENT_TYPE, "X-Amz-Target": TARGET},
        )
        SigV4Auth(self._credentials.get_frozen_credentials(), self._signing_name, self._region).add_auth(
            request
        )
        prepared = request.prepare()
        # Handlers of botocore's before-send event may answer instead of the network (moto's
        # in-process mock does), as they would for the client's own requests.
        answered = [
            response
            for _handler, response in self._events.emit(f"before-send.dynamodb.{OPERATION}", request=prepared)
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
            return parsed
        raise ClientError(_error(parsed, status, response.headers), OPERATION)


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
