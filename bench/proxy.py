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

One thread runs an asyncio loop for every connection: the round trip it adds costs a timer, not
a thread and its wake-ups. The proxy shares the machine's cores with what it measures (on a
2-core machine, the threaded proxy it replaces spent ~0.8 ms of CPU a request, a third of what
the server spent on a 25-item batch, and the pipeline's 50 ms row was bound by the cores).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
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
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._slots: asyncio.Semaphore | None = None
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="bench-proxy", daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result()
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _listen(self) -> asyncio.Server:
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        return await asyncio.start_server(self._connection, "127.0.0.1", self._port)

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            # The clients' open connections end here, while the loop still runs.
            connections = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in connections:
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def set_limit(self, limit: float | None) -> None:
        self.bucket = TokenBucket(limit) if limit else None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client connection: its requests in turn (HTTP/1.1 keep-alive) until it closes."""
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                method, path, headers = _request_head(head)
                if headers.get("expect", "").lower() == "100-continue":  # botocore's S3 PutObject
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                status, answer = await self._handle(method, path, headers, body)
                if status == 400 and answer is THROTTLED:
                    self.throttled += 1
                reason = REASONS.get(status, b"Status")
                writer.write(
                    b"HTTP/1.1 %d %s\r\n%s%d\r\n\r\n" % (status, reason, ANSWER_HEADERS, len(answer))
                )
                writer.write(answer)
                await writer.drain()
        finally:
            writer.close()

    async def _handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, bytes]:
        assert self._slots is not None
        async with self._slots:
            await asyncio.sleep(self.latency)
            self.requests += 1
            target = headers.get("x-amz-target", "")
            bucket = self.bucket
            unprocessed: list[Any] = []
            throttled_statements = 0
            table = ""
            if bucket is not None and target.endswith(".BatchWriteItem"):
                document = json.loads(body)
                table, writes = next(iter(document["RequestItems"].items()))
                granted = bucket.take(len(writes))
                if granted == 0:
                    return 400, THROTTLED
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
                    return 400, THROTTLED
                throttled_statements = len(statements) - granted
                if throttled_statements:
                    document["Statements"] = statements[:granted]
                    body = json.dumps(document).encode()
            elif bucket is not None and target.endswith(SINGLE_ITEM_WRITES) and bucket.take(1) == 0:
                return 400, THROTTLED
            status, answer = await self._forward(method, path, headers, body)
            if unprocessed and status == 200:
                reply = json.loads(answer)
                reply.setdefault("UnprocessedItems", {}).setdefault(table, []).extend(unprocessed)
                answer = json.dumps(reply).encode()
            if throttled_statements and status == 200:
                reply = json.loads(answer)
                error = {"Code": "ProvisionedThroughputExceeded", "Message": "throttled by the bench proxy"}
                reply["Responses"] += [{"Error": error}] * throttled_statements
                answer = json.dumps(reply).encode()
            return status, answer

    async def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, bytes]:
        """The upstream's status and body for the request (a connection of its own: the server
        closes each after one answer)."""
        reader, writer = await asyncio.open_connection(*self.upstream)
        try:
            lines = [f"{method} {path} HTTP/1.1", f"Host: {self.upstream[0]}:{self.upstream[1]}"]
            lines += [f"{name}: {value}" for name, value in headers.items() if name not in HOP_HEADERS]
            lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
            writer.write("\r\n".join(lines).encode("latin-1") + body)
            head = await reader.readuntil(b"\r\n\r\n")
            status_line, _, rest = head.decode("latin-1").partition("\r\n")
            status = int(status_line.split(" ", 2)[1])
            answer_headers = _header_fields(rest)
            if "content-length" in answer_headers:
                answer = await reader.readexactly(int(answer_headers["content-length"]))
            elif answer_headers.get("transfer-encoding", "").lower() == "chunked":
                answer = await _chunked(reader)
            else:
                answer = await reader.read()
            return status, answer
        finally:
            writer.close()


# Headers the proxy sets itself on the upstream request (lower case, as _request_head keeps them).
HOP_HEADERS = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding", "expect"})
ANSWER_HEADERS = b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: "
REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 500: b"Internal Server Error"}


def _header_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.split("\r\n"):
        name, colon, value = line.partition(":")
        if colon:
            fields[name.strip().lower()] = value.strip()
    return fields


def _request_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """The method, path and headers (names in lower case) of a request's head."""
    request_line, _, rest = head.decode("latin-1").partition("\r\n")
    method, path, _version = request_line.split(" ", 2)
    return method, path, _header_fields(rest)


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers: the empty line
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
