"""DynamoDB's bulk put items (StartBulkPutItems, DescribeBulkOperation, ListBulkOperations,
CancelBulkOperation) on the emulator's own S3 and DynamoDB: moto 5.2.5 has none of the four.

A real local model, as the local Neptune loader is one for Neptune (neptune_local.py): StartBulkPutItems
refuses what the documentation says the service refuses, then the operation runs in its own
thread, reads every object under the input prefix from the emulator's S3 (GZIP or NONE), parses
each DynamoDB JSON line, validates the item (well-formed DynamoDB JSON, the key attributes present
with the table's types, at most 400 KB as DynamoDB counts it) and puts it into the emulator's table
(moto's backend, with the emulator's patches: the write lock, the item size), keeps the statuses and
counters DescribeBulkOperation answers, and at its end writes the ERROR report and the manifest
under the output prefix with logic/bulk_output.py's encoders (the reader Finalize uses: one
source of truth for a layout the documentation does not state). docs/BULK_PUT_ITEMS.md lists
what each behaviour rests on: a page and section, or "the emulator's choice".

Where it is less than the service: it reads no Ion and, with no zstd library installed, no ZSTD
(both refused at Start, in one line); it evaluates no per-item condition expressions (their record
syntax could not be confirmed: a record with anything but `Item` is an ERROR entry), so it writes
no CONDITION_CHECK_FAILURE report; it does not throttle to MaxWriteRequestUnits, models no tier,
no quotas on concurrent operations and no BulkOperationUsage; moto has no global tables and no
index builds, so those refusals act on what a test marks on moto's table (`replicas`, an index's
`status`). The service reads the input and writes the output with the caller's permissions (the
documentation reachable here does not say otherwise; ImportTable does so): the model's S3 calls
are passed to the call observers as the caller's (calls.Watcher.s3_call_for), so the IAM check
sees what the role that started the operation must be granted.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from logic import bulk_output
from logic.bulk_output import ERROR, Manifest, Report, ReportedItem
from mapload.emulator import calls, limits

# The documented limits (docs/BULK_PUT_ITEMS.md): MaxWriteRequestUnits at least 1,024 (API
# reference); up to 50,000 input objects of at most 5 GB each (BulkPutItems.BestPractices); a
# ClientToken holds for 8 hours (API reference); ListBulkOperations covers 90 days, 10 a page by
# default, at most 25 (API reference, botocore's model).
MIN_WRITE_UNITS: Final = 1024
MAX_INPUT_OBJECTS: Final = 50_000
MAX_OBJECT_BYTES: Final = 5 * 1000**3
TOKEN_SECONDS: Final = 8 * 3600.0
LIST_SECONDS: Final = 90 * 86400.0
LIST_PAGE: Final = 10
LIST_MAX: Final = 25

IN_PROGRESS: Final = "IN_PROGRESS"
COMPLETED: Final = "COMPLETED"
COMPLETED_WITH_ERRORS: Final = "COMPLETED_WITH_ERRORS"
CANCELLING: Final = "CANCELLING"
CANCELLED: Final = "CANCELLED"
FAILED: Final = "FAILED"
RUNNING: Final = (IN_PROGRESS, CANCELLING)

# The emulator's codes in its ERROR entries and FailureCode (the documentation names none).
MALFORMED_RECORD: Final = "MALFORMED_RECORD"
INVALID_ITEM: Final = "INVALID_ITEM"
MISSING_KEY: Final = "MISSING_KEY_ATTRIBUTE"
KEY_TYPE: Final = "KEY_ATTRIBUTE_TYPE_MISMATCH"
ITEM_TOO_LARGE: Final = "ITEM_TOO_LARGE"
UNREADABLE_OBJECT: Final = "UNREADABLE_OBJECT"
INTERNAL_ERROR: Final = "INTERNAL_ERROR"

_SCALARS: Final = {"S": str, "N": str, "B": str, "BOOL": bool, "NULL": bool}
_SETS: Final = ("SS", "NS", "BS")


def zstd_decompressor() -> Callable[[bytes], bytes] | None:
    """ZSTD, when a zstd library is installed (Python 3.14's compression.zstd or zstandard)."""
    try:
        from compression import zstd  # type: ignore[import-not-found]

        return zstd.decompress  # type: ignore[no-any-return]
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found]

        def decompress(data: bytes) -> bytes:
            return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))

        return decompress
    except ImportError:
        return None


class BulkPutError(Exception):
    """A request the service refuses: `code` is DynamoDB's error code (the answer's `__type`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _validation(message: str) -> BulkPutError:
    return BulkPutError("ValidationException", message)


@dataclass
class Operation:
    arn: str
    account: str
    region: str
    table: str  # the table's name
    table_id: str
    request: dict[str, Any]  # the StartBulkPutItems parameters
    token: str | None
    who: calls.Principal | None  # whose permissions read the input and write the output
    inputs: list[tuple[str, int]]  # (key, size) of every input object
    started: float
    status: str = IN_PROGRESS
    ended: float | None = None
    processed: int = 0
    failed: int = 0
    processed_bytes: int = 0
    failure_code: str | None = None
    failure_message: str | None = None
    entries: list[ReportedItem] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def input(self) -> dict[str, Any]:
        return dict(self.request["InputS3Configuration"])

    @property
    def output(self) -> dict[str, Any]:
        return dict(self.request["OutputS3Configuration"])

    def description(self) -> dict[str, Any]:
        """BulkOperationDescription, as botocore's model names its members."""
        described: dict[str, Any] = {
            "BulkOperationArn": self.arn,
            "BulkOperationStatus": self.status,
            "TableDetails": [{"TableName": self.request["TableName"], "TableId": self.table_id}],
            "InputS3Configuration": self.input,
            "OutputS3Configuration": self.output,
            "StartTime": self.started,
            "ProcessedItemCount": self.processed,
            "FailedItemCount": self.failed,
            "ProcessedInputBytes": self.processed_bytes,
            "TotalInputBytes": sum(size for _key, size in self.inputs),
            "PerformanceTier": self.request.get("PerformanceTier", "STANDARD"),
        }
        if self.token is not None:
            described["ClientToken"] = self.token
        if "MaxWriteRequestUnits" in self.request:
            described["MaxWriteRequestUnits"] = self.request["MaxWriteRequestUnits"]
        if self.ended is not None:
            described["EndTime"] = self.ended
        if self.failure_code is not None:
            described["FailureCode"] = self.failure_code
            described["FailureMessage"] = self.failure_message or ""
        return described

    def summary(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "BulkOperationArn": self.arn,
            "BulkOperationStatus": self.status,
            "StartTime": self.started,
        }
        if self.ended is not None:
            found["EndTime"] = self.ended
        return found


# How an operation runs once Start answers: `start(operation, run)` calls `run()` and returns the
# thread doing it (joined on close), or None when the caller runs it (tests hold it back).
Start = Callable[[Operation, Callable[[], None]], threading.Thread | None]


def in_own_thread(operation: Operation, run: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=run, name=f"bulk-put-{operation.arn[-8:]}", daemon=True)
    thread.start()
    return thread


class BulkPutModel:
    """Every bulk operation of this process's emulator (moto's backends are process-wide too)."""

    def __init__(self, *, now: Callable[[], float] = time.time, start: Start = in_own_thread) -> None:
        self.now = now
        self.start_run = start
        self.operations: dict[str, Operation] = {}
        self._tokens: dict[tuple[str, str, str], str] = {}  # (account, region, token) -> arn
        self._lock = threading.Lock()
        self._runs: list[threading.Thread] = []
        self._table_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    # -- the four operations -----------------------------------------------------------------

    def start(
        self, account: str, region: str, request: Mapping[str, Any], who: calls.Principal | None
    ) -> dict[str, Any]:
        """StartBulkPutItems: the new (or, for the same token and parameters, the earlier)
        operation's description; BulkPutError for what the service refuses."""
        request = dict(request)
        token = request.pop("ClientToken", None)
        with self._lock:
            if token is not None:
                earlier = self._tokens.get((account, region, token))
                operation = self.operations.get(earlier or "")
                if operation is not None and self.now() - operation.started < TOKEN_SECONDS:
                    if operation.request != request:
                        raise BulkPutError(
                            "IdempotentParameterMismatchException",
                            f"ClientToken {token} was used with other parameters within 8 hours",
                        )
                    return operation.description()
            self._check_request(request)
            table, name = self._table(account, region, str(request["TableName"]))
            inputs = self._inputs(account, region, request["InputS3Configuration"])
            arn = f"arn:aws:dynamodb:{region}:{account}:table/{name}/bulk-operation/{uuid.uuid4()}"
            operation = Operation(
                arn, account, region, name, self._table_id(table), request, token, who, inputs, self.now()
            )
            self.operations[arn] = operation
            if token is not None:
                self._tokens[(account, region, token)] = arn
        source = operation.input
        calls.WATCHER.s3_call_for(
            who, "ListObjectsV2", source["S3Bucket"], None, region, prefix=source.get("S3KeyPrefix", "")
        )
        described = operation.description()  # as accepted, before the run moves it on
        run = self.start_run(operation, lambda: self._run(operation))
        if run is not None:
            self._runs.append(run)
        return described

    def describe(self, account: str, region: str, arn: str) -> dict[str, Any]:
        return self._operation(account, region, arn).description()

    def cancel(self, account: str, region: str, arn: str) -> dict[str, Any]:
        operation = self._operation(account, region, arn)
        with self._lock:
            if operation.status not in RUNNING:
                raise _validation(f"bulk operation {arn} is {operation.status}: there is nothing to cancel")
            operation.status = CANCELLING
        return {"BulkOperationArn": arn, "BulkOperationStatus": CANCELLING}

    def list_operations(
        self, account: str, region: str, max_results: int | None, next_token: str | None
    ) -> dict[str, Any]:
        """The account's and Region's operations of the last 90 days, the most recent first."""
        limit = LIST_PAGE if max_results is None else int(max_results)
        if not 1 <= limit <= LIST_MAX:
            raise _validation(f"MaxResults must be from 1 to {LIST_MAX}")
        newest = [
            op
            for op in reversed(self.operations.values())
            if op.account == account and op.region == region and self.now() - op.started < LIST_SECONDS
        ]
        begin = 0
        if next_token is not None:
            try:
                begin = int(next_token, 16)
            except ValueError:
                raise _validation("NextToken is not one ListBulkOperations gave") from None
        page = newest[begin : begin + limit]
        answer: dict[str, Any] = {"BulkOperationsSummaryList": [op.summary() for op in page]}
        if begin + limit < len(newest):
            answer["NextToken"] = f"{begin + limit:016x}"  # the model's pattern: ([0-9a-f]{16})+
        return answer

    # -- waiting and closing -----------------------------------------------------------------

    def active(self) -> bool:
        return any(op.status in RUNNING for op in list(self.operations.values()))

    def wait_idle(self, seconds: float) -> None:
        """Until no operation runs, or `seconds` have passed."""
        deadline = time.monotonic() + seconds
        for operation in list(self.operations.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if operation.status in RUNNING:
                operation.done.wait(left)

    def close(self) -> None:
        """Cancel what still runs, wait for it, forget every operation (the emulator's exit)."""
        with self._lock:
            for operation in self.operations.values():
                if operation.status == IN_PROGRESS:
                    operation.status = CANCELLING
        for run in list(self._runs):
            run.join(timeout=60)
        with self._lock:
            self._runs.clear()
            self.operations.clear()
            self._tokens.clear()

    # -- Start's checks ------------------------------------------------------------------------

    @staticmethod
    def _check_request(request: Mapping[str, Any]) -> None:
        """What the service refuses of the request itself (botocore checks these too, unless a
        caller turns its validation off)."""
        for name in ("TableName", "InputS3Configuration", "OutputS3Configuration"):
            if not request.get(name):
                raise _validation(f"{name} is required")
        source, target = request["InputS3Configuration"], request["OutputS3Configuration"]
        units = request.get("MaxWriteRequestUnits")
        if units is not None and int(units) < MIN_WRITE_UNITS:
            raise _validation(f"MaxWriteRequestUnits must be at least {MIN_WRITE_UNITS:,}, not {units}")
        if not source.get("S3Bucket") or not source.get("InputFormat"):
            raise _validation("InputS3Configuration needs S3Bucket and InputFormat")
        if not target.get("S3Bucket") or not target.get("OutputType"):
            raise _validation("OutputS3Configuration needs S3Bucket and OutputType")
        if source["InputFormat"] != "DYNAMODB_JSON":
            raise _validation(f"the emulator reads DYNAMODB_JSON input only, not {source['InputFormat']}")
        compression = source.get("InputCompressionType", "NONE")
        if compression not in ("GZIP", "ZSTD", "NONE"):
            raise _validation(f"unknown InputCompressionType {compression}")
        if compression == "ZSTD" and zstd_decompressor() is None:
            raise _validation("the emulator cannot read ZSTD input: no zstd library is installed (use GZIP)")
        kinds = list(target["OutputType"])
        if any(kind not in bulk_output.KINDS for kind in kinds) or len(set(kinds)) != len(kinds):
            raise _validation(f"OutputType must be ERROR and/or CONDITION_CHECK_FAILURE, not {kinds}")

    @staticmethod
    def _table(account: str, region: str, name_or_arn: str) -> tuple[Any, str]:
        """The target table (its name or ARN), refused unless ACTIVE, building no index and not
        part of a global table (BulkPutItems.Considerations)."""
        from moto.dynamodb.models import dynamodb_backends

        name = name_or_arn.split(":table/", 1)[1] if name_or_arn.startswith("arn:") else name_or_arn
        backend = dynamodb_backends[account][region]
        # moto's ResourceNotFoundException when missing; CREATING for a moment (table-creating)
        status = backend.describe_table(name)["Table"].get("TableStatus")
        if status != "ACTIVE":
            raise BulkPutError("ResourceInUseException", f"table {name} is {status}, not ACTIVE")
        table = backend.tables[name]
        building = [i.name for i in table.global_indexes if getattr(i, "status", "ACTIVE") != "ACTIVE"]
        if building:
            raise BulkPutError("ResourceInUseException", f"table {name} is building index(es) {building}")
        if getattr(table, "replicas", None):
            raise _validation(f"table {name} is part of a global table: bulk put items does not support it")
        return table, name

    def _table_id(self, table: Any) -> str:
        if table not in self._table_ids:
            self._table_ids[table] = str(uuid.uuid4())
        return self._table_ids[table]

    @staticmethod
    def _inputs(account: str, region: str, source: Mapping[str, Any]) -> list[tuple[str, int]]:
        """Every input object (key, size) under the prefix, refused past the documented counts."""
        from moto.s3.models import s3_backends

        bucket_name, prefix = str(source["S3Bucket"]), str(source.get("S3KeyPrefix", ""))
        backend = s3_backends[account]["aws"]
        bucket = backend.buckets.get(bucket_name)
        if bucket is None:
            raise _validation(f"input bucket {bucket_name} does not exist")
        found = sorted(
            (key.name, int(key.size))
            for key in (bucket.keys.getlist(name)[-1] for name in bucket.keys)
            if key.name.startswith(prefix) and not getattr(key, "is_delete_marker", False)
        )
        if not found:
            raise _validation(f"no input objects under s3://{bucket_name}/{prefix}")
        if len(found) > MAX_INPUT_OBJECTS:
            raise BulkPutError(
                "LimitExceededException",
                f"{len(found):,} input objects under s3://{bucket_name}/{prefix}: "
                f"at most {MAX_INPUT_OBJECTS:,}",
            )
        big = [key for key, size in found if size > MAX_OBJECT_BYTES]
        if big:
            raise BulkPutError(
                "LimitExceededException", f"input object {big[0]} is over {MAX_OBJECT_BYTES:,} bytes (5 GB)"
            )
        return found

    def _operation(self, account: str, region: str, arn: str) -> Operation:
        operation = self.operations.get(arn)
        if operation is None or operation.account != account or operation.region != region:
            raise BulkPutError("ResourceNotFoundException", f"bulk operation {arn} not found")
        return operation

    # -- the run -----------------------------------------------------------------------------------

    def _run(self, operation: Operation) -> None:
        try:
            for key, _size in operation.inputs:
                if operation.status == CANCELLING:
                    break
                self._read_object(operation, key)
            with self._lock:
                if operation.status == CANCELLING:
                    operation.status = CANCELLED
                elif any(e.kind == ERROR for e in operation.entries):
                    operation.status = COMPLETED_WITH_ERRORS
                else:
                    operation.status = COMPLETED
        except Exception as error:  # the operation fails, the emulator does not
            operation.status = FAILED
            operation.failure_code = INTERNAL_ERROR
            operation.failure_message = f"{type(error).__name__}: {error}"
        finally:
            try:
                self._write_output(operation)
            except Exception as error:
                operation.status = FAILED
                operation.failure_code = INTERNAL_ERROR
                operation.failure_message = f"writing the output: {type(error).__name__}: {error}"
            operation.ended = self.now()
            operation.done.set()

    def _read_object(self, operation: Operation, key: str) -> None:
        from moto.dynamodb.models import dynamodb_backends
        from moto.s3.models import s3_backends

        bucket = operation.input["S3Bucket"]
        calls.WATCHER.s3_call_for(operation.who, "GetObject", bucket, key, operation.region)
        held = s3_backends[operation.account]["aws"].get_object(bucket, key)
        data = bytes(held.value) if held is not None else b""
        operation.processed_bytes += len(data)
        try:
            text = _decompress(operation.input.get("InputCompressionType", "NONE"), data).decode("utf-8")
        except (OSError, EOFError, ValueError) as error:
            reason = f"the object cannot be read as {operation.input.get('InputCompressionType', 'NONE')}"
            operation.entries.append(
                ReportedItem(ERROR, f"{reason}: {error}", key, code=UNREADABLE_OBJECT, whole_object=True)
            )
            return
        backend = dynamodb_backends[operation.account][operation.region]
        table = backend.tables.get(operation.table)
        for number, line in enumerate(text.split("\n")):
            if operation.status == CANCELLING:
                return
            if not line.strip():
                continue
            operation.processed += 1
            entry = _put(backend, table, operation.table, key, number, line)
            if entry is not None:
                operation.failed += 1
                operation.entries.append(entry)

    def _write_output(self, operation: Operation) -> None:
        target = operation.output
        bucket, prefix = str(target["S3Bucket"]), str(target.get("S3KeyPrefix", ""))
        reports: list[Report] = []
        objects: list[tuple[str, bytes]] = []
        for kind in bulk_output.KINDS:
            entries = [e for e in operation.entries if e.kind == kind]
            if kind in target["OutputType"] and entries:
                key = bulk_output.report_key(prefix, operation.arn, kind)
                objects.append((key, bulk_output.encode_report(entries)))
                reports.append(Report(kind, key, len(entries)))
        manifest = Manifest(operation.arn, operation.status, tuple(reports))
        objects.append(
            (bulk_output.manifest_key(prefix, operation.arn), bulk_output.encode_manifest(manifest))
        )
        from moto.s3.models import s3_backends

        backend = s3_backends[operation.account]["aws"]
        sse_key = target.get("S3SseKmsKeyId") if target.get("S3SseAlgorithm") == "KMS" else None
        for key, body in objects:
            calls.WATCHER.s3_call_for(
                operation.who, "PutObject", bucket, key, operation.region, key_arn=sse_key
            )
            backend.put_object(bucket, key, body)


def _decompress(kind: str, data: bytes) -> bytes:
    if kind == "GZIP":
        return gzip.decompress(data)
    if kind == "ZSTD":
        decompress = zstd_decompressor()
        if decompress is None:  # checked at Start
            raise ValueError("no zstd library is installed")
        return decompress(data)
    return data


def _put(backend: Any, table: Any, name: str, key: str, number: int, line: str) -> ReportedItem | None:
    """One record written, or the ERROR entry that says why it was not."""
    try:
        record = json.loads(line)
    except ValueError as error:
        return ReportedItem(ERROR, f"not a JSON record: {error}", key, number, code=MALFORMED_RECORD)
    if not isinstance(record, dict) or set(record) != {"Item"} or not isinstance(record["Item"], dict):
        return ReportedItem(
            ERROR, 'a record must be one JSON object {"Item": {...}}', key, number, code=MALFORMED_RECORD
        )
    item: dict[str, Any] = record["Item"]
    problem = _malformed(item)
    if problem is not None:
        return ReportedItem(ERROR, problem, key, number, item, code=INVALID_ITEM)
    if table is None:
        raise RuntimeError(f"table {name} was deleted while the operation ran")
    for attribute, kind in (
        (table.hash_key_attr, table.hash_key_type),
        (table.range_key_attr, table.range_key_type),
    ):
        if attribute is None:
            continue
        if attribute not in item:
            return ReportedItem(
                ERROR, f"missing the key attribute {attribute}", key, number, item, code=MISSING_KEY
            )
        given = next(iter(item[attribute]))
        if given != kind:
            message = f"key attribute {attribute} is {given}, the table's key is {kind}"
            return ReportedItem(ERROR, message, key, number, item, code=KEY_TYPE)
    from moto.dynamodb.exceptions import DynamodbException
    from moto.dynamodb.models.dynamo_type import DynamoType

    if limits.item_bytes({n: DynamoType(v) for n, v in item.items()}) > limits.ITEM_BYTES:
        return ReportedItem(ERROR, "the item is over 400 KB", key, number, item, code=ITEM_TOO_LARGE)
    from moto.dynamodb import responses

    try:
        # What PutItem's request handler checks before the backend (moto/dynamodb/responses.py):
        # an empty key or index key, an empty set, a NULL index key; then the backend's own.
        responses.validate_put_has_empty_keys(item, table)
        responses.validate_put_has_empty_attrs(item, table)
        responses.validate_put_has_gsi_keys_set_to_none(item, table)
        backend.put_item(name, item)
    except DynamodbException as error:  # what PutItem refuses (an empty key, a bad number, ...)
        code = str(getattr(error, "error_type", "")).rsplit("#", 1)[-1] or INVALID_ITEM
        return ReportedItem(ERROR, str(getattr(error, "message", error)), key, number, item, code=code)
    return None


def _malformed(item: Mapping[str, Any]) -> str | None:
    """Why `item` is not well-formed DynamoDB JSON, or None."""
    if not item:
        return "the item has no attributes"
    for attribute, value in item.items():
        problem = _value_problem(value)
        if problem is not None:
            return f"attribute {attribute}: {problem}"
    return None


def _value_problem(value: Any) -> str | None:
    if not isinstance(value, dict) or len(value) != 1:
        return "an attribute value is an object of exactly one type"
    ((kind, held),) = value.items()
    if kind in _SCALARS:
        return None if isinstance(held, _SCALARS[kind]) else f"{kind} holds {type(held).__name__}"
    if kind in _SETS:
        ok = isinstance(held, list) and held and all(isinstance(e, str) for e in held)
        return None if ok else f"{kind} is a non-empty list of strings"
    if kind == "L":
        if not isinstance(held, list):
            return "L is a list"
        return next((p for p in map(_value_problem, held) if p is not None), None)
    if kind == "M":
        if not isinstance(held, dict):
            return "M is an object"
        return next((p for p in map(_value_problem, held.values()) if p is not None), None)
    return f"unknown type {kind}"


MODEL: Final = BulkPutModel()


# -- moto's DynamoHandler gains the four operations (moto_seams.BULK_PUT) ---------------------------


def _answer(handler: Any, act: Callable[[], dict[str, Any]]) -> str:
    from moto.dynamodb.exceptions import ERROR_TYPE_PREFIX, DynamodbException

    try:
        return json.dumps(act())
    except BulkPutError as error:
        raise DynamodbException(ERROR_TYPE_PREFIX + error.code, error.message) from None


def start_bulk_put_items(handler: Any) -> str:
    who = calls.WATCHER.caller(handler.get_access_key())
    return _answer(
        handler,
        lambda: {
            "BulkOperationDescription": MODEL.start(
                handler.current_account, handler.region, handler.body, who
            )
        },
    )


def describe_bulk_operation(handler: Any) -> str:
    arn = str(handler.body.get("BulkOperationArn", ""))
    return _answer(
        handler,
        lambda: {"BulkOperationDescription": MODEL.describe(handler.current_account, handler.region, arn)},
    )


def list_bulk_operations(handler: Any) -> str:
    body = handler.body
    return _answer(
        handler,
        lambda: MODEL.list_operations(
            handler.current_account, handler.region, body.get("MaxResults"), body.get("NextToken")
        ),
    )


def cancel_bulk_operation(handler: Any) -> str:
    arn = str(handler.body.get("BulkOperationArn", ""))
    return _answer(handler, lambda: MODEL.cancel(handler.current_account, handler.region, arn))


HANDLERS: Final = {
    "start_bulk_put_items": start_bulk_put_items,
    "describe_bulk_operation": describe_bulk_operation,
    "list_bulk_operations": list_bulk_operations,
    "cancel_bulk_operation": cancel_bulk_operation,
}
