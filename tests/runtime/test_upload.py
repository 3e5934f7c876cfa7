"""`mapload upload`: part-set rules, and processes coordinating one multipart upload through the
ledger against a real (moto) S3/DynamoDB server: one CreateMultipartUpload, exact bytes, resume."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import xxhash
from servers import MotoServer, moto_server

from logic import parts as partlib
from logic.errors import PartMismatchError, PartSetError, UploadConflictError
from mapload import ROOT, upload

pytestmark = [pytest.mark.runtime]

MIN_PART = 1024  # the test server accepts parts this small (S3 itself: 5 MiB)


# -- part sets (pure) ----------------------------------------------------------------------


def test_part_names_are_parsed_from_the_right() -> None:
    assert partlib.parse_part_name("uk_post_codes.csv_3_10") == partlib.PartName("uk_post_codes.csv", 3, 10)
    assert partlib.parse_part_name("a_1_2_3") == partlib.PartName("a_1", 2, 3)
    assert partlib.parse_part_name("data.csv") is None
    assert partlib.parse_part_name("data_x_3") is None


def _files(*names: str, size: int = MIN_PART) -> list[tuple[str, int]]:
    return [(f"/parts/{name}", size) for name in names]


def test_a_complete_part_set_is_planned_in_part_order() -> None:
    plan = partlib.plan_part_files(_files("d_3_3", "d_1_3", "d_2_3"), min_part=MIN_PART)
    assert [p.number for p in plan.parts] == [1, 2, 3]
    assert plan.total == 3 and plan.complete and plan.name == "d"


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("d_1_4", "d_2_4", "d_4_4"), "missing part 3 of 4"),
        (("d_1_5", "d_4_5"), "missing parts 2-3, 5 of 5"),
        (("d_1_3", "d_01_3", "d_2_3", "d_3_3"), "two files claim part 1: d_01_3 and d_1_3"),
        (("d_1_3", "d_2_4"), "disagree on the number of parts N: [3, 4]"),
        (("d_1_2", "e_2_2"), "different objects in one set: d, e"),
        (("d_0_2", "d_1_2"), "part 0 is outside 1..2"),
        (("d_1_2", "notes.txt"), "notes.txt: not a part file"),
    ],
)
def test_bad_part_sets_name_what_is_wrong(names: tuple[str, ...], message: str) -> None:
    with pytest.raises(PartSetError) as caught:
        partlib.plan_part_files(_files(*names), min_part=MIN_PART)
    assert message in str(caught.value)


def test_partial_sets_may_miss_parts_that_other_hosts_hold() -> None:
    plan = partlib.plan_part_files(_files("d_2_4", "d_4_4"), require_all=False, min_part=MIN_PART)
    assert [p.number for p in plan.parts] == [2, 4] and not plan.complete


def test_s3_part_limits() -> None:
    small = [("/p/d_1_2", 5 * partlib.MIB - 1), ("/p/d_2_2", 10)]
    with pytest.raises(PartSetError, match="part 1 of 2 is 5,242,879 bytes: every part but the last"):
        partlib.plan_part_files(small)
    # the last part may be small
    partlib.plan_part_files([("/p/d_1_2", 5 * partlib.MIB), ("/p/d_2_2", 10)])
    with pytest.raises(PartSetError, match="at most 5,368,709,120 bytes a part"):
        partlib.plan_part_files([("/p/d_1_1", 5 * 1024 * partlib.MIB + 1)])
    with pytest.raises(PartSetError, match="at most 10,000 parts"):
        partlib.plan_part_files(_files("d_1_10001"), require_all=False)
    with pytest.raises(PartSetError, match="below S3's minimum"):
        partlib.plan_file("/f", 100, part_size=partlib.MIB)


def test_a_large_file_gets_larger_parts_to_stay_within_10000() -> None:
    size = 2 * 1024**4  # 2 TiB
    plan = partlib.plan_file("/f", size, part_size=16 * partlib.MIB)
    assert plan.total <= partlib.MAX_PARTS
    assert sum(p.size for p in plan.parts) == size
    assert all(p.size % partlib.MIB == 0 for p in plan.parts[:-1])
    assert partlib.plan_file("/f", 0).total == 1


def test_the_part_size_default_is_the_one_constant() -> None:
    """`--part-size-mib` defaults to DEFAULT_PART_BYTES (8 MiB, s3transfer's too), and a file's plan
    without a part size uses the same: one default, not a CLI number beside a library one."""
    from mapload import cli

    args = cli.parser("upload").parse_args(["upload", "f", "s3://b/k", "--env", "local"])
    assert args.part_size_mib * 2**20 == partlib.DEFAULT_PART_BYTES == 8 * partlib.MIB
    assert partlib.plan_file("/f", 100 * partlib.MIB).total == 13
    assert "default: 8," in cli.parser("upload")._subparsers._group_actions[0].choices["upload"].format_help()


def test_the_upload_command_parses_without_the_other_commands_imports() -> None:
    """`mapload upload` builds only its own arguments: the other commands' (the emulator and moto,
    the deployed-job commands) took a third of a second before the first part; its help is unchanged."""
    code = (
        "import sys\n"
        "from mapload import cli\n"
        "whole = cli.parser()._subparsers._group_actions[0].choices['upload'].format_help()\n"
        "for name in [m for m in sys.modules if m.startswith(('moto', 'mapload.emulator', 'mapload.ops'))]:\n"
        "    del sys.modules[name]\n"
        "alone = cli.parser('upload')._subparsers._group_actions[0].choices['upload'].format_help()\n"
        "args = cli.parser('upload').parse_args(['upload', 'f', 's3://b/k', '--env', 'local'])\n"
        "print(whole == alone, args.in_flight, sorted(m for m in sys.modules if m.startswith('moto'))[:3])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "8", "[]"], done.stdout


def test_the_upload_command_imports_neither_the_spec_models_nor_pydantic(server: MotoServer) -> None:
    """Building the input spec's models took a fifth of a second of `mapload upload`'s start-up; the
    destination is checked against the same S3 URI pattern (logic.s3uri), with the same words."""
    code = (
        "import sys\n"
        "from mapload import cli, upload\n"
        "cli.parser('upload')\n"
        "upload.target('s3://bkt/k', 'local')\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'logic.spec'))))\n"
        "try:\n"
        "    upload.target('s3://Bad_Bucket/k', 'local')\n"
        "except upload.UploadError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    modules, error = done.stdout.strip().splitlines()
    assert error.startswith("destination: 'Bad_Bucket' is not a valid bucket name"), error
    assert modules == "[]"


# -- against a server ----------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoServer]:
    with moto_server(tmp_path / "server.log", {"S3_UPLOAD_PART_MIN_SIZE": str(MIN_PART)}) as running:
        env = {
            "AWS_ENDPOINT_URL": running.endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
            upload.MIN_PART_ENV: str(MIN_PART),
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        running.start_recording()
        yield running


def _write_parts(folder: Path, name: str, sizes: list[int], seed: int = 1) -> list[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    blobs = []
    for i, size in enumerate(sizes, 1):
        data = hashlib.sha256(f"{seed}-{i}".encode()).digest() * (size // 32 + 1)
        (folder / f"{name}_{i}_{len(sizes)}").write_bytes(data[:size])
        blobs.append(data[:size])
    return blobs


def _object(bucket: str, key: str) -> bytes:
    return bytes(boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())


def _ledger_items() -> list[dict[str, object]]:
    items: list[dict[str, object]] = boto3.client("dynamodb").scan(TableName=upload.LOCAL_LEDGER_TABLE)[
        "Items"
    ]
    return items


# A `mapload` process for the tests: it imports, says "ready" on stderr and waits for a line on
# stdin (the test's start barrier); it says "recorded N" on stderr for each part N it has recorded.
_CHILD = """
import sys
import time
import zlib
from mapload.cli import main  # first: it puts the Lambda code root (runtime/) on sys.path
from adapters.multipart import UploadLedger

record = UploadLedger.record_parts

def announce(self, upload_id, parts):
    record(self, upload_id, parts)
    for part in parts:
        print("recorded", part.number, file=sys.stderr, flush=True)

UploadLedger.record_parts = announce
print("ready", file=sys.stderr, flush=True)
sys.stdin.readline()
sys.exit(main(sys.argv[1:]))
"""


def _start(*args: str) -> subprocess.Popen[str]:
    """A child `mapload` process, imported and waiting at the barrier."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, *args, "--quiet"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stderr is not None
    assert child.stderr.readline().strip() == "ready", child.communicate(timeout=30)
    return child


def _go(*children: subprocess.Popen[str]) -> None:
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()


def test_three_processes_on_disjoint_parts_build_one_object(server: MotoServer, tmp_path: Path) -> None:
    sizes = [MIN_PART + 100 * i for i in range(9)]
    sizes[-1] = 300  # the last part may be small
    blobs = _write_parts(tmp_path / "all", "postcodes.csv", sizes)
    hosts = []
    for h in range(3):  # host h holds parts h+1, h+4, h+7
        folder = tmp_path / f"host{h}"
        folder.mkdir()
        for i in range(h + 1, 10, 3):
            name = f"postcodes.csv_{i}_9"
            (folder / name).write_bytes((tmp_path / "all" / name).read_bytes())
        hosts.append(folder)
    runs = [
        _start("upload", str(folder), "s3://coord-bkt/in/postcodes.csv", "--env", "local", "--partial")
        for folder in hosts
    ]

    _go(*runs)  # all three are imported and waiting: they start together
    outputs = [run.communicate(timeout=120) for run in runs]

    assert [run.returncode for run in runs] == [0, 0, 0], [err[-2000:] for _, err in outputs]
    creates = server.requests("POST", r"/coord-bkt/in/postcodes\.csv\?uploads")
    assert len(creates) == 1, creates
    finals = [out for out, _ in outputs]
    assert sum("completed the object (9 parts)" in text for text in finals) == 1, finals
    body = _object("coord-bkt", "in/postcodes.csv")
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(b"".join(blobs)).hexdigest()
    assert _ledger_items() == []  # the coordination records are gone


def test_a_killed_upload_resumes_with_only_the_missing_parts(server: MotoServer, tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(300 * MIN_PART))
    part_mib = str(MIN_PART / 2**20)
    args = ["upload", str(source), "s3://resume-bkt/big.bin", "--env", "local", "--part-size-mib", part_mib]
    first = _start(*args, "--in-flight", "1")
    assert first.stderr is not None
    _go(first)
    recorded = 0
    for line in first.stderr:  # killed on the event itself: within its first batch of records
        recorded += line.startswith("recorded ")
        if recorded == 20:
            break
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL, "the first upload finished before it could be killed"
    parts_before = {item["sk"]["S"] for item in _ledger_items() if str(item["sk"]["S"]).startswith("PART#")}  # type: ignore[index]
    assert 20 <= len(parts_before) < 300
    assert len(server.requests("POST", r"/resume-bkt/big\.bin\?uploads")) == 1
    server.start_recording()  # count the re-run's requests only

    rerun = _start(*args, "--in-flight", "4")
    _go(rerun)
    line, errors = rerun.communicate(timeout=120)

    assert rerun.returncode == 0, errors[-2000:]
    match = re.search(r"300 parts \((\d+) uploaded, (\d+) already there\)", line)
    assert match, line
    uploaded, skipped = int(match[1]), int(match[2])
    assert skipped == len(parts_before) and uploaded == 300 - len(parts_before)
    assert "completed the object (300 parts)" in line, line
    assert len(server.requests("PUT", r"/resume-bkt/big\.bin\?.*partNumber=")) == uploaded
    assert server.requests("POST", r"/resume-bkt/big\.bin\?uploads") == []
    assert _object("resume-bkt", "big.bin") == source.read_bytes()
    assert _ledger_items() == []


def test_records_of_another_part_set_are_never_completed(server: MotoServer, tmp_path: Path) -> None:
    _write_parts(tmp_path / "a", "d", [MIN_PART, MIN_PART, 10], seed=1)
    (tmp_path / "a" / "d_3_3").unlink()
    first, _, _ = upload.upload(tmp_path / "a", "s3://mix-bkt/d", env="local", partial=True, quiet=True)
    assert not first.completed and first.missing == "3"

    _write_parts(tmp_path / "b", "d", [MIN_PART, MIN_PART, 10], seed=2)  # same names, other bytes
    with pytest.raises(PartMismatchError, match=r"part ([12]) differs from the part \1 already recorded"):
        upload.upload(tmp_path / "b", "s3://mix-bkt/d", env="local", quiet=True)
    _write_parts(tmp_path / "c", "d", [MIN_PART] * 3 + [10], seed=1)
    with pytest.raises(UploadConflictError, match=r"has 3 parts .*this part set has N=4.*--part-size-mib"):
        upload.upload(tmp_path / "c", "s3://mix-bkt/d", env="local", quiet=True)

    aborted, cleared = upload.abort("s3://mix-bkt/d", env="local")

    assert len(aborted) == 1 and cleared == 3  # the upload record and two part records
    assert _ledger_items() == []
    assert boto3.client("s3").list_multipart_uploads(Bucket="mix-bkt").get("Uploads", []) == []
    # Now the other set goes through, and nothing of the first one is in it.
    second, _, _ = upload.upload(tmp_path / "b", "s3://mix-bkt/d", env="local", quiet=True)
    assert second.completed and second.uploaded == 3
    assert _object("mix-bkt", "d") == b"".join((tmp_path / "b" / f"d_{i}_3").read_bytes() for i in (1, 2, 3))


def test_cli_errors_name_the_problem(
    server: MotoServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mapload.cli import main

    _write_parts(tmp_path / "gap", "d", [MIN_PART, MIN_PART, 10])
    (tmp_path / "gap" / "d_2_3").unlink()

    assert main(["upload", str(tmp_path / "gap"), "s3://err-bkt/d", "--env", "local"]) == 1
    assert "missing part 2 of 3" in capsys.readouterr().err
    assert main(["upload", str(tmp_path / "nope"), "s3://err-bkt/d", "--env", "local"]) == 1
    assert "no such file or folder" in capsys.readouterr().err
    assert main(["upload", str(tmp_path / "gap"), "s3://err-bkt/", "--env", "local"]) == 1
    assert "name the object" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["upload", str(tmp_path / "gap"), "s3://err-bkt/d"])  # --env is required


@pytest.mark.parametrize(
    ("variables", "option", "region"),
    [
        ({"AWS_DEFAULT_REGION": "eu-west-1"}, [], "eu-west-1"),
        ({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-east-1"}, [], "eu-west-1"),
        ({"AWS_DEFAULT_REGION": "eu-west-1"}, ["--region", "ap-southeast-2"], "ap-southeast-2"),
    ],
)
def test_upload_local_creates_the_bucket_and_ledger_in_the_configured_region(
    server: MotoServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    option: list[str],
    region: str,
) -> None:
    """Outside us-east-1 CreateBucket needs a LocationConstraint (without it: IllegalLocationConstraint)."""
    from mapload.cli import main

    monkeypatch.delenv("AWS_REGION", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    _write_parts(tmp_path / "p", "d", [MIN_PART, 10])

    assert (
        main(["upload", str(tmp_path / "p"), "s3://region-bkt/d", "--env", "local", "--quiet", *option]) == 0
    )

    s3 = boto3.client("s3", region_name=region)
    assert s3.get_bucket_location(Bucket="region-bkt")["LocationConstraint"] == region
    assert (
        upload.LOCAL_LEDGER_TABLE in boto3.client("dynamodb", region_name=region).list_tables()["TableNames"]
    )
    assert _object("region-bkt", "d") == b"".join((tmp_path / "p" / f"d_{i}_2").read_bytes() for i in (1, 2))


def test_an_aws_error_ends_the_command_in_one_line_not_a_traceback(
    server: MotoServer, tmp_path: Path
) -> None:
    _write_parts(tmp_path / "p", "d", [MIN_PART, 10])
    # A "ledger" keyed otherwise than pk/sk: DynamoDB refuses the first record (ValidationException).
    boto3.client("dynamodb").create_table(
        TableName="not-a-ledger",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    done = subprocess.run(
        [
            *(sys.executable, "-m", "mapload.cli", "upload", str(tmp_path / "p"), "s3://err2-bkt/d"),
            *("--env", "local", "--quiet", "--ledger-table", "not-a-ledger"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mapload upload: AWS error: ")
    assert "ValidationException" in lines[0]


def _upload_record(uri: str, upload_id: str, *, owner: str, done: list[int], checksum: str | None) -> None:
    """An upload record of 2 parts written straight into the local ledger, as another (dead or
    older) process left it; `checksum` None as a mapload before CRC32 parts wrote it."""

    item = {
        "pk": {"S": f"UPLOAD#{uri}"},
        "sk": {"S": "UPLOAD"},
        "owner": {"S": owner},
        "total": {"N": "2"},
        "name": {"S": "d"},
        "uploadId": {"S": upload_id},
        "partsDone": {"N": str(len(done))},
        **({"doneParts": {"NS": [str(n) for n in done]}} if done else {}),
        **({"checksum": {"S": checksum}} if checksum else {}),
    }
    boto3.client("dynamodb").put_item(TableName=upload.LOCAL_LEDGER_TABLE, Item=item)


def test_a_completer_that_died_before_removing_the_records_is_finished_by_the_next_run(
    server: MotoServer, tmp_path: Path
) -> None:
    from adapters.multipart import LEDGER_FORMAT

    _write_parts(tmp_path / "p", "d", [MIN_PART, 10])
    done, _, _ = upload.upload(tmp_path / "p", "s3://done-bkt/d", env="local", quiet=True)
    assert done.completed
    # The records as a completer leaves them if it dies right after CompleteMultipartUpload.
    _upload_record("s3://done-bkt/d", done.upload_id, owner="gone", done=[1, 2], checksum=LEDGER_FORMAT)

    again, _, _ = upload.upload(tmp_path / "p", "s3://done-bkt/d", env="local", quiet=True)

    assert (again.uploaded, again.missing, again.completed) == (0, "", False)
    assert "the object is complete" in upload.final_line(again, 1.0, 10)
    assert _ledger_items() == []


@pytest.mark.parametrize(
    ("checksum", "carried"),
    [(None, "SHA-256 to S3, SHA-256 in the ledger"), ("CRC32", "CRC32 to S3, SHA-256 in the ledger")],
)
def test_an_upload_started_by_an_older_mapload_is_refused_naming_abort(
    server: MotoServer, tmp_path: Path, checksum: str | None, carried: str
) -> None:
    """An upload record whose `checksum` is not this version's LEDGER_FORMAT was made by a mapload
    whose parts carried SHA-256 to S3 (no `checksum`) or were named by their SHA-256 in the ledger
    ("CRC32"): this version's parts would not fit that upload or its records, so the command stops
    before sending anything and says how to go on; `--abort` clears it (its part records, which
    have no xxh128, included) and the upload goes through."""
    from adapters.multipart import LEDGER_FORMAT

    blobs = _write_parts(tmp_path / "p", "d", [MIN_PART, 10])
    s3, db = boto3.client("s3"), boto3.client("dynamodb")
    upload._create_local(s3, db, "us-east-1", "old-bkt", upload.LOCAL_LEDGER_TABLE)
    old = s3.create_multipart_upload(Bucket="old-bkt", Key="d", ChecksumAlgorithm=checksum or "SHA256")[
        "UploadId"
    ]
    _upload_record("s3://old-bkt/d", old, owner="older", done=[], checksum=checksum)
    db.put_item(  # a part recorded by that version: a sha256, no xxh128
        TableName=upload.LOCAL_LEDGER_TABLE,
        Item={
            "pk": {"S": "UPLOAD#s3://old-bkt/d"},
            "sk": {"S": "PART#00001"},
            "number": {"N": "1"},
            "etag": {"S": '"e"'},
            "size": {"N": str(MIN_PART)},
            "sha256": {"S": "old-sha"},
            **({"crc32": {"S": "old-crc"}} if checksum else {}),
            "uploadId": {"S": old},
        },
    )
    server.start_recording()

    with pytest.raises(UploadConflictError) as refused:
        upload.upload(tmp_path / "p", "s3://old-bkt/d", env="local", quiet=True)

    assert f"created by an older mapload, whose parts carry {carried}" in str(refused.value)
    assert "CRC32 to S3, XXH3-128 in the ledger" in str(refused.value)
    assert "run `mapload upload --abort` first" in str(refused.value)
    assert server.requests("PUT", r"partNumber=") == []
    aborted, cleared = upload.abort("s3://old-bkt/d", env="local")
    assert aborted == [old] and cleared == 2 and _ledger_items() == []
    result, _, _ = upload.upload(tmp_path / "p", "s3://old-bkt/d", env="local", quiet=True)
    assert result.completed and _object("old-bkt", "d") == b"".join(blobs)
    assert LEDGER_FORMAT == "CRC32/XXH3-128/16-part-keys"


def test_a_count_whose_answer_was_lost_still_completes_the_object(
    server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DynamoDB applied the last count, the answer was lost, the SDK retried: the retry fails its
    condition, yet this process counted the last part and must complete the object."""
    from adapters.multipart import UploadLedger

    blobs = _write_parts(tmp_path / "p", "d", [MIN_PART, MIN_PART, 10])
    count = UploadLedger.count_parts

    def applied_then_retried(
        self: UploadLedger, upload_id: str, numbers: list[int], counter: str
    ) -> int | None:
        count(self, upload_id, numbers, counter)  # applied; its answer never arrives
        return count(self, upload_id, numbers, counter)  # the retry of the same request

    monkeypatch.setattr(UploadLedger, "count_parts", applied_then_retried)

    result, _, _ = upload.upload(tmp_path / "p", "s3://lost-bkt/d", env="local", in_flight=1, quiet=True)

    assert result.completed and result.missing == ""
    assert _object("lost-bkt", "d") == b"".join(blobs)
    assert _ledger_items() == []


def test_each_part_is_hashed_once_and_checked_by_its_signed_checksum(
    server: MotoServer, tmp_path: Path
) -> None:
    """S3 checks each part's bytes against its x-amz-checksum-crc32, a signed header, so the SDK
    need not hash the part a second time to sign the payload (its default over https; over http,
    which local servers speak, it read and hashed every part again). The upload is created with
    that algorithm, so S3 composes the object's checksum from the parts' own."""
    source = tmp_path / "f.bin"
    source.write_bytes(os.urandom(3 * MIN_PART + 7))

    result, _, _ = upload.upload(source, "s3://sum-bkt/f", env="local", part_size=MIN_PART, quiet=True)

    assert result.completed and _object("sum-bkt", "f") == source.read_bytes()
    parts = server.requests("PUT", r"/sum-bkt/f\?.*partNumber=")
    assert len(parts) == 4
    for request in parts:
        headers = {name.lower(): value for name, value in request["headers"].items()}
        body = base64.b64decode(request["body"]) if request["body_encoded"] else request["body"].encode()
        assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
        assert (
            headers["x-amz-checksum-crc32"] == base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
        )
        assert "x-amz-checksum-crc32" in headers["authorization"].split("SignedHeaders=")[1].split(",")[0]
        assert not any(
            name.startswith("x-amz-checksum-") and name != "x-amz-checksum-crc32" for name in headers
        )
    (create,) = server.requests("POST", r"/sum-bkt/f\?uploads")
    assert {k.lower(): v for k, v in create["headers"].items()}["x-amz-checksum-algorithm"] == "CRC32"


def _updates(server: MotoServer) -> int:
    """UpdateItem requests recorded (the ledger's counts, and setting the UploadId)."""
    return sum(
        request["headers"].get("X-Amz-Target") == "DynamoDB_20120810.UpdateItem"
        for request in server.recorded()
    )


def test_parts_are_recorded_and_counted_in_batches_not_two_requests_each(
    server: MotoServer, tmp_path: Path
) -> None:
    """Up to COUNT_BATCH parts are recorded in one TransactWriteItems (each part's conditional put,
    the integrity check, inside it) and counted in one UpdateItem: 30 parts, two transactions and
    two counts (and the claim's PutItem and the UploadId's update)."""
    from adapters.multipart import COUNT_BATCH

    source = tmp_path / "f.bin"
    source.write_bytes(os.urandom(30 * MIN_PART))

    result, _, _ = upload.upload(source, "s3://batch-bkt/f", env="local", part_size=MIN_PART, quiet=True)

    assert result.completed and result.uploaded == 30 and _object("batch-bkt", "f") == source.read_bytes()
    calls = _calls(server)
    assert COUNT_BATCH == 25 and _updates(server) == 1 + 2
    assert calls.count("TransactWriteItems") == 2 and calls.count("PutItem") == 1


def test_a_batch_holding_a_part_recorded_with_other_bytes_names_that_part(
    server: MotoServer, tmp_path: Path
) -> None:
    """Another process recorded part 1 with other bytes after this one read the records: the batch's
    transaction is cancelled, each part is recorded alone, and the error names part 1; part 2,
    after it in the batch, is recorded all the same. The same batch again (a retry whose answer was
    lost) is no error."""
    from adapters.multipart import UploadedPart, UploadLedger

    db = boto3.client("dynamodb")
    upload._create_local(boto3.client("s3"), db, "us-east-1", "rec-bkt", upload.LOCAL_LEDGER_TABLE)
    ledger = UploadLedger(db, upload.LOCAL_LEDGER_TABLE, "rec-bkt", "d")
    one, two = (UploadedPart(n, f'"etag{n}"', MIN_PART, f"hash{n}", f"crc{n}") for n in (1, 2))
    ledger.record_parts("u1", [UploadedPart(1, '"x"', MIN_PART, "other", "c")])  # the other process

    with pytest.raises(PartMismatchError, match=r"part 1 differs from the part 1 already recorded"):
        ledger.record_parts("u1", [one, two])

    assert sorted(ledger.parts()) == [1, 2] and ledger.parts()[1].xxh128 == "other"
    assert ledger.parts()[2] == two
    ledger.record_parts("u1", [two])
    ledger.record_parts("u1", [two])
    assert ledger.parts()[2] == two


class _Conflicting:
    """A DynamoDB client whose first TransactWriteItems is cancelled by a conflict (another
    process's transaction on one of its items) and whose first PutItem meets one."""

    def __init__(self, client: object) -> None:
        self._client = client
        self.calls: list[str] = []

    def transact_write_items(self, **request: object) -> object:
        self.calls.append("TransactWriteItems")
        if self.calls.count("TransactWriteItems") == 1:
            from botocore.exceptions import ClientError

            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                    "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
                },
                "TransactWriteItems",
            )
        return self._client.transact_write_items(**request)  # type: ignore[attr-defined]

    def put_item(self, **request: object) -> object:
        self.calls.append("PutItem")
        if self.calls.count("PutItem") == 1:
            from botocore.exceptions import ClientError

            raise ClientError(
                {"Error": {"Code": "TransactionConflictException", "Message": "in a transaction"}}, "PutItem"
            )
        return self._client.put_item(**request)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)


def test_a_batch_cancelled_by_a_conflict_is_sent_again_and_a_conflicting_put_retried(
    server: MotoServer,
) -> None:
    """botocore does not retry a TransactionConflict: a transaction cancelled only by conflicts
    (or throttling) is sent again whole, and a part's own PutItem that meets another process's
    transaction on its item is retried, so neither fails the upload."""
    from adapters.multipart import UploadedPart, UploadLedger

    db = boto3.client("dynamodb")
    upload._create_local(boto3.client("s3"), db, "us-east-1", "tx-bkt", upload.LOCAL_LEDGER_TABLE)
    conflicting = _Conflicting(db)
    ledger = UploadLedger(conflicting, upload.LOCAL_LEDGER_TABLE, "tx-bkt", "d")
    one, two, three = (UploadedPart(n, f'"etag{n}"', MIN_PART, f"hash{n}", f"crc{n}") for n in (1, 2, 3))

    ledger.record_parts("u1", [one, two])
    ledger.record_part("u1", three)

    assert conflicting.calls == ["TransactWriteItems", "TransactWriteItems", "PutItem", "PutItem"]
    assert ledger.parts() == {1: one, 2: two, 3: three}


def test_a_batch_that_fails_to_record_is_recorded_on_the_way_out_and_resumed(
    server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording part 2 fails (throttled past the SDK's retries): the run fails, but the batch went
    back to the queue and the error path records and counts it, so the next run sends only part 3."""
    from botocore.exceptions import ClientError

    from adapters import multipart

    blobs = _write_parts(tmp_path / "p", "d", [MIN_PART, MIN_PART, 10])
    monkeypatch.setattr(multipart, "RECORD_SECONDS", 0.0)  # each part is recorded as it lands
    record = multipart.UploadLedger.record_parts
    failed: list[int] = []

    def throttled_once(
        self: multipart.UploadLedger, upload_id: str, parts: list[multipart.UploadedPart]
    ) -> None:
        if [p.number for p in parts] == [2] and not failed:
            failed.append(2)
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems"
            )
        record(self, upload_id, parts)

    monkeypatch.setattr(multipart.UploadLedger, "record_parts", throttled_once)

    with pytest.raises(ClientError, match="ThrottlingException"):
        upload.upload(tmp_path / "p", "s3://requeue-bkt/d", env="local", in_flight=1, quiet=True)

    assert failed == [2]
    parts = {int(i["number"]["N"]) for i in _ledger_items() if str(i["sk"]["S"]).startswith("PART#")}  # type: ignore[index]
    assert parts == {1, 2}
    again, _, _ = upload.upload(tmp_path / "p", "s3://requeue-bkt/d", env="local", in_flight=1, quiet=True)
    assert (again.uploaded, again.skipped, again.completed) == (1, 2, True)
    assert _object("requeue-bkt", "d") == b"".join(blobs)


def test_a_queued_part_is_recorded_while_a_slow_part_is_still_in_flight(
    server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch not yet full waits RECORD_SECONDS at most, even when no other part finishes meanwhile:
    part 1 is recorded while part 2 is still being sent, not at the end with it."""
    from adapters import multipart

    _write_parts(tmp_path / "p", "d", [MIN_PART, 10])
    monkeypatch.setattr(multipart, "RECORD_SECONDS", 0.3)
    send, record = multipart.S3Multipart.upload_part, multipart.UploadLedger.record_parts
    events: list[tuple[float, str]] = []

    def slow_part_2(self: multipart.S3Multipart, upload_id: str, number: int, body: object, crc: str) -> str:
        if number == 2:
            time.sleep(2.5)
        etag = send(self, upload_id, number, body, crc)
        events.append((time.monotonic(), f"sent {number}"))
        return etag

    def noted(self: multipart.UploadLedger, upload_id: str, parts: list[multipart.UploadedPart]) -> None:
        record(self, upload_id, parts)
        events.append((time.monotonic(), f"recorded {[p.number for p in parts]}"))

    monkeypatch.setattr(multipart.S3Multipart, "upload_part", slow_part_2)
    monkeypatch.setattr(multipart.UploadLedger, "record_parts", noted)

    result, _, _ = upload.upload(tmp_path / "p", "s3://due-bkt/d", env="local", in_flight=2, quiet=True)

    assert result.completed
    assert [what for _, what in sorted(events)] == ["sent 1", "recorded [1]", "sent 2", "recorded [2]"]


def test_a_batch_holding_a_part_counted_before_counts_each_part_alone(
    server: MotoServer, tmp_path: Path
) -> None:
    """A host uploads parts 1-2 of 3 (recorded and counted); the whole set then runs: its batch of
    1, 2 (already there) and 3 fails its condition, each part is counted alone, the last completes."""
    blobs = _write_parts(tmp_path / "all", "d", [MIN_PART, MIN_PART, 10])
    (tmp_path / "some").mkdir()
    for i in (1, 2):
        (tmp_path / "some" / f"d_{i}_3").write_bytes(blobs[i - 1])
    first, _, _ = upload.upload(tmp_path / "some", "s3://again-bkt/d", env="local", partial=True, quiet=True)
    assert (first.uploaded, first.recorded, first.missing, first.completed) == (2, 2, "3", False)
    server.start_recording()

    second, _, _ = upload.upload(tmp_path / "all", "s3://again-bkt/d", env="local", in_flight=1, quiet=True)

    assert (second.uploaded, second.skipped, second.completed) == (1, 2, True)
    assert _updates(server) == 1 + 3  # the batch, then parts 1, 2 and 3 alone
    assert _object("again-bkt", "d") == b"".join(blobs)
    assert _ledger_items() == []


def _part_keys() -> dict[int, str]:
    """Part number -> the partition key its record is under, of the part records in the ledger."""
    return {int(i["number"]["N"]): str(i["pk"]["S"]) for i in _ledger_items() if "number" in i}  # type: ignore[index]


@pytest.mark.parametrize("older", [False, True])
def test_part_records_are_spread_over_keys_and_an_upload_of_the_single_key_layout_resumes(
    server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, older: bool
) -> None:
    """Issue 42 item 6: a part's record is under one of PART_KEYS keys by its number, not the
    upload item's (tests/runtime/test_ledger_keys.py computes the bound). An upload begun by the
    mapload before (`checksum` CRC32/XXH3-128, every record under the upload's key) is joined
    and finished as it was laid out: its records read, the new ones beside them, all cleared."""
    from adapters import multipart

    blobs = _write_parts(tmp_path / "all", "d", [MIN_PART, MIN_PART, 10])
    (tmp_path / "some").mkdir()
    for i in (1, 2):
        (tmp_path / "some" / f"d_{i}_3").write_bytes(blobs[i - 1])
    with monkeypatch.context() as before:
        if older:  # the item shapes the mapload before wrote
            before.setattr(multipart, "LEDGER_FORMAT", multipart.SINGLE_KEY_FORMAT)
            before.setattr(multipart, "PART_KEYS", 1)
        first, _, _ = upload.upload(
            tmp_path / "some", "s3://keys-bkt/d", env="local", partial=True, quiet=True
        )
    assert (first.recorded, first.missing) == (2, "3")
    upload_key = "UPLOAD#s3://keys-bkt/d"
    if older:
        assert _part_keys() == {1: upload_key, 2: upload_key}
    else:
        assert _part_keys() == {n: f"UPART#{n % multipart.PART_KEYS:02d}#s3://keys-bkt/d" for n in (1, 2)}

    second, _, _ = upload.upload(tmp_path / "all", "s3://keys-bkt/d", env="local", quiet=True)

    assert (second.uploaded, second.skipped, second.completed) == (1, 2, True)
    assert _object("keys-bkt", "d") == b"".join(blobs)
    assert _ledger_items() == []


def test_an_upload_makes_each_client_once(
    server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client costs ~50 ms of start-up (its service model): one S3 and one DynamoDB client serve
    the bucket and ledger checks and the whole upload."""
    made: list[str] = []
    client = boto3.Session.client

    def counted(self: boto3.Session, service: str, *args: object, **kwargs: object) -> object:
        made.append(service)
        return client(self, service, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(boto3.Session, "client", counted)
    _write_parts(tmp_path / "p", "d", [MIN_PART, 10])

    result, _, _ = upload.upload(tmp_path / "p", "s3://once-bkt/d", env="local", quiet=True)

    assert result.completed
    assert sorted(made) == ["dynamodb", "s3"]


def _calls(server: MotoServer) -> list[str]:
    """The recorded requests in order: DynamoDB's by action, S3's by method and query."""
    named = []
    for request in server.recorded():
        target = request["headers"].get("X-Amz-Target", "")
        query = request["url"].partition("?")[2]
        keys = "&".join(sorted(pair.split("=")[0] for pair in query.split("&") if pair))
        named.append(target.rpartition(".")[2] if target else f"{request['method']} ?{keys}")
    return named


def test_a_new_upload_starts_its_first_part_after_five_requests(server: MotoServer, tmp_path: Path) -> None:
    """The process that creates the upload knows nothing is recorded, counted or in S3 yet (no
    GetItem, Query or ListParts before its parts), finds the table with one DescribeTable, wins
    the election with its one conditional put (no GetItem first), and completes with the records
    it wrote itself: no Query, no GetItem at all; ListParts still checks S3 against them."""
    _write_parts(tmp_path / "p", "d", [MIN_PART, 10])
    upload.upload(tmp_path / "p", "s3://six-bkt/d", env="local", quiet=True)  # the table exists now
    server.start_recording()

    result, _, _ = upload.upload(tmp_path / "p", "s3://six-bkt/e", env="local", quiet=True)

    assert result.completed and _object("six-bkt", "e") == _object("six-bkt", "d")
    calls = _calls(server)
    first_part = calls.index("PUT ?partNumber&uploadId")
    assert calls[:first_part] == ["PUT ?", "DescribeTable", "PutItem", "POST ?uploads", "UpdateItem"]
    assert calls.count("Query") == 0 and calls.count("GetItem") == 0
    assert calls.count("GET ?uploadId") == 1  # ListParts, before CompleteMultipartUpload
    assert calls.index("GET ?uploadId") < calls.index("POST ?uploadId")


def test_parts_are_hashed_one_at_a_time(
    server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads hashing their first parts all at once held back the first part until every hash was
    done; one hash at a time, the first part leaves after its own (hashing outruns any upload)."""
    from adapters import multipart

    hash_part = multipart.file_part_checksums
    running: list[int] = []
    most = [0]

    def slow_hash(part: partlib.Part) -> tuple[str, str]:
        running.append(part.number)
        most[0] = max(most[0], len(running))
        try:
            time.sleep(0.05)  # long enough for threads hashing at once to overlap
            return hash_part(part)
        finally:
            running.remove(part.number)

    monkeypatch.setattr(multipart, "file_part_checksums", slow_hash)
    source = tmp_path / "f.bin"
    source.write_bytes(os.urandom(8 * MIN_PART))

    result, _, _ = upload.upload(
        source, "s3://hash-bkt/f", env="local", part_size=MIN_PART, in_flight=4, quiet=True
    )

    assert result.completed and _object("hash-bkt", "f") == source.read_bytes()
    assert most[0] == 1


# -- start-up and completion paths: hashing ahead, the one-request election, pages by hand ----


def _hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The part numbers file_part_checksums is called for, in order (any thread)."""
    from adapters import multipart

    calls: list[int] = []
    real = multipart.file_part_checksums

    def recorded(part: partlib.Part) -> tuple[str, str]:
        calls.append(part.number)
        return real(part)

    monkeypatch.setattr(multipart, "file_part_checksums", recorded)
    return calls


def _until(condition: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_the_hasher_hashes_ahead_in_order_up_to_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started before the clients and the election, the hasher thread hashes the parts in order
    while nothing takes them, but never more than `ahead` bytes beyond the parts taken; each part's
    checksums (its XXH3-128, the ledger's identity, and its CRC32, S3's check) are computed once."""
    from adapters.multipart import PartHasher

    calls = _hashed(monkeypatch)
    source = tmp_path / "f.bin"
    source.write_bytes(os.urandom(6 * MIN_PART))
    plan = partlib.plan_file(str(source), 6 * MIN_PART, part_size=MIN_PART, min_part=MIN_PART)

    with PartHasher(plan.parts, ahead=2 * MIN_PART) as hasher:
        _until(lambda: len(calls) == 2)
        time.sleep(0.1)
        assert calls == [1, 2]  # the bound holds while nothing is taken
        taken = [hasher.take(part) for part in plan.parts]

    assert sorted(calls) == [1, 2, 3, 4, 5, 6]  # each once, whoever hashed it
    blob = source.read_bytes()
    chunks = [blob[part.offset : part.offset + part.size] for part in plan.parts]
    assert taken == [
        (
            base64.b64encode(xxhash.xxh3_128(chunk).digest()).decode(),
            base64.b64encode(zlib.crc32(chunk).to_bytes(4, "big")).decode(),
        )
        for chunk in chunks
    ]


def test_a_part_taken_before_the_hasher_reaches_it_is_hashed_by_the_taker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed run checks its recorded parts first, out of the hasher's order: the taker hashes
    such a part itself, the hasher skips it, and an error hashing it (the file is shorter than
    planned) is raised in the taker, naming the part."""
    from adapters.multipart import PartHasher

    calls = _hashed(monkeypatch)
    source = tmp_path / "f.bin"
    source.write_bytes(os.urandom(4 * MIN_PART))
    plan = partlib.plan_file(str(source), 4 * MIN_PART, part_size=MIN_PART, min_part=MIN_PART)

    with PartHasher(plan.parts, ahead=MIN_PART) as hasher:  # the thread stops after part 1
        _until(lambda: calls == [1])
        hasher.take(plan.parts[3])
        assert calls == [1, 4]
        for part in plan.parts[:3]:
            hasher.take(part)
    assert sorted(calls) == [1, 2, 3, 4]

    source.write_bytes(os.urandom(2 * MIN_PART))  # shrunk after planning
    with PartHasher(plan.parts, ahead=8 * MIN_PART) as hasher:
        hasher.take(plan.parts[0])
        with pytest.raises(PartMismatchError, match=r"shorter than planned \(part 3\)"):
            hasher.take(plan.parts[2])


def test_the_election_is_one_request_for_the_winner_and_for_a_joiner(server: MotoServer) -> None:
    """The conditional put of the upload item returns the item it found (ALL_OLD on the failed
    condition): a joining process reads the upload from it, not from a GetItem after it. A server
    that ignores that parameter is asked with a GetItem."""
    from adapters.multipart import UploadLedger

    db = boto3.client("dynamodb")
    upload._create_local(boto3.client("s3"), db, "us-east-1", "vote-bkt", upload.LOCAL_LEDGER_TABLE)
    first = UploadLedger(db, upload.LOCAL_LEDGER_TABLE, "vote-bkt", "d")
    second = UploadLedger(db, upload.LOCAL_LEDGER_TABLE, "vote-bkt", "d")
    server.start_recording()

    assert first.claim("owner-1", 3, "d") == (True, None)
    won, record = second.claim("owner-2", 3, "d")

    assert not won and record is not None
    assert (record["owner"], record["total"], record["partsDone"]) == ("owner-1", 3, 0)
    assert _calls(server) == ["PutItem", "PutItem"]

    class _Forgetful:
        """A server that does not return the item a failed condition found."""

        def put_item(self, **request: object) -> object:
            from botocore.exceptions import ClientError

            try:
                return db.put_item(**request)
            except ClientError as error:
                error.response.pop("Item", None)
                raise

        def __getattr__(self, name: str) -> object:
            return getattr(db, name)

    won, record = UploadLedger(_Forgetful(), upload.LOCAL_LEDGER_TABLE, "vote-bkt", "d").claim("o3", 3, "d")
    assert not won and record is not None and record["owner"] == "owner-1"
    assert _calls(server)[2:] == ["PutItem", "GetItem"]


class _SmallPages:
    """Clients whose Query and ListParts answer two items a page, so that every page is read."""

    def __init__(self, client: object) -> None:
        self._client = client
        self.pages = 0

    def query(self, **request: object) -> object:
        self.pages += 1
        return self._client.query(Limit=2, **request)  # type: ignore[attr-defined]

    def list_parts(self, **request: object) -> object:
        self.pages += 1
        return self._client.list_parts(MaxParts=2, **request)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)


def test_records_and_s3_parts_are_read_page_by_page(server: MotoServer) -> None:
    """Both are paged by hand (a paginator loads a model of every service's, 10-40 ms on the way to
    the object): every page of part records and of ListParts is read, following the server's
    LastEvaluatedKey and NextPartNumberMarker (the records here all on one of the PART_KEYS keys,
    the others queried once each, empty)."""
    from adapters.multipart import PART_KEYS, ListedPart, S3Multipart, UploadedPart, UploadLedger

    s3, db = boto3.client("s3"), boto3.client("dynamodb")
    upload._create_local(s3, db, "us-east-1", "page-bkt", upload.LOCAL_LEDGER_TABLE)
    paged_s3, paged_db = _SmallPages(s3), _SmallPages(db)
    multipart = S3Multipart(paged_s3, "page-bkt", "d")
    ledger = UploadLedger(paged_db, upload.LOCAL_LEDGER_TABLE, "page-bkt", "d")
    upload_id = multipart.create()
    parts = []
    for number in range(1, 6):
        data = os.urandom(MIN_PART)
        crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        etag = multipart.upload_part(upload_id, number, data, crc)
        parts.append(UploadedPart(number, etag, MIN_PART, f"hash{number}", crc))
    # Records of parts 1, 1 + PART_KEYS, ...: all under one key.
    records = [dataclasses.replace(p, number=1 + i * PART_KEYS) for i, p in enumerate(parts)]
    ledger.record_parts(upload_id, records)

    assert ledger.parts(upload_id) == {p.number: p for p in records}
    assert multipart.list_parts(upload_id) == {p.number: ListedPart(p.etag, MIN_PART, p.crc32) for p in parts}
    assert paged_db.pages == 3 + PART_KEYS - 1 and paged_s3.pages == 3


def test_a_part_record_left_by_an_earlier_upload_of_the_key_does_not_block_the_next(
    server: MotoServer, tmp_path: Path
) -> None:
    """A process that records a part after another completed (or aborted) the upload leaves a
    part record with no upload record. Each upload's records are its own items (`PART#<uploadId>#
    <n>`): a new upload of the key, of other bytes, neither fails on that leftover nor has its own
    record of the same part overwritten by such a late writer; the leftover goes by TTL or
    `--abort`."""
    from adapters.multipart import UploadedPart, UploadLedger

    first = _write_parts(tmp_path / "a", "d", [MIN_PART, 10], seed=1)
    done, _, _ = upload.upload(tmp_path / "a", "s3://late-bkt/d", env="local", quiet=True)
    assert done.completed and _ledger_items() == [] and _object("late-bkt", "d") == b"".join(first)
    ledger = UploadLedger(boto3.client("dynamodb"), upload.LOCAL_LEDGER_TABLE, "late-bkt", "d")
    late = UploadedPart(1, '"late"', MIN_PART, "hash-of-the-first", "c")
    ledger.record_parts(done.upload_id, [late])
    assert ledger.parts(done.upload_id) == {1: late} and ledger.parts("another") == {}

    second = _write_parts(tmp_path / "b", "d", [MIN_PART, 10], seed=2)
    again, _, _ = upload.upload(tmp_path / "b", "s3://late-bkt/d", env="local", quiet=True)

    assert again.completed and again.upload_id != done.upload_id
    assert _object("late-bkt", "d") == b"".join(second)
    assert [item["sk"]["S"] for item in _ledger_items()] == [f"PART#{done.upload_id}#00001"]
    assert upload.abort("s3://late-bkt/d", env="local")[0] == [] and _ledger_items() == []

    # A late writer of an earlier upload beside a running one: its record is its own item.
    mine = UploadedPart(1, '"mine"', MIN_PART, "hash-of-mine", "c")
    ledger.record_parts("U1", [mine])
    ledger.record_parts("U0", [late])
    assert ledger.parts("U1") == {1: mine} and ledger.parts("U0") == {1: late}


def test_a_lost_answer_to_the_winning_claim_still_wins(server: MotoServer) -> None:
    """The election's put applied but its answer was lost; the SDK's retry fails the condition and
    returns the item: this process's own claim, without an UploadId. It won (it does not wait
    60 s for a creator that is itself)."""
    from adapters.multipart import UploadLedger

    db = boto3.client("dynamodb")
    upload._create_local(boto3.client("s3"), db, "us-east-1", "lost-claim-bkt", upload.LOCAL_LEDGER_TABLE)

    class _Retried:
        def put_item(self, **request: object) -> object:
            db.put_item(**request)  # applied; its answer never arrives
            return db.put_item(**request)  # the SDK's retry of the same request

        def __getattr__(self, name: str) -> object:
            return getattr(db, name)

    ledger = UploadLedger(_Retried(), upload.LOCAL_LEDGER_TABLE, "lost-claim-bkt", "d")
    assert ledger.claim("me", 2, "d") == (True, None)
    won, record = UploadLedger(db, upload.LOCAL_LEDGER_TABLE, "lost-claim-bkt", "d").claim("other", 2, "d")
    assert not won and record is not None and record["owner"] == "me"


def test_a_completer_whose_own_copy_of_a_record_is_stale_reads_the_records(
    server: MotoServer, tmp_path: Path
) -> None:
    """The completer holds a record of every part, but another process sent part 1 again since and
    recorded its ETag (the same bytes: under SSE-KMS or SSE-C, another ETag). The completer's copy
    does not match S3; the records do: it completes, and does not report other bytes."""
    from adapters.multipart import CoordinatedUpload, S3Multipart, UploadedPart, UploadLedger

    s3, db = boto3.client("s3"), boto3.client("dynamodb")
    upload._create_local(s3, db, "us-east-1", "stale-bkt", upload.LOCAL_LEDGER_TABLE)
    multipart = S3Multipart(s3, "stale-bkt", "d")
    ledger = UploadLedger(db, upload.LOCAL_LEDGER_TABLE, "stale-bkt", "d")
    upload_id = multipart.create()
    blobs = [os.urandom(MIN_PART), os.urandom(10)]
    parts = {}
    for number, data in enumerate(blobs, 1):
        crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        etag = multipart.upload_part(upload_id, number, data, crc)
        parts[number] = UploadedPart(number, etag, len(data), f"hash{number}", crc)
    ledger.record_parts(upload_id, list(parts.values()))
    stale = {**parts, 1: UploadedPart(1, '"an-earlier-etag"', MIN_PART, "hash1", parts[1].crc32)}

    CoordinatedUpload(multipart, ledger).complete(upload_id, 2, stale)

    assert _object("stale-bkt", "d") == b"".join(blobs)
    assert _ledger_items() == []


def test_two_hosts_sending_one_part_under_sse_kms_complete_by_its_crc32_not_its_etag(
    server: MotoServer,
) -> None:
    """Under SSE-KMS a part's ETag is not the MD5 of its bytes: host A and host B send the same
    part 1, S3 keeps B's copy (B's ETag) while the record the completer reads holds A's ETag
    (A recorded last; the condition lets the same bytes be recorded again). The bytes are the
    same, and S3 returns each part's CRC32 (the upload asked for it): it completes, naming each
    part by the ETag S3 holds, and reports no "other bytes"."""
    from adapters.multipart import CoordinatedUpload, S3Multipart, UploadedPart, UploadLedger

    s3, db = boto3.client("s3"), boto3.client("dynamodb")
    upload._create_local(s3, db, "us-east-1", "kms-bkt", upload.LOCAL_LEDGER_TABLE)
    multipart = S3Multipart(s3, "kms-bkt", "d")
    ledger = UploadLedger(db, upload.LOCAL_LEDGER_TABLE, "kms-bkt", "d")
    upload_id = multipart.create()
    blobs = [os.urandom(MIN_PART), os.urandom(10)]
    parts = {}
    for number, data in enumerate(blobs, 1):
        crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        etag = multipart.upload_part(upload_id, number, data, crc)
        parts[number] = UploadedPart(number, etag, len(data), f"hash{number}", crc)
    # Host A's record of part 1: the same bytes (hash, size, CRC32), the ETag S3 gave A's copy.
    host_a = UploadedPart(1, '"etag-of-host-a-copy-under-sse-kms"', MIN_PART, "hash1", parts[1].crc32)
    ledger.record_parts(upload_id, [host_a, parts[2]])

    CoordinatedUpload(multipart, ledger).complete(upload_id, 2)

    assert _object("kms-bkt", "d") == b"".join(blobs)
    assert _ledger_items() == []


def test_other_bytes_in_s3_than_recorded_are_still_refused_by_crc32(server: MotoServer) -> None:
    from adapters.multipart import (
        CoordinatedUpload,
        PartMismatchError,
        S3Multipart,
        UploadedPart,
        UploadLedger,
    )

    s3, db = boto3.client("s3"), boto3.client("dynamodb")
    upload._create_local(s3, db, "us-east-1", "other-bkt", upload.LOCAL_LEDGER_TABLE)
    multipart = S3Multipart(s3, "other-bkt", "d")
    ledger = UploadLedger(db, upload.LOCAL_LEDGER_TABLE, "other-bkt", "d")
    upload_id = multipart.create()
    data = os.urandom(10)
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    etag = multipart.upload_part(upload_id, 1, data, crc)
    other = base64.b64encode(zlib.crc32(b"x" * 10).to_bytes(4, "big")).decode()
    ledger.record_parts(upload_id, [UploadedPart(1, etag, 10, "hash-of-other-bytes", other)])

    with pytest.raises(PartMismatchError, match=r"S3 holds other bytes than recorded for parts \[1\]"):
        CoordinatedUpload(multipart, ledger).complete(upload_id, 1)


def test_upload_local_waits_for_the_ledger_it_creates_and_turns_its_ttl_on(server: MotoServer) -> None:
    """The local ledger is created as the stacks define the ledger: ACTIVE before use, its records
    expiring by TTL on `expiresAt` (leftover part records "go by TTL or --abort")."""
    db = boto3.client("dynamodb")

    upload._create_local(boto3.client("s3"), db, "us-east-1", "ttl-bkt", upload.LOCAL_LEDGER_TABLE)

    assert db.describe_table(TableName=upload.LOCAL_LEDGER_TABLE)["Table"]["TableStatus"] == "ACTIVE"
    assert db.describe_time_to_live(TableName=upload.LOCAL_LEDGER_TABLE)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "expiresAt",
    }
