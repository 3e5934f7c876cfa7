"""A local HTTP server that answers like Neptune's bulk loader, backed by a pyoxigraph store.

The embedded run points the StartGraphLoad/PollGraphLoad functions at it (the cluster endpoint
resolves to its URL), so the very client code that runs on AWS - HTTP, SigV4 headers, retries -
runs locally. It reads the staged files from S3 (the emulator's, or any endpoint boto3 is told
about), loads them into the store and reports the statuses and counts Neptune's loader does.
Tests script it: queued and in-progress answers before the outcome, a failed load with error
details, loads held in the queue until cancelled, or HTTP faults (4xx/5xx, throttling, "too many
concurrent loads") for the next requests.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import boto3
import pyoxigraph as ox

FORMATS = {"nquads": ox.RdfFormat.N_QUADS, "ntriples": ox.RdfFormat.N_TRIPLES}
REQUIRED = ("source", "format", "iamRoleArn", "region")
PARALLELISM = ("LOW", "MEDIUM", "HIGH", "OVERSUBSCRIBE")
ACTIVE = ("LOAD_NOT_STARTED", "LOAD_IN_QUEUE", "LOAD_IN_PROGRESS")
MAX_ERRORS_LOGGED = 100


@dataclass
class Load:
    load_id: str
    request: dict[str, Any]
    status: str = "LOAD_NOT_STARTED"
    records: int = 0
    duplicates: int = 0
    parsing_errors: int = 0
    insert_errors: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    finished: float | None = None
    # Statuses a test wants reported (one per GET) before the real one.
    scripted: deque[str] = field(default_factory=deque)
    done: threading.Event = field(default_factory=threading.Event)
    # Held in the queue (behind other loads, as far as the client can tell) until cancelled.
    held: bool = False
    # The failed feed's own status when it differs from the overall one (an S3 error of one feed
    # sets the overall status to LOAD_FAILED, as Neptune documents).
    feed_status: str | None = None

    def answer(self) -> dict[str, Any]:
        status = self.scripted.popleft() if self.scripted else self.status
        overall: dict[str, Any] = {
            "fullUri": self.request.get("source"),
            "runNumber": 1,
            "retryNumber": 0,
            "status": status,
            "totalTimeSpent": int((self.finished or time.time()) - self.started),
            "startTime": int(self.started),
            "totalRecords": self.records,
            "totalDuplicates": self.duplicates,
            "parsingErrors": self.parsing_errors,
            "datatypeMismatchErrors": 0,
            "insertErrors": self.insert_errors,
        }
        payload: dict[str, Any] = {"feedCount": [{status: 1}], "overallStatus": overall}
        if self.errors:
            payload["errors"] = {
                "startIndex": 1,
                "endIndex": len(self.errors),
                "loadId": self.load_id,
                "errorLogs": self.errors,
            }
            payload["failedFeeds"] = [
                {"fullUri": e["fileName"], "status": self.feed_status or status}
                for e in self.errors[:1]
                if status != "LOAD_COMPLETED"
            ]
        return {"status": "200 OK", "payload": payload}


class LocalNeptuneLoader:
    """`with LocalNeptuneLoader(store_dir) as loader:` serves http://127.0.0.1:<port>/loader."""

    # Neptune queues at most 64 loads; a further POST is refused until one ends.
    QUEUE_LIMIT = 64

    def __init__(
        self,
        store_path: Path | None = None,
        *,
        s3_client: Callable[[], Any] | None = None,
        require_sigv4: bool = True,
    ) -> None:
        self.store = ox.Store(str(store_path)) if store_path is not None else ox.Store()
        self._s3 = s3_client or (lambda: boto3.client("s3"))
        self.require_sigv4 = require_sigv4
        self.loads: dict[str, Load] = {}
        self.requests: list[dict[str, Any]] = []
        # (HTTP status, JSON body) answered to the next requests instead of serving them.
        self.faults: deque[tuple[int, dict[str, Any]]] = deque()
        # Statuses each new load reports (one per GET) before its real one.
        self.script: list[str] = []
        # When set, a new load ends with this status and these error logs instead of loading.
        self.fail_with: tuple[str, list[dict[str, Any]]] | None = None
        # When set, new loads stay LOAD_IN_QUEUE (never run) until a DELETE cancels them.
        self.hold = False
        # When set, reading the source fails as S3 does for a role without access.
        self.deny_s3 = False
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._server is not None, "the server is not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LocalNeptuneLoader:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner._handle(self, "GET")

            def do_POST(self) -> None:
                owner._handle(self, "POST")

            def do_DELETE(self) -> None:
                owner._handle(self, "DELETE")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-neptune", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for load in list(self.loads.values()):
            if not load.held:  # a held load has no thread to wait for
                load.done.wait(timeout=60)
        self.store.flush()

    def wait(self, load_id: str, timeout: float = 60) -> Load:
        load = self.loads[load_id]
        load.done.wait(timeout)
        return load

    # -- HTTP --------------------------------------------------------------------------------

    def _handle(self, http: BaseHTTPRequestHandler, method: str) -> None:
        length = int(http.headers.get("Content-Length") or 0)
        body = http.rfile.read(length) if length else b""
        url = urlparse(http.path)
        with self._lock:
            self.requests.append({"method": method, "path": url.path, "headers": dict(http.headers.items())})
            fault = self.faults.popleft() if self.faults else None
        if fault is not None:
            self._send(http, *fault)
            return
        if self.require_sigv4 and not _signed(http.headers.get("Authorization") or ""):
            self._send(
                http,
                403,
                {
                    "code": "AccessDeniedException",
                    "detailedMessage": "Missing or invalid SigV4 authentication",
                },
            )
            return
        parts = [p for p in url.path.split("/") if p]
        if not parts or parts[0] != "loader":
            self._send(http, 404, {"code": "BadRequestException", "detailedMessage": f"no route {url.path}"})
        elif method == "POST" and len(parts) == 1:
            self._send(http, *self._start(body))
        elif method == "GET" and len(parts) == 1:
            # Newest first, like Neptune; `limit` (default 50) bounds the list.
            limit = int(parse_qs(url.query).get("limit", ["50"])[0])
            self._send(
                http, 200, {"status": "200 OK", "payload": {"loadIds": list(reversed(self.loads))[:limit]}}
            )
        elif len(parts) == 2 and parts[1] in self.loads:
            load = self.loads[parts[1]]
            if method == "DELETE":
                load.status = "LOAD_CANCELLED_BY_USER"
                load.scripted.clear()
                if load.held:  # no thread runs it: it ends here
                    load.finished = time.time()
                    load.done.set()
                self._send(http, 200, {"status": "200 OK"})
            else:
                query = parse_qs(url.query)
                answer = load.answer()
                if query.get("errors", ["false"])[0] != "true":
                    answer["payload"].pop("errors", None)
                self._send(http, 200, answer)
        else:
            self._send(
                http,
                404,
                {"code": "LoadNotFoundException", "detailedMessage": f"load id {parts[-1]} not found"},
            )

    @staticmethod
    def _send(http: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        http.send_response(status)
        http.send_header("Content-Type", "application/json")
        http.send_header("Content-Length", str(len(data)))
        http.end_headers()
        http.wfile.write(data)

    def _start(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            return 400, {"code": "BadRequestException", "detailedMessage": "the request body is not JSON"}
        missing = [name for name in REQUIRED if not request.get(name)]
        if missing:
            return 400, {"code": "BadRequestException", "detailedMessage": f"missing parameter(s): {missing}"}
        if request["format"] not in FORMATS:
            return 400, {
                "code": "BadRequestException",
                "detailedMessage": f"unsupported format {request['format']}",
            }
        if not str(request["source"]).startswith("s3://"):
            return 400, {"code": "BadRequestException", "detailedMessage": "source must be an s3:// URI"}
        if request.get("parallelism", "HIGH") not in PARALLELISM:
            return 400, {"code": "BadRequestException", "detailedMessage": "invalid parallelism"}
        waiting = [load for load in self.loads.values() if load.status in ACTIVE]
        if len(waiting) >= self.QUEUE_LIMIT:
            return 400, {
                "code": "BadRequestException",
                "detailedMessage": f"Failed to start new load for the source {request['source']}. "
                "Max concurrent load limit breached. Limit is 64",
            }
        load = Load(load_id=str(uuid.uuid4()), request=request, scripted=deque(self.script))
        self.loads[load.load_id] = load
        if self.hold:
            load.status, load.held = "LOAD_IN_QUEUE", True
            return 200, {"status": "200 OK", "payload": {"loadId": load.load_id}}
        threading.Thread(target=self._run, args=(load,), name=f"load-{load.load_id[:8]}", daemon=True).start()
        return 200, {"status": "200 OK", "payload": {"loadId": load.load_id}}

    # -- the load ----------------------------------------------------------------------------

    def _run(self, load: Load) -> None:
        try:
            if self.fail_with is not None:
                load.status, load.errors = self.fail_with[0], list(self.fail_with[1])
                load.parsing_errors = len(load.errors)
                return
            load.status = "LOAD_IN_PROGRESS"
            self._load(load)
        except Exception as error:  # the loader reports, it does not crash
            load.status = "LOAD_FAILED"
            load.errors.append(
                {"errorCode": "INTERNAL_ERROR", "errorMessage": str(error), "fileName": "", "recordNum": 0}
            )
        finally:
            load.finished = time.time()
            load.done.set()

    def _load(self, load: Load) -> None:
        bucket, _, prefix = str(load.request["source"])[5:].partition("/")
        rdf_format = FORMATS[load.request["format"]]
        fail_on_error = str(load.request.get("failOnError", "TRUE")).upper() == "TRUE"
        s3 = self._s3()
        try:
            if self.deny_s3:
                raise PermissionError(
                    "Access Denied (Service: Amazon S3; Status Code: 403; Error Code: AccessDenied)"
                )
            keys = [
                obj["Key"]
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                for obj in page.get("Contents", [])
            ]
        except Exception as error:
            # A feed's S3 error sets the overall status to LOAD_FAILED; the feed keeps its own.
            denied = "AccessDenied" in str(error) or "Access Denied" in str(error)
            load.status = "LOAD_FAILED"
            load.feed_status = "LOAD_S3_ACCESS_DENIED_ERROR" if denied else "LOAD_S3_READ_ERROR"
            load.errors.append(
                {
                    "errorCode": load.feed_status,
                    "errorMessage": str(error),
                    "fileName": load.request["source"],
                    "recordNum": 0,
                }
            )
            return
        if not keys:
            load.status = "LOAD_FAILED"
            load.errors.append(
                {
                    "errorCode": "NO_FILES",
                    "errorMessage": "no files under the source",
                    "fileName": load.request["source"],
                    "recordNum": 0,
                }
            )
            return
        for key in sorted(keys):
            data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            if key.endswith(".gz"):
                data = gzip.decompress(data)
            file_name = f"s3://{bucket}/{key}"
            quads: list[ox.Quad] = []
            for number, line in enumerate(data.split(b"\n"), start=1):
                if not line.strip() or line.lstrip().startswith(b"#"):
                    continue
                try:
                    quads.extend(ox.parse(input=line, format=rdf_format))
                except SyntaxError as error:
                    load.parsing_errors += 1
                    if len(load.errors) < MAX_ERRORS_LOGGED:
                        load.errors.append(
                            {
                                "errorCode": "PARSING_ERROR",
                                "errorMessage": str(error),
                                "fileName": file_name,
                                "recordNum": number,
                            }
                        )
                    if fail_on_error:
                        load.status = "LOAD_FAILED"
                        return
            if load.status == "LOAD_CANCELLED_BY_USER":
                return
            before = len(self.store)
            self.store.extend(quads)
            added = len(self.store) - before
            load.records += len(quads)
            load.duplicates += len(quads) - added
        load.status = "LOAD_COMPLETED"


def _signed(authorization: str) -> bool:
    """A SigV4 Authorization header for the neptune-db service (not verified: there is no secret here)."""
    return authorization.startswith("AWS4-HMAC-SHA256 ") and "/neptune-db/aws4_request" in authorization
