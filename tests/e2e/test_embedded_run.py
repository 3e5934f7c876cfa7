"""The embedded run: the synthesized state machine, the runtime handlers, moto as AWS."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mapload.sample import postcodes

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

POSTCODE_SPEC: dict[str, Any] = {
    "format": "csv",
    "csv": {"header": True},
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {
            "latitude": {"field": "latitude", "type": "N"},
            "longitude": {"field": "longitude", "type": "N"},
        },
    },
    "shardSizeMiB": 0.01,  # ~10 KB shards: a few thousand rows make many shards
    "maxConcurrency": 4,
    "maxRejectedPercent": 10,
}

# (raw line, reject code) mixed into a CSV file; each must be rejected, nothing else.
BAD_CSV_ROWS = [
    (b"AB1 2CD,51.5", "column_count"),
    (b"AB1 2CE,51.5,-0.1,extra", "column_count"),
    (b"AB1 2CF,north,-0.1", "bad_number"),
    (b",51.5,-0.1", "empty_key"),
    (b'"AB1 2CG"x,51.5,-0.1', "bad_quote"),  # text after a closing quote
    (b"AB1 2\xff\xfeCH,51.5,-0.1", "invalid_utf8"),
]


def _csv_with_bad_rows(path: Path, rows: int, seed: int = 3) -> tuple[dict[str, tuple[str, str]], list[int]]:
    """Write good rows with bad rows spread through the file; return the good rows by
    postcode and the 1-based line numbers of the bad ones."""
    rng = random.Random(seed)
    good: dict[str, tuple[str, str]] = {}
    bad_lines: list[int] = []
    lines: list[bytes] = [b"postcode,latitude,longitude"]
    bad_at = set(rng.sample(range(rows), len(BAD_CSV_ROWS)))
    bad = iter(BAD_CSV_ROWS)
    for i, (code, lat, lon) in enumerate(postcodes(rows, seed)):
        if i in bad_at:
            lines.append(next(bad)[0])
            bad_lines.append(len(lines))
        lines.append(f"{code},{lat},{lon}".encode())
        good[code] = (lat, lon)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return good, bad_lines


def test_csv_with_bad_rows_loads_every_good_row_and_rejects_every_bad_one(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    source = tmp_path / "postcodes.csv"
    good, bad_lines = _csv_with_bad_rows(source, 3_000)

    run = run_file(source, POSTCODE_SPEC)

    report = run.report
    assert report["status"] == "SUCCEEDED", report["error"]
    records = report["records"]
    assert records["read"] == len(good) + len(BAD_CSV_ROWS)
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
    assert records["rejected"] == len(BAD_CSV_ROWS)
    assert report["shards"]["total"] > 5
    assert report["shards"]["done"] == report["shards"]["total"]
    assert report["rejects"]["byReason"] == {
        "bad_number": 1,
        "column_count": 2,
        "empty_key": 1,
        "invalid_utf8": 1,
        "bad_quote": 1,
    }
    # The table holds exactly the good rows, with their values.
    assert set(run.items) == {(f"POSTCODE#{code}", "LOCATION") for code in good}
    for code, (lat, lon) in good.items():
        item = run.items[(f"POSTCODE#{code}", "LOCATION")]
        assert float(item["latitude"]["N"]) == pytest.approx(float(lat))
        assert float(item["longitude"]["N"]) == pytest.approx(float(lon))
    # Each reject names its line in the file, its byte offset and keeps the raw line.
    rejects = run.rejects()
    assert sorted(r["line"] for r in rejects) == sorted(bad_lines)
    raw = source.read_bytes()
    for reject in rejects:
        line_start = reject["offset"]
        assert line_start == 0 or raw[line_start - 1 : line_start] == b"\n"
        assert raw.count(b"\n", 0, line_start) + 1 == reject["line"]
        assert reject["source"].endswith("/postcodes.csv")
        assert reject["reason"]


def test_jsonl_with_star_attributes_keeps_json_types(tmp_path: Path, run_file: Callable[..., Any]) -> None:
    source = tmp_path / "people.jsonl"
    rows = [
        {
            "id": f"u{i}",
            "name": f"name {i}",
            "age": i % 90,
            "active": i % 2 == 0,
            "tags": ["a", str(i)],
            "address": {"city": "Leeds", "zip": None},
        }
        for i in range(1_500)
    ]
    lines = [json.dumps(r).encode() for r in rows]
    lines.insert(100, b"{not json")
    lines.insert(700, b"[1, 2, 3]")
    source.write_bytes(b"\n".join(lines) + b"\n")
    spec = {
        "format": "jsonl",
        "dynamodb": {"key": {"pk": "USER#{id}", "sk": "PROFILE"}, "attributes": "*"},
        "shardSizeMiB": 0.02,
        "maxConcurrency": 3,
        "maxRejectedPercent": 1,
    }

    run = run_file(source, spec)

    assert run.report["status"] == "SUCCEEDED", run.report["error"]
    assert run.report["records"] == {
        "read": 1_502,
        "written": 1_500,
        "skipped": 0,
        "rejected": 2,
        "duplicates": 0,
    }
    assert len(run.items) == 1_500
    item = run.items[("USER#u7", "PROFILE")]
    assert item["age"] == {"N": "7"}
    assert item["active"] == {"BOOL": False}
    assert item["tags"] == {"L": [{"S": "a"}, {"S": "7"}]}
    assert item["address"] == {"M": {"city": {"S": "Leeds"}, "zip": {"NULL": True}}}
    assert item["id"] == {"S": "u7"}


def test_too_many_rejects_fails_the_execution_after_writing_the_report(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    source = tmp_path / "bad.csv"
    good, _ = _csv_with_bad_rows(source, 200)
    spec = {**POSTCODE_SPEC, "maxRejectedPercent": 1}

    run = run_file(source, spec)

    report = run.report
    assert report["status"] == "FAILED"
    assert report["error"]["type"] == "TooManyRejectsError"
    assert report["records"]["written"] == len(good)  # what was written stays written
    assert (
        report["records"]["read"]
        == report["records"]["written"] + report["records"]["skipped"] + report["records"]["rejected"]
    )
    assert len(run.items) == len(good)


def test_invalid_input_fails_with_the_field_named_and_still_reports(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    source = tmp_path / "p.csv"
    source.write_text("postcode,latitude,longitude\nAB1 2CD,1,2\n")
    spec = {**POSTCODE_SPEC, "dynamodb": {"key": {"pk": "{postcode}"}, "attributes": {}}}

    run = run_file(source, spec)

    assert run.report["status"] == "FAILED"
    assert run.report["error"]["type"] == "InputValidationError"
    assert "dynamodb.key" in run.report["error"]["message"]
    assert "sk" in run.report["error"]["message"]
    assert run.report["error"]["where"] == "Prepare"  # Prepare validates the input first
    assert run.items == {}


def test_dry_run_writes_nothing_but_counts_and_rejects(tmp_path: Path, run_file: Callable[..., Any]) -> None:
    source = tmp_path / "postcodes.csv"
    good, _ = _csv_with_bad_rows(source, 500)

    run = run_file(source, {**POSTCODE_SPEC, "dryRun": True})

    assert run.report["status"] == "SUCCEEDED"
    assert run.report["dryRun"] is True
    assert run.report["records"]["rejected"] == len(BAD_CSV_ROWS)
    assert run.report["records"]["written"] == len(good)
    assert run.items == {}


def test_data_lands_in_the_dynamodb_endpoint_the_standard_setting_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str
) -> None:
    """AWS_ENDPOINT_URL_DYNAMODB: tables are created on, and items land in, that server, under
    stable names a re-run reuses."""
    import boto3

    from mapload.local import run_local

    db = boto3.client(
        "dynamodb",
        endpoint_url=moto_server,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server)
    source = tmp_path / "p.csv"
    source.write_text(
        "postcode,latitude,longitude\n" + "".join(f"AB{i} 1CD,51.{i},-0.{i}\n" for i in range(300))
    )

    first = run_local(source, POSTCODE_SPEC, report_path=tmp_path / "r1.json", quiet=True)
    second = run_local(source, POSTCODE_SPEC, report_path=tmp_path / "r2.json", quiet=True)

    assert first["status"] == second["status"] == "SUCCEEDED"
    table = first["dynamodb"]["table"]
    assert table == second["dynamodb"]["table"]
    assert table in db.list_tables()["TableNames"]
    assert db.scan(TableName=table, Select="COUNT")["Count"] == 300


def test_the_configured_region_is_where_tables_and_buckets_are_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str
) -> None:
    """AWS_REGION (before AWS_DEFAULT_REGION) is honoured: the user's own scan of a kept endpoint,
    in their region, finds the tables and buckets, and the report names the table's region."""
    import boto3

    from mapload.local import run_local

    def client(service: str, region: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=moto_server,
            region_name=region,
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )

    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server)
    source = tmp_path / "p.csv"
    source.write_text(
        "postcode,latitude,longitude\n" + "".join(f"AB{i} 1CD,51.{i},-0.{i}\n" for i in range(50))
    )

    report = run_local(source, POSTCODE_SPEC, report_path=tmp_path / "r.json", quiet=True)

    assert report["status"] == "SUCCEEDED"
    table = report["dynamodb"]["table"]
    assert report["dynamodb"]["tableArn"].startswith("arn:aws:dynamodb:eu-west-1:")
    assert table in client("dynamodb", "eu-west-1").list_tables()["TableNames"]
    assert table not in client("dynamodb", "us-east-1").list_tables()["TableNames"]
    assert client("dynamodb", "eu-west-1").scan(TableName=table, Select="COUNT")["Count"] == 50
    s3 = client("s3", "eu-west-1")
    buckets = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert buckets
    for bucket in buckets:
        assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == "eu-west-1", bucket


def test_an_aws_error_ends_run_local_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mapload.cli import main

    # Nothing listens on port 9: creating the tables fails (botocore's EndpointConnectionError).
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    source = tmp_path / "p.csv"
    source.write_text("postcode,latitude,longitude\nAB1 1CD,51.1,-0.1\n")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(POSTCODE_SPEC))

    code = main(
        ["run-local", str(source), "--spec", str(spec), "--report", str(tmp_path / "r.json"), "--quiet"]
    )

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1, err
    assert err[0].startswith("mapload run-local: AWS error: Could not connect to the endpoint URL")


def test_duplicate_keys_in_a_batch_send_the_later_record_and_are_counted(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    source = tmp_path / "dupes.jsonl"
    rows = [
        {"id": "a", "v": 1},
        {"id": "b", "v": 1},
        {"id": "a", "v": 2},
        {"id": "c", "v": 1},
        {"id": "a", "v": 3},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {
        "format": "jsonl",
        "dynamodb": {"key": {"pk": "{id}", "sk": "X"}, "attributes": {"v": {"field": "v", "type": "N"}}},
    }

    run = run_file(source, spec)

    assert run.report["records"] == {"read": 5, "written": 5, "skipped": 0, "rejected": 0, "duplicates": 2}
    assert {k: v["v"]["N"] for k, v in run.items.items()} == {
        ("a", "X"): "3",
        ("b", "X"): "1",
        ("c", "X"): "1",
    }


def test_the_first_run_waits_until_its_new_tables_are_active(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DynamoDB keeps a new table CREATING for seconds, and so does the emulator (patch
    table-creating): a first run on a fresh emulator waits until its tables are ACTIVE before Plan
    reads the ledger, and the TTL the template sets is on, nothing said."""
    from mapload.emulator.embedded import Deployment, Emulator
    from mapload.local import run_local

    seen: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        db = emu.client("dynamodb")
        names = deployment.tables.values()
        seen["status"] = {db.describe_table(TableName=n)["Table"]["TableStatus"] for n in names}
        seen["ttl"] = [db.describe_time_to_live(TableName=n)["TimeToLiveDescription"] for n in names]

    source = tmp_path / "p.csv"
    source.write_text(
        "postcode,latitude,longitude\n" + "".join(f"AB{i} 1CD,51.{i},-0.{i}\n" for i in range(20))
    )

    report = run_local(source, POSTCODE_SPEC, report_path=tmp_path / "r.json", quiet=True, inspect=inspect)

    assert report["status"] == "SUCCEEDED", report.get("error")
    assert report["records"]["written"] == 20
    assert seen["status"] == {"ACTIVE"}
    assert {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"} in seen["ttl"]
    assert capsys.readouterr().err == ""


def test_a_kept_table_whose_ttl_cannot_be_turned_on_is_said(stacks: list[Any]) -> None:
    """A reused table with TTL on another attribute keeps it (a table has one TTL attribute): the
    deployment says so, for run-local to print, instead of swallowing the refusal."""
    from mapload.emulator.embedded import Emulator

    ledger = next(
        (logical, resource["Properties"])
        for stack in stacks
        for logical, resource in stack.template.get("Resources", {}).items()
        if resource["Type"] == "AWS::DynamoDB::Table" and "TimeToLiveSpecification" in resource["Properties"]
    )
    name = f"mapload-dev-{ledger[0]}"
    with Emulator("dev") as emu:
        db = emu.client("dynamodb")
        db.create_table(
            TableName=name,
            KeySchema=ledger[1]["KeySchema"],
            AttributeDefinitions=ledger[1]["AttributeDefinitions"],
            BillingMode="PAY_PER_REQUEST",
        )
        db.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1})
        db.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "old"}
        )

        deployment = emu.provision(stacks)

    assert deployment.warnings == [
        f"table {name} has TTL on 'old', not 'expiresAt': its items will not expire"
    ]


def test_the_rejects_file_beside_a_report_is_that_report_s_on_every_run(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    """REPORT-stem.rejects.jsonl belongs to the report beside it: a clean re-run with the same
    --report leaves none (34,924 stale rejects were seen beside a report of 0), and so does a
    failed run; a run with rejects writes exactly its own."""
    bad = tmp_path / "bad.csv"
    _, bad_lines = _csv_with_bad_rows(bad, 60)
    clean = tmp_path / "clean.csv"
    clean.write_text("postcode,latitude,longitude\nAB1 2CD,51.5,-0.1\n")
    invalid = {**POSTCODE_SPEC, "dynamodb": {"key": {"pk": "{postcode}"}, "attributes": {}}}
    beside = tmp_path / "report.rejects.jsonl"

    with_rejects = run_file(bad, POSTCODE_SPEC)
    assert with_rejects.report["rejects"]["location"] == str(beside)
    assert sorted(r["line"] for r in with_rejects.rejects()) == sorted(bad_lines)

    clean_run = run_file(clean, POSTCODE_SPEC)
    assert clean_run.report["rejects"]["count"] == 0
    assert clean_run.report["rejects"]["location"] is None
    assert not beside.exists()

    run_file(bad, POSTCODE_SPEC)
    failed = run_file(clean, invalid)
    assert failed.report["status"] == "FAILED"
    assert not beside.exists()


def test_a_folder_run_on_a_kept_server_loads_exactly_the_folder_s_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str
) -> None:
    """run-local FOLDER uploads the folder under its name; on a kept server (`mapload serve`) the
    prefix still held the files of earlier runs, so a file deleted locally was loaded again. The
    prefix holds exactly the folder's files, under the same keys as before."""
    import boto3

    from mapload.local import run_local

    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", served)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", served)
    folder = tmp_path / "parts"
    (folder / "deeper").mkdir(parents=True)
    (folder / "a.csv").write_text("postcode,latitude,longitude\nAB1 1CD,51.1,-0.1\n")
    (folder / "deeper" / "b.csv").write_text("postcode,latitude,longitude\nAB2 1CD,51.2,-0.2\n")

    first = run_local(folder, POSTCODE_SPEC, report_path=tmp_path / "r1.json", quiet=True)
    (folder / "deeper" / "b.csv").unlink()
    second = run_local(folder, POSTCODE_SPEC, report_path=tmp_path / "r2.json", quiet=True)

    s3 = boto3.client(
        "s3", endpoint_url=served, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if "source" in b["Name"])
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="parts/").get("Contents", [])]
    assert first["status"] == second["status"] == "SUCCEEDED"
    assert first["records"]["read"] == 2
    assert second["records"]["read"] == 1  # b.csv, deleted locally, is not loaded again
    assert keys == ["parts/a.csv"]
