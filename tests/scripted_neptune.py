"""A test double: the local Neptune loader, scripted to answer what a test needs to happen.

Queued and in-progress answers before the outcome, a failed load with error details, loads held
in the queue until cancelled, S3 refusing the loader's role, or HTTP faults (4xx/5xx,
throttling, "too many concurrent loads") for the next requests; every request is recorded.
The `mapload` command never imports this: its embedded run uses mapload/emulator/neptune_local.py as is.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import ParseResult

from mapload.emulator.neptune_local import Load, LocalNeptuneLoader


@dataclass
class ScriptedLoad(Load):
    # Statuses reported (one per GET) before the real one.
    scripted: deque[str] = field(default_factory=deque)
    # Held in the queue (behind other loads, as far as the client can tell) until cancelled.
    held: bool = False

    def reported_status(self) -> str:
        return self.scripted.popleft() if self.scripted else self.status

    def cancel(self) -> None:
        super().cancel()
        self.scripted.clear()
        if self.held:  # no thread runs it: it ends here
            self.finished = time.time()
            self.done.set()


class ScriptedNeptuneLoader(LocalNeptuneLoader):
    """`with ScriptedNeptuneLoader() as loader: loader.script = [...]` before the client calls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
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

    def wait(self, load_id: str, timeout: float = 60) -> Load:
        """The load once it has ended; TimeoutError naming it after `timeout` s."""
        load = self.loads[load_id]
        if not load.done.wait(timeout):
            raise TimeoutError(f"load {load_id} still {load.status} after {timeout:g} s")
        return load

    def _answer(
        self, method: str, url: ParseResult, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        with self._requests_lock:
            self.requests.append({"method": method, "path": url.path, "headers": headers, "body": body})
            fault = self.faults.popleft() if self.faults else None
        return fault if fault is not None else super()._answer(method, url, body, headers)

    def _new_load(self, request: dict[str, Any]) -> Load:
        load = ScriptedLoad(load_id=super()._new_load(request).load_id, request=request)
        load.scripted.extend(self.script)
        return load

    def _begin(self, load: Load) -> None:
        if self.hold:
            assert isinstance(load, ScriptedLoad)
            load.status, load.held = "LOAD_IN_QUEUE", True
        else:
            super()._begin(load)

    def _load(self, load: Load) -> None:
        if self.fail_with is not None:
            load.status, load.errors = self.fail_with[0], list(self.fail_with[1])
            load.parsing_errors = len(load.errors)
        else:
            super()._load(load)

    def _list_keys(self, s3: Any, bucket: str, prefix: str) -> list[str]:
        if self.deny_s3:
            raise PermissionError(
                "Access Denied (Service: Amazon S3; Status Code: 403; Error Code: AccessDenied)"
            )
        return super()._list_keys(s3, bucket, prefix)
