"""Every change the embedded run makes to moto's private internals, in one place (moto 5.2.5, as
pinned in constraints.txt).

Each patch names the moto behaviour it mends and the internals it replaces (`targets`, each
"module:Owner.attribute" or "module:attribute"). tests/e2e/test_moto_patches.py holds, per
patch, a fingerprint of those internals as moto 5.2.5 ships them: an upgrade that fixes, changes
or moves one fails that test naming the patch. `install()` is idempotent and `uninstall()` puts
moto's own objects back exactly as they were; the Emulator (embedded.py) installs every patch on
entry and uninstalls it on exit.

- LAMBDA_INVOKE: moto's simple Lambda backend answers every invocation with a canned body; the
  embedded run's seam runs the runtime handler in-process instead.
- WAIT_CLOCK: a Wait state sleeps real seconds; given a clock, it moves the clock on instead.
- HISTORY_LIMIT, MAP_RESULT_LIMIT, UNCATCHABLE_ERRORS, RESULT_WRITER_PARAMETERS,
  RESULT_WRITER_FILES: what AWS Step Functions enforces or writes and moto's interpreter does not
  (moto checks each state's output and each task's result against 256 KiB, but not a Map's
  collected results; lets States.ALL catch States.DataLimitExceeded; counts no history; and its
  ResultWriter selects its parameters from the children's outputs and writes an empty manifest).
  The numbers themselves are in limits.py.
- BACKEND_LOOKUP, CLIENT_REUSE: two hot paths made cheap for a Map with thousands of children;
  behaviour unchanged (py-spy on a 2,000-shard run, docs/ARCHITECTURE.md "The embedded emulator").
- TRANSACTIONS: TransactWriteItems isolated from other threads' writes, as DynamoDB's are, and
  rolled back item by item (moto deep-copies every table a transaction names, each time).
- DYNAMODB_EXPRESSIONS: DynamoDB's expression limits (4 KB a string, 300 operators or functions
  an UpdateExpression), which moto does not check; and moto's expression parser kept from
  overflowing Python's recursion limit on an expression AWS accepts.
- ITEM_SIZE: DynamoDB's 400 KB item limit as AWS counts an item's size (moto's own measure
  ignores a list's and map's overhead and stops at 405,000 bytes).
- PARTIQL_INSERT: BatchExecuteStatement of the INSERTs putIfAbsent sends, with AWS's per-statement
  answers (moto's PartiQL copies every item of every table for each statement, and cannot read
  an INSERT's `?` parameters).
- SERVER_MODULES: moto's server (`mapload serve`) lists its package directory under its
  dispatcher's lock on every request; the list is taken once (behaviour unchanged).
- BATCH_WRITE_UNITS: the write units a BatchWriteItem consumed, when asked (ReturnConsumedCapacity),
  as AWS counts them (moto reports one per request, whatever it wrote or deleted).
- DYNAMO_TYPES, METHOD_NAMES, BATCH_WRITE_PARSE (and ITEM_SIZE's measure of a new item once):
  the CPU moto spends on each BatchWriteItem, a quarter less, behaviour unchanged (each shown
  equal to moto's own in tests/e2e/test_moto_speed.py); installed with the others in the embedded
  run and `mapload serve` (the bench's server too) (DYNAMODB_SPEED).
- AST_TRAVERSE, UPDATE_PARSE: the CPU of an UpdateItem's validation (its expression parsed once
  and shared, each of the ten validating walks reading its map once), a quarter less in moto's
  backend, answers and stored items unchanged (tests/e2e/test_moto_speed.py); in DYNAMODB_SPEED.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import json
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from mapload.emulator.clock import Clock
from mapload.emulator.limits import (
    HISTORY_EVENTS,
    HISTORY_LIMIT_CAUSE,
    HISTORY_LIMIT_ERROR,
    ITEM_BYTES,
    UNCATCHABLE_ERRORS,
    item_bytes,
    request_expression_error,
    value_bytes,
)

_MISSING: Final = object()
_SFN: Final = "moto.stepfunctions.parser.asl"


def resolve(target: str) -> tuple[Any, str]:
    """A target's owner and attribute name: the class for "module:Owner.attribute", the module
    for "module:attribute"."""
    module_name, _, path = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *owners, attribute = path.split(".")
    for name in owners:
        owner = getattr(owner, name)
    return owner, attribute


class Patch:
    """One moto behaviour mended by replacing its `targets` with `replacements` (same order)."""

    def __init__(self, name: str, targets: tuple[str, ...], replacements: tuple[Any, ...] = ()) -> None:
        self.name = name
        self.targets = targets
        self._replacements = replacements
        # target -> (what the owner's own namespace held, the attribute as moto's code read it)
        self._saved: dict[str, tuple[Any, Any]] = {}

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    def install(self) -> None:
        if self.installed:
            return
        # Import every target's module before replacing any: a module that imports a name from
        # another target's module (`from ...boto_client import boto_client_for`) and is first
        # imported after that module was patched would save the replacement as moto's own.
        for target in self.targets:
            resolve(target)
        for target, replacement in zip(self.targets, self._replacements, strict=True):
            self._swap(target, replacement)

    def original(self, target: str | None = None) -> Any:
        """moto's own attribute (the first target's by default), as its code read it: a plain
        function for a method (call it with the instance), the function for a module's name."""
        return self._saved[target or self.targets[0]][1]

    def uninstall(self) -> None:
        for target, (own, _) in self._saved.items():
            owner, attribute = resolve(target)
            if own is _MISSING:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, own)
        self._saved.clear()

    def _swap(self, target: str, replacement: Any) -> None:
        owner, attribute = resolve(target)
        if target not in self._saved:
            self._saved[target] = (vars(owner).get(attribute, _MISSING), getattr(owner, attribute))
        setattr(owner, attribute, replacement)


# -- Lambda ----------------------------------------------------------------------------------

# (function name, request body, request headers, response headers) -> the response payload, or
# None for a function the seam does not run (moto's own invoke answers it).
Invoke = Callable[[str, Any, Mapping[str, Any], dict[str, Any]], bytes | None]


class LambdaInvoke(Patch):
    """moto's simple Lambda backend (config `lambda: use_docker False`) answers every invocation
    with the request body or a canned "Simple Lambda happy path OK": its one place where an
    invocation lands, `LambdaSimpleBackend.invoke`, is routed to `invoke` (the embedded run's
    seam: the runtime handler, in-process, within Lambda's limits)."""

    def __init__(self) -> None:
        super().__init__("lambda-invoke", ("moto.awslambda_simple.models:LambdaSimpleBackend.invoke",))

    def install(self, invoke: Invoke | None = None) -> None:
        assert invoke is not None, "LAMBDA_INVOKE.install(invoke): the seam to route invocations to"

        def seam(
            backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
        ) -> Any:
            answer = invoke(function_name, body, headers or {}, response_headers)
            if answer is not None:
                return answer
            return self.original()(backend, function_name, qualifier, body, headers, response_headers)

        self._swap(self.targets[0], seam)


# -- Step Functions: the clock ---------------------------------------------------------------


class WaitClock(Patch):
    """moto's Wait states (Seconds, SecondsPath, Timestamp, TimestampPath) all wait in
    `WaitFunction._wait_interval`, in real time: given a clock, they advance it and return at once
    (a later install() replaces the clock)."""

    def __init__(self) -> None:
        super().__init__(
            "wait-clock",
            (f"{_SFN}.component.state.wait.wait_function.wait_function:WaitFunction._wait_interval",),
        )

    def install(self, clock: Clock | None = None) -> None:
        assert clock is not None, "WAIT_CLOCK.install(clock): the clock the Wait states advance"

        def wait_interval(self: Any, env: Any, wait_seconds: int) -> None:
            clock.advance(wait_seconds)

        self._swap(self.targets[0], wait_interval)


# -- Step Functions: the service limits --------------------------------------------------------

_COMMON_STATE = f"{_SFN}.component.state.state:CommonStateField._eval_body"
_MAP_EXECUTION = f"{_SFN}.component.state.exec.state_map.state_map:StateMap._eval_execution"
_ERROR_EQUALS = f"{_SFN}.component.common.error_name.error_equals_decl:ErrorEqualsDecl._eval_body"
_RESULT_WRITER = (
    f"{_SFN}.component.state.exec.state_map.result_writer.result_writer_decl:ResultWriter._eval_body"
)
_PUT_RESULTS = (
    f"{_SFN}.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3"
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


# -- speed -----------------------------------------------------------------------------------


def _lookup(self: Any, account_id: str) -> Any:
    """`BackendDict.__getitem__` takes moto's one global lock even when the account's backend
    exists, so every request's threads queue on it: an existing backend is returned lock-free."""
    try:
        return dict.__getitem__(self, account_id)
    except KeyError:  # first use of the account (or after a reset): moto's locked path
        return BACKEND_LOOKUP.original()(self, account_id)


class ClientReuse(Patch):
    """moto's interpreter builds a new boto3 client (`boto_client_for`, which loads the service
    model) for every Lambda task and every ResultWriter/ItemReader call: one client is reused per
    region, service and credentials while the patch is on (boto3 clients are thread-safe).
    The modules of the interpreter import `boto_client_for` by name: each one's is replaced."""

    def __init__(self) -> None:
        users = (
            f"{_SFN}.utils.boto_client",
            f"{_SFN}.component.state.exec.state_task.lambda_eval_utils",
            f"{_SFN}.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3",
            f"{_SFN}.component.state.exec.state_map.item_reader.eval.resource_eval_s3",
        )
        targets = tuple(f"{module}:boto_client_for" for module in users)
        super().__init__("client-reuse", targets, (self._client_for,) * len(targets))
        self._clients: dict[tuple[str, str, str, bool], Any] = {}
        self._lock = threading.Lock()

    def _client_for(self, region: str, service: str, state_credentials: Any = None) -> Any:
        from moto.core.models import botocore_stubber

        key = (region, service, repr(state_credentials), bool(botocore_stubber.enabled))
        client = self._clients.get(key)
        if client is None:
            with self._lock:
                client = self._clients.get(key)
                if client is None:
                    client = self._clients[key] = self.original()(region, service, state_credentials)
        return client

    def uninstall(self) -> None:
        super().uninstall()
        with self._lock:
            self._clients.clear()


# -- DynamoDB --------------------------------------------------------------------------------

_DYNAMODB_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
_WRITE_LOCK = threading.RLock()


def _locked(write: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(write)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _WRITE_LOCK:
            return write(self, *args, **kwargs)

    return locked


_MODELS = "moto.dynamodb.models"
_TRANSACT = f"{_MODELS}:DynamoDBBackend.transact_write_items"


class _ItemBefore:
    """One item a transaction may write, as it was before: its table, key and stored Item (a
    copy; None when absent), and whether its partition held any item (a table with a sort key)."""

    __slots__ = ("hash_key", "item", "partition", "range_key", "table")

    def __init__(self, table: Any, hash_key: Any, range_key: Any) -> None:
        self.table, self.hash_key, self.range_key = table, hash_key, range_key
        stored = table.items.get(hash_key)  # .get: the defaultdict adds no partition
        self.partition = stored is not None
        if range_key is not None and stored is not None:
            stored = stored.get(range_key)
        self.item = None if stored is None else copy.deepcopy(stored)

    def restore(self) -> None:
        items = self.table.items
        if self.range_key is None:
            if self.item is None:
                items.pop(self.hash_key, None)
            else:
                items[self.hash_key] = self.item
            return
        partition = items[self.hash_key]
        if self.item is not None:
            partition[self.range_key] = self.item
            return
        partition.pop(self.range_key, None)
        if not partition and not self.partition:
            del items[self.hash_key]


def _written_key(table: Any, op_type: str, op: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The key of the item moto's transact_write_items writes for one op, derived as the write it
    calls derives it (put_item from the Item, delete_item by get_keys_value, update_item's three
    cases); None for a ConditionCheck, which writes nothing. Raises where that write would fail
    before writing."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_attr, range_attr = table.hash_key_attr, table.range_key_attr
    if op_type == "Put" or op_type == "Delete":
        key = op["Item"] if op_type == "Put" else op["Key"]
        return DynamoType(key[hash_attr]), None if range_attr is None else DynamoType(key[range_attr])
    if op_type != "Update":
        return None
    key = op["Key"]
    if hash_attr in key and range_attr in key:
        return DynamoType(key[hash_attr]), DynamoType(key[range_attr])
    if range_attr is not None:
        return None  # Table.get_item refuses a key without its sort key before anything is written
    return DynamoType(key.get(hash_attr, key)), None


class _Rollback:
    """What moto's rollback of one TransactWriteItems would put back, taken item by item: every
    item an op may write (its table's, if moto's own snapshot covers that table: one named by its
    TableName) and each such table's stream records."""

    def __init__(self, backend: Any, transact_items: Iterable[Mapping[str, Any]]) -> None:
        ops = [next(iter(item.items())) for item in transact_items if isinstance(item, Mapping) and item]
        covered = {
            id(backend.tables[op["TableName"]]): backend.tables[op["TableName"]]
            for _, op in ops
            if isinstance(op, Mapping) and op.get("TableName") in backend.tables
        }
        self.items: dict[tuple[int, Any, Any], _ItemBefore] = {}
        for op_type, op in ops:
            try:
                table = backend.get_table(op["TableName"])
                key = _written_key(table, op_type, op) if id(table) in covered else None
                if key is not None and (id(table), *key) not in self.items:
                    self.items[(id(table), *key)] = _ItemBefore(table, *key)
            except Exception:  # moto's op fails before writing: nothing to restore
                continue
        # A shard's records (a list it may replace, when a Lambda consumed them) and their number.
        self.streams = [
            (t.stream_shard, t.stream_shard.items, len(t.stream_shard.items))
            for t in covered.values()
            if t.stream_shard is not None
        ]

    def restore(self) -> None:
        for before in self.items.values():
            before.restore()
        for shard, records, length in self.streams:
            del records[length:]
            shard.items = records


class _TableCopies:
    """moto.dynamodb.models' `copy` while TRANSACTIONS is installed: the copy module itself, except
    that a Table deep-copied by a transaction of this thread is not copied (the transaction's
    _Rollback holds what the copy was for): moto's rollback then puts the same table back."""

    def __init__(self) -> None:
        self.transacting = threading.local()
        self.table: type = type(None)  # moto's Table, set when installed

    def deepcopy(self, x: Any, memo: Any = None) -> Any:
        if isinstance(x, self.table) and getattr(self.transacting, "on", False):
            return x
        return copy.deepcopy(x, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def _rolled_back(error: BaseException) -> bool:
    """Whether moto's transact_write_items rolled back before raising `error`: a cancellation, or
    a validation error inside its per-op loop (not those it raises before or outside it)."""
    from moto.dynamodb.exceptions import (
        MockValidationException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if isinstance(error, (TooManyTransactionsException, TransactWriteSingleOpException)):
        return False
    return isinstance(error, (TransactionCanceledException, MockValidationException))


class Transactions(Patch):
    """Two mends of moto's TransactWriteItems, which deep-copies every table it names before its
    ops and, when the transaction is cancelled, puts the copies back.

    Isolation: a write another thread made in between was undone, and a copy taken while another
    thread inserts an item failed ("dictionary changed size during iteration"). The embedded run's
    Workers write from many threads (the ItemWriter's lanes, shards in parallel), so a numeric
    ADD's transactions (logic/writemodes.py) would lose or repeat additions there. The backend's
    item writes (PutItem, UpdateItem, DeleteItem, which BatchWriteItem goes through) and
    TransactWriteItems run one at a time under one lock; reads are unaffected.

    Cost: the copy made each transaction cost the size of its tables (a numeric ADD's transaction
    names the table and the ledger: 85 ms of CPU at 2,000 items in each, 420 ms at 10,000, against
    2.4 ms with this patch whatever their size), so a large update+add file ran in quadratic time.
    The rollback now keeps only what the transaction may write: each op's item as it was (or its
    absence) and the tables' stream records, restored on the same failures as moto's (a
    cancellation, a validation error in its loop); the tables are not copied (moto's module reads
    a `copy` whose deepcopy returns a Table as is inside a transaction). The same answers and the
    same tables after, success or failure (tests/e2e/test_moto_transactions.py)."""

    def __init__(self) -> None:
        super().__init__(
            "transactions",
            (*(f"{_MODELS}:DynamoDBBackend.{name}" for name in _DYNAMODB_WRITES), f"{_MODELS}:copy"),
        )
        self._copies = _TableCopies()

    def install(self) -> None:
        if self.installed:
            return
        for target in self.targets[:-1]:
            write = getattr(*resolve(target))
            self._swap(target, _locked(self._cheap_rollback if target == _TRANSACT else write))
        from moto.dynamodb.models.table import Table

        self._copies.table = Table
        self._swap(self.targets[-1], self._copies)

    def _cheap_rollback(self, backend: Any, transact_items: list[dict[str, Any]]) -> None:
        try:
            rollback = _Rollback(backend, transact_items) if len(transact_items) <= 100 else None
        except Exception:  # a request moto refuses before its first write
            rollback = None
        # Without a _Rollback, moto copies its tables as it would unpatched.
        self._copies.transacting.on = rollback is not None
        try:
            self.original(_TRANSACT)(backend, transact_items)
        except BaseException as error:
            if rollback is not None and _rolled_back(error):
                rollback.restore()
            raise
        finally:
            self._copies.transacting.on = False


# The DynamoDB requests that carry an expression (DynamoHandler's method per API action).
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
        with _WRITE_LOCK:  # the lookup and the put as one (PutItem, UpdateItem take it too)
            if table.get_item(*key) is not None:
                return _statement_error("DuplicateItem", "Duplicate primary key exists in table")
            backend.put_item(table_name, item)
    except ItemSizeTooLarge:
        return _statement_error("ValidationError", "Item size has exceeded the maximum allowed size")
    except MockValidationException as error:
        return _statement_error("ValidationError", str(getattr(error, "message", error)))
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


# -- the patches -----------------------------------------------------------------------------

LAMBDA_INVOKE: Final = LambdaInvoke()
WAIT_CLOCK: Final = WaitClock()
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
BACKEND_LOOKUP: Final = Patch(
    # moto's backend lookup takes its global lock on every request.
    "backend-lookup",
    ("moto.core.base_backend:BackendDict.__getitem__",),
    (_lookup,),
)
CLIENT_REUSE: Final = ClientReuse()
TRANSACTIONS: Final = Transactions()
DYNAMODB_EXPRESSIONS: Final = DynamoDbExpressions()
ITEM_SIZE: Final = Patch(
    # moto measures an item without a list's or map's overhead and refuses it past 405,000 bytes.
    "item-size",
    (
        "moto.dynamodb.models.dynamo_type:LimitedSizeDict.__setitem__",
        "moto.dynamodb.models.dynamo_type:Item.__init__",
    ),
    (_set_within_item_size, _new_item_within_size),
)

_TABLE = "moto.dynamodb.models.table:Table"


class QueryPartition(Patch):
    """moto's Query of a table (no index) sorts every item of the table (`Table.all_items`) and
    keeps those of the partition: each Query costs the whole table (0.2 s at 42,000 items), so
    Finalize's reads of a 20,000-shard ledger, block by block, ran past its timeout. While the
    patch is on, that one call inside a base-table Query returns the partition's items only, in
    the same order; an index Query and a Scan still read every item."""

    def __init__(self) -> None:
        super().__init__("query-partition", (f"{_TABLE}.query", f"{_TABLE}.all_items"))
        self._querying = threading.local()
        patch = self

        def query(table: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:  # a method of Table
            return patch._query(table, hash_key, *args, **kwargs)

        def all_items(table: Any) -> Any:
            return patch._all_items(table)

        self._replacements = (query, all_items)

    def _query(self, table: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        self._querying.at = (table, hash_key) if index_name is None else None
        try:
            return self.original(f"{_TABLE}.query")(table, hash_key, *args, **kwargs)
        finally:
            self._querying.at = None

    def _all_items(self, table: Any) -> Any:
        at = getattr(self._querying, "at", None)
        if at is None or at[0] is not table:
            return self.original(f"{_TABLE}.all_items")(table)
        self._querying.at = None  # once per Query: the base-table path calls it once
        partition = table.items.get(at[1])
        if partition is None:
            return []
        items = list(partition.values()) if table.range_key_attr else [partition]
        return sorted(items, key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)


class ServerModules(Patch):
    """moto's server, to route each request, lists its own package directory (`os.listdir` and
    an `isdir` per entry, some 170 services) while holding its dispatcher's one lock: ~6 % of the
    server's CPU per BatchWriteItem, and every request thread queues behind it. The directory does
    not change while the server runs, so the names are listed once, when installed, and the same
    list (same names, same order) answers every request."""

    def __init__(self) -> None:
        super().__init__("server-modules", ("moto.backends:list_of_moto_modules",))
        self._names: tuple[str, ...] = ()

        def list_of_moto_modules() -> Iterable[str]:
            return iter(self._names)

        self._replacements = (list_of_moto_modules,)

    def install(self) -> None:
        if self.installed:
            return
        super().install()
        self._names = tuple(self.original()())


def _dynamo_type(self: Any, type_as_dict: Any) -> None:
    """`DynamoType.__init__` for what a request holds (a dict of one type and its value): the
    first key and its value read once, where moto builds two lists for them. Anything else (a
    DynamoType to copy, an empty dict) is moto's. moto has no subclass of DynamoType, so
    `type(self)` is the class moto names for a list's or map's elements."""
    if type(type_as_dict) is dict and type_as_dict:
        kind, value = next(iter(type_as_dict.items()))
        self.type = kind
        if kind == "L":
            value = [type(self)(element) for element in value]
        elif kind == "M":
            value = {name: type(self)(element) for name, element in value.items()}
        self.value = value
        return
    DYNAMO_TYPES.original()(self, type_as_dict)


@functools.cache
def _method_names(clazz: type) -> list[str]:
    """moto's `method_names_from_class` (an `inspect.getmembers` walk of the response class, on
    every request), once per class: the classes do not change while moto runs."""
    names: list[str] = METHOD_NAMES.original()(clazz)
    return names


class NotPlain(Exception):
    """A request the fast reading does not take as it is: moto's parser reads it."""


_AV_STRINGS = frozenset({"S", "N"})
_AV_FLAGS = frozenset({"BOOL", "NULL"})
_AV_STRING_SETS = frozenset({"SS", "NS"})
_BWI_OPTIONS = ("ReturnConsumedCapacity", "ReturnItemCollectionMetrics")
_WRITE_REQUESTS = {"PutRequest": "Item", "DeleteRequest": "Key"}


def _plain_value(value: Any, blob: Callable[[str], bytes]) -> dict[str, Any]:
    """An AttributeValue as moto's parser reads it (a blob base64-decoded by `blob`); NotPlain
    for anything its shape does not hold exactly once (more than one type, a null, a number)."""
    if type(value) is not dict or len(value) != 1:
        raise NotPlain
    ((kind, held),) = value.items()
    if (kind in _AV_STRINGS and type(held) is str) or (kind in _AV_FLAGS and type(held) is bool):
        return value
    if type(held) is list:
        if kind in _AV_STRING_SETS and all(type(e) is str for e in held):
            return value
        if kind == "BS" and all(type(e) is str for e in held):
            return {kind: [blob(e) for e in held]}
        if kind == "L":
            return {kind: [_plain_value(e, blob) for e in held]}
    if kind == "B" and type(held) is str:
        return {kind: blob(held)}
    if kind == "M" and type(held) is dict:
        return {kind: {name: _plain_value(e, blob) for name, e in held.items()}}
    raise NotPlain


def plain_batch_write(body: bytes | str) -> dict[str, Any]:
    """A BatchWriteItem request's parameters as moto's model-driven parser reads them (members in
    the shape's order; blobs decoded), from one `json.loads`; NotPlain for a request that has
    anything else (a member the shape lacks, a null, a request of two kinds) or is not JSON."""
    from moto.core.parse import default_blob_parser

    try:
        document = json.loads(body)
    except ValueError:
        raise NotPlain from None
    if type(document) is not dict or not set(document) <= {"RequestItems", *_BWI_OPTIONS}:
        raise NotPlain
    requests = document.get("RequestItems")
    if type(requests) is not dict:
        raise NotPlain
    tables: dict[str, list[dict[str, Any]]] = {}
    for table, writes in requests.items():
        if type(writes) is not list:
            raise NotPlain
        tables[table] = [_plain_write(write, default_blob_parser) for write in writes]
    parameters: dict[str, Any] = {"RequestItems": tables}
    for option in _BWI_OPTIONS:
        if option in document:
            if type(document[option]) is not str:
                raise NotPlain
            parameters[option] = document[option]
    return parameters


def _plain_write(write: Any, blob: Callable[[str], bytes]) -> dict[str, Any]:
    """One WriteRequest: a PutRequest's Item or a DeleteRequest's Key, and nothing else."""
    if type(write) is not dict or len(write) != 1:
        raise NotPlain
    ((kind, request),) = write.items()
    member = _WRITE_REQUESTS.get(kind)
    if member is None or type(request) is not dict or set(request) != {member}:
        raise NotPlain
    attributes = request[member]
    if type(attributes) is not dict:
        raise NotPlain
    return {kind: {member: {name: _plain_value(v, blob) for name, v in attributes.items()}}}


def _parse_parameters(self: Any, request: Any) -> None:
    """`BaseResponse.parse_parameters` (the request's body walked along botocore's model, value by
    value: a tenth of moto's CPU per BatchWriteItem): a DynamoDB BatchWriteItem whose body holds
    only what its shape does is read with `plain_batch_write`, with the same result; every
    other request is moto's."""
    if self.boto3_service_name == "dynamodb" and self._get_action() == "BatchWriteItem":
        try:
            self.params = plain_batch_write(request.data)
            return
        except NotPlain:
            pass
    BATCH_WRITE_PARSE.original()(self, request)


# The traverser's methods whose override makes a processor moto's to walk (`_traverse` assumes
# the base class's: a node processed by the first class of `_processing_map` it is an instance of).
_TRAVERSAL = ("process", "nodes_to_be_processed", "traverse_node_recursively")
_NODE_KINDS: dict[type, bool] = {}  # a class -> whether its instances are moto's AST nodes


def _traverse(self: Any, node: Any) -> Any:
    """`DepthFirstTraverser.traverse`: moto's depth-first walk, children first, each node replaced by
    what the processor of its class returns, with the processing map read once a walk (moto builds
    it twice for every node, and tests every node against its abstract classes: three quarters of
    an UpdateItem's CPU, through the ten processors that validate its expression, twice). A
    processor that overrides how nodes are picked or walked is walked by moto."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node  # type: ignore[attr-defined]

    kind = type(self)
    if any(getattr(kind, name) is not getattr(DepthFirstTraverser, name) for name in _TRAVERSAL):
        return AST_TRAVERSE.original()(self, node)
    handlers = tuple(self._processing_map().items())
    own_hook = kind.pre_processing_of_child is not DepthFirstTraverser.pre_processing_of_child
    hook = self.pre_processing_of_child if own_hook else None
    chosen: dict[type, Any] = {}

    def walk(current: Any, child_id: int) -> Any:
        cls = type(current)
        is_node = _NODE_KINDS.get(cls)
        if is_node is None:
            is_node = _NODE_KINDS[cls] = isinstance(current, Node)
        if not is_node:
            return current
        parent = current.parent
        if current.children is not None:
            for index, child in enumerate(current.children):
                if hook is not None:
                    hook(current, index)
                walk(child, index)
        if cls not in chosen:
            chosen[cls] = next((process for base, process in handlers if issubclass(cls, base)), None)
        process = chosen[cls]
        if process is not None:
            current = process(current)
            current.parent = parent
            if parent:
                parent.children[child_id] = current
        return current

    return walk(node, -1)


@functools.lru_cache(maxsize=1024)
def _parsed_update(expression: str) -> Any:
    return UPDATE_PARSE.original()(expression)


def _update_expression(cls: Any, expression: str) -> Any:
    """`UpdateExpressionParser.make`: an UpdateExpression parsed once (moto parses it twice a request,
    a sixth of an UpdateItem's CPU), its tree shared: moto only reads it (find_clauses) or validates
    a deep copy of it (Validator.__init__), never changes it. A refused expression raises each time."""
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    if cls is not UpdateExpressionParser:  # a subclass parses as moto would, uncached
        return UPDATE_PARSE.original().__func__(cls, expression)
    return _parsed_update(expression)


QUERY_PARTITION: Final = QueryPartition()
SERVER_MODULES: Final = ServerModules()
PARTIQL_INSERT: Final = PartiqlInsert()
BATCH_WRITE_UNITS: Final = BatchWriteUnits()
DYNAMO_TYPES: Final = Patch(
    "dynamo-types", ("moto.dynamodb.models.dynamo_type:DynamoType.__init__",), (_dynamo_type,)
)
METHOD_NAMES: Final = Patch(
    "method-names", ("moto.core.responses:method_names_from_class",), (_method_names,)
)
BATCH_WRITE_PARSE: Final = Patch(
    "batch-write-parse", ("moto.core.responses:BaseResponse.parse_parameters",), (_parse_parameters,)
)
AST_TRAVERSE: Final = Patch(
    "ast-traverse", ("moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.traverse",), (_traverse,)
)
UPDATE_PARSE: Final = Patch(
    "update-parse",
    ("moto.dynamodb.parsing.expressions:UpdateExpressionParser.make",),
    (classmethod(_update_expression),),
)


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
)
# moto's DynamoDB hot paths: the embedded run's and `mapload serve`'s (the bench's server).
DYNAMODB_SPEED: Final = (
    BACKEND_LOOKUP,
    QUERY_PARTITION,
    DYNAMO_TYPES,
    METHOD_NAMES,
    BATCH_WRITE_PARSE,
    AST_TRAVERSE,
    UPDATE_PARSE,
)
# moto's hot paths, cheap for thousands of Map children.
SPEED: Final = (*DYNAMODB_SPEED, CLIENT_REUSE)
# Every patch, for the guard test (SERVER_MODULES: moto's server only, `mapload serve`).
ALL: Final[tuple[Patch, ...]] = (
    LAMBDA_INVOKE,
    WAIT_CLOCK,
    *LIMITS,
    *SPEED,
    TRANSACTIONS,
    SERVER_MODULES,
)


def install(*patches: Patch) -> None:
    """Install parameterless patches (e.g. `install(*SPEED)`); uninstall() undoes them."""
    for patch in patches:
        patch.install()


def uninstall(*patches: Patch) -> None:
    for patch in reversed(patches):
        patch.uninstall()
