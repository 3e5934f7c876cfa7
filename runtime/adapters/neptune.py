"""Neptune's HTTP APIs the loader Lambdas call, signed with SigV4 (neptune-db): the bulk loader
(POST /loader, GET /loader/{id}) and one openCypher read (POST /openCypher: which vertex ids exist)."""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Mapping
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from logic import graph_load
from logic.errors import GraphLoaderAccessDeniedError, GraphLoaderBusyError, GraphLoaderError
from logic.retry import backoff_delays

SERVICE = "neptune-db"
# Answers worth another try: throttling, a busy or restarting server, the load queue being full.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# IAM authentication refused the request: not retried here (Neptune may take up to 10 minutes
# to apply an IAM change; the state machine waits between attempts, a Lambda never sleeps).
ACCESS_DENIED = 403
RETRY_CODES = frozenset({"ThrottlingException", "TooManyRequestsException", "TimeLimitExceededException"})
LOADER = "Neptune loader"
OPENCYPHER = "Neptune openCypher"
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
# The vertices among `$ids` (openCypher's id() is a vertex's ~id). The embedded Neptune
# (mapload/emulator/neptune_local.py) answers exactly this text, so both sides import it from here.
EXISTING_IDS_QUERY = "MATCH (n) WHERE id(n) IN $ids RETURN id(n) AS id"
# Vertex id queries in flight at once (existing_vertex_ids).
QUERY_CONCURRENCY = 4


def base_url(endpoint: str, port: int) -> str:
    """`https://<cluster endpoint>:<port>`; an endpoint with a scheme (the embedded run's
    local loader, `http://127.0.0.1`) keeps it."""
    scheme_host = endpoint if "://" in endpoint else f"https://{endpoint}"
    return f"{scheme_host.rstrip('/')}:{port}"


def _too_many_loads(status: int, message: str) -> bool:
    # The loader answers 400 when its queue (64 loads) is full or queueRequest is FALSE and a
    # load is running: "... concurrent load limit ..." / "... max number of concurrent ...".
    text = message.lower()
    return status == 400 and "concurrent" in text and ("limit" in text or "max" in text)


class LoaderClient:
    """Bounded retries with capped full-jitter backoff; every failure names the request and the answer."""

    def __init__(
        self,
        url: str,
        region: str,
        *,
        credentials: Any = None,
        attempts: int = 6,
        base_seconds: float = 0.5,
        cap_seconds: float = 8.0,
        timeout_seconds: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.region = region
        self._credentials = credentials
        self.attempts = attempts
        self._base = base_seconds
        self._cap = cap_seconds
        self._timeout = timeout_seconds
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.retries = 0

    def start(self, body: Mapping[str, Any]) -> str:
        """POST /loader; the new load's id."""
        answer = self._request("POST", "/loader", body)
        load_id = (answer.get("payload") or {}).get("loadId")
        if not isinstance(load_id, str) or not load_id:
            raise GraphLoaderError(f"POST /loader answered without a loadId: {json.dumps(answer)[:300]}")
        return load_id

    def status(self, load_id: str) -> dict[str, Any]:
        """GET /loader/{id}?details=true&errors=true: the answer's payload."""
        query = urllib.parse.urlencode({"details": "true", "errors": "true", "page": 1, "errorsPerPage": 10})
        answer = self._request("GET", f"/loader/{urllib.parse.quote(load_id, safe='')}?{query}")
        payload = answer.get("payload")
        if not isinstance(payload, dict) or "overallStatus" not in payload:
            raise GraphLoaderError(
                f"GET /loader/{load_id} answered without overallStatus: {json.dumps(answer)[:300]}"
            )
        return payload

    def list_loads(self, limit: int = 100) -> list[str]:
        """GET /loader?limit=N: the most recent load ids (Neptune keeps them newest first)."""
        answer = self._request("GET", f"/loader?{urllib.parse.urlencode({'limit': limit})}")
        ids = (answer.get("payload") or {}).get("loadIds") or []
        return [str(load_id) for load_id in ids]

    def find_load(self, source: str, since: float = 0, limit: int = 100) -> str | None:
        """The id of a recent load of exactly `source` (its overallStatus.fullUri) that started at
        or after `since` (epoch seconds; a load not started yet counts), or None. A re-run of the
        same plan stages under the same source: an earlier run's load is never adopted."""
        for load_id in self.list_loads(limit):
            try:
                payload = self.status(load_id)
            except GraphLoaderError:
                continue  # expired or unreadable: not ours to adopt
            overall = payload.get("overallStatus") or {}
            started = float(overall.get("startTime") or 0)
            if overall.get("fullUri") == source and (not started or started >= since):
                return load_id
        return None

    def cancel(self, load_id: str) -> None:
        """DELETE /loader/{id}: cancel a load that outlived its deadline."""
        self._request("DELETE", f"/loader/{urllib.parse.quote(load_id, safe='')}")

    def existing_vertex_ids(self, ids: Collection[str], batch: int = 1000) -> set[str]:
        """The ids among `ids` that are vertices of the graph: POST /openCypher with
        EXISTING_IDS_QUERY and `{"ids": [...]}` as its parameters, `batch` distinct ids a request."""
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch}")
        # A set is distinct already: no second copy of millions of ids to make it so.
        wanted = list(ids) if isinstance(ids, AbstractSet) else list(dict.fromkeys(ids))

        def ask(start: int) -> list[str]:
            parameters = json.dumps({"ids": wanted[start : start + batch]})
            form = urllib.parse.urlencode({"query": EXISTING_IDS_QUERY, "parameters": parameters})
            return _result_ids(self._call("POST", "/openCypher", form.encode(), FORM_TYPE, OPENCYPHER))

        found: set[str] = set()
        starts = range(0, len(wanted), batch)
        if len(starts) <= 1:
            for start in starts:
                found.update(ask(start))
            return found
        # A few queries at once: Neptune runs queries on its worker threads (two per vCPU) and
        # queues the rest; one at a time would leave the check waiting on round trips.
        with ThreadPoolExecutor(max_workers=QUERY_CONCURRENCY) as pool:
            for ids_found in pool.map(ask, starts):
                found.update(ids_found)
        return found

    # -- transport ---------------------------------------------------------------------------

    def _credentials_now(self) -> Any:
        if self._credentials is None:
            self._credentials = boto3.Session().get_credentials()
            if self._credentials is None:
                raise GraphLoaderError("no AWS credentials to sign the Neptune request with")
        return (
            self._credentials.get_frozen_credentials()
            if hasattr(self._credentials, "get_frozen_credentials")
            else self._credentials
        )

    def _signed(
        self, method: str, path: str, data: bytes | None, content_type: str
    ) -> urllib.request.Request:
        url = self.url + path
        headers = {"Content-Type": content_type} if data is not None else {}
        request = AWSRequest(method=method, url=url, data=data, headers=headers)
        SigV4Auth(self._credentials_now(), SERVICE, self.region).add_auth(request)
        return urllib.request.Request(url, data=data, headers=dict(request.headers.items()), method=method)

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A loader call: its body (if any) as JSON."""
        data = json.dumps(body).encode() if body is not None else None
        return self._call(method, path, data, JSON_TYPE, LOADER)

    def _call(
        self, method: str, path: str, data: bytes | None, content_type: str, api: str
    ) -> dict[str, Any]:
        """One request with bounded retries; `api` ("Neptune loader", "Neptune openCypher") opens
        every error message."""
        delays = backoff_delays(self._base, self._cap, self._rng)
        what = f"{method} {path.split('?')[0]}"
        last = ""
        busy = False
        for attempt in range(1, self.attempts + 1):
            try:
                with urllib.request.urlopen(
                    self._signed(method, path, data, content_type), timeout=self._timeout
                ) as response:
                    raw = response.read()
                return dict(json.loads(raw or b"{}"))
            except urllib.error.HTTPError as error:
                status = error.code
                answer = _error_body(error)
                code = str(answer.get("code") or "")
                message = str(answer.get("detailedMessage") or answer.get("message") or error.reason or "")
                last = f"HTTP {status} {code}: {message}".strip()
                # The loader's S3 unreachable or denied (HTTP 500 or 400): the same answer on every attempt.
                cause = graph_load.access_cause(message) if api == LOADER else None
                if cause is not None:
                    raise GraphLoaderError(f"{api} {what} failed: {cause} ({last})", status, code) from None
                if status == ACCESS_DENIED:
                    refused = f"{api} {what} refused: {last}"
                    raise GraphLoaderAccessDeniedError(refused, status, code) from None
                busy = api == LOADER and _too_many_loads(status, message)
                if not (status in RETRY_STATUSES or code in RETRY_CODES or busy):
                    raise GraphLoaderError(f"{api} {what} refused: {last}", status, code) from None
            except (urllib.error.URLError, OSError, ValueError) as error:
                reason = getattr(error, "reason", error)
                last = f"{type(error).__name__}: {reason}"
            if attempt < self.attempts:
                self.retries += 1
                self._sleep(next(delays))
        kind = "at its concurrent load limit" if busy else "unavailable or throttling"
        raise GraphLoaderBusyError(f"{api} {what} {kind} after {self.attempts} attempts; last answer: {last}")


def _result_ids(answer: Mapping[str, Any]) -> list[str]:
    """The `id` of every row of an openCypher answer (`{"results": [{"id": ...}, ...]}`)."""
    results = answer.get("results")
    rows = results if isinstance(results, list) else None
    if rows is None or not all(isinstance(row, dict) and isinstance(row.get("id"), str) for row in rows):
        raise GraphLoaderError(
            f"{OPENCYPHER} POST /openCypher answered without results of ids: {json.dumps(answer)[:300]}"
        )
    return [row["id"] for row in rows]


def _error_body(error: urllib.error.HTTPError) -> dict[str, Any]:
    try:
        value = json.loads(error.read() or b"{}")
    except (ValueError, OSError):
        return {}
    return value if isinstance(value, dict) else {}
