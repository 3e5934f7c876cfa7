"""delete and putIfAbsent in batches (adapters/keyed_batches.py) against moto's DynamoDB (with the
emulator's BatchExecuteStatement, moto_patches.PARTIQL_INSERT: installed by conftest) and a
misbehaving wrapper: per-statement outcomes, retries of a partly failed batch, throttled single
statements, lost answers, per-key file order, the delete's units charged to the budget."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from moto import mock_aws

from adapters.dynamodb import RetryPolicy
from adapters.keyed_batches import KeyedBatchWriter
from logic.errors import ShardWriteError
from logic.spec.dynamodb import DeleteTarget, PutIfAbsentTarget
from logic.writemodes import WritePlan, insert_statement
from mapload.tables import create_pk_sk_table

pytestmark = pytest.mark.runtime

KEY = ("pk", "sk")
FAST = RetryPolicy(max_attempts=6, base_seconds=0.0, cap_seconds=0.0)
INSERT = WritePlan(PutIfAbsentTarget, KEY)
REMOVE = WritePlan(DeleteTarget, KEY)


def item(key: int, version: int = 0, **extra: Any) -> dict[str, Any]:
    return {"pk": {"S": f"K#{key}"}, "sk": {"S": "I"}, "v": {"N": str(version)}, **extra}


def key_of(key: int) -> tuple[str, str]:
    return (f"K#{key}", "I")


@pytest.fixture
def db() -> Any:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-2")
        create_pk_sk_table(client, "target")
        yield client


def table(db: Any) -> dict[str, int]:
    return {row["pk"]["S"]: int(row["v"]["N"]) for row in db.scan(TableName="target")["Items"]}


class Recording:
    """Passes calls to `client`, recording each batch request; `answer(n, statements)` may replace
    the n-th BatchExecuteStatement's answer (or raise) before or after it reaches the table."""

    def __init__(self, client: Any, answer: Any = None) -> None:
        self._client = client
        self._answer = answer
        self._lock = threading.Lock()
        self.batches: list[list[Any]] = []
        self.puts: list[dict[str, Any]] = []

    def batch_write_item(self, **arguments: Any) -> Any:
        with self._lock:
            self.batches.append(arguments["RequestItems"]["target"])
        return self._client.batch_write_item(**arguments)

    def batch_execute_statement(self, **arguments: Any) -> Any:
        with self._lock:
            self.batches.append(arguments["Statements"])
            n = len(self.batches)
        if self._answer is not None:
            return self._answer(n, arguments, self._client)
        return self._client.batch_execute_statement(**arguments)

    def put_item(self, **arguments: Any) -> Any:
        with self._lock:
            self.puts.append(arguments)
        return self._client.put_item(**arguments)


def test_inserts_go_25_a_request_and_each_statement_answers_for_itself(db: Any) -> None:
    db.put_item(TableName="target", Item=item(3, 9))
    client = Recording(db)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=4, policy=FAST)
    for key in range(60):
        writer.submit(key_of(key), item(key, 1))
    stats = writer.close()
    assert sorted(len(b) for b in client.batches) == [10, 25, 25]  # sent in parallel: any order
    assert stats.requests == 3 and stats.skipped == 1 and writer.skipped_keys == [key_of(3)]
    assert table(db) == {f"K#{k}": (9 if k == 3 else 1) for k in range(60)}
    assert client.puts == []


def test_the_first_record_of_a_key_wins_and_later_ones_are_skipped_in_file_order(db: Any) -> None:
    client = Recording(db)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=8, policy=FAST)
    records = [(k % 5, v) for v, k in enumerate(range(40))]
    for key, version in records:
        writer.submit(key_of(key), item(key, version))
    stats = writer.close()
    assert table(db) == {f"K#{k}": k for k in range(5)}  # each key's first record
    assert stats.skipped == 35
    assert all(len({s["Parameters"][0]["S"] for s in batch}) == len(batch) for batch in client.batches)


def test_a_later_batch_with_a_key_waits_for_the_earlier_batch_s_answer(db: Any) -> None:
    """Key 0 in batch 1 and again in batch 2: batch 2 is not sent until batch 1 is answered, even
    with room in flight, so key 0's first record wins."""
    first_sent, release = threading.Event(), threading.Event()

    def answer(n: int, arguments: Any, real: Any) -> Any:
        if n == 1:
            first_sent.set()
            assert release.wait(5)
        return real.batch_execute_statement(**arguments)

    client = Recording(db, answer)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=4, policy=FAST)
    writer.submit(key_of(0), item(0, 1))
    writer.submit(key_of(0), item(0, 2))  # closes batch 1; batch 2 opens with key 0
    assert first_sent.wait(5)
    done = threading.Thread(target=writer.close)
    done.start()
    done.join(0.3)
    assert len(client.batches) == 1  # batch 2 waits for batch 1
    release.set()
    done.join(5)
    assert table(db) == {"K#0": 1} and writer.stats.skipped == 1


def test_a_throttled_statement_is_sent_again_alone(db: Any) -> None:
    def answer(n: int, arguments: Any, real: Any) -> Any:
        if n > 1:
            return real.batch_execute_statement(**arguments)
        # Statement 2 throttled (not applied), the others answered by the table.
        kept = [s for i, s in enumerate(arguments["Statements"]) if i != 2]
        responses = real.batch_execute_statement(Statements=kept)["Responses"]
        responses.insert(2, {"Error": {"Code": "ProvisionedThroughputExceeded", "Message": "slow"}})
        return {"Responses": responses}

    client = Recording(db, answer)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=2, policy=FAST)
    for key in range(5):
        writer.submit(key_of(key), item(key, 1))
    stats = writer.close()
    assert [len(b) for b in client.batches] == [5, 1]
    assert client.batches[1][0]["Parameters"][0] == {"S": "K#2"}
    assert stats.throttles == 1 and stats.retries == 1 and stats.skipped == 0
    assert table(db) == {f"K#{k}": 1 for k in range(5)}


def test_a_whole_request_throttled_is_retried(db: Any) -> None:
    def answer(n: int, arguments: Any, real: Any) -> Any:
        if n == 1:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "BatchExecuteStatement"
            )
        return real.batch_execute_statement(**arguments)

    client = Recording(db, answer)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=2, policy=FAST)
    for key in range(3):
        writer.submit(key_of(key), item(key, 1))
    stats = writer.close()
    assert stats.throttles == 1 and stats.skipped == 0 and len(client.batches) == 2
    assert table(db) == {f"K#{k}": 1 for k in range(3)}


@pytest.mark.parametrize("lost", ["timeout", "5xx", "statement 5xx"])
def test_a_lost_answer_does_not_count_a_record_we_wrote_as_skipped(db: Any, lost: str) -> None:
    """The first request reaches the table and its answer is lost: the retry finds every item
    stored (DuplicateItem). Those that are ours count written; key 1, stored before by someone
    else, is skipped."""
    db.put_item(TableName="target", Item=item(1, 9))

    def answer(n: int, arguments: Any, real: Any) -> Any:
        response = real.batch_execute_statement(**arguments)
        if n == 1 and lost == "timeout":
            raise ReadTimeoutError(endpoint_url="http://dynamodb")
        if n == 1 and lost == "5xx":
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "?"}}, "BatchExecuteStatement"
            )
        if n == 1:  # each statement applied, its answer an InternalServerError
            error = {"Error": {"Code": "InternalServerError", "Message": "?"}}
            return {"Responses": [a if "Error" in a else error for a in response["Responses"]]}
        return response

    client = Recording(db, answer)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=2, policy=FAST)
    for key in range(4):
        writer.submit(key_of(key), item(key, 1))
    stats = writer.close()
    assert table(db) == {"K#0": 1, "K#1": 9, "K#2": 1, "K#3": 1}
    assert stats.skipped == 1 and writer.skipped_keys == [key_of(1)]
    if lost == "statement 5xx":  # key 1's DuplicateItem came first, unambiguous: no PutItem for it
        assert sorted(p["Item"]["pk"]["S"] for p in client.puts) == ["K#0", "K#2", "K#3"]


def test_an_insert_answered_conditional_check_failed_is_skipped_as_its_key_exists(db: Any) -> None:
    """BatchStatementError documents ConditionalCheckFailed beside DuplicateItem: an INSERT whose
    key is stored may answer either, and both mean the record is skipped, not a failed shard."""

    def condition_failed(_n: int, arguments: Any, client: Any) -> Any:
        answer = client.batch_execute_statement(**arguments)
        for response in answer["Responses"]:
            if response.get("Error", {}).get("Code") == "DuplicateItem":
                response["Error"] = {
                    "Code": "ConditionalCheckFailed",
                    "Message": "The conditional request failed",
                }
        return answer

    db.put_item(TableName="target", Item=item(1, 9))
    client = Recording(db, condition_failed)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=2, policy=FAST)
    for key in range(3):
        writer.submit(key_of(key), item(key, 1))
    stats = writer.close()
    assert stats.skipped == 1 and writer.skipped_keys == [key_of(1)]
    assert table(db) == {"K#0": 1, "K#1": 9, "K#2": 1}


def test_a_statement_dynamodb_refuses_is_handed_back_to_be_rejected(db: Any) -> None:
    client = Recording(db)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=2, policy=FAST)
    writer.submit(key_of(0), item(0, 1), record="line 1")
    writer.submit(("bad", "I"), {"pk": {"N": "1"}, "sk": {"S": "I"}}, record="line 2")  # wrong key type
    stats = writer.close()
    ((record, reason),) = writer.take_refused()
    assert record == "line 2" and reason.startswith("DynamoDB refused the write: ValidationError: ")
    assert stats.skipped == 0 and table(db) == {"K#0": 1}


def test_a_statement_failing_for_another_reason_fails_the_shard(db: Any) -> None:
    def denied(_n: int, arguments: Any, _client: Any) -> Any:
        return {
            "Responses": [
                {"Error": {"Code": "AccessDenied", "Message": "no"}} for _ in arguments["Statements"]
            ]
        }

    writer = KeyedBatchWriter(Recording(db, denied), db, "target", INSERT, in_flight=2, policy=FAST)
    writer.submit(key_of(0), item(0, 1))
    with pytest.raises(ShardWriteError) as failed:
        writer.close()
    assert failed.value.not_written == 1 and "AccessDenied" in str(failed.value)


def test_an_insert_past_partiql_s_statement_size_goes_as_one_conditional_put(db: Any) -> None:
    wide = item(0, 1, **{f"attribute_{'x' * 40}_{n}": {"S": "v"} for n in range(200)})
    assert len(insert_statement("target", wide)["Statement"]) > 8192
    db.put_item(TableName="target", Item=item(1, 9))
    client = Recording(db)
    writer = KeyedBatchWriter(client, client, "target", INSERT, in_flight=2, policy=FAST)
    writer.submit(key_of(0), wide)
    writer.submit(key_of(1), item(1, 1, **{k: v for k, v in wide.items() if k.startswith("attr")}))
    writer.submit(key_of(2), item(2, 1))
    stats = writer.close()
    assert table(db) == {"K#0": 1, "K#1": 9, "K#2": 1}
    assert stats.skipped == 1 and len(client.puts) == 2


def test_deletes_go_25_a_request_a_repeated_key_in_the_next(db: Any) -> None:
    for key in range(30):
        db.put_item(TableName="target", Item=item(key))
    client = Recording(db)
    writer = KeyedBatchWriter(client, client, "target", REMOVE, in_flight=4, policy=FAST)
    for key in [*range(10), 3, *range(10, 40)]:
        writer.submit(key_of(key), {"pk": {"S": f"K#{key}"}, "sk": {"S": "I"}})
    stats = writer.close()
    assert sorted(len(b) for b in client.batches) == [6, 10, 25]  # sent in parallel: any order
    assert all("DeleteRequest" in r for b in client.batches for r in b)
    assert table(db) == {} and stats.skipped == 0


class Unprocessed:
    """Leaves the last request of the first BatchWriteItem unprocessed, and reports `units` consumed
    per request processed."""

    def __init__(self, client: Any, units: float) -> None:
        self._client = client
        self._units = units
        self.calls: list[Any] = []

    def batch_write_item(self, **arguments: Any) -> Any:
        requests = arguments["RequestItems"]["target"]
        self.calls.append(arguments)
        done, left = (requests[:-1], requests[-1:]) if len(self.calls) == 1 else (requests, [])
        self._client.batch_write_item(RequestItems={"target": done})
        return {
            "UnprocessedItems": {"target": left} if left else {},
            "ConsumedCapacity": [{"TableName": "target", "CapacityUnits": self._units * len(done)}],
        }


def test_unprocessed_deletes_are_sent_again(db: Any) -> None:
    for key in range(5):
        db.put_item(TableName="target", Item=item(key))
    client = Unprocessed(db, 1.0)
    writer = KeyedBatchWriter(client, db, "target", REMOVE, in_flight=2, policy=FAST)
    for key in range(5):
        writer.submit(key_of(key), {"pk": {"S": f"K#{key}"}, "sk": {"S": "I"}})
    stats = writer.close()
    assert table(db) == {} and stats.unprocessed == 1 and stats.retries == 1
    assert [len(c["RequestItems"]["target"]) for c in client.calls] == [5, 1]
    assert all(c["ReturnConsumedCapacity"] == "TOTAL" for c in client.calls)


def test_a_delete_s_units_follow_the_deleted_item_not_the_record(db: Any) -> None:
    """Each delete books 1 unit (its key); DynamoDB reports 10 (a 10 KB item): the other 9 are
    charged to the write budget after the answer, and the next request waits for them. At 100
    units/s: 25 + 1 + 25 units booked (a retried request between) and 240 + 10 charged before the
    last request, against an empty bucket refilled as the clock moves: 2.75 s of waiting (0.51 s
    without the charge)."""
    waits: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    client = Unprocessed(db, 10.0)
    writer = KeyedBatchWriter(
        client, db, "target", REMOVE, in_flight=1, policy=FAST, rate=100.0, clock=lambda: now[0], sleep=sleep
    )
    for key in range(50):
        writer.submit(key_of(key), {"pk": {"S": f"K#{key}"}, "sk": {"S": "I"}})
    writer.close()
    assert sum(waits) == pytest.approx(2.75, abs=0.1)


def test_the_emulator_s_units_of_deleted_items_reach_the_write_budget(db: Any) -> None:
    """Against moto with the emulator's BatchWriteItem units (moto_patches.BATCH_WRITE_UNITS):
    50 stored items of 3 KB deleted at 100 units/s, two requests of 25. The first books 25 units
    (0.25 s: the bucket starts empty) and is charged the other 50 its items consumed; the second
    waits for those and its own 25: 0.75 s. Without the charge: 0.25 + 0.25 s."""
    from mapload.emulator import moto_patches

    for key in range(50):
        db.put_item(TableName="target", Item=item(key, x={"S": "y" * 3000}))
    waits: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    moto_patches.BATCH_WRITE_UNITS.install()
    try:
        writer = KeyedBatchWriter(
            db, db, "target", REMOVE, in_flight=1, policy=FAST, rate=100.0, clock=lambda: now[0], sleep=sleep
        )
        for key in range(50):
            writer.submit(key_of(key), {"pk": {"S": f"K#{key}"}, "sk": {"S": "I"}})
        writer.close()
    finally:
        moto_patches.BATCH_WRITE_UNITS.uninstall()
    assert table(db) == {}
    assert waits == [pytest.approx(0.25), pytest.approx(0.75)]
