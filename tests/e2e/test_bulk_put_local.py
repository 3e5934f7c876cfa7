"""The emulator's DynamoDB bulk put items (mapload/emulator/bulk_put.py), driven through boto3 as a
caller drives the service: a good load, the ERROR entries of its report (read back with the
reader Finalize uses, logic/bulk_output.py), Start's refusals (each one line, the right error
code), the ClientToken's idempotence, a cancel, the answers' shapes checked against botocore's
service model, `mapload serve` answering the same, and the model's S3 calls attributed to the role
that started the operation."""

from __future__ import annotations

import datetime
import gzip
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator
from iamcheck import Call, decide

from logic import bulk_output
from logic.bulk_output import ERROR
from mapload.emulator import bulk_put
from mapload.emulator.calls import AwsCall, acting_as, principal, watching
from mapload.emulator.embedded import Emulator

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

REGION = "us-east-1"
TABLE = "target"
BUCKET = "staging"
INPUT = "jobs/j/p/bulk/items/"
OUTPUT = "jobs/j/r/bulk-output/"


def record(pk: str, sk: str = "A", **extra: Any) -> str:
    item = {"pk": {"S": pk}, "sk": {"S": sk}, **extra}
    return json.dumps({"Item": item})


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator("bulk", REGION) as emulator:
        db, s3 = emulator.client("dynamodb"), emulator.client("s3")
        db.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        db.get_waiter("table_exists").wait(TableName=TABLE, WaiterConfig={"Delay": 0.05})
        s3.create_bucket(Bucket=BUCKET)
        yield emulator


def stage(emu: Emulator, objects: dict[str, bytes | str], *, compress: bool = True) -> None:
    s3 = emu.client("s3")
    for name, body in objects.items():
        data = body.encode() if isinstance(body, str) else body
        s3.put_object(Bucket=BUCKET, Key=INPUT + name, Body=gzip.compress(data) if compress else data)


def start_args(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "TableName": TABLE,
        "InputS3Configuration": {
            "S3Bucket": BUCKET,
            "S3KeyPrefix": INPUT,
            "InputFormat": "DYNAMODB_JSON",
            "InputCompressionType": "GZIP",
        },
        "OutputS3Configuration": {"S3Bucket": BUCKET, "S3KeyPrefix": OUTPUT, "OutputType": ["ERROR"]},
        "MaxWriteRequestUnits": 1024,
    }
    args.update(changes)
    return args


def finished(db: Any, arn: str) -> dict[str, Any]:
    bulk_put.MODEL.wait_idle(30)
    described: dict[str, Any] = db.describe_bulk_operation(BulkOperationArn=arn)["BulkOperationDescription"]
    return described


def reported(emu: Emulator, arn: str) -> list[bulk_output.ReportedItem]:
    s3 = emu.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=OUTPUT).get("Contents", [])]
    return bulk_output.read_output(
        keys, lambda key: s3.get_object(Bucket=BUCKET, Key=key)["Body"].read(), arn
    )


def test_a_good_load_writes_every_item_and_reports_nothing(emu: Emulator) -> None:
    stage(emu, {"000000-000.json.gz": "\n".join(record(f"p{i}", n={"N": str(i)}) for i in range(30)) + "\n"})
    stage(emu, {"000001-000.json.gz": record("q", tags={"SS": ["a", "b"]})})
    db = emu.client("dynamodb")
    started = db.start_bulk_put_items(**start_args())["BulkOperationDescription"]
    assert started["BulkOperationStatus"] == "IN_PROGRESS"
    assert started["TableDetails"][0]["TableName"] == TABLE
    described = finished(db, started["BulkOperationArn"])
    assert described["BulkOperationStatus"] == "COMPLETED"
    assert (described["ProcessedItemCount"], described["FailedItemCount"]) == (31, 0)
    assert described["ProcessedInputBytes"] == described["TotalInputBytes"] > 0
    assert isinstance(described["EndTime"], datetime.datetime)
    items = db.scan(TableName=TABLE)["Items"]
    assert len(items) == 31
    assert {"pk": {"S": "p7"}, "sk": {"S": "A"}, "n": {"N": "7"}} in items
    assert reported(emu, started["BulkOperationArn"]) == []


def test_items_it_cannot_write_are_error_entries_naming_object_and_line(emu: Emulator) -> None:
    big = {"S": "x" * (400 * 1024)}
    lines = [
        record("ok1"),
        json.dumps({"Item": {"sk": {"S": "A"}}}),  # no partition key
        json.dumps({"Item": {"pk": {"N": "1"}, "sk": {"S": "A"}}}),  # the key's type is S
        record("big", blob=big),
        "{not json",
        json.dumps({"pk": {"S": "bare"}, "sk": {"S": "A"}}),  # not {"Item": ...}
        json.dumps({"Item": {"pk": {"S": "bad"}, "sk": {"S": "A"}, "n": {"N": 1}}}),  # N holds a number
        record("ok2"),
    ]
    stage(emu, {"000000-000.json.gz": "\n".join(lines)})
    stage(emu, {"000001-000.json.gz": b"not gzip at all"}, compress=False)
    db = emu.client("dynamodb")
    arn = db.start_bulk_put_items(**start_args())["BulkOperationDescription"]["BulkOperationArn"]
    described = finished(db, arn)
    assert described["BulkOperationStatus"] == "COMPLETED_WITH_ERRORS"
    assert (described["ProcessedItemCount"], described["FailedItemCount"]) == (8, 6)
    assert sorted(i["pk"]["S"] for i in db.scan(TableName=TABLE)["Items"]) == ["ok1", "ok2"]
    entries = reported(emu, arn)
    first = INPUT + "000000-000.json.gz"
    assert [(e.kind, e.object_key, e.record, e.code) for e in entries] == [
        (ERROR, first, 1, bulk_put.MISSING_KEY),
        (ERROR, first, 2, bulk_put.KEY_TYPE),
        (ERROR, first, 3, bulk_put.ITEM_TOO_LARGE),
        (ERROR, first, 4, bulk_put.MALFORMED_RECORD),
        (ERROR, first, 5, bulk_put.MALFORMED_RECORD),
        (ERROR, first, 6, bulk_put.INVALID_ITEM),
        (ERROR, INPUT + "000001-000.json.gz", None, bulk_put.UNREADABLE_OBJECT),
    ]
    assert entries[0].item == {"sk": {"S": "A"}} and entries[3].item is None
    assert entries[-1].whole_object and not any(e.whole_object for e in entries[:-1])


def test_errors_not_asked_for_are_counted_but_not_reported(emu: Emulator) -> None:
    stage(emu, {"a.json.gz": "{bad\n" + record("ok")})
    db = emu.client("dynamodb")
    output = {"S3Bucket": BUCKET, "S3KeyPrefix": OUTPUT, "OutputType": ["CONDITION_CHECK_FAILURE"]}
    arn = db.start_bulk_put_items(**start_args(OutputS3Configuration=output))["BulkOperationDescription"][
        "BulkOperationArn"
    ]
    described = finished(db, arn)
    assert (described["BulkOperationStatus"], described["FailedItemCount"]) == ("COMPLETED_WITH_ERRORS", 1)
    assert reported(emu, arn) == []


def refusal(call: Callable[[], Any]) -> tuple[str, str]:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response["Error"]
    return error["Code"], error["Message"]


def unvalidated(emu: Emulator) -> Any:
    """A client that sends what botocore itself would refuse, to see the server's own refusal."""
    return boto3.client("dynamodb", region_name=REGION, config=Config(parameter_validation=False))


def refusals(emu: Emulator) -> dict[str, tuple[Callable[[], Any], str]]:
    db = emu.client("dynamodb")
    raw = unvalidated(emu)
    ion = {**start_args()["InputS3Configuration"], "InputFormat": "ION"}
    zstd = {**start_args()["InputS3Configuration"], "InputCompressionType": "ZSTD"}
    empty = {**start_args()["InputS3Configuration"], "S3KeyPrefix": "nothing/here/"}
    return {
        "missing table": (
            lambda: db.start_bulk_put_items(**start_args(TableName="nope")),
            "ResourceNotFoundException",
        ),
        "under 1,024 units": (
            lambda: raw.start_bulk_put_items(**start_args(MaxWriteRequestUnits=1023)),
            "ValidationException",
        ),
        "Ion input": (
            lambda: db.start_bulk_put_items(**start_args(InputS3Configuration=ion)),
            "ValidationException",
        ),
        "no input objects": (
            lambda: db.start_bulk_put_items(**start_args(InputS3Configuration=empty)),
            "ValidationException",
        ),
        "unknown operation": (
            lambda: db.describe_bulk_operation(
                BulkOperationArn=f"arn:aws:dynamodb:{REGION}:1:table/t/bulk-operation/x"
            ),
            "ResourceNotFoundException",
        ),
        **(
            {}
            if bulk_put.zstd_decompressor() is not None
            else {
                "ZSTD without a library": (
                    lambda: db.start_bulk_put_items(**start_args(InputS3Configuration=zstd)),
                    "ValidationException",
                )
            }
        ),
    }


def test_start_refuses_in_one_line_with_the_service_s_code(emu: Emulator) -> None:
    stage(emu, {"a.json.gz": record("a")})
    for name, (call, code) in refusals(emu).items():
        got, message = refusal(call)
        assert got == code, f"{name}: {got} {message}"
        assert message and "\n" not in message, name


def test_tables_the_service_cannot_load_are_refused(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto has no global tables, index builds or CREATING moments past the first DescribeTable:
    the test marks them on moto's table, as the service would see them."""
    from moto.dynamodb.models import dynamodb_backends

    stage(emu, {"a.json.gz": record("a")})
    db = emu.client("dynamodb")
    table = dynamodb_backends["123456789012"][REGION].tables[TABLE]
    monkeypatch.setattr(table, "replicas", [{"RegionName": "eu-west-1"}], raising=False)
    code, message = refusal(lambda: db.start_bulk_put_items(**start_args()))
    assert (code, "global table" in message) == ("ValidationException", True)
    monkeypatch.setattr(table, "replicas", [], raising=False)

    class Building:  # what moto's GlobalSecondaryIndex is read for
        name, status = "by-name", "CREATING"

        def describe(self) -> dict[str, Any]:
            return {"IndexName": self.name, "IndexStatus": self.status}

    monkeypatch.setattr(table, "global_indexes", [Building()])
    code, message = refusal(lambda: db.start_bulk_put_items(**start_args()))
    assert (code, "building index" in message) == ("ResourceInUseException", True)


def test_more_objects_or_bigger_ones_than_the_service_takes_are_refused(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented 50,000 objects and 5 GB, checked at smaller numbers (staging 50,001 objects
    or a 5 GB one is not a unit test's work)."""
    stage(emu, {"a.json.gz": record("a"), "b.json.gz": record("b"), "c.json.gz": record("c")})
    db = emu.client("dynamodb")
    monkeypatch.setattr(bulk_put, "MAX_INPUT_OBJECTS", 2)
    code, message = refusal(lambda: db.start_bulk_put_items(**start_args()))
    assert (code, "at most 2" in message) == ("LimitExceededException", True)
    monkeypatch.setattr(bulk_put, "MAX_INPUT_OBJECTS", 50_000)
    monkeypatch.setattr(bulk_put, "MAX_OBJECT_BYTES", 10)
    code, message = refusal(lambda: db.start_bulk_put_items(**start_args()))
    assert (code, "a.json.gz" in message) == ("LimitExceededException", True)


def test_a_client_token_starts_one_operation_and_refuses_other_parameters(emu: Emulator) -> None:
    stage(emu, {"a.json.gz": record("a")})
    db = emu.client("dynamodb")
    first = db.start_bulk_put_items(ClientToken="job-run", **start_args())["BulkOperationDescription"]
    again = db.start_bulk_put_items(ClientToken="job-run", **start_args())["BulkOperationDescription"]
    assert again["BulkOperationArn"] == first["BulkOperationArn"]
    assert again["ClientToken"] == "job-run"
    code, message = refusal(
        lambda: db.start_bulk_put_items(ClientToken="job-run", **start_args(MaxWriteRequestUnits=2048))
    )
    assert code == "IdempotentParameterMismatchException" and "\n" not in message
    other = db.start_bulk_put_items(ClientToken="other", **start_args())["BulkOperationDescription"]
    assert other["BulkOperationArn"] != first["BulkOperationArn"]
    listed = db.list_bulk_operations()["BulkOperationsSummaryList"]
    assert [s["BulkOperationArn"] for s in listed] == [other["BulkOperationArn"], first["BulkOperationArn"]]


def test_a_token_older_than_eight_hours_starts_a_new_operation(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage(emu, {"a.json.gz": record("a")})
    db = emu.client("dynamodb")
    first = db.start_bulk_put_items(ClientToken="t", **start_args())["BulkOperationDescription"]
    finished(db, first["BulkOperationArn"])
    later = bulk_put.MODEL.now() + bulk_put.TOKEN_SECONDS + 1
    monkeypatch.setattr(bulk_put.MODEL, "now", lambda: later)
    second = db.start_bulk_put_items(ClientToken="t", **start_args(MaxWriteRequestUnits=4096))
    assert second["BulkOperationDescription"]["BulkOperationArn"] != first["BulkOperationArn"]


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Operations start only when the test sets the event (so a cancel lands while one runs)."""
    go = threading.Event()

    def start(operation: bulk_put.Operation, run: Callable[[], None]) -> threading.Thread:
        def held_run() -> None:
            go.wait(30)
            run()

        thread = threading.Thread(target=held_run, daemon=True)
        thread.start()
        return thread

    monkeypatch.setattr(bulk_put.MODEL, "start_run", start)
    yield go
    go.set()


def test_cancel_stops_the_operation_and_a_finished_one_cannot_be_cancelled(
    emu: Emulator, held: threading.Event
) -> None:
    stage(emu, {"a.json.gz": record("a"), "b.json.gz": record("b")})
    db = emu.client("dynamodb")
    arn = db.start_bulk_put_items(**start_args())["BulkOperationDescription"]["BulkOperationArn"]
    answer = db.cancel_bulk_operation(BulkOperationArn=arn)
    assert answer["BulkOperationStatus"] == "CANCELLING"
    assert db.describe_bulk_operation(BulkOperationArn=arn)["BulkOperationDescription"][
        "BulkOperationStatus"
    ] == ("CANCELLING")
    held.set()
    described = finished(db, arn)
    assert described["BulkOperationStatus"] == "CANCELLED" and "EndTime" in described
    assert db.scan(TableName=TABLE)["Items"] == []
    assert reported(emu, arn) == []  # the manifest is written, with nothing to report
    code, _ = refusal(lambda: db.cancel_bulk_operation(BulkOperationArn=arn))
    assert code == "ValidationException"


def test_an_operation_that_breaks_fails_with_a_code_and_a_message(
    emu: Emulator, held: threading.Event
) -> None:
    """FAILED (the service: "might write some items before"): here the table goes mid-run."""
    stage(emu, {"a.json.gz": record("a")})
    db = emu.client("dynamodb")
    raw = Raw(db)
    arn = db.start_bulk_put_items(**start_args())["BulkOperationDescription"]["BulkOperationArn"]
    db.delete_table(TableName=TABLE)
    held.set()
    described = finished(db, arn)
    assert (described["BulkOperationStatus"], described["FailureCode"]) == ("FAILED", bulk_put.INTERNAL_ERROR)
    assert "deleted" in described["FailureMessage"]
    check_shape(
        raw.bodies["DescribeBulkOperation"],
        raw.model.operation_model("DescribeBulkOperation").output_shape,
        "D",
    )


# -- shapes against botocore's model ------------------------------------------------------------


def check_shape(value: Any, shape: Any, path: str) -> None:
    """Every key of an answer is a member of its output shape, each value of the member's type."""
    kind = shape.type_name
    if kind == "structure":
        assert isinstance(value, dict), path
        for name, member in value.items():
            assert name in shape.members, f"{path}.{name} is not in {shape.name}"
            check_shape(member, shape.members[name], f"{path}.{name}")
        missing = set(shape.required_members) - set(value)
        assert not missing, f"{path} lacks {missing}"
    elif kind == "list":
        assert isinstance(value, list), path
        for index, element in enumerate(value):
            check_shape(element, shape.member, f"{path}[{index}]")
    elif kind == "map":
        assert isinstance(value, dict), path
        for name, element in value.items():
            check_shape(element, shape.value, f"{path}.{name}")
    elif kind == "string":
        assert isinstance(value, str), path
        assert not shape.enum or value in shape.enum, f"{path}: {value} not in {shape.enum}"
    elif kind in ("integer", "long"):
        assert isinstance(value, int) and not isinstance(value, bool), path
        assert value >= shape.metadata.get("min", value), f"{path}: {value} under the minimum"
    elif kind == "timestamp":
        assert isinstance(value, int | float), path
    elif kind == "boolean":
        assert isinstance(value, bool), path
    else:
        raise AssertionError(f"{path}: shape type {kind} not checked")


class Raw:
    """The answers as sent (before botocore parses them): after-call hands over the parsed one, so
    the raw JSON is kept from the HTTP response."""

    def __init__(self, client: Any) -> None:
        self.bodies: dict[str, Any] = {}
        client.meta.events.register("after-call.dynamodb", self._keep)
        self.model = client.meta.service_model

    def _keep(self, http_response: Any, model: Any, **_: Any) -> None:
        self.bodies[model.name] = json.loads(http_response.content or b"{}")


def test_requests_and_answers_have_botocore_s_shapes(emu: Emulator) -> None:
    stage(emu, {"a.json.gz": "{bad\n" + record("a")})
    db = emu.client("dynamodb")
    raw = Raw(db)
    requests = {
        "StartBulkPutItems": start_args(ClientToken="shape", PerformanceTier="STANDARD"),
        "ListBulkOperations": {"MaxResults": 5},
    }
    validator = ParamValidator()
    for name, request in requests.items():
        report = validator.validate(request, raw.model.operation_model(name).input_shape)
        assert not report.has_errors(), report.generate_report()
    arn = db.start_bulk_put_items(**requests["StartBulkPutItems"])["BulkOperationDescription"][
        "BulkOperationArn"
    ]
    finished(db, arn)
    db.describe_bulk_operation(BulkOperationArn=arn)
    db.list_bulk_operations(MaxResults=5)
    with pytest.raises(ClientError):
        db.cancel_bulk_operation(BulkOperationArn=arn)  # finished: refused, answered below running
    for name in ("StartBulkPutItems", "DescribeBulkOperation", "ListBulkOperations"):
        check_shape(raw.bodies[name], raw.model.operation_model(name).output_shape, name)
    for name, call in {
        "DescribeBulkOperation": lambda: db.describe_bulk_operation(BulkOperationArn=arn + "0"),
        "CancelBulkOperation": lambda: db.cancel_bulk_operation(BulkOperationArn=arn + "0"),
    }.items():
        code, _ = refusal(call)
        assert code in {shape.name for shape in raw.model.operation_model(name).error_shapes}, name


def test_cancel_s_answer_has_botocore_s_shape(emu: Emulator, held: threading.Event) -> None:
    stage(emu, {"a.json.gz": record("a")})
    db = emu.client("dynamodb")
    raw = Raw(db)
    arn = db.start_bulk_put_items(**start_args())["BulkOperationDescription"]["BulkOperationArn"]
    db.cancel_bulk_operation(BulkOperationArn=arn)
    check_shape(
        raw.bodies["CancelBulkOperation"], raw.model.operation_model("CancelBulkOperation").output_shape, "C"
    )
    held.set()


def test_list_pages_with_next_token(emu: Emulator) -> None:
    stage(emu, {"a.json.gz": record("a")})
    db = emu.client("dynamodb")
    arns = [
        db.start_bulk_put_items(ClientToken=f"t{i}", **start_args())["BulkOperationDescription"][
            "BulkOperationArn"
        ]
        for i in range(3)
    ]
    pages = list(db.get_paginator("list_bulk_operations").paginate(PaginationConfig={"PageSize": 2}))
    assert [len(p["BulkOperationsSummaryList"]) for p in pages] == [2, 1]
    assert [s["BulkOperationArn"] for p in pages for s in p["BulkOperationsSummaryList"]] == arns[::-1]


# -- IAM: the model's S3 calls are the caller's --------------------------------------------------


def test_the_model_s_s3_calls_are_attributed_to_the_role_that_started_it(emu: Emulator) -> None:
    stage(emu, {"a.json.gz": record("a") + "\n{bad"})
    table_arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/{TABLE}"
    grants = [
        {"Effect": "Allow", "Action": "dynamodb:StartBulkPutItems", "Resource": table_arn},
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}"},
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/{INPUT}*"},
        {"Effect": "Allow", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{BUCKET}/{OUTPUT}*"},
    ]
    # The autouse IAM check (tests/iamcheck.py) then finds every observed call allowed; without
    # the last grant, the model's report writes would be denied.
    starter = principal("function StartBulkPut", "StartRole", "123456789012", grants)
    narrow = principal("function StartBulkPut", "StartRole", "123456789012", grants[:-1])
    seen: list[AwsCall] = []
    db = emu.client("dynamodb")
    with watching(seen.append):
        with acting_as(starter):
            started = db.start_bulk_put_items(**start_args(TableName=table_arn))  # the ARN names it too
            arn = started["BulkOperationDescription"]["BulkOperationArn"]
        finished(db, arn)
    mine = {(c.operation, resource) for c in seen if c.principal == starter for _, resource in c.needs}
    folder = bulk_output.operation_folder(OUTPUT, arn)
    assert mine == {
        ("dynamodb:StartBulkPutItems", f"arn:aws:dynamodb:{REGION}:123456789012:table/{TABLE}"),
        ("s3:ListObjectsV2", f"arn:aws:s3:::{BUCKET}"),
        ("s3:GetObject", f"arn:aws:s3:::{BUCKET}/{INPUT}a.json.gz"),
        ("s3:PutObject", f"arn:aws:s3:::{BUCKET}/{folder}error-00000.jsonl.gz"),
        ("s3:PutObject", f"arn:aws:s3:::{BUCKET}/{folder}manifest.json"),
    }
    writes = [Call(starter, a, r) for c in seen if c.operation == "s3:PutObject" for a, r in c.needs]
    assert writes and all(decide(starter.statements, w).allowed for w in writes)
    assert not any(decide(narrow.statements, w).allowed for w in writes)
    listing = next(c for c in seen if c.operation == "s3:ListObjectsV2")
    assert ("s3:prefix", INPUT) in listing.context
    assert all(c.principal is None for c in seen if c.operation.startswith("dynamodb:Describe"))


# -- `mapload serve` -------------------------------------------------------------------------------


def test_mapload_serve_answers_the_four_operations(served: str) -> None:
    kwargs = {
        "region_name": REGION,
        "endpoint_url": served,
        "aws_access_key_id": "k",
        "aws_secret_access_key": "s",
    }
    db, s3 = boto3.client("dynamodb", **kwargs), boto3.client("s3", **kwargs)
    db.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    db.get_waiter("table_exists").wait(TableName=TABLE, WaiterConfig={"Delay": 0.05})
    s3.create_bucket(Bucket=BUCKET)
    body = "\n".join(json.dumps({"Item": {"pk": {"S": f"p{i}"}}}) for i in range(5)) + "\n{bad"
    s3.put_object(Bucket=BUCKET, Key=INPUT + "a.json", Body=body.encode())
    source = {**start_args()["InputS3Configuration"], "InputCompressionType": "NONE"}
    arn = db.start_bulk_put_items(**start_args(InputS3Configuration=source))["BulkOperationDescription"][
        "BulkOperationArn"
    ]
    db.get_waiter("bulk_operation_completed").wait(BulkOperationArn=arn, WaiterConfig={"Delay": 0.1})
    described = db.describe_bulk_operation(BulkOperationArn=arn)["BulkOperationDescription"]
    assert (described["BulkOperationStatus"], described["ProcessedItemCount"]) == (
        "COMPLETED_WITH_ERRORS",
        6,
    )
    assert db.scan(TableName=TABLE, Select="COUNT")["Count"] == 5
    assert [s["BulkOperationArn"] for s in db.list_bulk_operations()["BulkOperationsSummaryList"]] == [arn]
    code, _ = refusal(lambda: db.cancel_bulk_operation(BulkOperationArn=arn))
    assert code == "ValidationException"


def test_the_kms_calls_of_encrypted_input_and_output_are_the_caller_s(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3 decrypts an SSE-KMS input object and generates a data key for an output object with the
    reader's and writer's permissions: the bucket's key for the input, the request's
    S3SseKmsKeyId for the output."""
    from mapload.emulator import calls

    stage(emu, {"a.json.gz": record("a")})
    bucket_key = f"arn:aws:kms:{REGION}:123456789012:key/staging"
    output_key = f"arn:aws:kms:{REGION}:123456789012:key/reports"
    monkeypatch.setitem(calls.WATCHER.keys, f"arn:aws:s3:::{BUCKET}", bucket_key)
    everything = [{"Effect": "Allow", "Action": ["dynamodb:*", "s3:*", "kms:*"], "Resource": "*"}]
    starter = principal("function StartBulkPut", "StartRole", "123456789012", everything)
    seen: list[AwsCall] = []
    db = emu.client("dynamodb")
    output = {
        "S3Bucket": BUCKET,
        "S3KeyPrefix": OUTPUT,
        "OutputType": ["ERROR"],
        "S3SseAlgorithm": "KMS",
        "S3SseKmsKeyId": output_key,
    }
    with watching(seen.append):
        with acting_as(starter):
            started = db.start_bulk_put_items(**start_args(OutputS3Configuration=output))
        finished(db, started["BulkOperationDescription"]["BulkOperationArn"])
    kms = {(c.operation, k.key, k.actions) for c in seen for k in c.kms}
    assert kms == {
        ("s3:GetObject", bucket_key, ("kms:Decrypt",)),
        ("s3:PutObject", output_key, ("kms:GenerateDataKey",)),
    }
    assert all(c.principal == starter for c in seen if c.kms)
