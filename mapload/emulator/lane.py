"""`mapload serve`'s lane for DynamoDB: moto's own handler, without the web framework around it.

A BatchWriteItem of 25 items cost `mapload serve` ~3.4 ms of CPU on the 2-core machine of
docs/PERFORMANCE.md, and two fifths of it were not DynamoDB's work: Flask's routing (moto infers
the service of every request under one lock), moto's request set-up (its headers, URL and body read
again) and its model-driven serializer writing an answer that is always the same three members.
One interpreter serves every request thread, so that overhead capped how many items a second a
long-round-trip run could write, and how many single-item writes a second a write mode could.

`DynamoDbLane` wraps moto's WSGI application and takes two kinds of request:
- a BatchWriteItem whose body `moto_speed.plain_batch_write` reads exactly as moto's parser
  does: answered by moto's `DynamoHandler.batch_write_item` itself (with every patch the server
  installs: the units a write consumes, the item-size limit, the write lock), the answer written
  as moto's serializer writes it (the same members in the same order, the same headers, the same
  checksum); a refusal (a missing table, a key of the wrong type, an item too large) serialized by
  moto;
- the single-item requests mapload sends (SINGLE_TARGETS): read by moto's own parser and answered
  by moto's own `call_action` (its dispatch, serializer and checksum).
Both run for the region and account moto would pick (its own `get_region_from_url` and
`get_current_account`). Everything else, and any request with something the lane does not model
(another BatchWriteItem body, a compressed one, IAM authorization switched on, moto's request
recorder, a browser's Origin), goes to moto's application unchanged. tests/e2e/test_lane.py sends
a spectrum of each to a server with the lane and one without and compares status, body, headers
and stored items.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from werkzeug.http import HTTP_STATUS_CODES

from mapload.emulator.moto_limits import batch_request
from mapload.emulator.moto_speed import NotPlain, plain_batch_write

TARGET = "DynamoDB_20120810.BatchWriteItem"
# The single-item requests mapload's writers and ledger send: read by moto's own parser and
# answered by moto's own `call_action` (its dispatch, serializer and checksum), Flask left out.
SINGLE_TARGETS = frozenset(
    f"DynamoDB_20120810.{action}"
    for action in (
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "GetItem",
        "Query",
        "TransactWriteItems",
        "BatchExecuteStatement",
    )
)
# An answer whose members are exactly these (moto's, with the units patch's ConsumedCapacity) is
# written here, in the order of the output shape, as moto's serializer writes it.
_ANSWER_ORDER = ("UnprocessedItems", "ItemCollectionMetrics", "ConsumedCapacity")
_CONSUMED_MEMBERS = frozenset({"TableName", "CapacityUnits", "Table"})

StartResponse = Callable[..., Any]


class DynamoDbLane:
    """WSGI middleware around moto's `DomainDispatcherApplication` (see the module's text)."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self.taken = 0  # requests the lane answered (tests read it)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET")
        if (target != TARGET and target not in SINGLE_TARGETS) or not _plain_request(environ):
            return self.app(environ, start_response)
        body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
        if target == TARGET:
            try:
                parameters = plain_batch_write(body)
            except NotPlain:
                environ["wsgi.input"] = io.BytesIO(body)  # moto reads it as sent
                return self.app(environ, start_response)
            with batch_request(len(body)):
                status, headers, answer = _answer(_handler(environ, body, parameters))
        else:
            status, headers, answer = _called(_handler(environ, body, None))
        self.taken += 1
        start_response(
            f"{status} {HTTP_STATUS_CODES.get(status, 'unknown').upper()}",
            [*headers.items(), ("Content-Length", str(len(answer)))],
        )
        return [answer]


def _plain_request(environ: Mapping[str, Any]) -> bool:
    """Whether moto would answer the request with nothing the lane leaves out: a body of a stated
    length, not compressed, no IAM authorization (moto's INITIAL_NO_AUTH_ACTION_COUNT, infinite
    unless set), no request recorder, and no Origin for Flask-CORS to answer."""
    from moto import settings
    from moto.moto_api import recorder

    return (
        str(environ.get("CONTENT_LENGTH") or "").isdigit()
        and not environ.get("HTTP_CONTENT_ENCODING")
        and not environ.get("HTTP_ORIGIN")
        and math.isinf(settings.INITIAL_NO_AUTH_ACTION_COUNT)
        and not recorder._user_enabled
    )


def _handler(environ: dict[str, Any], body: bytes, parameters: dict[str, Any] | None) -> Any:
    """moto's DynamoHandler as its request set-up leaves it for this request: the parameters
    (`parameters`, else read by moto's own parser), the headers, and the region and account moto's
    own methods pick from them."""
    from moto.dynamodb.responses import DynamoHandler
    from moto.iam.models import mark_account_as_visited
    from werkzeug.datastructures import EnvironHeaders
    from werkzeug.wsgi import get_current_url

    handler = DynamoHandler()
    handler.headers = EnvironHeaders(environ)
    handler.querystring = {}
    handler.uri_match = {}
    handler.raw_body = body
    handler.method = environ["REQUEST_METHOD"]
    handler.uri = get_current_url(environ)
    handler.path = handler.raw_path = environ.get("PATH_INFO") or "/"
    handler.response_headers = {"server": "amazon.com"}
    request = _Request(handler.headers, handler.method, handler.path, body)
    handler.region = handler.get_region_from_url(request, handler.uri)
    if parameters is None:
        handler.parse_parameters(request)  # type: ignore[arg-type]  # what it reads of one
    else:
        handler.params = handler.body = parameters
    handler.access_key = handler.get_access_key()
    handler.current_account = handler.get_current_account()
    mark_account_as_visited(
        account_id=handler.current_account,
        access_key=handler.access_key,
        service="dynamodb",  # DynamoHandler's service_name
        region=handler.region,
    )
    return handler


class _Request:
    """What moto's `get_region_from_url` and `parse_parameters` read of a request."""

    def __init__(self, headers: Any, method: str, path: str, data: bytes) -> None:
        self.headers = headers
        self.method = method
        self.path = path
        self.data = data
        self.values: dict[str, Any] = {}  # a JSON request's body is not a form
        self.content_type = headers.get("Content-Type")


def _called(handler: Any) -> tuple[int, dict[str, str], bytes]:
    """moto's `call_action` for a single-item request, as Flask would send it on."""
    status, headers, text = handler.call_action()
    return _sent(int(status), headers, text)


def _answer(handler: Any) -> tuple[int, dict[str, str], bytes]:
    """moto's `call_action` (and its `amz_crc32` wrapper) for the request: the status, headers and
    body moto would send, a refusal's as moto builds it."""
    from moto.core.exceptions import ServiceException
    from moto.core.responses import ActionResult
    from moto.utilities.aws_headers import gen_amz_crc32
    from werkzeug.exceptions import HTTPException

    response: Any
    try:
        response = handler.batch_write_item()
    except ServiceException as error:
        status, headers, text = handler.serialized(ActionResult(error))
        response = text, {**headers, "status": status}
    except HTTPException as error:  # moto's DynamoDB refusals (JsonRESTError)
        response = error.description, {**dict(error.get_headers() or []), "status": error.code}
    if isinstance(response, ActionResult):
        written = _written(response.result)
        if written is None:
            status, headers, text = handler.serialized(response)
        else:
            status, text = 200, written
            headers = {"Content-Type": "application/x-amz-json-1.0", **handler.response_headers}
    else:
        status, headers, text = handler._transform_response(handler.response_headers, response)
    headers, text = handler._enrich_response(headers, text)
    gen_amz_crc32(text, headers)
    return _sent(int(status), headers, text)


def _sent(status: int, headers: Mapping[str, Any], text: str | bytes) -> tuple[int, dict[str, str], bytes]:
    """What moto's Flask view makes of moto's answer (a Response of it: text/html when moto names
    no type) and Flask-CORS adds to it."""
    sent = {name: str(value) for name, value in headers.items()}
    if not any(name.lower() == "content-type" for name in sent):
        sent["Content-Type"] = "text/html; charset=utf-8"
    sent.update(_cors())
    return status, sent, text if isinstance(text, bytes) else text.encode()


def _written(result: Any) -> str | None:
    """The answer as moto's JSON serializer writes it, when it holds only what moto answers a
    plain batch with (empty UnprocessedItems and ItemCollectionMetrics, and ConsumedCapacity of a
    table's units); else None, for moto's serializer."""
    if type(result) is not dict or set(result) - set(_ANSWER_ORDER):
        return None
    if result.get("UnprocessedItems", {}) != {} or result.get("ItemCollectionMetrics", {}) != {}:
        return None
    consumed = result.get("ConsumedCapacity", [])
    for entry in consumed:
        if (
            type(entry) is not dict
            or set(entry) != _CONSUMED_MEMBERS
            or type(entry["TableName"]) is not str
            or type(entry["CapacityUnits"]) is not float
            or entry["Table"] != {"CapacityUnits": entry["CapacityUnits"]}
        ):
            return None
    answer = {name: result[name] for name in _ANSWER_ORDER if name in result}
    if "ConsumedCapacity" in answer:
        answer["ConsumedCapacity"] = [
            {
                "TableName": entry["TableName"],
                "CapacityUnits": entry["CapacityUnits"],
                "Table": {"CapacityUnits": entry["CapacityUnits"]},
            }
            for entry in consumed
        ]
    return json.dumps(answer)


def _cors() -> dict[str, str]:
    """What Flask-CORS, as moto's server sets it up, adds to an answer to a request without Origin."""
    from moto import settings

    return {} if settings.DISABLE_GLOBAL_CORS else {"Access-Control-Allow-Origin": "*"}
