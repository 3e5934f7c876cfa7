"""Helpers for end-to-end runs: build files with known good and bad rows, run, read the table."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from emulated_stacks import record_stack_outputs
from iamcheck import RECORDER
from servers import mapload_serve
from servers import moto_server as start_moto_server

from mapload import ROOT
from mapload.emulator.calls import watching
from mapload.emulator.embedded import Deployment, Emulator
from mapload.local import LOCAL_CONTEXT, run_local
from mapload.synth import StackTemplate, synthesize

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
    by its own synthesized role's policies (tests/iamcheck.py, an observer of the emulator's calls)."""
    RECORDER.take()
    with watching(RECORDER):
        yield
    denied = RECORDER.denied()
    if denied:
        pytest.fail("AWS calls their roles do not allow:\n  " + "\n  ".join(denied), pytrace=False)


@pytest.fixture(scope="module")
def stacks() -> list[StackTemplate]:
    """The dev environment's stacks as the embedded run synthesizes them (cached per session)."""
    return synthesize({"env": "dev", **LOCAL_CONTEXT})


@pytest.fixture
def deployed(stacks: list[StackTemplate]) -> Iterator[tuple[Emulator, Deployment]]:
    """The dev environment provisioned in a fresh emulator, with CloudFormation stack records
    holding its outputs (so `mapload start`/`status` find it as on AWS)."""
    with Emulator("dev") as emu:
        deployment = emu.provision(stacks)
        record_stack_outputs(emu.client("cloudformation"), deployment.outputs)
        yield emu, deployment


@pytest.fixture
def moto_server(tmp_path: Path) -> Iterator[str]:
    """A moto server in its own process: a DynamoDB/S3 endpoint that outlives one embedded run."""
    with start_moto_server(tmp_path / "moto-server.log") as running:
        yield running.endpoint


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`mapload serve` in its own process: the documented endpoint that keeps the data."""
    with mapload_serve(tmp_path / "mapload-serve.log") as endpoint:
        yield endpoint


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
        assert (
            report["records"]["read"]
            == report["records"]["written"] + report["records"]["skipped"] + report["records"]["rejected"]
        )
        assert report["rejects"]["count"] == len(result.rejects()) == report["records"]["rejected"]
        return result

    return _run
