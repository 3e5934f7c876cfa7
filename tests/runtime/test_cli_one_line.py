"""One line, no traceback (issue 44 item 6): a sample into a missing directory, any command piped
into `head`, and start/status/release without credentials naming the cause."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mapload import cli

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]


def test_a_sample_into_a_missing_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no-such-dir" / "postcodes.csv"
    assert cli.main(["sample", str(target), "--rows", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err == f"mapload sample: cannot write {target}: No such file or directory\n"


def test_a_command_piped_into_head_ends_without_a_traceback() -> None:
    # A command that prints far more than a pipe holds, its reader gone after one line (`| head -1`).
    script = (
        "import sys\n"
        "from mapload import cli\n"
        "def chatty(args):\n"
        "    for n in range(200000):\n"
        "        print('line', n)\n"
        "    return 0\n"
        "cli._sample = chatty\n"
        "sys.exit(cli.main(['sample', 'x']))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'runtime'}"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"line 0\n"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert err == ""


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", "eu-west-2")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE", raising=False)


@pytest.mark.usefixtures("no_credentials")
@pytest.mark.parametrize(
    "argv", [["status", "--env", "dev"], ["release", "--env", "dev", "job-1"]], ids=["status", "release"]
)
def test_without_credentials_the_cause_is_named_not_a_deploy(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    region, err = capsys.readouterr().err.splitlines()  # the region line, then the error's one line
    assert region.endswith("region eu-west-2 (AWS_REGION)")
    assert err.startswith("mapload: no AWS credentials")
    assert "no AWS credentials" in err and "Unable to locate credentials" in err
    assert "AWS_PROFILE" in err and "aws configure" in err
    assert "deploy the environment first" not in err
