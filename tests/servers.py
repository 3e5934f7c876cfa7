"""A moto server in its own process for tests: it picks its own port, is ready before use, applies
DynamoDB requests one at a time, and counts requests through its own recorder API (never by
parsing its log), which records one request at a time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
STARTUP_SECONDS = 60.0
# DynamoDB applies each write to an item atomically; moto's threaded server does not (8 threads
# adding 1 to one item 1,000 times left 895), which made the multipart counter, whose last count
# elects the completer, lose counts. This server applies DynamoDB requests one at a time.
_SERVER = """
import sys, threading
from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

lock = threading.Lock()
dispatch = DomainDispatcherApplication.__call__

def one_dynamodb_request_at_a_time(self, environ, start_response):
    if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
        with lock:
            return dispatch(self, environ, start_response)
    return dispatch(self, environ, start_response)

DomainDispatcherApplication.__call__ = one_dynamodb_request_at_a_time

# moto's recorder appends each request's JSON line in two writes from the request's thread: two
# requests at once (a 24 KB TransactWriteItems beside a part) interleaved into one unreadable line.
from moto.moto_api._internal.recorder.models import Recorder

record_lock = threading.Lock()
record = Recorder._record_request

def one_record_at_a_time(self, request, body=None):
    with record_lock:
        return record(self, request, body)

Recorder._record_request = one_record_at_a_time

# S3's part checksums: a part whose checksum does not match is refused, and ListParts names each
# part's (mapload upload compares parts by CRC32: under SSE-KMS an ETag differs per copy).
from mapload.emulator.s3_checksums import PART_CHECKSUMS

PART_CHECKSUMS.install()
server.main(sys.argv[1:])
"""
_LISTENING = re.compile(r"Running on (http://127\.0\.0\.1:\d+)")
_SERVED = re.compile(r"^export AWS_ENDPOINT_URL_DYNAMODB=(http://127\.0\.0\.1:\d+)")


class ServerStartError(RuntimeError):
    """The server process exited or never said where it listens."""


@dataclass
class MotoServer:
    endpoint: str
    log: Path

    def _api(self, path: str, method: str = "GET") -> str:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{path}", method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            return str(response.read().decode())

    def start_recording(self) -> None:
        self._api("reset-recording", "POST")
        self._api("start-recording", "POST")

    def recorded(self) -> list[dict[str, Any]]:
        """Every request recorded since start_recording, in the order the server took them."""
        return [json.loads(line) for line in self._api("download-recording").splitlines() if line]

    def requests(self, method: str, url: str) -> list[dict[str, Any]]:
        """Recorded requests (since start_recording) with this method whose URL matches `url`."""
        return [e for e in self.recorded() if e["method"] == method and re.search(url, e["url"])]


def _drain(
    stream: IO[str], log: Path, listening: re.Pattern[str], found: list[str], ready: threading.Event
) -> None:
    """Read the server's output to the end (a full pipe would stall it), noting its address."""
    with log.open("a", encoding="utf-8") as out:
        for line in stream:
            out.write(line)
            out.flush()
            match = listening.search(line)
            if match and not ready.is_set():
                found.append(match.group(1))
                ready.set()
    ready.set()  # the process ended: wake the waiter, which then finds no address


@contextmanager
def moto_server(log: Path, env: Mapping[str, str] | None = None) -> Iterator[MotoServer]:
    """moto's server on `-p 0` (the OS picks a free port: no bind-close-reuse race under
    xdist); raises ServerStartError, with the server's output, if it does not come up."""
    recording = log.with_suffix(".recording")
    command = [sys.executable, "-c", _SERVER, "-H", "127.0.0.1", "-p", "0"]
    recorder = {"MOTO_RECORDER_FILEPATH": str(recording), **(env or {})}
    with _server_process("moto", command, _LISTENING, log, recorder) as url:
        yield MotoServer(url, log)


@contextmanager
def mapload_serve(log: Path) -> Iterator[str]:
    """`mapload serve --port 0` in its own process, as a user runs it; yields its endpoint."""
    command = [sys.executable, "-m", "mapload.cli", "serve", "--port", "0"]
    with _server_process("mapload serve", command, _SERVED, log, {}) as url:
        yield url


@contextmanager
def _server_process(
    name: str, command: list[str], listening: re.Pattern[str], log: Path, env: Mapping[str, str]
) -> Iterator[str]:
    """Start `command`, wait until its output names its endpoint (`listening`), yield it; stop it."""
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )
    assert process.stdout is not None
    found: list[str] = []
    ready = threading.Event()
    drain = threading.Thread(target=_drain, args=(process.stdout, log, listening, found, ready), daemon=True)
    drain.start()
    try:
        started = time.monotonic()
        if not ready.wait(STARTUP_SECONDS) or not found:
            raise ServerStartError(
                f"{name} server did not come up within {time.monotonic() - started:.0f} s "
                f"(exit code {process.poll()}): {log.read_text(encoding='utf-8')[-2000:]}"
            )
        yield found[0]
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        drain.join(timeout=10)
