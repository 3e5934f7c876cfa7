"""A fault-injecting HTTP proxy for S3/DynamoDB-compatible endpoints, for tests on loopback.

It forwards every request to an upstream server (e.g. a moto server) and, on a schedule,
answers instead with what AWS answers under load or failure: DynamoDB throttling
(ProvisionedThroughputExceededException, ThrottlingException), InternalServerError, a
BatchWriteItem that writes only part of its items and returns the rest as UnprocessedItems,
a BatchExecuteStatement whose INSERTs that found their key stored answer `ConditionalCheckFailed`
instead of `DuplicateItem` (both are documented BatchStatementError codes), S3 SlowDown (503) and
InternalError (500), a dropped connection, or added latency.

A schedule is a list of `Fault(kind, every=N)`: the fault hits every N-th request that it applies
to (counted per fault, deterministic), at most `limit` times. Requests are bounded in time
(upstream timeout) and the server only listens on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

DYNAMODB_ERRORS = {
    "throttle": (
        400,
        "ProvisionedThroughputExceededException",
        "The level of configured provisioned throughput was exceeded.",
    ),
    "throttling": (400, "ThrottlingException", "Rate of requests exceeds the allowed throughput."),
    "server_error": (500, "InternalServerError", "Internal server error"),
}
S3_ERRORS = {
    "slow_down": (503, "SlowDown", "Please reduce your request rate."),
    "server_error": (500, "InternalError", "We encountered an internal error. Please try again."),
}
KINDS = (
    "throttle",
    "throttling",
    "server_error",
    "slow_down",
    "unprocessed",
    "condition_failed",
    "drop",
    "latency",
)
# What `condition_failed` answers for a statement upstream answered DuplicateItem.
CONDITION_FAILED = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}


@dataclass
class Fault:
    """`kind` on every `every`-th request of `service` (dynamodb, s3 or any) matching `operation`
    (a DynamoDB target such as BatchWriteItem, or an HTTP method for S3; None for all)."""

    kind: str
    every: int = 3
    service: str = "any"
    operation: str | None = None
    limit: int | None = None
    seconds: float = 0.05  # for latency
    ranged: bool = False  # only requests with a Range header (S3 ranged GETs of source objects)
    seen: int = field(default=0, init=False)
    injected: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.every < 1:
            raise ValueError("every must be at least 1")


class FaultProxy:
    def __init__(self, upstream: str, faults: Sequence[Fault] = (), timeout: float = 30.0) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.faults = list(faults)
        self.timeout = timeout
        self.lock = threading.Lock()
        self.injected: Counter[str] = Counter()
        self.requests = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _relay(self) -> None:
                proxy.handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True)

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- one request ----------------------------------------------------------------------
    def _pick(self, service: str, operation: str, ranged: bool = False) -> Fault | None:
        with self.lock:
            self.requests += 1
            for fault in self.faults:
                if fault.service not in ("any", service):
                    continue
                if fault.operation is not None and fault.operation != operation:
                    continue
                if fault.ranged and not ranged:
                    continue
                if fault.kind == "unprocessed" and operation != "BatchWriteItem":
                    continue
                if fault.kind == "condition_failed" and operation != "BatchExecuteStatement":
                    continue
                if fault.kind in ("throttle", "throttling") and service != "dynamodb":
                    continue
                if fault.kind == "slow_down" and service != "s3":
                    continue
                fault.seen += 1
                if fault.seen % fault.every:
                    continue
                if fault.limit is not None and fault.injected >= fault.limit:
                    continue
                fault.injected += 1
                self.injected[fault.kind] += 1
                return fault
        return None

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        target = request.headers.get("X-Amz-Target", "")
        service = "dynamodb" if target.startswith("DynamoDB_") else "s3"
        operation = target.split(".")[-1] if target else request.command
        fault = self._pick(service, operation, ranged="Range" in request.headers)
        if fault is not None and fault.kind == "latency":
            time.sleep(fault.seconds)
            fault = None
        if fault is not None and fault.kind == "drop":
            # A connection reset without an answer: what a broken network looks like.
            request.close_connection = True
            request.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None and fault.kind in ("throttle", "throttling", "server_error", "slow_down"):
            if service == "dynamodb":
                status, code, message = DYNAMODB_ERRORS[fault.kind]
                payload = json.dumps(
                    {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message}
                )
                self._answer(
                    request, status, {"Content-Type": "application/x-amz-json-1.0"}, payload.encode()
                )
            else:
                status, code, message = S3_ERRORS[fault.kind]
                xml = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"  # noqa: E501
                self._answer(request, status, {"Content-Type": "application/xml"}, xml.encode())
            return
        unprocessed: list[Any] = []
        if fault is not None and fault.kind == "unprocessed":
            body, unprocessed = _split_batch(body)
            if not unprocessed:  # a batch of one item has nothing to hand back: no fault after all
                with self.lock:
                    fault.injected -= 1
                    self.injected[fault.kind] -= 1
        status, headers, answer = self._forward(request, body)
        changed = False
        if unprocessed and status == 200:
            answer, changed = _add_unprocessed(answer, unprocessed), True
        if fault is not None and fault.kind == "condition_failed":
            answer, changed = _condition_failed(answer) if status == 200 else (answer, False)
            if not changed:  # no INSERT found its key stored: no fault after all
                with self.lock:
                    fault.injected -= 1
                    self.injected[fault.kind] -= 1
        if changed:
            headers = [(k, v) for k, v in headers if k.lower() not in ("x-amz-crc32", "content-length")]
        self._answer(request, status, dict(headers), answer)

    def _forward(
        self, request: BaseHTTPRequestHandler, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=self.timeout)
        try:
            # Content-Length is set again from the body sent (a split batch is shorter).
            dropped = ("host", "connection", "content-length")
            headers = {k: v for k, v in request.headers.items() if k.lower() not in dropped}
            headers["Host"] = f"{self.upstream_host}:{self.upstream_port}"
            upstream.request(request.command, request.path, body=body, headers=headers)
            response = upstream.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            upstream.close()

    @staticmethod
    def _answer(request: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes) -> None:
        request.send_response(status)
        for name, value in headers.items():
            if name.lower() in ("content-length", "transfer-encoding", "connection", "server", "date"):
                continue
            request.send_header(name, value)
        if request.command == "HEAD":  # a HEAD answer carries the object's length, not its own
            length = next((v for k, v in headers.items() if k.lower() == "content-length"), "0")
            request.send_header("Content-Length", length)
        else:
            request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)


def _split_batch(body: bytes) -> tuple[bytes, list[Any]]:
    """Keep the first half of a BatchWriteItem's items; hand back the rest as unprocessed."""
    document = json.loads(body)
    items = document["RequestItems"]
    table = next(iter(items))
    requests = items[table]
    keep = max(1, len(requests) // 2)
    left = requests[keep:]
    document["RequestItems"] = {table: requests[:keep]}
    return json.dumps(document).encode(), [(table, r) for r in left]


def _add_unprocessed(answer: bytes, unprocessed: list[Any]) -> bytes:
    document = json.loads(answer or b"{}")
    pending: dict[str, list[Any]] = document.setdefault("UnprocessedItems", {})
    for table, request in unprocessed:
        pending.setdefault(table, []).append(request)
    return json.dumps(document).encode()


def _condition_failed(answer: bytes) -> tuple[bytes, bool]:
    """A BatchExecuteStatement answer whose DuplicateItem statements say ConditionalCheckFailed
    instead; whether there was one."""
    document = json.loads(answer or b"{}")
    errors = [
        r["Error"]
        for r in document.get("Responses", [])
        if (r.get("Error") or {}).get("Code") == "DuplicateItem"
    ]
    for error in errors:
        error.update(CONDITION_FAILED)
    return json.dumps(document).encode(), bool(errors)


@contextmanager
def fault_proxy(upstream: str, faults: Sequence[Fault] = ()) -> Iterator[FaultProxy]:
    proxy = FaultProxy(upstream, faults).start()
    try:
        yield proxy
    finally:
        proxy.stop()
