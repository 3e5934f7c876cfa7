"""The single-item writer (conditional and update modes) against moto's DynamoDB and a misbehaving
wrapper: records of one key keep file order, refused conditions are skipped, lost answers and
throttling are retried, nothing is lost."""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from moto import mock_aws

from adapters.dynamodb import ItemWriter, RetryPolicy
from adapters.ledger import Markers, marker_bucket
from logic.errors import ShardWriteError
from logic.spec.dynamodb import ADD, NewerWinsTarget, PutIfAbsentTarget, UpdateTarget
from logic.writemodes import WritePlan
from mapload.emulator import moto_patches
from mapload.tables import create_pk_sk_table

pytestmark = pytest.mark.runtime

KEY = ("pk", "sk")
FAST = RetryPolicy(max_attempts=6, base_seconds=0.0, cap_seconds=0.0)


def item(key: int, version: int) -> dict[str, Any]:
    return {"pk": {"S": f"K#{key}"}, "sk": {"S": "I"}, "v": {"N": str(version)}}


class Misbehaving:
    """Wraps a client, per key and so in any thread order: the first call for every
    `throttle_every`-th key is throttled before it reaches the table; the first call that
    reaches the table for every `lose_every`-th key is written and then its answer is lost."""

    def __init__(self, client: Any, *, throttle_every: int = 0, lose_every: int = 0) -> None:
        self._client = client
        self._throttle_every = throttle_every
        self._lose_every = lose_every
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self.calls = 0

    def _nth(self, key: int, every: int) -> bool:
        return bool(every) and key % every == 0

    def put_item(self, **arguments: Any) -> Any:
        pk = arguments["Item"]["pk"]["S"]
        key = int(pk.removeprefix("K#"))
        with self._lock:
            self.calls += 1
            attempt = self._seen[pk] = self._seen.get(pk, 0) + 1
        throttled = self._nth(key, self._throttle_every)
        if throttled and attempt == 1:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "PutItem")
        answer = self._client.put_item(**arguments)
        if self._nth(key, self._lose_every) and attempt == (2 if throttled else 1):
            raise ReadTimeoutError(endpoint_url="http://dynamodb")
        return answer


@pytest.fixture
def db() -> Any:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-2")
        create_pk_sk_table(client, "target")
        yield client


def table(db: Any) -> dict[str, int]:
    return {row["pk"]["S"]: int(row["v"]["N"]) for row in db.scan(TableName="target")["Items"]}


def test_newer_wins_across_many_lanes_keeps_the_highest_version(db: Any) -> None:
    writer = ItemWriter(db, "target", WritePlan(NewerWinsTarget, KEY, version="v"), in_flight=8, policy=FAST)
    versions = [(k, v) for v in range(6) for k in range(20)] + [(k, 2) for k in range(20)]
    for key, version in versions:
        writer.submit((f"K#{key}", "I"), item(key, version))
    stats = writer.close()
    assert table(db) == {f"K#{k}": 5 for k in range(20)}
    # Per key: versions 0..5 each beat the stored one, the trailing 2 does not.
    assert stats.skipped == 20 and stats.requests == len(versions)


def test_put_if_absent_keeps_the_first_record_of_each_key_in_submission_order(db: Any) -> None:
    db.put_item(TableName="target", Item=item(0, 99))  # already in the table: left untouched
    writer = ItemWriter(db, "target", WritePlan(PutIfAbsentTarget, KEY), in_flight=4, policy=FAST, sample=3)
    for version in range(5):
        for key in range(10):
            writer.submit((f"K#{key}", "I"), item(key, version))
    stats = writer.close()
    assert table(db) == {"K#0": 99, **{f"K#{k}": 0 for k in range(1, 10)}}
    assert stats.skipped == 50 - 9
    assert len(writer.skipped_keys) == 3


def test_throttled_and_lost_answers_are_retried_and_counted_once(db: Any) -> None:
    flaky = Misbehaving(db, throttle_every=3, lose_every=4)
    writer = ItemWriter(flaky, "target", WritePlan(PutIfAbsentTarget, KEY), in_flight=4, policy=FAST)
    for key in range(40):
        writer.submit((f"K#{key}", "I"), item(key, 1))
    stats = writer.close()
    assert table(db) == {f"K#{k}": 1 for k in range(40)}
    # A retry after a lost answer finds its own item: written, not skipped.
    assert stats.skipped == 0
    # Keys 0, 3, .., 39 throttled once (14); keys 0, 4, .., 36 lost once (10): 24 retries.
    assert stats.throttles == 14 and stats.retries == 24
    assert flaky.calls == 40 + 24


def test_a_record_dynamodb_refuses_is_handed_back_and_the_others_are_written() -> None:
    """A ValidationException concerns the record sent (its item past 400 KB after an update, a
    key or a value the table does not take): no retry mends it, so it is handed back, with
    DynamoDB's words, to be rejected; the shard goes on."""

    class Refusing:
        def __init__(self) -> None:
            self.calls = 0

        def put_item(self, **arguments: Any) -> Any:
            self.calls += 1
            if arguments["Item"]["pk"]["S"] == "K#1":
                raise ClientError(
                    {"Error": {"Code": "ValidationException", "Message": "bad item"}}, "PutItem"
                )
            return {}

    client = Refusing()
    writer = ItemWriter(client, "target", WritePlan(PutIfAbsentTarget, KEY), in_flight=2, policy=FAST)
    for key in range(3):
        writer.submit((f"K#{key}", "I"), item(key, 1), record=f"line {key}")
    stats = writer.close()
    assert writer.take_refused() == [("line 1", "DynamoDB refused the write: ValidationException: bad item")]
    assert writer.take_refused() == []
    assert client.calls == stats.requests == 3 and stats.retries == 0


def test_a_write_refused_for_good_fails_the_shard_with_the_count() -> None:
    class Refusing:
        def put_item(self, **_: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "PutItem")

    writer = ItemWriter(Refusing(), "target", WritePlan(PutIfAbsentTarget, KEY), in_flight=2, policy=FAST)
    for key in range(3):
        writer.submit((f"K#{key}", "I"), item(key, 1))
    with pytest.raises(ShardWriteError, match="3 records were not written") as failed:
        writer.close()
    assert failed.value.not_written == 3 and "AccessDeniedException" in str(failed.value)


COUNTING = WritePlan(UpdateTarget, KEY, actions={"n": ADD}, counters=("n",))


def counted(key: int, n: int) -> dict[str, Any]:
    return {"pk": {"S": f"K#{key}"}, "sk": {"S": "I"}, "n": {"N": str(n)}}


class LosingTransactions:
    """Wraps a client: the first `lose` transactions are applied, then their answers are lost."""

    def __init__(self, client: Any, lose: int, error: Exception | None = None) -> None:
        self._client = client
        self.lose = lose
        self._error = error or ReadTimeoutError(endpoint_url="http://dynamodb")

    def transact_write_items(self, **arguments: Any) -> Any:
        answer = self._client.transact_write_items(**arguments)
        if self.lose:
            self.lose -= 1
            raise self._error
        return answer


SERVER_ERROR = ClientError(
    {"Error": {"Code": "InternalServerError", "Message": "applied, then failed"}}, "TransactWriteItems"
)


def test_a_transaction_applied_before_a_server_error_counts_written_not_skipped(db: Any) -> None:
    # A 5xx answer says nothing of whether the transaction was applied: here it was.
    create_pk_sk_table(db, "ledger")
    markers = Markers("ledger", "job", "plan", 1, expires_at=2_000_000_000)
    writer = ItemWriter(
        LosingTransactions(db, lose=1, error=SERVER_ERROR),
        "target",
        COUNTING,
        in_flight=1,
        policy=FAST,
        markers=markers,
    )
    moto_patches.TRANSACTIONS.install()
    try:
        writer.submit(("K#0", "I"), counted(0, 5), writer.units(60), 0)
        stats = writer.close()
    finally:
        moto_patches.TRANSACTIONS.uninstall()
    assert (stats.skipped, stats.retries) == (0, 1)
    assert _sums(db) == {"K#0": 5}


def _sums(db: Any) -> dict[str, int]:
    return {row["pk"]["S"]: int(row["n"]["N"]) for row in db.scan(TableName="target")["Items"]}


def test_a_numeric_add_is_applied_once_per_record_offset_however_often_it_is_sent(db: Any) -> None:
    # Given the ledger for markers and a shard's records (offset, key, amount)
    create_pk_sk_table(db, "ledger")
    markers = Markers("ledger", "job", "plan", 3, expires_at=2_000_000_000)
    records = [(10 * i, i % 3, i + 1) for i in range(12)]

    def send(client: Any) -> Any:
        writer = ItemWriter(client, "target", COUNTING, in_flight=4, policy=FAST, markers=markers)
        for offset, key, amount in records:
            writer.submit((f"K#{key}", "I"), counted(key, amount), writer.units(60), offset)
        return writer.close()

    # When the shard is sent, its answers lost twice, then sent again (a retried shard)
    moto_patches.TRANSACTIONS.install()  # as the embedded run does: moto's transactions isolated
    try:
        first = send(LosingTransactions(db, lose=2))
        again = send(db)
    finally:
        moto_patches.TRANSACTIONS.uninstall()

    # Then each key holds the sum of its amounts once; the lost answers counted written, the
    # second sending skipped whole; each record left one marker, with the ledger's TTL.
    assert _sums(db) == {f"K#{k}": sum(a for _, key, a in records if key == k) for k in range(3)}
    assert (first.skipped, first.retries) == (0, 2)
    # (records of one key waiting behind each other go in one transaction: fewer requests)
    assert again.skipped == len(records) and 3 <= again.requests <= len(records)
    marks = db.scan(TableName="ledger")["Items"]
    assert sorted(m["sk"]["S"] for m in marks) == sorted(f"OFFSET#{o}" for o, _, _ in records)
    # keyed by the shard and a bucket of the offset (adapters/ledger.py: no key takes a shard's rate)
    assert {m["pk"]["S"] for m in marks} == {
        f"MARK#job#PLAN#plan#SHARD#000003#{marker_bucket(o):02d}" for o, _, _ in records
    }
    assert {m["expiresAt"]["N"] for m in marks} == {"2000000000"}


def test_a_record_without_its_counter_is_a_plain_update_and_a_counter_needs_markers(db: Any) -> None:
    writer = ItemWriter(
        db, "target", COUNTING, in_flight=1, policy=FAST, markers=Markers("x", "j", "p", 0, 1)
    )
    writer.submit(("K#1", "I"), {"pk": {"S": "K#1"}, "sk": {"S": "I"}, "note": {"S": "hi"}})
    assert writer.close().requests == 1  # no marker table was touched: it does not exist
    with pytest.raises(ValueError, match="needs markers"):
        ItemWriter(db, "target", COUNTING, in_flight=1)


class Recording:
    """A client that records UpdateItem calls and refuses the `refuse`-th one (not retryable)."""

    def __init__(self, refuse: int = 0) -> None:
        self.calls: list[dict[str, Any]] = []
        self._refuse = refuse

    def update_item(self, **arguments: Any) -> Any:
        self.calls.append(arguments)
        if len(self.calls) == self._refuse:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "no"}}, "UpdateItem")
        return {}


def wide(count: int) -> dict[str, Any]:
    return {"pk": {"S": "W"}, "sk": {"S": "I"}, **{f"attribute_{i}": {"S": str(i)} for i in range(count)}}


def test_an_update_past_the_expression_limits_is_sent_as_several_paced_requests() -> None:
    """Each request of a split update costs the record's units (an UpdateItem is priced at the
    item's size); a refused one leaves the rest unsent and the record is handed back once."""
    waits: list[float] = []
    client = Recording()
    writer = ItemWriter(
        client,
        "target",
        WritePlan(UpdateTarget, KEY),
        in_flight=1,
        policy=FAST,
        rate=10.0,
        sleep=waits.append,
        clock=lambda: 0.0,
    )
    writer.submit(("W", "I"), wide(600), units=5)
    writer.close()
    assert len(client.calls) >= 3 and all(call["TableName"] == "target" for call in client.calls)
    assert writer.stats.requests == len(client.calls)
    # The clock stands still: each request reserves 5 more units at 10 a second.
    assert waits == pytest.approx([0.5 * (n + 1) for n in range(len(client.calls))])

    refusing = Recording(refuse=2)
    writer = ItemWriter(refusing, "target", WritePlan(UpdateTarget, KEY), in_flight=1, policy=FAST)
    writer.submit(("W", "I"), wide(600), record="W")
    writer.close()
    assert len(refusing.calls) == 2 and [r for r, _ in writer.take_refused()] == ["W"]


SHARDS = 50


def test_fifty_shards_adding_to_one_counter_finish_with_the_exact_sum(db: Any) -> None:
    """Issue 42 item 5: every shard's numeric adds go to one key. DynamoDB cancels a transaction
    on an item another one holds (TransactionConflict; the emulator models it:
    moto_transactions._Held). Each record in its own transaction, 50 shards contending, records
    ran out of attempts and the shards failed; now the records of the key waiting in a shard go in
    one transaction (each with its marker) and a conflict is retried until the deadline."""
    create_pk_sk_table(db, "ledger")
    records = 40
    failures: list[BaseException] = []
    stats: list[Any] = []

    def shard(index: int) -> None:
        markers = Markers("ledger", "job", "plan", index, expires_at=2_000_000_000)
        try:
            writer = ItemWriter(db, "target", COUNTING, in_flight=8, markers=markers)
            for n in range(records):
                writer.submit(("K#0", "I"), counted(0, n + 1), writer.units(60), 100 * n)
            stats.append(writer.close())
        except BaseException as error:
            failures.append(error)

    moto_patches.TRANSACTIONS.install()
    try:
        threads = [threading.Thread(target=shard, args=(i,)) for i in range(SHARDS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        conflicts = moto_patches.TRANSACTIONS.held.conflicts
    finally:
        moto_patches.TRANSACTIONS.uninstall()
    assert not failures, failures[0]
    assert _sums(db) == {"K#0": SHARDS * records * (records + 1) // 2}
    assert sum(s.skipped for s in stats) == 0
    assert conflicts > 0  # the model answered TransactionConflict: the contention was there
    assert len(db.scan(TableName="ledger")["Items"]) == SHARDS * records  # a marker per record


def _cancelled(*reasons: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": r, "Message": r} for r in reasons],
        },
        "TransactWriteItems",
    )


class Scripted:
    """A client whose TransactWriteItems answers from `answers` (an exception, or a function of the
    request that returns one or None) until they run out, then succeeds; it keeps every request."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []

    def transact_write_items(self, **request: Any) -> Any:
        self.requests.append(request)
        if self.answers:
            answer = self.answers.pop(0)
            error = answer(request) if callable(answer) else answer
            if error is not None:
                raise error
        return {}


def _counting_writer(client: Any, policy: RetryPolicy = FAST) -> ItemWriter:
    markers = Markers("ledger", "job", "plan", 0, expires_at=2_000_000_000)
    return ItemWriter(client, "target", COUNTING, in_flight=1, policy=policy, markers=markers)


def test_a_conflict_is_retried_past_the_attempts_while_throttling_is_not() -> None:
    conflicts = Scripted([_cancelled("TransactionConflict", "None")] * 20)
    writer = _counting_writer(conflicts)
    writer.submit(("K#0", "I"), counted(0, 1), 4, 0)
    assert writer.close().retries == 20 and len(conflicts.requests) == 21  # FAST allows 6 attempts

    throttled = Scripted([_cancelled("ThrottlingError", "None")] * 20)
    writer = _counting_writer(throttled)
    writer.submit(("K#0", "I"), counted(0, 1), 4, 0)
    with pytest.raises(ShardWriteError, match="gave up after 6 attempts"):
        writer.close()

    past_deadline = Scripted([_cancelled("TransactionConflict", "None")] * 20)
    no_time = RetryPolicy(max_attempts=6, deadline_seconds=0.0, cap_seconds=0.0)
    writer = _counting_writer(past_deadline, no_time)
    writer.submit(("K#0", "I"), counted(0, 1), 4, 0)
    with pytest.raises(ShardWriteError, match="gave up after 1 attempts"):
        writer.close()


def _grouped(answers: list[Any]) -> tuple[Scripted, ItemWriter, list[int]]:
    """Four records of one key: the first held in flight until the other three wait behind it
    (they go together), then `answers`; the markers each request carried, in order."""
    release = threading.Event()
    client = Scripted([lambda _: release.wait(5) and None, *answers])
    writer = _counting_writer(client)
    writer.submit(("K#0", "I"), counted(0, 1), 4, 0, record="r0")
    time.sleep(0.2)  # the first is in flight
    for n in range(1, 4):
        writer.submit(("K#0", "I"), counted(0, n + 1), 4, 10 * n, record=f"r{n}")
    release.set()
    writer.close()
    return client, writer, [len(r["TransactItems"]) - 1 for r in client.requests]


def test_a_group_drops_the_records_whose_markers_are_stored_and_sends_the_rest() -> None:
    _, writer, sent = _grouped([_cancelled("None", "None", "ConditionalCheckFailed", "None")])
    assert sent == [1, 3, 2] and writer.stats.skipped == 1


def test_a_refused_group_goes_again_record_by_record_and_only_the_refused_record_is_rejected() -> None:
    refused = _cancelled("ValidationError", "None")
    client, writer, sent = _grouped([_cancelled("ValidationError", "None", "None", "None"), None, refused])
    assert sent == [1, 3, 1, 1, 1]
    assert [record for record, _ in writer.take_refused()] == ["r2"]
    # the combined update added 2 + 3 + 4; alone, each its own
    amounts = [r["TransactItems"][0]["Update"]["ExpressionAttributeValues"] for r in client.requests]
    assert [next(iter(a.values()))["N"] for a in amounts] == ["1", "9", "2", "3", "4"]
