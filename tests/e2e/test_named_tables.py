"""A table per load through run-local (issue 45): two files into two named tables, each created with
its spec's key and said so; the Worker's role allows exactly what it calls (the IAM check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from logic.tables import key_schema
from mapload.emulator.embedded import Deployment, Emulator
from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

ORDERS = {
    "format": "csv",
    "dynamodb": {
        "table": "orders",
        "key": {"order": "{order}", "line": "{line}"},
        "attributes": {"sku": "{sku}"},
    },
}
CATALOG = {
    "format": "csv",
    "dynamodb": {"table": "catalog-eu", "key": {"sku": "SKU#{sku}"}, "attributes": {"name": "{name}"}},
}


def test_two_files_go_into_two_named_tables_each_created_with_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders, catalog = tmp_path / "orders.csv", tmp_path / "catalog.csv"
    orders.write_text("order,line,sku\n" + "".join(f"O{i // 3},{i % 3},S{i % 7}\n" for i in range(30)))
    catalog.write_text("sku,name\n" + "".join(f"S{i},thing {i}\n" for i in range(7)))
    seen: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        db = emu.client("dynamodb")
        seen["own"] = db.scan(TableName=deployment.output("TableName"), Select="COUNT")["Count"]
        for name in ("orders", "catalog-eu"):
            try:
                table = db.describe_table(TableName=name)["Table"]
            except db.exceptions.ResourceNotFoundException:
                continue
            seen[name] = (
                [(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]],
                db.scan(TableName=name, Select="COUNT")["Count"],
            )

    first = run_local(orders, ORDERS, report_path=tmp_path / "orders.json", inspect=inspect)
    printed = capsys.readouterr().out
    assert first["status"] == "SUCCEEDED", first.get("error")
    assert first["dynamodb"]["table"] == "orders"
    assert first["dynamodb"]["tableArn"].endswith(":table/orders")
    assert seen["orders"] == ([("order", "HASH"), ("line", "RANGE")], 30)
    assert seen["own"] == 0
    assert "  table     orders" in printed
    assert "  created   table orders (key order S, line S): the spec named it and it did not exist" in printed

    second = run_local(catalog, CATALOG, report_path=tmp_path / "catalog.json", quiet=True, inspect=inspect)
    assert second["status"] == "SUCCEEDED", second.get("error")
    assert second["dynamodb"]["table"] == "catalog-eu"
    assert seen["catalog-eu"] == ([("sku", "HASH")], 7)


def test_an_existing_named_table_with_another_key_is_refused_before_any_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders = tmp_path / "orders.csv"
    orders.write_text("order,line,sku\nO1,1,S1\n")

    def prepare(emu: Emulator) -> None:
        db = emu.client("dynamodb")
        db.create_table(TableName="orders", BillingMode="PAY_PER_REQUEST", **key_schema({"id": "N"}))

    report = run_local(orders, ORDERS, report_path=tmp_path / "r.json", prepare=prepare)
    printed = capsys.readouterr().out
    assert report["status"] == "FAILED"
    assert report["shards"]["total"] == 0
    assert report["error"]["type"] == "InputValidationError"
    assert report["error"]["message"] == (
        "dynamodb.key: table 'orders' has the key id (N), but dynamodb.key gives order, line: give a "
        "template for exactly the table's key attributes"
    )
    assert "created" not in printed


def test_on_mapload_serve_the_named_table_is_created_once_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a kept endpoint the table outlives the run: the next run finds it and creates nothing."""
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", served)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", served)
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("sku,name\n" + "".join(f"S{i},thing {i}\n" for i in range(5)))

    first = run_local(catalog, CATALOG, report_path=tmp_path / "r1.json")
    assert "  created   table catalog-eu (key sku S)" in capsys.readouterr().out
    second = run_local(catalog, CATALOG, report_path=tmp_path / "r2.json")
    assert "created" not in capsys.readouterr().out

    keys = {"aws_access_key_id": "x", "aws_secret_access_key": "x"}
    db = boto3.client("dynamodb", endpoint_url=served, region_name="us-east-1", **keys)
    assert first["status"] == second["status"] == "SUCCEEDED"
    assert db.scan(TableName="catalog-eu", Select="COUNT")["Count"] == 5
