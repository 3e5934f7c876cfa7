"""The command line as a user meets it: failures in one line (also with --quiet), a dry run that
says so, readable reports, the region each command uses, --version, and the served endpoint."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from logic import report as reports_logic
from mapload import cli, ops, synth
from mapload import emulator as emulator_module
from mapload import local as local_command
from mapload import region as regions
from mapload.environment import Environment
from mapload.reports import report_lines

pytestmark = pytest.mark.runtime

KNOWN = "dev, staging, prod"


def _report(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "runId": "local-1",
        "status": "SUCCEEDED",
        "error": None,
        "dryRun": False,
        "writeMode": "put",
        "records": {"read": 5, "written": 4, "skipped": 0, "rejected": 1, "duplicates": 0},
        "shards": {"done": 1, "total": 1},
        "seconds": 1.0,
        "dynamodb": {"table": "mapload-dev-Table"},
        "rejects": {"count": 1, "byReason": {"bad_quote": 1}, "location": "/tmp/r.rejects.jsonl"},
    }
    return base | fields


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"format": "csv", "dynamodb": {"key": {"pk": "{id}", "sk": "S"}}}))
    return path


@pytest.fixture
def no_region(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")


def _run_local_returning(monkeypatch: pytest.MonkeyPatch, report: dict[str, Any]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake(file: Path, spec: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        calls.append(kwargs)
        return report

    monkeypatch.setattr(local_command, "run_local", fake)
    return calls


def test_quiet_still_prints_a_failure_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec_file: Path
) -> None:
    error = {"type": "TooManyRejectsError", "where": "Finalize", "message": "3 of 5 records rejected"}
    _run_local_returning(monkeypatch, _report(status="FAILED", error=error))

    code = cli.main(["run-local", "in.csv", "--spec", str(spec_file), "--report", "r.json", "--quiet"])

    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.count("\n") == 1
    assert "FAILED: TooManyRejectsError in Finalize: 3 of 5 records rejected (report r.json)" in err


def test_quiet_prints_nothing_on_success(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec_file: Path
) -> None:
    _run_local_returning(monkeypatch, _report())
    assert cli.main(["run-local", "in.csv", "--spec", str(spec_file), "--report", "r.json", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


def test_a_dry_run_says_so_and_what_it_would_write() -> None:
    lines = "\n".join(report_lines(_report(dryRun=True)))
    assert "DRY RUN, nothing written: read 5 = would write 4 + rejected 1" in lines
    assert "written 4" not in lines

    built = reports_logic.build(
        job_id="j",
        run_id="r",
        spec={"dryRun": True, "maxRejectedPercent": 1},
        manifest=[{"index": 0}],
        shards={0: {"read": 2, "written": 1, "rejected": 1}},
        error=None,
        table="t",
        seconds=1.0,
        rejects_location=None,
        sample=[],
    )
    assert built["error"]["type"] == "TooManyRejectsError"
    assert "a dry run: nothing was written" in built["error"]["message"]
    assert "stays written" not in built["error"]["message"]


def test_rejects_are_listed_by_reason_not_as_a_python_dict() -> None:
    lines = report_lines(_report(rejects={"count": 3, "byReason": {"bad_quote": 2, "missing_field": 1}}))
    rejects = next(line for line in lines if line.startswith("  rejects"))
    assert "3 (bad_quote 2, missing_field 1)" in rejects
    assert "{" not in rejects


def test_a_graph_only_run_shows_no_table_line() -> None:
    graph = {"staged": 4, "loaded": 4, "status": "LOAD_COMPLETED"}
    assert not any(line.startswith("  table") for line in report_lines(_report(writeMode=None, graph=graph)))
    assert any(line.startswith("  table") for line in report_lines(_report(graph=graph)))


@pytest.mark.parametrize(
    "argv",
    [
        ["run-local", "in.csv", "--spec", "s.json", "--report", "r.json", "--env", "prd"],
        ["start", "in.csv", "--spec", "s.json", "--env", "prd"],
        ["status", "--env", "prd"],
        ["upload", "in.csv", "s3://b/k", "--env", "prd"],
        ["release", "job-1", "--env", "prd"],
    ],
    ids=["run-local", "start", "status", "upload", "release"],
)
def test_an_unknown_environment_is_one_line_naming_the_known_ones(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(argv)
    err = capsys.readouterr().err
    assert ended.value.code == 2
    assert "Traceback" not in err
    assert err.count("\n") == 1
    assert f"error: argument --env: unknown environment 'prd'; cdk.json defines {KNOWN}" in err


def test_a_failed_synth_is_one_line_with_the_apps_error() -> None:
    stderr = 'Traceback (most recent call last):\n  File "app.py"\nstacks.config.MaploadConfigError: bad\n'
    message = synth._synth_failure("", stderr)
    assert "\n" not in message
    assert message.startswith("cdk synth failed: stacks.config.MaploadConfigError: bad (whole output: ")


def test_run_local_says_which_region_it_uses_and_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec_file: Path, no_region: None
) -> None:
    calls = _run_local_returning(monkeypatch, _report())
    cli.main(["run-local", "in.csv", "--spec", str(spec_file), "--report", "r.json"])
    assert f"mapload run-local: region us-east-1 ({regions.DEFAULTED})" in capsys.readouterr().err
    assert calls[0]["region"] == "us-east-1"

    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    cli.main(["run-local", "in.csv", "--spec", str(spec_file), "--report", "r.json"])
    assert "mapload run-local: region eu-west-1 (AWS_REGION)" in capsys.readouterr().err


def test_a_deployed_environment_is_never_given_a_default_region(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_region: None
) -> None:
    source = tmp_path / "in.csv"
    source.write_text("a\n1\n")
    assert cli.main(["upload", str(source), "s3://my-bucket/k", "--env", "dev", "--quiet"]) == 1
    assert "no AWS region: pass --region" in capsys.readouterr().err
    assert cli.main(["status", "--env", "dev"]) == 2
    assert "no AWS region: pass --region" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out.startswith("mapload ")


def test_every_option_of_every_command_has_help() -> None:
    command = cli.parser()
    subparsers = next(a for a in command._actions if a.choices and isinstance(a.choices, dict))
    assert isinstance(subparsers.choices, dict)
    missing = [
        f"{name} {action.dest}"
        for name, sub in subparsers.choices.items()
        for action in sub._actions
        if not action.help
    ]
    assert missing == []


class _Sfn:
    def describe_execution(self, executionArn: str) -> dict[str, Any]:
        return {"name": "job-1", "executionArn": executionArn, "status": "RUNNING", "startDate": None}


class _Clients:
    region, region_source = "eu-west-1", "AWS_REGION"
    sfn = _Sfn()

    def __init__(self, region: str | None = None) -> None:
        pass


def test_status_watch_follows_a_running_execution_to_its_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = "arn:aws:states:eu-west-1:1:stateMachine:m"
    environment = Environment("dev", {"StateMachineArn": machine})
    watched: list[str] = []

    def watch(clients: Any, arn: str, bar: Any, *, interval: float) -> dict[str, Any]:
        watched.append(arn)
        return {"name": "job-1", "executionArn": arn, "status": "SUCCEEDED"}

    monkeypatch.setattr(ops, "Clients", _Clients)
    monkeypatch.setattr(ops, "describe_environment", lambda clients, env: environment)
    monkeypatch.setattr(ops, "watch", watch)
    monkeypatch.setattr(ops, "job_report", lambda clients, env, described: _report(jobId="job"))

    assert cli.main(["status", "--env", "dev", "job-1", "--watch", "--interval", "0.01"]) == 0

    out, err = capsys.readouterr()
    assert watched == ["arn:aws:states:eu-west-1:1:execution:m:job-1"]
    assert "execution job-1: SUCCEEDED" in out and "records   read 5 = written 4" in out
    assert "mapload status: region eu-west-1 (AWS_REGION)" in err


def test_serve_listens_on_localhost_only_and_names_a_taken_port_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with emulator_module.serving(0) as endpoint:
        assert endpoint.startswith("http://127.0.0.1:")
        port = int(endpoint.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert cli.main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err


def test_without_a_kept_endpoint_the_summary_says_the_data_went_with_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    assert not local_command.kept_endpoint()
    gone = local_command.summary(_report(), Path("r.json"), kept=False).splitlines()
    assert gone[-1].startswith(
        "  kept      nothing: the table and buckets were in memory and went with the run"
    )
    assert "mapload serve" in gone[-1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4566")
    assert local_command.kept_endpoint()
    kept = local_command.summary(_report(), Path("r.json"), kept=True)
    assert "went with the run" not in kept and "mapload-dev-Table" in kept
