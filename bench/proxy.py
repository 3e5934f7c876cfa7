"""A loopback HTTP proxy in front of a DynamoDB-compatible server: adds a fixed round trip and,
optionally, enforces a write-unit budget the way DynamoDB does.

Only for the benchmark. Every request waits `latency` seconds before it is forwarded (the round
trip to a remote endpoint). With a limit, a token bucket of `limit` write units per second
(burst: a quarter of a second's worth) admits items: a BatchWriteItem whose items exceed the
tokens left gets the excess back as UnprocessedItems (a BatchExecuteStatement, the excess
statements answered ProvisionedThroughputExceeded each), and one that finds no token at all, or a
PutItem, UpdateItem or DeleteItem without one, is refused with
ProvisionedThroughputExceededException — which is what DynamoDB answers when a table or
partition is over its capacity. One item costs one write unit
(the benchmark's items are under 1 KB). Requests in flight are bounded.
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

THROTTLED = json.dumps(
    {
        "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        "message": "The level of configured provisioned throughput for the table was exceeded.",
    }
).encode()
MAX_IN_FLIGHT = 256
SINGLE_ITEM_WRITES = (".PutItem", ".UpdateItem", ".DeleteItem")


class TokenBucket:
    def __init__(self, rate: float, burst_seconds: float = 0.25) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate * burst_seconds)
        self.tokens = self.capacity
        self.stamp = time.monotonic()
        self.lock = threading.Lock()
        self.admitted = 0
        self.refused = 0

    def take(self, wanted: int) -> int:
        """Admit up to `wanted` units now; returns how many were admitted."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            granted = min(wanted, math.floor(self.tokens))
            self.tokens -= granted
            self.admitted += granted
            self.refused += wanted - granted
            return granted


class Proxy:
    def __init__(self, upstream: str, *, latency: float, limit: float | None, port: int = 0) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.latency = latency
        self.bucket = TokenBucket(limit) if limit else None
        self.requests = 0
        self.throttled = 0
        self._slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self._local = threading.local()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm and
            # the client's delayed ACK add ~40 ms to every answer.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                proxy.handle(self)

            def do_GET(self) -> None:
                proxy.handle(self)

            def do_PUT(self) -> None:  # S3 PutObject (Plan's manifest)
                proxy.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Proxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def set_limit(self, limit: float | None) -> None:
        self.bucket = TokenBucket(limit) if limit else None

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(*self.upstream, timeout=120)
            self._local.conn = conn
        return conn

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        with self._slots:
            time.sleep(self.latency)
            self.requests += 1
            target = request.headers.get("X-Amz-Target", "")
            bucket = self.bucket
            unprocessed: list[Any] = []
            throttled_statements = 0
            table = ""
            if bucket is not None and target.endswith(".BatchWriteItem"):
                document = json.loads(body)
                table, writes = next(iter(document["RequestItems"].items()))
                granted = bucket.take(len(writes))
                if granted == 0:
                    self._reply(request, 400, THROTTLED)
                    return
                if granted < len(writes):
                    unprocessed = writes[granted:]
                    document["RequestItems"][table] = writes[:granted]
                    body = json.dumps(document).encode()
            elif bucket is not None and target.endswith(".BatchExecuteStatement"):
                # Each INSERT answers for itself: those past the tokens left are throttled alone.
                document = json.loads(body)
                statements = document["Statements"]
                granted = bucket.take(len(statements))
                if granted == 0:
                    self._reply(request, 400, THROTTLED)
                    return
                throttled_statements = len(statements) - granted
                if throttled_statements:
                    document["Statements"] = statements[:granted]
                    body = json.dumps(document).encode()
            elif bucket is not None and target.endswith(SINGLE_ITEM_WRITES) and bucket.take(1) == 0:
                self._reply(request, 400, THROTTLED)
                return
            headers = {
                k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")
            }
            headers["Content-Length"] = str(len(body))
            status, answer = self._forward(request.command, request.path, body, headers)
            if unprocessed and status == 200:
                reply = json.loads(answer)
                reply.setdefault("UnprocessedItems", {}).setdefault(table, []).extend(unprocessed)
                answer = json.dumps(reply).encode()
            if throttled_statements and status == 200:
                reply = json.loads(answer)
                error = {"Code": "ProvisionedThroughputExceeded", "Message": "throttled by the bench proxy"}
                reply["Responses"] += [{"Error": error}] * throttled_statements
                answer = json.dumps(reply).encode()
            self._reply(request, status, answer)

    def _forward(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                return response.status, response.read()
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _reply(self, request: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        if status == 400 and body is THROTTLED:
            self.throttled += 1
        request.send_response(status)
        request.send_header("Content-Type", "application/x-amz-json-1.0")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)
