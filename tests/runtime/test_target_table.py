"""A job names its target table (`dynamodb.table`) among those its environment allows (TABLES):
Plan checks it is allowed, exists, is ACTIVE and has the key the input fills, before any shard;
every Worker writes it; the report names it (issue 45)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import boto3
import pytest
from pipeline_support import ENV, REGION, scan

from handlers import finalize, plan, prepare, worker
from logic import tables
from logic.errors import InputValidationError
from logic.spec.parse import parse_spec, spec_to_json

pytestmark = pytest.mark.runtime

# This environment may load its own table ("target"), "orders" and every "catalog-..." table.
TABLES_ENV = {**ENV, "TABLES": "orders,catalog-*"}
CSV = b"sku,name,price\n1,pen,2.5\n2,ink,7\n3,pad,1\n"
CATALOG = {
    "key": {"sku": "{sku}"},
    "attributes": {"name": "{name}", "price": {"field": "price", "type": "N"}},
}


def _table(name: str, key: dict[str, str]) -> None:
    db = boto3.client("dynamodb", region_name=REGION)
    db.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **tables.key_schema(key))


def _run(aws: Any, dynamodb: dict[str, Any], run: str = "run-1") -> dict[str, Any]:
    event = {
        "input": {"source": "s3://src/c.csv", "format": "csv", "shardSizeMiB": 0.001, "dynamodb": dynamodb},
        "execution": {"name": run, "id": f"arn:{run}"},
    }
    planned = plan.handle(event, TABLES_ENV)
    manifest = aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read()
    for shard in json.loads(manifest):
        worker.handle({"shard": shard, "job": planned["job"]}, ENV)  # the Worker's own env names no list
    return finalize.handle({"state": {"plan": planned}, "execution": {"name": run}}, ENV)


def _staged(aws: Any) -> list[str]:
    return [o["Key"] for o in aws.list_objects_v2(Bucket="stg").get("Contents", [])]


def test_a_job_loads_the_table_it_names_with_that_tables_key(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="c.csv", Body=CSV)
    _table("catalog-eu", {"sku": "N"})

    result = _run(aws, {**CATALOG, "table": "catalog-eu"})

    db = boto3.client("dynamodb", region_name=REGION)
    items = db.scan(TableName="catalog-eu")["Items"]
    assert sorted(item["sku"]["N"] for item in items) == ["1", "2", "3"]  # typed by the table's key
    assert scan() == {}  # nothing in the environment's own table
    assert result["status"] == "SUCCEEDED"
    assert result["report"]["dynamodb"]["table"] == "catalog-eu"
    assert (
        result["report"]["dynamodb"]["tableArn"] == f"arn:aws:dynamodb:{REGION}:123456789012:table/catalog-eu"
    )


def test_a_job_naming_no_table_loads_the_environments_own(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="c.csv", Body=CSV)
    _run(aws, {"key": {"pk": "{sku}", "sk": "X"}})
    assert len(scan()) == 3


@pytest.mark.parametrize(
    ("table", "key", "field", "message"),
    [
        (
            "payroll",
            CATALOG["key"],
            "dynamodb.table",
            "table 'payroll' is not one this environment may load: its `tables` setting allows "
            "catalog-*, orders, target",
        ),
        (
            "catalog-missing",
            CATALOG["key"],
            "dynamodb.table",
            "table 'catalog-missing' does not exist in this environment's account and region",
        ),
        (
            "orders",
            {"pk": "{sku}"},
            "dynamodb.key",
            "table 'orders' has the key order (S), line (N), but dynamodb.key gives pk: give a template "
            "for exactly the table's key attributes",
        ),
    ],
)
def test_plan_refuses_a_table_in_one_line_before_any_shard(
    aws: Any, table: str, key: dict[str, str], field: str, message: str
) -> None:
    aws.put_object(Bucket="src", Key="c.csv", Body=CSV)
    _table("orders", {"order": "S", "line": "N"})
    with pytest.raises(InputValidationError) as refused:
        _run(aws, {"key": key, "table": table})
    assert (refused.value.field, refused.value.message) == (field, message)
    assert "\n" not in str(refused.value)
    assert _staged(aws) == []  # no manifest, so no shard


def test_a_table_not_active_is_refused() -> None:
    with pytest.raises(InputValidationError, match="table 'orders' is CREATING, not ACTIVE"):
        tables.check_ready("orders", {"TableStatus": "CREATING", "KeySchema": [], "AttributeDefinitions": []})


def test_names_and_prefixes_allow_exactly_their_tables() -> None:
    allowed = ["orders", "catalog-*"]
    assert [
        tables.allows(allowed, n) for n in ("orders", "orders2", "catalog-", "catalog-x", "catalogx")
    ] == [
        True,
        False,
        True,
        True,
        False,
    ]


def test_the_named_table_stays_out_of_the_normalized_form_when_absent() -> None:
    raw = {"source": "s3://src/a.csv", "format": "csv", "dynamodb": {"key": {"pk": "{a}", "sk": "X"}}}
    absent = spec_to_json(parse_spec(raw, table_key={"pk": "S", "sk": "S"}, execution_name="j"))
    assert "table" not in absent["dynamodb"]
    named = {**raw, "dynamodb": {**raw["dynamodb"], "table": "orders"}}
    given = spec_to_json(parse_spec(named, table_key={"pk": "S", "sk": "S"}, execution_name="j"))
    assert given["dynamodb"]["table"] == "orders"
    with pytest.raises(InputValidationError, match=r"^dynamodb\.table: not a DynamoDB table name"):
        parse_spec(
            {**raw, "dynamodb": {**raw["dynamodb"], "table": "no"}}, table_key={"pk": "S"}, execution_name="j"
        )


def test_prepare_leaves_a_named_tables_key_to_plan(aws: Any) -> None:
    # The environment's table is keyed pk/sk; the named one by sku: Prepare must not refuse it.
    aws.put_object(Bucket="src", Key="c.csv.gz", Body=gzip.compress(CSV))
    event = {
        "input": {
            "source": "s3://src/c.csv.gz",
            "format": "csv",
            "dynamodb": {**CATALOG, "table": "catalog-eu"},
        },
        "execution": {"name": "run-1"},
    }
    assert prepare.handle(event, ENV)["compressed"] == 1


def test_the_report_of_a_refused_table_names_the_table_asked_for(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="c.csv", Body=CSV)
    state = {"source": "s3://src/c.csv", "format": "csv", "dynamodb": {**CATALOG, "table": "payroll"}}
    try:
        plan.handle({"input": state, "execution": {"name": "run-1", "id": "arn:run-1"}}, TABLES_ENV)
    except InputValidationError as error:
        state["error"] = {"Error": "InputValidationError", "Cause": json.dumps({"errorMessage": str(error)})}
    result = finalize.handle({"state": state, "execution": {"name": "run-1"}}, ENV)
    assert result["status"] == "FAILED"
    assert result["report"]["dynamodb"]["table"] == "payroll"
    assert "its `tables` setting allows" in result["cause"]


def test_the_ledger_is_never_a_target_even_when_a_prefix_matches_it(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="c.csv", Body=CSV)
    event = {
        "input": {
            "source": "s3://src/c.csv",
            "format": "csv",
            "dynamodb": {"key": {"pk": "{sku}", "sk": "X"}, "table": "ledger"},
        },
        "execution": {"name": "run-1", "id": "arn:run-1"},
    }
    with pytest.raises(InputValidationError, match="table 'ledger' is this environment's ledger"):
        plan.handle(event, {**ENV, "TABLES": "*"})


def test_estimate_measures_a_spec_that_names_its_table(tmp_path: Any) -> None:
    from mapload import measure

    source = tmp_path / "c.csv"
    source.write_bytes(CSV)
    measured = measure.measure(source, {"format": "csv", "dynamodb": {**CATALOG, "table": "catalog-eu"}})
    assert measured.rows == 3


def test_start_leaves_a_named_tables_key_to_plan(tmp_path: Any) -> None:
    # `mapload start` checks a spec against the environment's TableKey (pk, sk) before uploading:
    # a spec naming a table keyed by sku is Plan's to check, not refused here.
    from mapload.environment import OpsError
    from mapload.ops import check_spec

    source = tmp_path / "c.csv"
    source.write_bytes(CSV)
    named = {"format": "csv", "dynamodb": {**CATALOG, "table": "catalog-eu"}}
    check_spec(named, "s3://src/c.csv", {"pk": "S", "sk": "S"}, "run-1", source)
    with pytest.raises(OpsError, match=r"dynamodb\.key\.sku: not a key attribute of the table"):
        check_spec({"format": "csv", "dynamodb": CATALOG}, "s3://src/c.csv", {"pk": "S", "sk": "S"}, "run-1")
