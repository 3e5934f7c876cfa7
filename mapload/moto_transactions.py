"""moto's DynamoDB transactions made isolated from other threads' writes, as DynamoDB's are.

moto 5 runs TransactWriteItems by deep-copying every table it names and, when the transaction is
cancelled, putting the copies back: a write another thread made in between is undone, and a copy
taken while another thread inserts an item fails ("dictionary changed size during iteration").
The embedded run's Workers write from many threads (the ItemWriter's lanes, shards in parallel),
so a numeric ADD's transactions (logic/writemodes.py) would lose or repeat additions there.
`install()` runs the backend's item writes (PutItem, UpdateItem, DeleteItem, which BatchWriteItem
goes through) and TransactWriteItems one at a time under one lock; reads are unaffected.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")

_LOCK = threading.RLock()
_SAVED: dict[str, Callable[..., Any]] = {}


def install() -> None:
    """Serialize the DynamoDB backend's writes (idempotent; uninstall() restores them)."""
    from moto.dynamodb.models import DynamoDBBackend

    if _SAVED:
        return
    for name in WRITES:
        original = getattr(DynamoDBBackend, name)
        _SAVED[name] = original
        setattr(DynamoDBBackend, name, _locked(original))


def uninstall() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    for name, original in _SAVED.items():
        setattr(DynamoDBBackend, name, original)
    _SAVED.clear()


def _locked(write: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(write)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return write(self, *args, **kwargs)

    return locked
