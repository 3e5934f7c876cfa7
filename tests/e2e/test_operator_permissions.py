"""The operator's commands run as a principal holding only what docs/OPERATIONS.md's "Operator
permissions" table lists for them (parsed from the doc: the one list), through the emulator's IAM
check (tests/iamcheck.py), with and without `data_key`: a call the row does not allow fails the
test (the autouse `iam_checked`), so the documented list cannot fall short of the calls again."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from emulated_stacks import record_stack_outputs
from iamcheck import RECORDER, decide

from mapload import ROOT, cli, upload
from mapload.emulator.calls import acting_as, principal, watching
from mapload.emulator.embedded import ACCOUNT, Deployment, Emulator
from mapload.local import LOCAL_CONTEXT
from mapload.synth import synthesize

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

OPERATIONS = ROOT / "docs" / "OPERATIONS.md"
ACTION = re.compile(r"`([a-z0-9-]+:[A-Za-z]+)`")


def documented() -> dict[str, tuple[list[str], list[str]]]:
    """Command -> (its actions, what `data_key` adds), from the doc's table."""
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text.split("## Operator permissions", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`mapload "):
            rows[cells[0].strip("`")] = (ACTION.findall(cells[1]), ACTION.findall(cells[2]))
    return rows


def operator(command: str, keyed: bool) -> Any:
    actions, with_key = documented()[command]
    statements = [
        {"Effect": "Allow", "Action": sorted({*actions, *(with_key if keyed else [])}), "Resource": "*"}
    ]
    return principal(f"operator ({command})", "Operator", ACCOUNT, statements)


@pytest.fixture(params=[False, True], ids=["no data key", "data_key"])
def environment(request: pytest.FixtureRequest) -> Iterator[tuple[Emulator, Deployment, bool]]:
    keyed = bool(request.param)
    context = {"env": "dev", **LOCAL_CONTEXT, **({"mapload:data_key": "create"} if keyed else {})}
    with Emulator("dev") as emu:
        deployment = emu.provision(synthesize(context))
        record_stack_outputs(emu.client("cloudformation"), deployment.outputs)
        yield emu, deployment, keyed


def test_the_table_lists_each_command() -> None:
    rows = documented()
    assert set(rows) == {"mapload start", "mapload status", "mapload release", "mapload upload"}
    assert "s3:ListBucket" in rows["mapload start"][0]
    assert {"s3:GetObject", "s3:PutObject"} <= set(rows["mapload upload"][0])
    assert set(rows["mapload upload"][1]) == {"kms:GenerateDataKey", "kms:Decrypt"}


def run_as(who: Any, call: Any) -> list[str]:
    """Run `call` as `who`; the operator's calls its documented list does not allow."""
    RECORDER.take()
    with watching(RECORDER), acting_as(who):
        call()
    calls, unmapped = RECORDER.take()
    mine = [c for c in calls if c.principal == who]
    assert mine, "no call observed as the operator"
    denied = [c.describe() for c in mine if not decide(who.statements, c).allowed]
    others = [
        c.describe() for c in calls if c.principal != who and not decide(c.principal.statements, c).allowed
    ]
    assert not others and not unmapped, (others, unmapped)
    return denied


def test_upload_holds_what_its_row_lists(
    environment: tuple[Emulator, Deployment, bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _emu, deployment, keyed = environment
    bucket = deployment.output("SourceBucketName")
    big = tmp_path / "big.csv"
    big.write_bytes(os.urandom(12 * 2**20))  # two 8 MiB parts
    who = operator("mapload upload", keyed)

    def send() -> None:
        done, _, _ = upload.upload(big, f"s3://{bucket}/in/big.csv", env="dev", quiet=True)
        assert done.completed

    assert run_as(who, send) == []


def test_start_and_status_hold_what_their_rows_list(
    environment: tuple[Emulator, Deployment, bool], tmp_path: Path
) -> None:
    """A local CSV file (uploaded), then a local Parquet folder (its prefix listed first: data
    files there that the folder has not would be loaded with it), then `status`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _emu, _deployment, keyed = environment
    people = {"id": [str(i) for i in range(30)], "name": [f"person {i}" for i in range(30)]}
    local = tmp_path / "people.csv"
    local.write_text(
        "id,name\n" + "".join(f"{i},{n}\n" for i, n in zip(people["id"], people["name"], strict=True))
    )
    folder = tmp_path / "people"
    folder.mkdir()
    pq.write_table(pa.table(people), folder / "part-00000.parquet")
    mapping = {"key": {"pk": "P#{id}", "sk": "NAME"}, "attributes": {"name": "{name}"}}
    starter = operator("mapload start", keyed)
    for n, (source, form) in enumerate(((local, "csv"), (folder, "parquet"))):
        spec, report = tmp_path / f"spec{n}.json", tmp_path / f"report{n}.json"
        spec.write_text(json.dumps({"format": form, "dynamodb": mapping}))

        def start(source: Path = source, spec: Path = spec, report: Path = report) -> None:
            argv = ["start", "--env", "dev", str(source), "--spec", str(spec), "--report", str(report)]
            assert cli.main(argv) == 0

        assert run_as(starter, start) == [], source
    watcher = operator("mapload status", keyed)
    assert run_as(watcher, lambda: cli.main(["status", "--env", "dev"])) == []
