"""The emulator enforces what AWS enforces and moto does not (mapload/emulator/limits.py, the Lambda seam):
each test shows one limit trip the way AWS reports it, on a small state machine of its own."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from mapload.emulator import limits
from mapload.emulator.embedded import ACCOUNT, Deployment, Emulator, EmulatorTimeoutError, FunctionDef
from mapload.local import run_local

pytestmark = pytest.mark.e2e

REGION = "us-east-1"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:limits-probe"


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator("limits", REGION) as emulator:
        role = emulator.client("iam").create_role(RoleName="limits", AssumeRolePolicyDocument="{}")["Role"]
        # A 1 s Timeout, as a template's Timeout sets it.
        probe = FunctionDef("Probe", "limits-probe", FUNCTION, "limit_handlers.handle", {}, 1.0)
        emulator.add_function(probe, role["Arn"])
        yield emulator


def role(emu: Emulator) -> str:
    return str(emu.client("iam").get_role(RoleName="limits")["Role"]["Arn"])


def run(emu: Emulator, definition: dict[str, Any], payload: Any, deadline: float = 120) -> dict[str, Any]:
    sfn = emu.client("stepfunctions")
    name = f"limits-{time.monotonic_ns()}"
    arn = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=role(emu))[
        "stateMachineArn"
    ]
    execution = emu.start(arn, name, payload)
    return emu.wait(execution, interval=0.05, deadline_seconds=deadline)


def invoke(payload_path: str = "$") -> dict[str, Any]:
    """One Lambda task whose every error ends in a Catch(States.ALL): what is caught, succeeds."""
    return {
        "StartAt": "Invoke",
        "States": {
            "Invoke": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": FUNCTION, "Payload.$": payload_path},
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught", "ResultPath": "$.caught"}],
                "End": True,
            },
            "Caught": {"Type": "Pass", "End": True},
        },
    }


def caught_error(described: dict[str, Any]) -> str:
    assert described["status"] == "SUCCEEDED", described
    return str(json.loads(described["output"])["caught"]["Error"])


@pytest.mark.parametrize("kind", ["decimal", "set", "datetime"])
def test_a_result_json_cannot_encode_fails_with_runtime_marshal_error(emu: Emulator, kind: str) -> None:
    assert caught_error(run(emu, invoke(), {"return": kind})) == "Runtime.MarshalError"


def test_a_result_over_6_mb_fails_like_lambda(emu: Emulator) -> None:
    size = limits.LAMBDA_SYNC_PAYLOAD_BYTES
    assert (
        caught_error(run(emu, invoke(), {"return": "bytes", "size": size})) == "Function.ResponseSizeTooLarge"
    )


def test_a_handler_past_its_timeout_fails_with_sandbox_timedout(emu: Emulator) -> None:
    started = time.monotonic()
    assert caught_error(run(emu, invoke(), {"return": "sleep", "seconds": 60})) == "Sandbox.Timedout"
    # Ended at the 1 s Timeout, not when the handler did (a wide margin: the machine may be busy).
    assert time.monotonic() - started < 45


def test_a_handler_within_its_timeout_succeeds(emu: Emulator) -> None:
    described = run(emu, invoke(), {"return": "sleep", "seconds": 0.2})
    assert described["status"] == "SUCCEEDED"
    assert "caught" not in json.loads(described["output"])


@pytest.mark.parametrize(
    ("invocation_type", "size"),
    [
        ("RequestResponse", limits.LAMBDA_SYNC_PAYLOAD_BYTES + 1),
        ("Event", limits.LAMBDA_ASYNC_PAYLOAD_BYTES + 1),
    ],
)
def test_an_oversized_request_is_refused_before_the_handler_runs(
    emu: Emulator, invocation_type: str, size: int
) -> None:
    payload = json.dumps({"return": "echo", "pad": "x" * size}).encode()
    with pytest.raises(ClientError) as refused:
        emu.client("lambda").invoke(FunctionName=FUNCTION, InvocationType=invocation_type, Payload=payload)
    assert refused.value.response["Error"]["Code"] == "RequestEntityTooLargeException"


def test_a_task_result_over_256_kib_fails_the_execution_and_no_catch_sees_it(emu: Emulator) -> None:
    described = run(emu, invoke(), {"return": "bytes", "size": limits.STATE_PAYLOAD_BYTES})
    assert described["status"] == "FAILED"
    assert described["error"] == "States.DataLimitExceeded"


def map_definition(*, result_writer: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Map over the input's items whose children each return ~1 KiB; ResultPath drops it."""
    state: dict[str, Any] = {
        "Type": "Map",
        "ItemsPath": "$.items",
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": "Child",
            "States": {"Child": {"Type": "Pass", "Result": {"pad": "x" * 1024}, "End": True}},
        },
        "ResultPath": None,
        "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught", "ResultPath": "$.caught"}],
        "End": True,
    }
    return {"StartAt": "Shards", "States": {"Shards": state, "Caught": {"Type": "Pass", "End": True}}}


def test_a_map_collecting_over_256_kib_of_results_fails_with_data_limit_exceeded(emu: Emulator) -> None:
    described = run(emu, map_definition(), {"items": list(range(300))})
    assert described["status"] == "FAILED"
    assert described["error"] == "States.DataLimitExceeded"
    # Below the limit the same Map succeeds.
    assert run(emu, map_definition(), {"items": list(range(200))})["status"] == "SUCCEEDED"


@pytest.mark.slow
def test_the_history_limit_fails_the_execution_at_25000_events(emu: Emulator) -> None:
    # Pass + Choice: 4 events a round, for ever; AWS fails it when event 25,000 is not the end.
    definition = {
        "StartAt": "Count",
        "States": {
            "Count": {"Type": "Pass", "Next": "Again"},
            "Again": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.forever", "BooleanEquals": True, "Next": "Count"}],
                "Default": "Done",
            },
            "Done": {"Type": "Succeed"},
        },
    }
    described = run(emu, definition, {"forever": True}, deadline=300)
    assert described["status"] == "FAILED"
    assert described["error"] == limits.HISTORY_LIMIT_ERROR
    assert described["cause"] == limits.HISTORY_LIMIT_CAUSE
    pages = emu.client("stepfunctions").get_paginator("get_execution_history")
    events = [e for page in pages.paginate(executionArn=described["executionArn"]) for e in page["events"]]
    assert len(events) == limits.HISTORY_EVENTS
    assert events[-1]["type"] == "ExecutionFailed"


def test_wait_gives_up_at_its_deadline_naming_the_execution(emu: Emulator) -> None:
    definition = {"StartAt": "Sleep", "States": {"Sleep": {"Type": "Wait", "Seconds": 30, "End": True}}}
    sfn = emu.client("stepfunctions")
    arn = sfn.create_state_machine(name="sleeper", definition=json.dumps(definition), roleArn=role(emu))[
        "stateMachineArn"
    ]
    execution = emu.start(arn, "sleepy", {})
    with pytest.raises(EmulatorTimeoutError, match=r"execution .*sleepy still RUNNING after 0\.\d s"):
        emu.wait(execution, interval=0.05, deadline_seconds=0.3)
    sfn.stop_execution(executionArn=execution)


def test_the_map_writes_its_results_to_staging_as_aws_does(tmp_path: Path) -> None:
    """The synthesized definition's ResultWriter: <run prefix>map-results/<map run id>/manifest.json
    and SUCCEEDED_0.json, one entry per shard; nothing of it in the execution's state."""
    source = tmp_path / "rows.csv"
    source.write_text("id,name\n" + "".join(f"{i},name-{i}\n" for i in range(400)))
    spec = {
        "format": "csv",
        "csv": {"header": True},
        "dynamodb": {"key": {"pk": "ROW#{id}", "sk": "ROW"}, "attributes": {"name": {"field": "name"}}},
        "shardSizeMiB": 0.001,
        "maxConcurrency": 4,
    }
    seen: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        s3 = emu.client("s3")
        bucket = deployment.output("StagingBucketName")
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="jobs/")["Contents"]]
        seen["manifests"] = [k for k in keys if "/map-results/" in k and k.endswith("/manifest.json")]
        seen["objects"] = {
            k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys if "/map-results/" in k
        }

    report = run_local(source, spec, report_path=tmp_path / "report.json", quiet=True, inspect=inspect)
    assert report["status"] == "SUCCEEDED"
    (manifest_key,) = seen["manifests"]
    prefix = f"jobs/{report['jobId']}/{report['runId']}/map-results/"
    assert manifest_key.startswith(prefix)
    manifest = json.loads(seen["objects"][manifest_key])
    map_run_id = manifest["MapRunArn"].rsplit(":", 1)[-1]
    assert manifest_key == f"{prefix}{map_run_id}/manifest.json"
    (succeeded,) = manifest["ResultFiles"]["SUCCEEDED"]
    assert manifest["ResultFiles"]["FAILED"] == manifest["ResultFiles"]["PENDING"] == []
    assert succeeded["Key"] == f"{prefix}{map_run_id}/SUCCEEDED_0.json"
    entries = json.loads(seen["objects"][succeeded["Key"]])
    assert succeeded["Size"] == len(seen["objects"][succeeded["Key"]])
    assert len(entries) == report["shards"]["total"] > 1
    assert sorted(json.loads(e["Output"])["index"] for e in entries) == list(range(len(entries)))
    assert {e["Status"] for e in entries} == {"SUCCEEDED"}


# -- DynamoDB: expression parameters and item size --------------------------------------------


def sets(count: int, *, stem: str = "a", value: str = ":v") -> dict[str, Any]:
    """UpdateItem arguments (table "t") that SET `count` attributes, placeholders `#<stem><i>`."""
    return {
        "TableName": "t",
        "Key": {"pk": {"S": "a"}, "sk": {"S": "b"}},
        "UpdateExpression": "SET " + ",".join(f"#{stem}{i}={value}" for i in range(count)),
        "ExpressionAttributeNames": {f"#{stem}{i}": f"x{i}" for i in range(count)},
        "ExpressionAttributeValues": {":v": {"N": "1"}},
    }


@pytest.fixture
def table(emu: Emulator) -> Any:
    from mapload.tables import create_pk_sk_table

    db = emu.client("dynamodb")
    create_pk_sk_table(db, "t")
    return db


def refusal(call: Any, **arguments: Any) -> str:
    with pytest.raises(ClientError) as refused:
        call(**arguments)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    return str(refused.value.response["Error"]["Message"])


def test_an_expression_over_4_kb_is_refused_like_dynamodb(table: Any) -> None:
    over = sets(20, stem="n" * 240)  # 20 SETs of 240-byte placeholders: about 4.9 KB
    size = len(over["UpdateExpression"])
    assert size > limits.EXPRESSION_BYTES
    assert refusal(table.update_item, **over) == (
        "Invalid UpdateExpression: Expression size has exceeded the maximum allowed size; "
        f"expression size: {size}"
    )
    condition = " OR ".join(["attribute_not_exists(pk)"] * 200)
    assert refusal(
        table.put_item,
        TableName="t",
        Item={"pk": {"S": "a"}, "sk": {"S": "b"}},
        ConditionExpression=condition,
    ).startswith("Invalid ConditionExpression: Expression size has exceeded the maximum allowed size")
    message = refusal(table.transact_write_items, TransactItems=[{"Update": over}])
    assert "Expression size has exceeded the maximum allowed size" in message


def test_an_update_expression_over_300_operators_is_refused_like_dynamodb(table: Any) -> None:
    within = sets(300, value=":v+:v")  # 300 "+": under 4 KB, at the limit
    assert len(within["UpdateExpression"]) <= limits.EXPRESSION_BYTES
    table.update_item(**within)
    assert refusal(table.update_item, **sets(301, value=":v+:v")) == (
        "Invalid UpdateExpression: The expression contains too many operators; operator count: 301"
    )
    functions = sets(2, value="if_not_exists(#a0, :v)")
    assert limits.update_operators(functions["UpdateExpression"]) == 2


def test_the_largest_update_dynamodb_accepts_is_accepted(table: Any) -> None:
    """moto's parser recurses per action: 4 KB of short SET actions (~290) parses in a thread."""
    count = 0
    while len(sets(count + 1)["UpdateExpression"]) <= limits.EXPRESSION_BYTES:
        count += 1
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(table.update_item(**sets(count))))
    thread.start()
    thread.join()
    assert outcome and count > 280
    stored = table.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "b"}})["Item"]
    assert len(stored) == count + 2


def test_an_item_over_400_kb_is_refused_like_dynamodb(table: Any) -> None:
    """Counted as AWS counts: a list of 210,000 nulls is 3 + 2 x 210,000 bytes (moto's own measure
    said 210,000 and accepted it); a 409,000-byte string fits (moto stopped at 405,000)."""
    key = {"pk": {"S": "a"}, "sk": {"S": "c"}}
    nulls = {"L": [{"NULL": True}] * 210_000}
    big = {**key, "v": nulls}
    assert (
        refusal(table.put_item, TableName="t", Item=big) == "Item size has exceeded the maximum allowed size"
    )
    message = refusal(table.transact_write_items, TransactItems=[{"Put": {"TableName": "t", "Item": big}}])
    assert "Item size has exceeded" in message
    batch = {"t": [{"PutRequest": {"Item": big}}]}
    assert "Item size has exceeded" in refusal(table.batch_write_item, RequestItems=batch)
    assert (
        refusal(
            table.update_item,
            TableName="t",
            Key=key,
            UpdateExpression="SET #v = :v",
            ExpressionAttributeNames={"#v": "v"},
            ExpressionAttributeValues={":v": nulls},
        )
        == "Item size to update has exceeded the maximum allowed size"
    )
    # pk, sk, v: 2 + 1 + 2 + 1 + 1 + 409,000 bytes.
    table.put_item(TableName="t", Item={**key, "v": {"S": "x" * 409_000}})
    assert limits.value_bytes("N", "-0012.3400") == 3 and limits.value_bytes("N", "0") == 2
    assert limits.value_bytes("M", {}) == 3


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.from_regex(r"[+-]?[0-9]{0,40}(\.[0-9]{0,40})?([eE][+-]?[0-9]{1,2})?", fullmatch=True),
        st.decimals(allow_nan=False, allow_infinity=False).map(str),
        st.sampled_from(["0", "-0", "0.000", "100", "1.", ".5", "+7", "9" * 29, "1" + "0" * 40, " 1"]),
    )
)
def test_a_numbers_size_counts_the_digits_decimal_keeps(text: str) -> None:
    """The size of a number read from its text is the one Decimal's normalize() gives, for every
    text Decimal reads (the server counts a plain one from its digits)."""
    try:
        number = Decimal(text)
    except InvalidOperation:
        return
    digits = len(number.normalize().as_tuple().digits)
    assert limits.value_bytes("N", text) == (digits + 1) // 2 + 1


def _attribute_values() -> st.SearchStrategy[dict[str, Any]]:
    """Any DynamoDB attribute value, as a request holds it (a binary as base64 text)."""
    text = st.text(max_size=12)
    number = st.one_of(
        st.decimals(allow_nan=False, allow_infinity=False).map(str),
        st.from_regex(r"-?[0-9]{1,30}(\.[0-9]{0,12})?", fullmatch=True),
    )
    binary = st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode())
    scalars = st.one_of(
        text.map(lambda v: {"S": v}),
        number.map(lambda v: {"N": v}),
        binary.map(lambda v: {"B": v}),
        st.booleans().map(lambda v: {"BOOL": v}),
        st.just({"NULL": True}),
        st.lists(text, min_size=1, max_size=4, unique=True).map(lambda v: {"SS": v}),
        st.lists(number, min_size=1, max_size=4, unique=True).map(lambda v: {"NS": v}),
        st.lists(binary, min_size=1, max_size=4, unique=True).map(lambda v: {"BS": v}),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4).map(lambda v: {"L": v}),
            st.dictionaries(text, inner, max_size=4).map(lambda v: {"M": v}),
        ),
        max_leaves=12,
    )


@settings(max_examples=400, deadline=None)
@given(item=st.dictionaries(st.text(min_size=1, max_size=12), _attribute_values(), min_size=1, max_size=6))
def test_no_item_counts_more_than_the_batch_request_that_holds_it(item: dict[str, Any]) -> None:
    """What lets `mapload serve` leave the items of a BatchWriteItem of at most 400 KB unmeasured
    (moto_patches.batch_request): an item's size as DynamoDB counts it is never more than the
    bytes of the tightest JSON request holding it (UTF-8 text unescaped, no spaces)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    request = {"RequestItems": {"t": [{"PutRequest": {"Item": item}}]}}
    body = json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode()
    typed = {name: DynamoType(value) for name, value in item.items()}
    assert limits.item_bytes(typed) <= len(body)


def test_a_batch_request_over_400_kb_still_has_its_items_measured(served: str) -> None:
    """Through the lane: a batch of one item of 399 KB is stored; one whose item is 401 KB (its
    request past 400 KB) is refused as DynamoDB refuses it."""
    db = boto3.client(
        "dynamodb",
        endpoint_url=served,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    db.create_table(
        TableName="sized",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    fits = {"pk": {"S": "a"}, "v": {"S": "x" * (399 * 1024)}}
    db.batch_write_item(RequestItems={"sized": [{"PutRequest": {"Item": fits}}]})
    over = {"pk": {"S": "b"}, "v": {"S": "x" * (401 * 1024)}}
    with pytest.raises(ClientError, match="Item size has exceeded"):
        db.batch_write_item(RequestItems={"sized": [{"PutRequest": {"Item": over}}]})
    assert db.get_item(TableName="sized", Key={"pk": {"S": "a"}})["Item"]["v"]["S"] == "x" * (399 * 1024)
    assert "Item" not in db.get_item(TableName="sized", Key={"pk": {"S": "b"}})
