"""`mapload start` / `mapload status` against the embedded emulator, through the standard AWS APIs.

The emulator gets CloudFormation stack records holding the deployment's outputs, so the
commands find their names exactly as they do on AWS (DescribeStacks), then upload, start the
synthesized state machine, follow its Map run and read its report.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from emulated_stacks import record_stack_outputs

from adapters import executions
from mapload import cli
from mapload.emulator.embedded import Deployment, Emulator
from mapload.environment import stack_name
from mapload.sample import write_csv
from mapload.synth import StackTemplate

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

ROWS = 1200
SPEC: dict[str, Any] = {
    "format": "csv",
    "csv": {"header": True},
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {"latitude": {"field": "latitude", "type": "N"}},
    },
    "shardSizeMiB": 0.01,
    "maxConcurrency": 4,
    "maxRejectedPercent": 0,
}


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    return path


def test_stack_names_are_the_stages(stacks: list[StackTemplate]) -> None:
    assert {stack_name("dev", "Data"), stack_name("dev", "Loader")} <= {s.name for s in stacks}


def test_start_uploads_runs_shows_progress_and_reports_a_reconciled_job(
    deployed: tuple[Emulator, Deployment], tmp_path: Path, spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emu, deployment = deployed
    source = write_csv(tmp_path / "postcodes.csv", ROWS, seed=7)
    report_path = tmp_path / "out" / "report.json"

    args = ["--spec", str(spec_file), "--report", str(report_path), "--interval", "0.2"]
    code = cli.main(["start", "--env", "dev", str(source), *args])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f"uploaded {source} to s3://{deployment.output('SourceBucketName')}/uploads/postcodes.csv" in err
    report = json.loads(report_path.read_text())
    assert report["status"] == "SUCCEEDED"
    assert report["records"] == {"read": ROWS, "written": ROWS, "skipped": 0, "rejected": 0, "duplicates": 0}
    total = report["shards"]["total"]
    assert total > 1 and report["shards"]["done"] == total
    # The last progress line is the Map run's own count of finished shards.
    assert f"SUCCEEDED [{'#' * 30}] shards {total}/{total} (100%)" in err
    assert f"records   read {ROWS:,} = written {ROWS:,} + rejected 0" in out
    table = deployment.output("TableName")
    assert emu.client("dynamodb").scan(TableName=table, Select="COUNT")["Count"] == ROWS

    execution = out.split("execution ", 1)[1].split(":", 1)[0]
    assert cli.main(["status", "--env", "dev"]) == 0
    listing = capsys.readouterr().out
    assert listing.splitlines()[0].startswith("SUCCEEDED") and execution in listing.splitlines()[0]
    assert f"records   read {ROWS:,}" in listing
    assert cli.main(["status", "--env", "dev", execution]) == 0
    assert f"execution {execution}: SUCCEEDED" in capsys.readouterr().out


def test_a_failed_job_exits_non_zero_and_shows_finalizes_report(
    deployed: tuple[Emulator, Deployment], tmp_path: Path, spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emu, deployment = deployed
    source = write_csv(tmp_path / "bad.csv", 300, seed=3)
    with source.open("ab") as handle:
        handle.write(b"AB1 2CF,north,-0.1\n")  # bad_number; maxRejectedPercent is 0
    bucket = deployment.output("SourceBucketName")
    emu.client("s3").upload_file(str(source), bucket, "in/bad.csv")

    code = cli.main(["start", "--env", "dev", f"s3://{bucket}/in/bad.csv", "--spec", str(spec_file)])

    out, err = capsys.readouterr()
    assert code == 1
    assert ": FAILED" in out.splitlines()[0]
    assert "records   read 301 = written 300 + rejected 1" in out  # from report.json in S3
    assert "rejects   1 (bad_number 1)" in out
    assert "mapload: NOT OK: execution FAILED" in err
    execution = out.split("execution ", 1)[1].split(":", 1)[0]
    assert cli.main(["status", "--env", "dev", execution]) == 1
    assert "read 301 = written 300 + rejected 1" in capsys.readouterr().out


def test_start_names_the_missing_stack_and_the_bad_spec(
    deployed: tuple[Emulator, Deployment], tmp_path: Path, spec_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emu, deployment = deployed
    source = write_csv(tmp_path / "p.csv", 10, seed=1)
    assert cli.main(["start", "--env", "staging", str(source), "--spec", str(spec_file)]) == 2
    err = capsys.readouterr().err
    assert "cannot read stack Mapload-staging-Data" in err
    assert "cdk deploy -c env=staging 'Mapload-staging/*'" in err

    with_source = tmp_path / "with-source.json"
    with_source.write_text(json.dumps({**SPEC, "source": "s3://x/y"}))
    assert cli.main(["start", "--env", "dev", str(source), "--spec", str(with_source)]) == 2
    assert "must not name 'source'" in capsys.readouterr().err

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**SPEC, "shardSizeMiB": -1}))
    uploads = (
        emu.client("s3").list_objects_v2(Bucket=deployment.output("SourceBucketName")).get("KeyCount", 0)
    )
    assert cli.main(["start", "--env", "dev", str(source), "--spec", str(bad)]) == 2
    assert "the spec is not valid (nothing uploaded or started): shardSizeMiB" in capsys.readouterr().err
    assert (
        emu.client("s3").list_objects_v2(Bucket=deployment.output("SourceBucketName")).get("KeyCount", 0)
        == uploads
    )

    # A template naming a column the file's header does not have: refused before the upload.
    typo = tmp_path / "typo.json"
    typo.write_text(
        json.dumps({**SPEC, "dynamodb": {**SPEC["dynamodb"], "key": {"pk": "{postcod}", "sk": "X"}}})
    )
    assert cli.main(["start", "--env", "dev", str(source), "--spec", str(typo)]) == 2
    err = capsys.readouterr().err
    assert "dynamodb.key.pk: names field 'postcod', which is not a column (did you mean 'postcode'?)" in err
    assert f"(header of {source})" in err and "nothing uploaded" in err
    assert (
        emu.client("s3").list_objects_v2(Bucket=deployment.output("SourceBucketName")).get("KeyCount", 0)
        == uploads
    )

    assert cli.main(["start", "--env", "dev", str(tmp_path / "nope.csv"), "--spec", str(spec_file)]) == 2
    assert "nope.csv: no such file" in capsys.readouterr().err
    assert cli.main(["status", "--env", "dev", "no-such-run"]) == 2
    assert "no execution no-such-run" in capsys.readouterr().err


def test_a_report_that_does_not_reconcile_is_not_ok_even_when_the_execution_succeeded() -> None:
    from mapload.reports import reconciliation_problems

    clean = {
        "status": "SUCCEEDED",
        "records": {"read": 10, "written": 9, "rejected": 1},
        "shards": {"total": 2, "done": 2, "missing": []},
    }
    assert reconciliation_problems(clean, "SUCCEEDED") == []  # no `skipped`: a report from before it
    lost = {**clean, "records": {"read": 10, "written": 8, "rejected": 1}}
    assert reconciliation_problems(lost, "SUCCEEDED") == [
        "records read 10 != written 8 + skipped 0 + rejected 1"
    ]
    # A write mode's skipped records balance the count (putIfAbsent, newerWins).
    skipping = {**clean, "records": {"read": 10, "written": 6, "skipped": 3, "rejected": 1}}
    assert reconciliation_problems(skipping, "SUCCEEDED") == []
    missing = {**clean, "shards": {"total": 2, "done": 1, "missing": [1]}}
    assert reconciliation_problems(missing, "SUCCEEDED") == ["shards done 1 of 2"]
    assert reconciliation_problems(None, "ABORTED") == ["execution ABORTED without a report"]
    assert reconciliation_problems(clean, "TIMED_OUT") == ["execution TIMED_OUT"]


def test_start_and_status_follow_the_standard_endpoint_setting(
    moto_server: str,
    tmp_path: Path,
    spec_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A separate server named only by AWS_ENDPOINT_URL: stacks, bucket and state machine live there
    (an environment cdk.json defines, as --env must be; deployed nowhere but on that server)."""
    import urllib.request

    import boto3

    for name, value in {
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-2",
    }.items():
        monkeypatch.setenv(name, value)
    config = json.dumps({"stepfunctions": {"execute_state_machine": True}}).encode()
    urllib.request.urlopen(
        urllib.request.Request(f"{moto_server}/moto-api/config", data=config, method="POST")
    )
    s3 = boto3.client("s3")
    for bucket in ("src-bucket", "staging-bucket"):
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-2"})
    report = {
        "jobId": "remote",
        "status": "SUCCEEDED",
        "records": {"read": 3, "written": 3, "skipped": 0, "rejected": 0, "duplicates": 0},
        "shards": {"total": 1, "done": 1, "missing": []},
    }
    # A stand-in with the loader's output shape: this test is about where the calls go.
    definition = {
        "StartAt": "Done",
        "States": {"Done": {"Type": "Pass", "Result": {"report": report}, "End": True}},
    }
    machine = boto3.client("stepfunctions").create_state_machine(
        name="remote", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/r"
    )["stateMachineArn"]
    record_stack_outputs(
        boto3.client("cloudformation"),
        {
            "Mapload-staging-Data.SourceBucketName": "src-bucket",
            "Mapload-staging-Data.StagingBucketName": "staging-bucket",
            "Mapload-staging-Loader.TableKey": json.dumps({"pk": "S", "sk": "S"}),
            "Mapload-staging-Loader.StateMachineArn": machine,
        },
    )
    source = write_csv(tmp_path / "three.csv", 3, seed=2)

    assert (
        cli.main(["start", "--env", "staging", str(source), "--spec", str(spec_file), "--interval", "0.2"])
        == 0
    )
    out = capsys.readouterr().out
    assert "records   read 3 = written 3 + rejected 0" in out
    assert (
        s3.head_object(Bucket="src-bucket", Key="uploads/three.csv")["ContentLength"] == source.stat().st_size
    )
    assert cli.main(["status", "--env", "staging"]) == 0
    assert "SUCCEEDED" in capsys.readouterr().out.splitlines()[0]


def test_a_graph_input_is_refused_before_the_upload_where_the_environment_has_no_graph(
    tmp_path: Path,
) -> None:
    from mapload.environment import OpsError
    from mapload.ops import check_spec

    spec = {"format": "nquads", "graph": {}}
    check_spec(spec, "s3://source-bucket/k.nq", {"pk": "S", "sk": "S"}, "run-1", graph_enabled=True)
    with pytest.raises(
        OpsError, match=r"nothing uploaded or started\): graph: this environment has no graph"
    ):
        check_spec(spec, "s3://source-bucket/k.nq", {"pk": "S", "sk": "S"}, "run-1", graph_enabled=False)


def test_the_loader_stack_says_whether_its_environment_has_a_graph(stacks: list[StackTemplate]) -> None:
    loader = next(s for s in stacks if s.name.endswith("-Loader"))
    assert loader.template["Outputs"]["GraphEnabled"]["Value"] == "true"


@contextlib.contextmanager
def _workers_held() -> Iterator[None]:
    """Inside the block every Worker invocation waits (at most 60 s) until the block ends, so a stop sent
    lands inside the Map whatever the machine's load: unheld, a run of 1,200 rows could finish,
    Finalize included, between Plan's claim and the stop (it did once, on a busy machine)."""
    from handlers import worker

    release = threading.Event()
    original = worker.handle

    @functools.wraps(original)  # the emulator reads its signature (whether it takes `now`)
    def held(*args: Any, **kwargs: Any) -> Any:
        release.wait(60)
        return original(*args, **kwargs)

    worker.handle = held  # type: ignore[assignment]
    try:
        yield
    finally:
        release.set()
        worker.handle = original  # type: ignore[assignment]


def _stopped_mid_way(
    emu: Emulator, deployment: Deployment, source: str, name: str, *, reload: bool = False
) -> str:
    """Start a run of jobId `held` (`reload`: of a plan an earlier run loaded), stop it once Plan
    has claimed the jobId and while its first Worker is held (StopExecution: no Finalize runs),
    and return its ARN."""
    db, sfn = emu.client("dynamodb"), emu.client("stepfunctions")
    ledger = deployment.output("LedgerTableName")
    payload = {
        **SPEC,
        "source": source,
        "jobId": "held",
        "maxConcurrency": 1,
        **({"reload": True} if reload else {}),
    }
    key = {"pk": {"S": "JOB#held"}, "sk": {"S": "JOB"}}
    with _workers_held():
        arn = emu.start(deployment.output("StateMachineArn"), name, payload)
        for _ in range(400):
            item = db.get_item(TableName=ledger, Key=key).get("Item")
            if item and item["runId"]["S"] == name:
                break
            time.sleep(0.05)
        sfn.stop_execution(executionArn=arn, error="Operator", cause="stopped mid-way")
    ended = emu.wait(arn)
    # moto's interpreter, stopped inside the Map, sometimes ends the execution with States.Runtime
    # instead of ABORTED: the same class here (uncatchable, Finalize never runs).
    assert ended["status"] in ("ABORTED", "FAILED"), (ended.get("error"), ended.get("cause"))
    assert ended["status"] == "ABORTED" or ended.get("error") == "States.Runtime", ended.get("cause")
    time.sleep(1)  # nothing of the stopped run closes the job
    item = db.get_item(TableName=ledger, Key=key)["Item"]
    assert (item["status"]["S"], item["runId"]["S"]) == ("RUNNING", name)
    return arn


def test_a_run_stopped_mid_way_does_not_block_its_job_id_and_release_frees_it(
    deployed: tuple[Emulator, Deployment],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    emu, deployment = deployed
    bucket = deployment.output("SourceBucketName")
    emu.client("s3").upload_file(str(write_csv(tmp_path / "p.csv", ROWS, seed=5)), bucket, "in/p.csv")
    source = f"s3://{bucket}/in/p.csv"

    _stopped_mid_way(emu, deployment, source, "first")
    # Its Workers may run on until their timeout after the stop: not free yet, and it says how long.
    assert cli.main(["release", "--env", "dev", "held"]) == 2
    assert "try again in" in capsys.readouterr().err
    settled = executions.LAMBDA_MAX_TIMEOUT_SECONDS + executions.SETTLE_MARGIN_SECONDS + 1
    monkeypatch.setattr(executions, "_now", lambda: time.time() + settled)  # that long later
    # The next run of the jobId proceeds: Plan finds the holder's execution over and takes over.
    again = emu.start(
        deployment.output("StateMachineArn"), "second", {**SPEC, "source": source, "jobId": "held"}
    )
    assert emu.wait(again)["status"] == "SUCCEEDED"

    # An operator frees a jobId whose run was stopped; while a run holds it, that is refused.
    running = emu.start(
        deployment.output("StateMachineArn"), "third", {**SPEC, "source": source, "jobId": "run"}
    )
    assert cli.main(["release", "--env", "dev", "run"]) in (0, 2)  # racing its end: never frees a live run
    capsys.readouterr()
    emu.wait(running)
    _stopped_mid_way(emu, deployment, source, "fourth", reload=True)  # "second" loaded the file
    assert cli.main(["release", "--env", "dev", "held"]) == 0
    out, err = capsys.readouterr()
    assert "released jobId 'held'" in out
    assert f"mapload release: region {emu.region} (" in err  # as every command says first
    assert cli.main(["release", "--env", "dev", "held"]) == 2
    assert "not held" in capsys.readouterr().err
