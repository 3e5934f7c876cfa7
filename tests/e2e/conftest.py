"""Helpers for end-to-end runs: build files with known good and bad rows, run, read the table."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mapload import ROOT
from mapload.embedded import Deployment, Emulator
from mapload.iamcheck import RECORDER
from mapload.local import run_local

REPORT_SCHEMA = json.loads((ROOT / "schemas" / "report.schema.json").read_text())


@dataclass
class Run:
    report: dict[str, Any]
    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    report_path: Path | None = None

    def rejects(self) -> list[dict[str, Any]]:
        location = self.report["rejects"]["location"]
        if not location:
            return []
        return [json.loads(line) for line in Path(location).read_text().splitlines()]


def scan(emu: Emulator, deployment: Deployment) -> dict[tuple[str, str], dict[str, Any]]:
    table = deployment.output("TableName")
    db = emu.client("dynamodb")
    items: dict[tuple[str, str], dict[str, Any]] = {}
    for page in db.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            items[(item["pk"]["S"], item["sk"]["S"])] = item
    return items


@pytest.fixture(autouse=True)
def iam_checked() -> Iterator[None]:
    """Every AWS call a deployed function or the state machine makes in the test must be allowed
    by its own synthesized role's policies (mapload/iamcheck.py)."""
    RECORDER.install()
    RECORDER.take()
    yield
    denied = RECORDER.denied()
    if denied:
        pytest.fail("AWS calls their roles do not allow:\n  " + "\n  ".join(denied), pytrace=False)


@pytest.fixture
def moto_server() -> Iterator[str]:
    """A moto server in its own process: a DynamoDB/S3 endpoint that outlives one embedded run."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def run_file(tmp_path: Path) -> Callable[..., Run]:
    def _run(file: Path, spec: dict[str, Any], **kwargs: Any) -> Run:
        seen: dict[str, Any] = {}

        def inspect(emu: Emulator, deployment: Deployment) -> None:
            seen["items"] = scan(emu, deployment)

        report_path = tmp_path / "report.json"
        report = run_local(file, spec, report_path=report_path, quiet=True, inspect=inspect, **kwargs)
        on_disk = json.loads(report_path.read_text())
        assert on_disk == report
        jsonschema.validate(report, REPORT_SCHEMA)
        result = Run(report, seen.get("items", {}), report_path)
        reject_schema = {**REPORT_SCHEMA["$defs"]["reject"], "$defs": REPORT_SCHEMA["$defs"]}
        for reject in result.rejects():
            jsonschema.validate(reject, reject_schema)
        # Nothing lost, in every report.
        assert report["records"]["read"] == report["records"]["written"] + report["records"]["rejected"]
        assert report["rejects"]["count"] == len(result.rejects()) == report["records"]["rejected"]
        return result

    return _run
