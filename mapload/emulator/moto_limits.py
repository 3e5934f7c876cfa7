"""What AWS enforces or answers and moto does not: Step Functions' history and payload limits, its
uncatchable errors and its ResultWriter; DynamoDB's expression and item size limits, the answers
of a putIfAbsent's INSERT batch and a BatchWriteItem's consumed units, a new table CREATING for a
moment (the numbers: limits.py)."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from mapload.emulator.limits import (
    CREATING_SECONDS,
    HISTORY_EVENTS,
    HISTORY_LIMIT_CAUSE,
    HISTORY_LIMIT_ERROR,
    ITEM_BYTES,
    UNCATCHABLE_ERRORS,
    item_bytes,
    request_expression_error,
    value_bytes,
)
from mapload.emulator.moto_patch import SFN_ASL, Patch, resolve
from mapload.emulator.moto_transactions import TRANSACTIONS, WRITE_LOCK

# -- Step Functions: the service limits --------------------------------------------------------

_COMMON_STATE = f"{SFN_ASL}.component.state.state:CommonStateField._eval_body"
_MAP_EXECUTION = f"{SFN_ASL}.component.state.exec.state_map.state_map:StateMap._eval_execution"
_ERROR_EQUALS = f"{SFN_ASL}.component.common.error_name.error_equals_decl:ErrorEqualsDecl._eval_body"
_RESULT_WRITER = (
    f"{SFN_ASL}.component.state.exec.state_map.result_writer.result_writer_decl:ResultWriter._eval_body"
)
_PUT_RESULTS = (
    f"{SFN_ASL}.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3"
    ":ResourceEvalS3._handle_put_object"
)


def history_length(env: Any) -> int:
    """Events so far in the history of the execution `env` runs (a Map child has its own)."""
    return len(env.event_manager._history_event_list)


# The event managers of executions' own histories. moto gives all the children of one
# Distributed Map run a single shared event manager; on AWS each child is an execution with its
# own history, and one Worker child never nears the limit, so only these are counted.
_EXECUTION_HISTORIES: weakref.WeakSet[Any] = weakref.WeakSet()


def _history_full(env: Any) -> bool:
    """AWS logs event 25,000 only if it is ExecutionSucceeded; anything else fails the execution."""
    if not env.is_frame():
        _EXECUTION_HISTORIES.add(env.event_manager)
    if env.event_manager not in _EXECUTION_HISTORIES:
        return False
    if env.is_running() and history_length(env) >= HISTORY_EVENTS - 1:
        from moto.stepfunctions.parser.api import ExecutionFailedEventDetails

        env.set_error(ExecutionFailedEventDetails(error=HISTORY_LIMIT_ERROR, cause=HISTORY_LIMIT_CAUSE))
        return True
    return False


def _state_within_history(self: Any, env: Any) -> None:
    if _history_full(env):
        return
    HISTORY_LIMIT.original()(self, env)
    _history_full(env)


def _map_within_payload_limit(self: Any, env: Any) -> None:
    """A Map without a ResultWriter collects every child's output into its result: at most 256 KiB."""
    MAP_RESULT_LIMIT.original()(self, env)
    if self.result_writer is None and env.stack:
        self._verify_size_quota(env=env, value=env.stack[-1])


def _error_equals(self: Any, env: Any) -> None:
    """States.ALL does not match the terminal errors (AWS: they cannot be caught or retried)."""
    error_name = env.stack[-1]
    if self._STATE_ALL_ERROR in self.error_names and getattr(error_name, "error_name", None) in (
        UNCATCHABLE_ERRORS
    ):
        env.stack.pop()
        env.stack.append(False)
        return
    UNCATCHABLE.original()(self, env)


def _result_writer(self: Any, env: Any) -> None:
    """Parameters (Prefix.$, Bucket.$) select from the state's input, as on AWS; moto evaluated
    them against the children's outputs."""
    env.stack.append(env.states.get_input())
    self.parargs.eval(env=env)
    parameters = env.stack.pop()
    env.stack.pop()
    env.stack.append(parameters)
    self.resource_eval.eval_resource(env=env)


def _write_map_results(env: Any, resource_runtime_part: Any, state_credentials: Any) -> None:
    """ResultWriter as AWS writes it: <Prefix>/<map run id>/manifest.json and one file per status
    (SUCCEEDED_0.json, FAILED_0.json; PENDING when a run stops early), each a JSON array of the
    child executions; the Map's result is then the small summary, not the outputs."""
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    parameters = env.stack.pop()
    outputs: list[Any] = env.stack.pop()
    s3 = boto_client_for(
        service="s3", region=resource_runtime_part.region, state_credentials=state_credentials
    )
    record = env.map_run_record_pool_manager.get_all()[-1]
    map_run_arn = record.map_run_arn
    map_run_id = map_run_arn.split(":")[-1]
    bucket = parameters["Bucket"]
    prefix = str(parameters.get("Prefix") or "")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    execution_base = map_run_arn.replace(":mapRun:", ":execution:", 1)
    by_status: dict[str, list[dict[str, Any]]] = {"SUCCEEDED": [], "FAILED": [], "PENDING": []}
    for index, output in enumerate(outputs):
        status = "FAILED" if output is None else "SUCCEEDED"
        entry: dict[str, Any] = {
            "ExecutionArn": f"{execution_base}:{index}",
            "Name": str(index),
            "StateMachineArn": env.states.context_object.context_object_data["StateMachine"]["Id"],
            "Status": status,
        }
        if output is not None:
            entry["Output"] = json.dumps(output)
            entry["OutputDetails"] = {"Included": True}
        by_status[status].append(entry)
    files: dict[str, list[dict[str, Any]]] = {status: [] for status in by_status}
    for status, entries in by_status.items():
        if not entries:
            continue
        key = f"{prefix}{map_run_id}/{status}_0.json"
        body = json.dumps(entries).encode()
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        files[status].append({"Key": key, "Size": len(body)})
    manifest_key = f"{prefix}{map_run_id}/manifest.json"
    manifest = {"DestinationBucket": bucket, "MapRunArn": map_run_arn, "ResultFiles": files}
    s3.put_object(Bucket=bucket, Key=manifest_key, Body=json.dumps(manifest).encode())
    env.stack.append(
        {"MapRunArn": map_run_arn, "ResultWriterDetails": {"Bucket": bucket, "Key": manifest_key}}
    )


_EXPRESSION_REQUESTS = (
    "put_item",
    "update_item",
    "delete_item",
    "get_item",
    "query",
    "scan",
    "transact_write_items",
    "transact_get_items",
)
# Python's recursion limit while the patch is on: moto's expression parser and executor recurse
# about ten frames per SET action, so the shortest actions that fit in 4 KB (~590) need ~6,000.
EXPRESSION_RECURSION: Final = 10_000


def _within_expression_limits(action: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(action)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        from moto.dynamodb.exceptions import MockValidationException

        error = request_expression_error(self.body)
        if error is not None:
            raise MockValidationException(error)
        return action(self, *args, **kwargs)

    return checked


class DynamoDbExpressions(Patch):
    """moto checks neither the size of an expression string nor the operators of an
    UpdateExpression: each request that carries expressions is refused first, with AWS's
    ValidationException message, when one is past the limits in limits.py. And moto's parser
    recurses per action: past ~160 SET actions (a 2 KB expression AWS accepts) it raised
    RecursionError instead of answering, so Python's recursion limit is raised while installed."""

    def __init__(self) -> None:
        super().__init__(
            "dynamodb-expressions",
            tuple(f"moto.dynamodb.responses:DynamoHandler.{name}" for name in _EXPRESSION_REQUESTS),
        )
        self._recursion_limit = 0

    def install(self) -> None:
        if self.installed:
            return
        for target in self.targets:
            self._swap(target, _within_expression_limits(getattr(*resolve(target))))
        self._recursion_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(self._recursion_limit, EXPRESSION_RECURSION))

    def uninstall(self) -> None:
        if self.installed:
            sys.setrecursionlimit(self._recursion_limit)
        super().uninstall()


def _set_within_item_size(self: Any, key: str, value: Any) -> None:
    """`LimitedSizeDict.__setitem__` (an item's attributes): refused past AWS's 400 KB."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge

    if item_bytes({**self, key: value}) > ITEM_BYTES:
        raise ItemSizeTooLarge
    dict.__setitem__(self, key, value)


def _update_whole_or_not(self: Any, node: Any = None) -> None:
    """`UpdateExpressionExecutor.execute`: an UpdateItem applied whole or not at all, as DynamoDB
    applies it. moto sets the actions one by one on the stored item, so one that takes the item
    past 400 KB was refused after the earlier actions had changed it."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge

    execute = ITEM_SIZE.original("moto.dynamodb.parsing.executors:UpdateExpressionExecutor.execute")
    if node is not None:  # moto's recursion into a node: the top call keeps the copy
        execute(self, node)
        return
    before = copy.deepcopy(self.item.attrs)
    try:
        execute(self)
    except ItemSizeTooLarge:
        self.item.attrs = before
        raise


_REQUEST = threading.local()  # .size: the body of the BatchWriteItem this thread answers


@contextlib.contextmanager
def batch_request(size: int) -> Iterator[None]:
    """While this thread answers a BatchWriteItem whose body is `size` bytes: the items it builds
    from the request's puts are not measured when `size` is at most ITEM_BYTES. No item is larger
    than the request that holds it: each name and value counts no more than its JSON text (a
    string its UTF-8 bytes, a number about half its digits, a binary 3/4 of its base64, a list or
    map 3 bytes and 1 an element against its brackets, type key and commas; tests/e2e/test_limits.py)."""
    _REQUEST.size = size
    try:
        yield
    finally:
        _REQUEST.size = None


def _new_item_within_size(self: Any, hash_key: Any, range_key: Any, attrs: Mapping[str, Any]) -> None:
    """`Item.__init__`: the new item measured once, as a whole (moto's sets each attribute in turn
    and `_set_within_item_size` measures every attribute so far at each set: a quadratic cost),
    refused when `_set_within_item_size` would refuse one of its sets: sizes are never negative,
    so some running total is over ITEM_BYTES exactly when the whole is. Not measured at all inside
    a `batch_request` too small to hold an item over ITEM_BYTES."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict

    self.hash_key = hash_key
    self.range_key = range_key
    typed = {key: DynamoType(value) for key, value in attrs.items()}
    request = getattr(_REQUEST, "size", None)
    if (request is None or request > ITEM_BYTES) and item_bytes(typed) > ITEM_BYTES:
        raise ItemSizeTooLarge
    self.attrs = LimitedSizeDict(typed)  # its __init__ adds them without __setitem__'s measure


# `INSERT INTO "table" VALUE {'name': ?, ...}`: the one statement shape mapload sends
# (logic/writemodes.py insert_statement); anything else is moto's.
_INSERT = re.compile(r'\s*INSERT\s+INTO\s+"([^"]+)"\s+VALUE\s+\{(.*)\}\s*', re.S | re.I)
_INSERT_PAIR = re.compile(r"\s*'((?:[^']|'')*)'\s*:\s*\?\s*(?:,|\Z)")
# BatchExecuteStatement's request constraints (API reference): 1 to 25 statements, each 1 to
# 8,192 characters.
BATCH_STATEMENTS: Final = 25
STATEMENT_CHARS: Final = 8192


def parse_insert(statement: str) -> tuple[str, list[str]] | None:
    """The table and attribute names of an INSERT whose every value is a parameter; None for any
    other statement."""
    found = _INSERT.fullmatch(statement)
    if found is None or found.group(2).rstrip().endswith(","):
        return None
    names: list[str] = []
    body, at = found.group(2), 0
    while at < len(body):
        pair = _INSERT_PAIR.match(body, at)
        if pair is None:
            return None
        names.append(pair.group(1).replace("''", "'"))
        at = pair.end()
    return (found.group(1), names) if names else None


def _statement_error(code: str, message: str) -> dict[str, Any]:
    return {"Error": {"Code": code, "Message": message}}


def _insert(backend: Any, statement: Mapping[str, Any]) -> dict[str, Any]:
    """One INSERT's BatchStatementResponse, as AWS documents it: the item stored, or DuplicateItem
    (an item with its key is stored: left untouched), ResourceNotFound, or ValidationError (a
    parameter count that does not match, a name twice, a key attribute missing or of the wrong
    type, an item past 400 KB)."""
    from moto.dynamodb.exceptions import (
        DynamodbException,
        ItemSizeTooLarge,
        MockValidationException,
        ResourceNotFoundException,
    )
    from moto.dynamodb.models.dynamo_type import DynamoType

    parsed = parse_insert(str(statement.get("Statement", "")))
    assert parsed is not None
    table_name, names = parsed
    values = statement.get("Parameters") or []
    if len(values) != len(names):
        return _statement_error(
            "ValidationError", f"Number of parameters in request and statement don't match: {len(values)}"
        )
    if len(set(names)) != len(names):
        return _statement_error("ValidationError", "Duplicate attribute names in the item")
    item = dict(zip(names, values, strict=True))
    try:
        table = backend.get_table(table_name)
    except ResourceNotFoundException:
        return _statement_error("ResourceNotFound", "Requested resource not found")
    for attribute in filter(None, (table.hash_key_attr, table.range_key_attr)):
        typed = item.get(attribute)
        expected = table.hash_key_type if attribute == table.hash_key_attr else table.range_key_type
        if not isinstance(typed, dict) or list(typed) != [expected] or typed[expected] in ("", None):
            return _statement_error(
                "ValidationError",
                f"One or more parameter values were invalid: Missing or invalid key {attribute} in the item",
            )
    key = [DynamoType(item[a]) for a in filter(None, (table.hash_key_attr, table.range_key_attr))]
    try:
        TRANSACTIONS.held.check(backend, table_name, item)  # an item in a transaction: a conflict
        with WRITE_LOCK:  # the lookup and the put as one (PutItem, UpdateItem take it too)
            if table.get_item(*key) is not None:
                return _statement_error("DuplicateItem", "Duplicate primary key exists in table")
            backend.put_item(table_name, item)
    except ItemSizeTooLarge:
        return _statement_error("ValidationError", "Item size has exceeded the maximum allowed size")
    except MockValidationException as error:
        return _statement_error("ValidationError", str(getattr(error, "message", error)))
    except DynamodbException as error:  # the item is in a transaction (moto_transactions._Held)
        if not str(getattr(error, "error_type", "")).endswith("#TransactionConflictException"):
            raise
        return _statement_error("TransactionConflict", str(getattr(error, "message", error)))
    return {"TableName": table_name}


class PartiqlInsert(Patch):
    """moto's BatchExecuteStatement runs each statement through its PartiQL engine, which copies
    every item of every table first and cannot read an INSERT's `?` parameters. A request whose
    statements are all INSERTs of parameters (putIfAbsent's, logic/writemodes.py) is answered here
    with AWS's documented semantics: at most 25 statements of at most 8,192 characters, else a
    ValidationException for the request; then each statement answers for itself (`_insert`).
    Any other request is moto's."""

    def __init__(self) -> None:
        super().__init__("partiql-insert", ("moto.dynamodb.responses:DynamoHandler.batch_execute_statement",))
        patch = self

        def batch_execute_statement(handler: Any) -> Any:  # a method of DynamoHandler
            return patch._batch(handler)

        self._replacements = (batch_execute_statement,)

    def _batch(self, handler: Any) -> Any:
        from moto.dynamodb.exceptions import MockValidationException
        from moto.dynamodb.responses import DynamoResult

        statements = handler.body.get("Statements") or []
        if not statements or not all(parse_insert(str(s.get("Statement", ""))) for s in statements):
            return self.original()(handler)
        if len(statements) > BATCH_STATEMENTS:
            raise MockValidationException(
                "1 validation error detected: Value at 'statements' failed to satisfy constraint: "
                f"Member must have length less than or equal to {BATCH_STATEMENTS}"
            )
        if any(len(str(s["Statement"])) > STATEMENT_CHARS for s in statements):
            raise MockValidationException(
                "1 validation error detected: Value at 'statements.member.statement' failed to satisfy "
                f"constraint: Member must have length less than or equal to {STATEMENT_CHARS}"
            )
        backend = handler.dynamodb_backend
        return DynamoResult({"Responses": [_insert(backend, statement) for statement in statements]})


def _units(attributes: Mapping[str, Any]) -> int:
    """Write units of an item (moto's DynamoType values): 1 per started KB of its size, at least 1."""
    return max(1, -(-item_bytes(attributes) // 1024))


class BatchWriteUnits(Patch):
    """moto answers a BatchWriteItem's ReturnConsumedCapacity with 1 unit per table whatever the
    request wrote. AWS (developer guide, "DynamoDB read and write capacity": BatchWriteItem counts
    each PutItem or DeleteItem in it as on its own) charges a put the larger of the new and the
    replaced item, and a delete the item it deletes (1 KB units, at least 1 when none is stored):
    the units are counted from the stored items before moto writes, and put in the answer. A
    request that does not ask, or that moto refuses (a missing table, a key missing), is moto's."""

    def __init__(self) -> None:
        super().__init__("batch-write-units", ("moto.dynamodb.responses:DynamoHandler.batch_write_item",))
        patch = self

        def batch_write_item(handler: Any) -> Any:  # a method of DynamoHandler
            return patch._batch(handler)

        self._replacements = (batch_write_item,)

    def _batch(self, handler: Any) -> Any:
        if handler.body.get("ReturnConsumedCapacity") not in ("TOTAL", "INDEXES"):
            return self.original()(handler)
        try:
            units = self._consumed(handler.dynamodb_backend, handler.body.get("RequestItems") or {})
        except Exception:  # moto's own answer says what is wrong with the request
            return self.original()(handler)
        answer = self.original()(handler)
        answer.result["ConsumedCapacity"] = [
            {"TableName": name, "CapacityUnits": float(n), "Table": {"CapacityUnits": float(n)}}
            for name, n in units.items()
        ]
        return answer

    @staticmethod
    def _consumed(backend: Any, request_items: Mapping[str, Any]) -> dict[str, int]:
        from moto.dynamodb.models.dynamo_type import DynamoType

        units: dict[str, int] = {}
        for name, requests in request_items.items():
            table = backend.get_table(name)
            key_names = [a for a in (table.hash_key_attr, table.range_key_attr) if a]
            total = 0
            for request in requests:
                put = (request.get("PutRequest") or {}).get("Item")
                key = put if put is not None else request["DeleteRequest"]["Key"]
                stored = table.get_item(*(DynamoType(key[a]) for a in key_names))
                old = _units(stored.attrs) if stored is not None else 1
                new = BatchWriteUnits.item_units(put) if put is not None else 1
                total += max(old, new) if put is not None else old
            units[name] = total
        return units

    @staticmethod
    def item_units(item: Mapping[str, Any]) -> int:
        """`_units` of a request's item, read from its own values: moto's objects (DynamoType)
        are built only for a list or map, whose elements `value_bytes` reads as moto holds them."""
        from moto.dynamodb.models.dynamo_type import DynamoType

        size = 0
        for name, value in item.items():
            kind = next(iter(value))
            if kind in ("L", "M"):
                held = DynamoType(value)
                size += len(name.encode()) + value_bytes(held.type, held.value)
            else:
                size += len(name.encode()) + value_bytes(kind, value[kind])
        return max(1, -(-size // 1024))


_DYNAMODB_BACKEND = "moto.dynamodb.models:DynamoDBBackend"


class TableCreating(Patch):
    """moto makes a new table ACTIVE at once. DynamoDB keeps it CREATING for seconds, DescribeTable
    says so, and a request on its items gets ResourceNotFoundException ("The resource might not be
    specified correctly, or its status might not be ACTIVE", API reference); so code that uses a
    table it just created passes here and fails there. Here a new table is CREATING for at least
    `seconds` (limits.CREATING_SECONDS) and until a DescribeTable sees it after that, which is what
    the SDK's `table_exists` waiter sends: code that does not wait fails every time, not only when
    DynamoDB is slow. Until then every request naming the table but DescribeTable (GetItem, a
    batch, a transaction, each statement of a PartiQL batch, UpdateTimeToLive) is answered as moto
    answers a missing table: ResourceNotFoundException (DynamoDB answers a control-plane call such
    as DeleteTable ResourceInUseException instead; mapload makes none on a table it waits for)."""

    def __init__(self, seconds: float = CREATING_SECONDS) -> None:
        super().__init__(
            "table-creating",
            tuple(f"{_DYNAMODB_BACKEND}.{name}" for name in ("create_table", "get_table", "describe_table")),
        )
        self.seconds = seconds
        self._creating: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        patch = self

        def create_table(backend: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            table = patch.original()(backend, name, *args, **kwargs)
            with patch._lock:
                patch._creating[table] = time.monotonic() + patch.seconds
            return table

        def get_table(backend: Any, table_name: str) -> Any:
            table = patch.original(patch.targets[1])(backend, table_name)
            # Every item request passes here: read without the lock (a lookup under the GIL).
            if patch._creating and table in patch._creating:
                from moto.dynamodb.exceptions import ResourceNotFoundException

                raise ResourceNotFoundException()
            return table

        def describe_table(backend: Any, name: str) -> dict[str, Any]:
            """moto's own (its message names the table), with the table's status."""
            from moto.dynamodb.exceptions import ResourceNotFoundException

            try:
                table = patch.original(patch.targets[1])(backend, name)
            except ResourceNotFoundException:
                raise ResourceNotFoundException(table_name=name) from None
            described: dict[str, Any] = table.describe(base_key="Table")
            with patch._lock:
                active_at = patch._creating.get(table)
                if active_at is not None and time.monotonic() >= active_at:
                    del patch._creating[table]
                elif active_at is not None:
                    described["Table"]["TableStatus"] = "CREATING"
            return described

        self._replacements = (create_table, get_table, describe_table)

    def uninstall(self) -> None:
        super().uninstall()
        with self._lock:
            self._creating.clear()


HISTORY_LIMIT: Final = Patch(
    # moto counts no history: each state checks its execution's before and after it runs.
    "history-limit",
    (_COMMON_STATE,),
    (_state_within_history,),
)
MAP_RESULT_LIMIT: Final = Patch(
    # moto checks each state's output against 256 KiB, but not a Map's collected results.
    "map-result-limit",
    (_MAP_EXECUTION,),
    (_map_within_payload_limit,),
)
UNCATCHABLE: Final = Patch(
    # moto lets States.ALL catch States.DataLimitExceeded and States.Runtime; AWS does not.
    "uncatchable-errors",
    (_ERROR_EQUALS,),
    (_error_equals,),
)
RESULT_WRITER_PARAMETERS: Final = Patch(
    # moto evaluates a ResultWriter's Parameters against the children's outputs, not the input.
    "result-writer-parameters",
    (_RESULT_WRITER,),
    (_result_writer,),
)
RESULT_WRITER_FILES: Final = Patch(
    # moto's ResultWriter writes an empty manifest and no result files.
    "result-writer-files",
    (_PUT_RESULTS,),
    (staticmethod(_write_map_results),),
)
DYNAMODB_EXPRESSIONS: Final = DynamoDbExpressions()
ITEM_SIZE: Final = Patch(
    # moto measures an item without a list's or map's overhead and refuses it past 405,000 bytes;
    # an update it refuses for the item's size keeps the actions it applied before.
    "item-size",
    (
        "moto.dynamodb.models.dynamo_type:LimitedSizeDict.__setitem__",
        "moto.dynamodb.models.dynamo_type:Item.__init__",
        "moto.dynamodb.parsing.executors:UpdateExpressionExecutor.execute",
    ),
    (_set_within_item_size, _new_item_within_size, _update_whole_or_not),
)
PARTIQL_INSERT: Final = PartiqlInsert()
BATCH_WRITE_UNITS: Final = BatchWriteUnits()
TABLE_CREATING: Final = TableCreating()


# What AWS enforces and moto does not (installed together, limits.py's numbers).
LIMITS: Final = (
    HISTORY_LIMIT,
    MAP_RESULT_LIMIT,
    UNCATCHABLE,
    RESULT_WRITER_PARAMETERS,
    RESULT_WRITER_FILES,
    DYNAMODB_EXPRESSIONS,
    ITEM_SIZE,
    PARTIQL_INSERT,
    BATCH_WRITE_UNITS,
    TABLE_CREATING,
)
