"""TransactWriteItems as DynamoDB applies it: isolated from other threads' writes, rolled back
item by item (moto's applies it across request threads and deep-copies every table it names), and
in conflict with any other write to one of its items while it is in progress (moto has no conflicts)."""

from __future__ import annotations

import contextlib
import copy
import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from mapload.emulator.moto_patch import Patch, resolve

_DYNAMODB_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
WRITE_LOCK = threading.RLock()


def _locked(write: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(write)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with WRITE_LOCK:
            return write(self, *args, **kwargs)

    return locked


_MODELS = "moto.dynamodb.models"
_TRANSACT = f"{_MODELS}:DynamoDBBackend.transact_write_items"
_BATCH = "moto.dynamodb.responses:DynamoHandler.batch_write_item"

# How long a TransactWriteItems holds its items at the least, from its arrival to its answer: the
# window in which another write to one of them conflicts. DynamoDB's transactions take some ms to
# tens of ms end to end (two phases over every item's partition); the emulator's own work takes
# well under one, and a window that short would almost never meet a second writer.
TRANSACTION_SECONDS: Final = 0.005
_CONFLICT_REASON = "Transaction is ongoing for the item"


def _conflict_error(message: str) -> Exception:
    """DynamoDB's TransactionConflictException (moto has none): a PutItem, UpdateItem or
    DeleteItem of an item that an ongoing TransactWriteItems holds."""
    from moto.dynamodb.exceptions import DynamodbException

    return DynamodbException("com.amazonaws.dynamodb.v20120810#TransactionConflictException", message)


class _Held:
    """The items of the TransactWriteItems in progress, by (table, hash key, sort key): what
    DynamoDB's conflict handling (developer guide, "Transaction conflict handling in DynamoDB")
    refuses another writer on. A TransactWriteItems with an item held is cancelled with reason
    TransactionConflict for that item (None for the others) and changes nothing; a PutItem,
    UpdateItem or DeleteItem of one fails with TransactionConflictException, a PartiQL INSERT
    answers TransactionConflict in its statement's error. Not modelled: an item of a
    BatchWriteItem in conflict, and TransactGetItems."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: Counter[tuple[Any, ...]] = Counter()
        self.conflicts = 0  # answered so far (TransactionConflict or TransactionConflictException)
        # Set while this thread applies a transaction or a BatchWriteItem (not checked).
        self.exempt = threading.local()

    def check(self, backend: Any, table_name: str, key: Mapping[str, Any]) -> None:
        if getattr(self.exempt, "on", False):
            return
        held = _item_key(backend, table_name, key)
        with self.lock:
            if held is not None and self.items[held]:
                self.conflicts += 1
                raise _conflict_error(_CONFLICT_REASON)

    @contextlib.contextmanager
    def holding(self, backend: Any, transact_items: list[dict[str, Any]]) -> Iterator[None]:
        """Hold the transaction's items until it is answered, at least TRANSACTION_SECONDS
        (Transactions.hold_seconds); cancelled, changing nothing, if another holds one of them."""
        from moto.dynamodb.exceptions import TransactionCanceledException

        keys = [_op_key(backend, item) for item in transact_items]
        started = time.monotonic()
        with self.lock:
            busy = [key is not None and self.items[key] > 0 for key in keys]
            if any(busy):
                self.conflicts += 1
                conflict = ("TransactionConflict", _CONFLICT_REASON, None)
                raise TransactionCanceledException([conflict if b else (None, None, None) for b in busy])
            held = [key for key in keys if key is not None]
            self.items.update(held)
        try:
            self.exempt.on = True  # moto applies the ops through the single-item writes
            try:
                yield
            finally:
                self.exempt.on = False
            left = TRANSACTIONS.hold_seconds - (time.monotonic() - started)
            if left > 0:
                time.sleep(left)
        finally:
            with self.lock:
                self.items.subtract(held)
                for key in held:
                    if self.items[key] <= 0:
                        del self.items[key]


def _item_key(backend: Any, table_name: Any, key: Any) -> tuple[Any, ...] | None:
    """(table, hash key, sort key) of the item `key` (a key or a whole item) names in
    `table_name`; None where it names none (moto refuses that request on its own)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        table = backend.get_table(table_name)
        hash_attr, range_attr = table.hash_key_attr, table.range_key_attr
        hash_value = DynamoType(key[hash_attr])
        range_value = None if range_attr is None else DynamoType(key[range_attr])
    except Exception:
        return None
    return (table_name, hash_value, range_value)


def _op_key(backend: Any, transact_item: Any) -> tuple[Any, ...] | None:
    """The item one action of a TransactWriteItems names (Put: its Item; others: their Key)."""
    if not isinstance(transact_item, Mapping) or not transact_item:
        return None
    op_type, op = next(iter(transact_item.items()))
    if not isinstance(op, Mapping):
        return None
    return _item_key(backend, op.get("TableName"), op.get("Item" if op_type == "Put" else "Key") or {})


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
    """Three mends of moto's TransactWriteItems, which deep-copies every table it names before its
    ops and, when the transaction is cancelled, puts the copies back, and never conflicts.

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
    same tables after, success or failure (tests/e2e/test_moto_transactions.py).

    Conflicts: a transaction holds its items from its arrival until it is answered, at least
    `hold_seconds` (TRANSACTION_SECONDS); a second transaction on one of them meanwhile is cancelled
    with reason TransactionConflict, a single-item write of one fails with
    TransactionConflictException (_Held), as DynamoDB answers. Less than the service: its window is
    the emulator's (a few ms, DynamoDB's may be longer), and a BatchWriteItem's items, PartiQL
    statements and TransactGetItems never conflict."""

    def __init__(self) -> None:
        super().__init__(
            "transactions",
            (*(f"{_MODELS}:DynamoDBBackend.{name}" for name in _DYNAMODB_WRITES), _BATCH, f"{_MODELS}:copy"),
        )
        self._copies = _TableCopies()
        self.held = _Held()
        self.hold_seconds = TRANSACTION_SECONDS

    def install(self) -> None:
        if self.installed:
            return
        for target in self.targets[:-2]:
            write = getattr(*resolve(target))
            self._swap(target, self._transaction() if target == _TRANSACT else self._checked(write))
        batch = getattr(*resolve(_BATCH))
        held = self.held

        @functools.wraps(batch)
        def batch_write_item(handler: Any, *args: Any, **kwargs: Any) -> Any:
            held.exempt.on = True
            try:
                return batch(handler, *args, **kwargs)
            finally:
                held.exempt.on = False

        self._swap(_BATCH, batch_write_item)
        from moto.dynamodb.models.table import Table

        self._copies.table = Table
        self._swap(self.targets[-1], self._copies)

    def _checked(self, write: Callable[..., Any]) -> Callable[..., Any]:
        """A single-item write (PutItem: its item; UpdateItem, DeleteItem: its key, each moto's
        second argument), refused while a transaction holds the item, then applied under the lock."""
        locked = _locked(write)
        held = self.held

        @functools.wraps(write)
        def checked(backend: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            held.check(backend, table_name, key)
            return locked(backend, table_name, key, *args, **kwargs)

        return checked

    def _transaction(self) -> Callable[..., None]:
        """moto's transact_write_items: its items held (conflicts), applied under the lock."""

        def transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
            with self.held.holding(backend, transact_items), WRITE_LOCK:
                self._cheap_rollback(backend, transact_items)

        return transact_write_items

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


TRANSACTIONS: Final = Transactions()
