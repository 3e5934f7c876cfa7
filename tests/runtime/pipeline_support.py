"""Handler tests: the functions' environment, the whole pipeline without Step Functions, readers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import boto3

REGION = "us-east-1"
ENV = {
    "SOURCE_BUCKETS": "src",
    "STAGING_BUCKET": "stg",
    "LEDGER_TABLE": "ledger",
    "TABLE_NAME": "target",
    "TABLE_ARN": f"arn:aws:dynamodb:{REGION}:123456789012:table/target",
    "TABLE_KEY": json.dumps({"pk": "S", "sk": "S"}),
    "MAX_CONCURRENCY_CAP": "10",
    "WORKER_MEMORY_MIB": "1024",
    "WORKER_TIMEOUT_SECONDS": "900",
    "PLAN_TIMEOUT_SECONDS": "300",
    "PLAN_MEMORY_MIB": "512",
    "LEDGER_TTL_DAYS": "7",
    "WRITE_CONCURRENCY": "4",
}


@dataclass
class FakeContext:
    """What Powertools reads from the Lambda context object."""

    function_name: str = "mapload-worker"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:eu-west-2:123456789012:function:mapload-worker"
    aws_request_id: str = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        """The Worker's deadline (a fresh invocation of a 900 s function)."""
        return 900_000


def run_pipeline(s3: Any, spec: dict[str, Any], run: str = "run-1") -> dict[str, Any]:
    """Plan, every Worker, Finalize — the handlers as the state machine calls them, in order.
    A Plan or Worker failure goes to Finalize as the Catch would hand it over."""
    from handlers import finalize, plan, worker

    state: dict[str, Any] = dict(spec)
    execution = {"name": run, "id": f"arn:{run}"}
    try:
        planned = plan.handle({"input": spec, "execution": execution}, ENV)
        state["plan"] = planned
        manifest = json.loads(s3.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
        for shard in manifest:
            worker.handle({"shard": shard, "job": planned["job"]}, ENV)
    except Exception as error:
        state["error"] = {
            "Error": type(error).__name__,
            "Cause": json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)}),
        }
    return finalize.handle({"state": state, "execution": execution}, ENV)


def scan(table: str = "target") -> dict[tuple[str, str], dict[str, Any]]:
    db = boto3.client("dynamodb", region_name=REGION)
    items: dict[tuple[str, str], dict[str, Any]] = {}
    for page in db.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            items[(item["pk"]["S"], item["sk"]["S"])] = item
    return items


def rejects(s3: Any, report: dict[str, Any]) -> list[dict[str, Any]]:
    location = report["rejects"]["location"]
    if not location:
        return []
    bucket, key = location[5:].split("/", 1)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    return [json.loads(line) for line in body.splitlines()]
