"""Requests per DynamoDB partition key in the embedded run (moto models no per-partition throughput).

DynamoDB serves at most 1,000 write and 3,000 read units a second per partition, and never splits
one partition key. `metering()` counts every DynamoDB request the run's clients send (the Worker's
wire sender included: the emulator's observer hook, mapload/emulator/calls.py, reads it from the
request), by table, partition key value and second, so a test can fail when a change makes one
key hot. The large case is computed, not metered (tests/runtime/test_ledger_keys.py).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mapload.emulator.calls import AwsCall, watching
from mapload.emulator.embedded import ACCOUNT
from mapload.emulator.moto_limits import parse_insert

_EQUALS = re.compile(r"(#?\w+)\s*=\s*(:\w+)")


@dataclass
class KeyMeter:
    """Requests per (table, partition key value), in total and per whole second."""

    key_names: Mapping[str, str] = field(default_factory=dict)  # table -> partition key attribute
    lock: threading.Lock = field(default_factory=threading.Lock)
    total: Counter[tuple[str, str]] = field(default_factory=Counter)
    per_second: Counter[tuple[str, str, int]] = field(default_factory=Counter)

    def keys(self, table: str) -> Counter[str]:
        """Requests per partition key value of `table`."""
        return Counter({key: n for (name, key), n in self.total.items() if name == table})

    def busiest_second(self, table: str) -> tuple[str, int]:
        """The key of `table` with the most requests in one second, and that count."""
        found = [(n, key) for (name, key, _), n in self.per_second.items() if name == table]
        n, key = max(found, default=(0, ""))
        return key, n

    def __call__(self, call: AwsCall) -> None:
        """An observer of the emulator's calls: its DynamoDB requests."""
        if call.operation.startswith("dynamodb:"):
            self.record(call.request, call.operation.split(":", 1)[1])

    def record(self, body: Mapping[str, Any], operation: str) -> None:
        now = int(time.time())
        touched = list(self._touched(operation, body))
        with self.lock:
            for table, key in touched:
                self.total[(table, key)] += 1
                self.per_second[(table, key, now)] += 1

    def _pk(self, table: str, item: Mapping[str, Any]) -> str:
        name = self.key_names.get(table) or _hash_key(table) or "pk"
        value = item.get(name) or {}
        return str(next(iter(value.values()), "")) if isinstance(value, Mapping) else ""

    def _touched(self, operation: str, body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        if operation in ("BatchWriteItem", "BatchGetItem"):
            for table, requests in (body.get("RequestItems") or {}).items():
                if operation == "BatchGetItem":
                    entries = requests.get("Keys", [])
                else:
                    entries = [
                        r.get("PutRequest", {}).get("Item") or r.get("DeleteRequest", {}).get("Key") or {}
                        for r in requests
                    ]
                for entry in entries:
                    yield table, self._pk(table, entry)
        elif operation in ("TransactWriteItems", "TransactGetItems"):
            for part in body.get("TransactItems", []):
                for detail in part.values():
                    table = str(detail.get("TableName", ""))
                    yield table, self._pk(table, detail.get("Item") or detail.get("Key") or {})
        elif operation == "BatchExecuteStatement":  # putIfAbsent's INSERTs (moto_patches.parse_insert)
            for statement in body.get("Statements", []):
                parsed = parse_insert(str(statement.get("Statement", "")))
                if parsed is not None:
                    table, inserted = parsed
                    item = dict(zip(inserted, statement.get("Parameters") or [], strict=False))
                    yield table, self._pk(table, item)
        elif operation == "Query":
            table = str(body.get("TableName", ""))
            names = body.get("ExpressionAttributeNames") or {}
            values = body.get("ExpressionAttributeValues") or {}
            for name, placeholder in _EQUALS.findall(str(body.get("KeyConditionExpression", ""))):
                if names.get(name, name) == (self.key_names.get(table) or _hash_key(table) or "pk"):
                    yield table, str(next(iter(values.get(placeholder, {}).values()), ""))
                    break
        elif "TableName" in body and ("Key" in body or "Item" in body):
            table = str(body["TableName"])
            yield table, self._pk(table, body.get("Key") or body.get("Item") or {})


def _hash_key(table: str) -> str | None:
    """The table's partition key attribute, from moto's in-process backend (None if unknown)."""
    from moto.dynamodb.models import dynamodb_backends

    for backend in dynamodb_backends[ACCOUNT].values():
        found = backend.tables.get(table)
        if found is not None:
            return str(found.hash_key_attr)
    return None


@contextmanager
def metering(key_names: Mapping[str, str] | None = None) -> Iterator[KeyMeter]:
    """Meter the DynamoDB requests of every botocore client from now on, until the block ends."""
    with watching(KeyMeter(dict(key_names or {}))) as meter:
        yield meter
