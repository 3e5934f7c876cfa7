"""format dynamodb-json end to end: a table exported by moto's ExportTableToPointInTime (a real
exporter: gzip files of `{"Item": ...}` lines under AWSDynamoDB/<id>/data/) is loaded by
`mapload start` through the synthesized state machine into the environment's existing table."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from mapload import cli
from mapload.emulator.embedded import Deployment, Emulator
from mapload.tables import wait_until_active

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

ITEMS = 120
EXPORT_PREFIX = "exports"


def every_type(index: int) -> dict[str, Any]:
    """An item holding every DynamoDB type, nested ones too (values vary with `index`)."""
    return {
        "pk": {"S": f"user#{index % 17}"},
        "sk": {"S": f"order#{index:05d}"},
        "name": {"S": f"név {index} ✓"},
        "empty": {"S": ""},
        "total": {"N": f"{index}.{index % 7}5"},
        "big": {"N": "-1.2345678901234567890123456789012345678E+125"},
        "blob": {"B": bytes([index % 256, 0, 255])},
        "paid": {"BOOL": index % 2 == 0},
        "note": {"NULL": True},
        "tags": {"SS": ["a", f"t{index % 5}"]},
        "scores": {"NS": ["1", "2.5", str(index)]} if index not in (1, 2) else {"NS": ["7"]},
        "keys": {"BS": [b"\x01", bytes([index % 256, 7])]} if index % 256 != 1 else {"BS": [b"\x01"]},
        "lines": {"L": [{"S": "x"}, {"N": "1"}, {"L": []}, {"B": b"\x03"}, {"M": {}}]},
        "address": {
            "M": {
                "street": {"S": "Main St"},
                "geo": {"M": {"lat": {"N": "51.5"}, "tags": {"SS": ["z"]}, "raw": {"BS": [b"\x09"]}}},
                "flags": {"L": [{"BOOL": True}, {"NULL": True}, {"NS": ["3"]}]},
            }
        },
    }


def export_table(emu: Emulator, bucket: str, name: str, key: list[str], items: list[dict[str, Any]]) -> str:
    """Fill table `name`, export it with ExportTableToPointInTime, add the export's metadata files
    (moto writes only the data file; these follow AWS's documented layout); the export's folder."""
    db = emu.client("dynamodb")
    db.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": k, "KeyType": t} for k, t in zip(key, ("HASH", "RANGE"), strict=False)],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in key],
        BillingMode="PAY_PER_REQUEST",
    )
    wait_until_active(db, name)  # CREATING for a moment, as on AWS (patch table-creating)
    db.update_continuous_backups(
        TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
    )
    for item in items:
        db.put_item(TableName=name, Item=item)
    arn = db.describe_table(TableName=name)["Table"]["TableArn"]
    export = db.export_table_to_point_in_time(
        TableArn=arn, S3Bucket=bucket, S3Prefix=EXPORT_PREFIX, ExportFormat="DYNAMODB_JSON"
    )["ExportDescription"]
    for _ in range(200):
        described = db.describe_export(ExportArn=export["ExportArn"])["ExportDescription"]
        if described["ExportStatus"] != "IN_PROGRESS":
            break
        time.sleep(0.05)
    assert described["ExportStatus"] == "COMPLETED", described
    assert described["ItemCount"] == len(items)
    s3 = emu.client("s3")
    [data] = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=EXPORT_PREFIX)["Contents"]]
    folder = data.split("/data/", 1)[0] + "/"
    summary = {"version": "2020-06-30", "exportArn": export["ExportArn"], "itemCount": len(items)}
    files = {"itemCount": len(items), "md5Checksum": "x", "etag": "y", "dataFileS3Key": data}
    for key_name, body in {
        "manifest-summary.json": json.dumps(summary),
        "manifest-summary.checksum": "0123abcd",
        "manifest-files.json": json.dumps(files) + "\n",
        "manifest-files.checksum": "4567cdef",
        "_started": "",
    }.items():
        s3.put_object(Bucket=bucket, Key=folder + key_name, Body=body.encode())
    return folder


def table_items(emu: Emulator, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every item as Python values (numbers as Decimal, so 2.50 and 2.5 are one number)."""
    plain = TypeDeserializer().deserialize
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for page in emu.client("dynamodb").get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            found[(item["pk"]["S"], item["sk"]["S"])] = {k: plain(v) for k, v in item.items()}
    return found


def start(tmp_path: Path, source: str, spec: dict[str, Any]) -> dict[str, Any]:
    spec_file, report_path = tmp_path / "spec.json", tmp_path / "report.json"
    spec_file.write_text(json.dumps(spec))
    code = cli.main(["start", "--env", "dev", source, "--spec", str(spec_file), "--report", str(report_path)])
    report: dict[str, Any] = json.loads(report_path.read_text())
    assert code == (0 if report["status"] == "SUCCEEDED" else 1)
    records = report["records"]
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
    return report


def test_an_exported_table_reloads_into_an_existing_table_equal_to_the_original(
    deployed: tuple[Emulator, Deployment], tmp_path: Path
) -> None:
    emu, deployment = deployed
    bucket = deployment.output("SourceBucketName")
    export_table(emu, bucket, "origin", ["pk", "sk"], [every_type(i) for i in range(ITEMS)])

    # The prefix above the export's folder: its manifests and _started are not read as data.
    report = start(
        tmp_path, f"s3://{bucket}/{EXPORT_PREFIX}/", {"format": "dynamodb-json", "shardSizeMiB": 0.01}
    )

    assert report["status"] == "SUCCEEDED", report.get("error")
    assert report["records"] == {
        "read": ITEMS,
        "written": ITEMS,
        "skipped": 0,
        "rejected": 0,
        "duplicates": 0,
    }
    assert report["shards"]["total"] > 1
    original = table_items(emu, "origin")
    assert len(original) == ITEMS
    assert table_items(emu, deployment.output("TableName")) == original


def test_an_export_of_a_table_with_another_key_is_rejected_as_key_schema(
    deployed: tuple[Emulator, Deployment], tmp_path: Path
) -> None:
    emu, deployment = deployed
    bucket = deployment.output("SourceBucketName")
    items = [{"id": {"S": f"i{i}"}, "sk": {"S": "s"}} for i in range(5)]
    folder = export_table(emu, bucket, "other", ["id"], items)

    report = start(
        tmp_path, f"s3://{bucket}/{folder}data/", {"format": "dynamodb-json", "maxRejectedPercent": 100}
    )

    assert report["status"] == "SUCCEEDED", report.get("error")
    assert report["records"]["rejected"] == 5
    assert report["rejects"]["byReason"] == {"key_schema": 5}
    assert report["rejects"]["sample"][0]["reason"] == "key attribute pk (S): the item has no 'pk'"
    assert emu.client("dynamodb").scan(TableName=deployment.output("TableName"))["Count"] == 0


@pytest.mark.parametrize(
    ("first", "refused"),
    [
        ({"Item": {"id": {"S": "a"}}}, "key_schema: key attribute pk (S): the item has no 'pk'"),
        ({"pk": {"S": "a"}, "sk": {"S": "b"}}, "not_an_item"),
        (None, "invalid_json"),  # a CSV file given as DynamoDB JSON
        ({"Item": {"pk": {"S": "a"}, "sk": {"S": "b"}, "n": {"N": "x"}}}, None),  # one bad value: the job's
        ({"Item": {"pk": {"S": "a"}, "sk": {"S": "b"}}}, None),
    ],
)
@pytest.mark.parametrize("gzipped", [False, True])
def test_start_refuses_a_local_export_file_whose_first_item_misses_the_tables_key(
    tmp_path: Path, first: dict[str, Any] | None, refused: str | None, gzipped: bool
) -> None:
    from mapload.environment import OpsError
    from mapload.ops import check_spec

    text = (b"pk,sk\n" if first is None else json.dumps(first).encode() + b"\n") + b"more\n"
    path = tmp_path / ("part.json.gz" if gzipped else "part.json")
    path.write_bytes(gzip.compress(text) if gzipped else text)
    spec, key = {"format": "dynamodb-json"}, {"pk": "S", "sk": "S"}

    if refused is None:
        check_spec(spec, "s3://source-bucket/part.json", key, "run-1", path)
    else:
        with pytest.raises(OpsError) as raised:
            check_spec(spec, "s3://source-bucket/part.json", key, "run-1", path)
        assert "nothing uploaded or started" in str(raised.value)
        assert refused in str(raised.value) and f"(first item of {path})" in str(raised.value)
