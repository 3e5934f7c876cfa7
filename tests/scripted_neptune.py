"""A test double: the local Neptune loader, scripted to answer what a test needs to happen.

Queued and in-progress answers before the outcome, a failed load with error details, loads held
in the queue until cancelled, S3 refusing the loader's role, or HTTP faults (4xx/5xx,
throttling, "too many concurrent loads") for the next requests; every request is recorded.
The `mapload` command never imports this: its embedded run uses mapload/emulator/neptune_local.py as is.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import ParseResult, parse_qs

import boto3

from mapload.emulator.neptune_local import Answer, Load, LocalNeptuneLoader, in_own_thread


class _DeniedS3:
    """An S3 client whose listing fails as S3 does for a role without access."""

    def get_paginator(self, name: str) -> Any:
        raise PermissionError(
            "Access Denied (Service: Amazon S3; Status Code: 403; Error Code: AccessDenied)"
        )


class ScriptedNeptuneLoader(LocalNeptuneLoader):
    """`with ScriptedNeptuneLoader() as loader: loader.script = [...]` before the client calls.

    The loader itself is unchanged: the script acts through its constructor arguments (a front
    that sees each request first, how a load starts, the S3 client the loads read with)."""

    def __init__(self, *args: Any, s3_client: Callable[[], Any] | None = None, **kwargs: Any) -> None:
        real_s3 = s3_client or (lambda: boto3.client("s3"))
        super().__init__(
            *args,
            s3_client=lambda: _DeniedS3() if self.deny_s3 else real_s3(),
            start=self._script_start,
            front=self._script_front,
            **kwargs,
        )
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
        self._requests_lock = threading.Lock()
        self._scripted: dict[str, deque[str]] = {}  # load id -> statuses still to report
        self._held: set[str] = set()

    def wait(self, load_id: str, timeout: float = 60) -> Load:
        """The load once it has ended; TimeoutError naming it after `timeout` s."""
        load = self.loads[load_id]
        if not load.done.wait(timeout):
            raise TimeoutError(f"load {load_id} still {load.status} after {timeout:g} s")
        return load

    def _script_front(self, answer: Answer) -> Answer:
        def scripted(
            method: str, url: ParseResult, body: bytes, headers: dict[str, str]
        ) -> tuple[int, dict[str, Any]]:
            with self._requests_lock:
                self.requests.append({"method": method, "path": url.path, "headers": headers, "body": body})
                fault = self.faults.popleft() if self.faults else None
            if fault is not None:
                return fault
            status, answered = answer(method, url, body, headers)
            parts = [p for p in url.path.split("/") if p]
            load = self.loads.get(parts[1]) if status == 200 and len(parts) == 2 else None
            if load is None:
                return status, answered
            script = self._scripted.setdefault(load.load_id, deque())
            if method == "DELETE":
                script.clear()
                if load.load_id in self._held:  # no thread runs it: it ends here
                    load.finished = time.time()
                    load.done.set()
            elif method == "GET" and script:
                answered = dataclasses.replace(load, status=script.popleft()).answer()
                if parse_qs(url.query).get("errors", ["false"])[0] != "true":
                    answered["payload"].pop("errors", None)
            return status, answered

        return scripted

    def _script_start(self, load: Load, run: Callable[[], None]) -> threading.Thread | None:
        self._scripted[load.load_id] = deque(self.script)
        if self.hold:
            load.status = "LOAD_IN_QUEUE"
            self._held.add(load.load_id)
            return None
        if self.fail_with is not None:
            status, errors = self.fail_with

            def fail() -> None:
                load.status, load.errors = status, list(errors)
                load.parsing_errors = len(load.errors)
                load.finished = time.time()
                load.done.set()

            return in_own_thread(load, fail)
        return in_own_thread(load, run)
