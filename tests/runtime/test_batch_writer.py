"""The batch writer against a DynamoDB that throttles, drops items and fails: nothing is lost."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from adapters.dynamodb import BatchWriter, RetryPolicy
from logic.errors import ShardWriteError

pytestmark = pytest.mark.runtime

TABLE = "target"


def _items(n: int) -> list[dict[str, Any]]:
    return [{"pk": {"S": f"P#{i}"}, "n": {"N": str(i)}} for i in range(n)]


class FakeDynamoDB:
    """In-memory BatchWriteItem with scripted misbehaviour, keyed by call number."""

    def __init__(
        self,
        *,
        unprocessed_every: int = 0,
        throttle_every: int = 0,
        drop_always: bool = False,
        disconnect_every: int = 0,
    ) -> None:
        self.table: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self.max_request = 0
        self._lock = threading.Lock()
        self._unprocessed_every = unprocessed_every
        self._throttle_every = throttle_every
        self._disconnect_every = disconnect_every
        self._drop_always = drop_always

    def batch_write_item(self, RequestItems: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            call = self.calls
        requests = RequestItems[TABLE]
        assert len(requests) <= 25
        keys = [r["PutRequest"]["Item"]["pk"]["S"] for r in requests]
        assert len(keys) == len(set(keys)), "DynamoDB rejects a batch with two puts of one key"
        if self._throttle_every and call % self._throttle_every == 0:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
                "BatchWriteItem",
            )
        if self._disconnect_every and call % self._disconnect_every == 0:
            raise EndpointConnectionError(endpoint_url="http://dynamodb")
        if self._drop_always:
            return {"UnprocessedItems": {TABLE: requests}}
        keep = requests
        left: list[dict[str, Any]] = []
        if self._unprocessed_every and call % self._unprocessed_every == 0:
            keep, left = requests[: len(requests) // 2], requests[len(requests) // 2 :]
        with self._lock:
            for r in keep:
                item = r["PutRequest"]["Item"]
                self.table[item["pk"]["S"]] = item
        return {"UnprocessedItems": {TABLE: left} if left else {}}


def _write(db: FakeDynamoDB, items: list[dict[str, Any]], policy: RetryPolicy | None = None) -> BatchWriter:
    writer = BatchWriter(
        db, TABLE, in_flight=4, policy=policy or RetryPolicy(), sleep=lambda _s: None, rng=random.Random(7)
    )
    for start in range(0, len(items), 25):
        writer.submit(items[start : start + 25])
    writer.close()
    return writer


def test_given_unprocessed_items_and_throttling_when_writing_then_every_item_lands_once() -> None:
    db = FakeDynamoDB(unprocessed_every=3, throttle_every=5, disconnect_every=7)
    items = _items(2_000)

    writer = _write(db, items)

    assert set(db.table) == {f"P#{i}" for i in range(2_000)}
    assert writer.stats.retries > 0
    assert writer.stats.throttles > 0
    assert writer.stats.unprocessed > 0


def test_given_a_table_that_never_accepts_when_writing_then_it_fails_with_the_count_not_written() -> None:
    db = FakeDynamoDB(drop_always=True)

    with pytest.raises(ShardWriteError) as failure:
        _write(db, _items(60), RetryPolicy(max_attempts=3))

    assert failure.value.not_written == 60
    assert "60 records were not written" in str(failure.value)
    assert db.calls == 3 * 3  # three batches, three attempts each: bounded


def test_given_a_validation_error_when_writing_then_it_is_not_retried() -> None:
    class Refusing(FakeDynamoDB):
        def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
            self.calls += 1
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "bad"}}, "BatchWriteItem")

    db = Refusing()
    with pytest.raises(ShardWriteError, match="ValidationException"):
        _write(db, _items(25))
    assert db.calls == 1


class FailsOnce(FakeDynamoDB):
    """A batch whose sending raises an error that is no answer of DynamoDB's (a bug's error)."""

    def batch_write_item(self, RequestItems: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        with self._lock:
            first = self.calls == 0
        if first:
            with self._lock:
                self.calls += 1
            raise KeyError("a bug in the request path")
        return super().batch_write_item(RequestItems)


def test_a_batch_that_raised_fails_the_writer_even_after_its_future_was_pruned() -> None:
    """More than 256 batches: the list of futures is pruned of done ones as the shard goes on; the
    batch that raised must still fail close() (its items were not written)."""
    db = FailsOnce()
    writer = BatchWriter(db, TABLE, in_flight=2)
    items = _items(25 * 300)
    with pytest.raises(KeyError):
        for start in range(0, len(items), 25):
            writer.submit(items[start : start + 25])
        writer.close()
