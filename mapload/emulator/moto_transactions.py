"""TransactWriteItems as DynamoDB applies it: isolated from other threads' writes and rolled back
item by item (moto's applies it across request threads and deep-copies every table it names)."""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Iterable, Mapping
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


TRANSACTIONS: Final = Transactions()
