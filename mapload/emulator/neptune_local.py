"""A local HTTP server that answers like Neptune's bulk loader, backed by a pyoxigraph store
(RDF) and a LadybugDB property graph (openCypher CSV, mapload/emulator/property_store.py).

The embedded run points the StartGraphLoad/PollGraphLoad functions at it (the cluster endpoint
resolves to its URL), so the very client code that runs on AWS - HTTP, SigV4 headers, retries -
runs locally. It reads the staged files from S3 (the emulator's, or any endpoint boto3 is told
about), loads them into the store and reports the statuses and counts Neptune's loader does.
(Tests substitute through its constructor - how a load starts, a front that sees each request
first - in tests/scripted_neptune.py; the command never does.)

It also answers `POST /openCypher`, but it is not an openCypher engine: it answers only
mapload's vertex id query (adapters.neptune.EXISTING_IDS_QUERY, form parameters `query` and
`parameters={"ids": [...]}`) from the property graph, as `{"results": [{"id": ...}, ...]}`; any
other query is refused with HTTP 400 MalformedQueryException.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, parse_qs, urlparse

import boto3
import pyoxigraph as ox

from adapters.neptune import EXISTING_IDS_QUERY
from logic import opencypher
from logic.opencypher import FormatError, Header, Row
from mapload.emulator.property_store import (
    FILE_NAME,
    MissingEndpointError,
    PropertyGraphStore,
    PropertyTypeError,
)

FORMATS = {"nquads": ox.RdfFormat.N_QUADS, "ntriples": ox.RdfFormat.N_TRIPLES}
OPENCYPHER = "opencypher"
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
    done: threading.Event = field(default_factory=threading.Event)
    # The failed feed's own status when it differs from the overall one (an S3 error of one feed
    # sets the overall status to LOAD_FAILED, as Neptune documents).
    feed_status: str | None = None

    def cancel(self) -> None:
        """DELETE: a running load stops before its next file."""
        self.status = "LOAD_CANCELLED_BY_USER"

    def answer(self) -> dict[str, Any]:
        status = self.status
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
            # Each file with an error is a failed feed (with failOnError false the others load).
            payload["failedFeeds"] = [
                {"fullUri": name, "status": self.feed_status or status}
                for name in dict.fromkeys(e["fileName"] for e in self.errors)
                if status != "LOAD_COMPLETED"
            ]
        return {"status": "200 OK", "payload": payload}


# One request answered: (method, URL, body, headers) -> (HTTP status, JSON body).
Answer = Callable[[str, ParseResult, bytes, dict[str, str]], tuple[int, dict[str, Any]]]
# How a load runs once its POST is answered: `start(load, run)` calls `run()` (the load's work,
# which sets `load.done` at its end) and returns the thread doing it, joined on exit.
Start = Callable[[Load, Callable[[], None]], threading.Thread | None]


def in_own_thread(load: Load, run: Callable[[], None]) -> threading.Thread:
    """Run the load in its own thread, as Neptune runs it after answering the POST."""
    thread = threading.Thread(target=run, name=f"load-{load.load_id[:8]}", daemon=True)
    thread.start()
    return thread


class LocalNeptuneLoader:
    """`with LocalNeptuneLoader(store_dir) as loader:` serves http://127.0.0.1:<port>/loader.

    `s3_client` makes the client the loads read the staged files with; `start` runs a load
    (default: in_own_thread); `front` wraps the answering of each request (default: none)."""

    # Neptune queues at most 64 loads; a further POST is refused until one ends.
    QUEUE_LIMIT = 64

    def __init__(
        self,
        store_path: Path | None = None,
        *,
        s3_client: Callable[[], Any] | None = None,
        require_sigv4: bool = True,
        start: Start = in_own_thread,
        front: Callable[[Answer], Answer] | None = None,
    ) -> None:
        self.store = ox.Store(str(store_path)) if store_path is not None else ox.Store()
        self._store_path = store_path
        self._property_graph: PropertyGraphStore | None = None
        self._graph_lock = threading.Lock()  # one openCypher load at a time writes the graph
        self._s3 = s3_client or (lambda: boto3.client("s3"))
        self.require_sigv4 = require_sigv4
        self.loads: dict[str, Load] = {}
        self._lock = threading.Lock()
        self._runs: list[threading.Thread] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._start_load = start
        self._served: Answer = front(self._answer) if front is not None else self._answer

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def property_graph(self) -> PropertyGraphStore:
        """The property graph openCypher loads go to (made at the first one: `<store dir>/` +
        property_store.FILE_NAME, or in memory)."""
        if self._property_graph is None:
            self._property_graph = PropertyGraphStore(self._store_path)
        return self._property_graph

    @property
    def has_property_graph(self) -> bool:
        return self._property_graph is not None

    def _graph_exists(self) -> bool:
        """A graph is open, or one a past run left in the store directory."""
        return self.has_property_graph or (
            self._store_path is not None and (self._store_path / FILE_NAME).exists()
        )

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
        for run in list(self._runs):
            run.join(timeout=60)
        self.store.flush()
        if self._property_graph is not None:
            self._property_graph.close()
            self._property_graph = None

    # -- HTTP --------------------------------------------------------------------------------

    def _handle(self, http: BaseHTTPRequestHandler, method: str) -> None:
        length = int(http.headers.get("Content-Length") or 0)
        body = http.rfile.read(length) if length else b""
        self._send(http, *self._served(method, urlparse(http.path), body, dict(http.headers.items())))

    def _answer(
        self, method: str, url: ParseResult, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one request, as Neptune's loader answers it."""
        if self.require_sigv4 and not _signed(headers.get("Authorization") or ""):
            return 403, {
                "code": "AccessDeniedException",
                "detailedMessage": "Missing or invalid SigV4 authentication",
            }
        parts = [p for p in url.path.split("/") if p]
        if method == "POST" and parts == ["openCypher"]:
            return self._open_cypher(body)
        if not parts or parts[0] != "loader":
            return 404, {"code": "BadRequestException", "detailedMessage": f"no route {url.path}"}
        if method == "POST" and len(parts) == 1:
            return self._start(body)
        if method == "GET" and len(parts) == 1:
            # Newest first, like Neptune; `limit` (default 50) bounds the list.
            limit = int(parse_qs(url.query).get("limit", ["50"])[0])
            return 200, {"status": "200 OK", "payload": {"loadIds": list(reversed(self.loads))[:limit]}}
        if len(parts) == 2 and parts[1] in self.loads:
            load = self.loads[parts[1]]
            if method == "DELETE":
                load.cancel()
                return 200, {"status": "200 OK"}
            answer = load.answer()
            if parse_qs(url.query).get("errors", ["false"])[0] != "true":
                answer["payload"].pop("errors", None)
            return 200, answer
        return 404, {"code": "LoadNotFoundException", "detailedMessage": f"load id {parts[-1]} not found"}

    def _open_cypher(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """POST /openCypher: mapload's vertex id query, answered from the property graph."""
        form = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
        query = (form.get("query") or [""])[0]
        if query != EXISTING_IDS_QUERY:
            return 400, {
                "code": "MalformedQueryException",
                "detailedMessage": "the embedded Neptune answers only mapload's vertex id query: "
                f"{EXISTING_IDS_QUERY!r}, not {query[:200]!r}",
            }
        if "parameters" not in form:
            return 400, {
                "code": "MissingParameterException",
                "detailedMessage": "missing parameter 'parameters'",
            }
        try:
            parameters = json.loads(form["parameters"][0])
        except ValueError:
            parameters = None
        ids = parameters.get("ids") if isinstance(parameters, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return 400, {
                "code": "InvalidParameterException",
                "detailedMessage": "parameters must be a JSON object whose 'ids' is a list of strings",
            }
        with self._graph_lock:
            found = self.property_graph.existing_ids(ids) if self._graph_exists() else []
        return 200, {"results": [{"id": i} for i in found]}

    @staticmethod
    def _send(http: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        http.send_response(status)
        http.send_header("Content-Type", "application/json")
        http.send_header("Content-Length", str(len(data)))
        http.end_headers()
        http.wfile.write(data)

    def _start(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        # One POST at a time from the limit check to the insert: two server threads must not
        # both pass the concurrent-load limit with the last free place.
        with self._lock:
            request, refused = self._request(raw)
            if refused is not None:
                return refused
            load = Load(load_id=str(uuid.uuid4()), request=request)
            self.loads[load.load_id] = load
        run = self._start_load(load, lambda: self._run(load))
        if run is not None:
            self._runs.append(run)
        return 200, {"status": "200 OK", "payload": {"loadId": load.load_id}}

    def _request(self, raw: bytes) -> tuple[dict[str, Any], tuple[int, dict[str, Any]] | None]:
        """The POST's parameters, or the 400 Neptune answers a request it refuses."""
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            return {}, _bad_request("the request body is not JSON")
        missing = [name for name in REQUIRED if not request.get(name)]
        if missing:
            return request, _bad_request(f"missing parameter(s): {missing}")
        if request["format"] not in (*FORMATS, OPENCYPHER):
            return request, _bad_request(f"unsupported format {request['format']}")
        if not str(request["source"]).startswith("s3://"):
            return request, _bad_request("source must be an s3:// URI")
        if request.get("parallelism", "HIGH") not in PARALLELISM:
            return request, _bad_request("invalid parallelism")
        waiting = [load for load in self.loads.values() if load.status in ACTIVE]
        if len(waiting) >= self.QUEUE_LIMIT:
            return request, _bad_request(
                f"Failed to start new load for the source {request['source']}. "
                "Max concurrent load limit breached. Limit is 64"
            )
        return request, None

    def wait_idle(self, seconds: float) -> None:
        """Wait until no load is running, or `seconds` have passed: the embedded run's graph poll
        Wait, which on AWS gives Neptune time, ends as soon as the local loads are done."""
        deadline = time.monotonic() + seconds
        for load in list(self.loads.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if load.status in ACTIVE:
                load.done.wait(left)

    # -- the load ----------------------------------------------------------------------------

    def _run(self, load: Load) -> None:
        try:
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
        s3 = self._s3()
        try:
            keys = self._list_keys(s3, bucket, prefix)
        except Exception as error:
            # A feed's S3 error sets the overall status to LOAD_FAILED; the feed keeps its own.
            denied = "AccessDenied" in str(error) or "Access Denied" in str(error)
            code = "LOAD_S3_ACCESS_DENIED_ERROR" if denied else "LOAD_S3_READ_ERROR"
            _fail(load, code, str(error), feed_status=code)
            return
        if not keys:
            _fail(load, "NO_FILES", "no files under the source", feed_status=None)
            return
        if load.request["format"] == OPENCYPHER:
            files = [(f"s3://{bucket}/{key}", _body(s3, bucket, key)) for key in sorted(keys)]
            with self._graph_lock:
                self._load_opencypher(load, files)
            return
        for key in sorted(keys):
            data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            quads = self._parse(
                load, f"s3://{bucket}/{key}", gzip.decompress(data) if key.endswith(".gz") else data
            )
            if quads is None or load.status == "LOAD_CANCELLED_BY_USER":
                return
            before = len(self.store)
            self.store.extend(quads)
            added = len(self.store) - before
            load.records += len(quads)
            load.duplicates += len(quads) - added
        load.status = _ended(load)

    def _load_opencypher(self, load: Load, files: list[tuple[str, bytes]]) -> None:
        """Vertex files before edge files (as Neptune's loader orders them), row by row: a bad row
        is a parsing error, an edge without its vertices an insert error; with failOnError the
        first one fails the load."""
        parsed = [(name, *_read_csv(load, name, data)) for name, data in files]
        if load.status == "LOAD_FAILED":
            return
        graph = self.property_graph
        ordered = sorted(parsed, key=lambda file: file[1] is None or file[1].kind != opencypher.NODE)
        for name, header, rows in ordered:
            if header is None or load.status == "LOAD_CANCELLED_BY_USER":
                continue
            try:
                graph.prepare(header)
            except PropertyTypeError as error:
                if _insert_error(load, "DATATYPE_MISMATCH", str(error), name, 1):
                    return
                continue
            add = graph.add_vertex if header.kind == opencypher.NODE else graph.add_edge
            for number, row in rows:
                load.records += 1
                try:
                    load.duplicates += not add(header, row)
                except MissingEndpointError as error:
                    if _insert_error(load, "FROM_OR_TO_VERTEX_ARE_MISSING", str(error), name, number):
                        return
        if load.status != "LOAD_CANCELLED_BY_USER":
            load.status = _ended(load)

    def _list_keys(self, s3: Any, bucket: str, prefix: str) -> list[str]:
        return [
            obj["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for obj in page.get("Contents", [])
        ]

    @staticmethod
    def _parse(load: Load, file_name: str, data: bytes) -> list[ox.Quad] | None:
        """One file's statements, its bad lines counted and logged; None when the load fails on them."""
        rdf_format = FORMATS[load.request["format"]]
        fail_on_error = str(load.request.get("failOnError", "TRUE")).upper() == "TRUE"
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
                    return None
        return quads


def _body(s3: Any, bucket: str, key: str) -> bytes:
    data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return gzip.decompress(data) if key.endswith(".gz") else data


def _read_csv(load: Load, name: str, data: bytes) -> tuple[Header | None, list[tuple[int, Row]]]:
    """One openCypher CSV file's header and valid rows (with their record numbers). A bad row is
    a parsing error, a bad header one for the whole file; with failOnError the load fails on it."""
    reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""), strict=True)
    header: Header | None = None
    rows: list[tuple[int, Row]] = []
    try:
        for cells in reader:
            try:
                if header is None:
                    header = opencypher.parse_header(cells)
                else:
                    rows.append((reader.line_num, opencypher.parse_row(header, cells)))
            except FormatError as error:
                if _parsing_error(load, str(error), name, reader.line_num) or header is None:
                    return None, []
    except csv.Error as error:
        if _parsing_error(load, str(error), name, reader.line_num):
            return None, []
    return header, rows


def _parsing_error(load: Load, message: str, name: str, number: int) -> bool:
    """Count and log a parsing error; True when the load fails on it (failOnError)."""
    load.parsing_errors += 1
    _log_error(load, "PARSING_ERROR", message, name, number)
    if _fails_on_error(load):
        load.status = "LOAD_FAILED"
        return True
    return False


def _ended(load: Load) -> str:
    """A load that read every file: with failOnError false Neptune skips a bad record and loads
    the rest, and still ends the load LOAD_FAILED when any record failed."""
    return "LOAD_FAILED" if load.parsing_errors or load.insert_errors else "LOAD_COMPLETED"


def _fails_on_error(load: Load) -> bool:
    return str(load.request.get("failOnError", "TRUE")).upper() == "TRUE"


def _log_error(load: Load, code: str, message: str, name: str, number: int) -> None:
    if len(load.errors) < MAX_ERRORS_LOGGED:
        load.errors.append(
            {"errorCode": code, "errorMessage": message, "fileName": name, "recordNum": number}
        )


def _insert_error(load: Load, code: str, message: str, name: str, number: int) -> bool:
    """Count and log an insert error; True when the load fails on it (failOnError)."""
    load.insert_errors += 1
    _log_error(load, code, message, name, number)
    if _fails_on_error(load):
        load.status = "LOAD_FAILED"
        return True
    return False


def _bad_request(message: str) -> tuple[int, dict[str, Any]]:
    return 400, {"code": "BadRequestException", "detailedMessage": message}


def _fail(load: Load, code: str, message: str, *, feed_status: str | None) -> None:
    """The load fails on its source as a whole: one error log naming it (`feed_status`: the failed
    feed's own status, None when it is the overall one)."""
    load.status = "LOAD_FAILED"
    load.feed_status = feed_status
    load.errors.append(
        {"errorCode": code, "errorMessage": message, "fileName": load.request["source"], "recordNum": 0}
    )


def _signed(authorization: str) -> bool:
    """A SigV4 Authorization header for the neptune-db service (not verified: there is no secret here)."""
    return authorization.startswith("AWS4-HMAC-SHA256 ") and "/neptune-db/aws4_request" in authorization
