"""Per-key load on the ledger at the largest run the config and Plan accept, computed from the
code's own constants (issue 23: no key over a partition's 1,000 write / 3,000 read units a second).

The items are the real ones: a recording client stands in for DynamoDB and keeps what each
`Ledger`/`HeartbeatBoard`/`Markers` call sends, so a change to the keys or to what a shard writes
changes the numbers here. A real-time meter at this scale would be slow and flaky; the embedded run
meters small runs per key instead (tests/e2e/test_key_load.py).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from typing import Any

import pytest

from adapters import budget, csvchain, ledger
from adapters.budget import HeartbeatBoard
from adapters.dynamodb import ItemWriter
from adapters.ledger import Ledger, Markers, block_of, marker_bucket, shard_key
from logic.clipping import TEXT_BYTES
from logic.csvrecords import ShardSummary
from logic.planning import DEFAULT_MAX_SHARDS
from logic.report import SAMPLE_SIZE, SKIPPED_SAMPLE_SIZE, clip_sample
from logic.spec.dynamodb import ADD, UpdateTarget
from logic.writemodes import MARKER_UNITS, WritePlan
from stacks.loader_settings import MAX_MAP_CONCURRENCY, LoaderConfig

pytestmark = pytest.mark.runtime

# DynamoDB, per partition: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html
PARTITION_WCU = 1_000
PARTITION_RCU = 3_000
WRITE_UNIT = 1024  # bytes per write unit (transactional: two)
READ_UNIT = 4096  # bytes per strongly consistent read unit (eventually consistent: half)
WORKERS = MAX_MAP_CONCURRENCY  # the highest max_concurrency_cap
SHARDS = DEFAULT_MAX_SHARDS  # the most Plan cuts
IN_FLIGHT = max(m.le for m in LoaderConfig.model_fields["write_concurrency"].metadata if hasattr(m, "le"))
# The quickest TransactWriteItems round trip assumed: a few ms within a Region.
FASTEST_TRANSACTION = 0.005
JOB = "j" * 80  # the longest jobId
PLAN = "p" * 64


class Recorder:
    """A DynamoDB client that answers like an empty table and keeps each request's key and item."""

    def __init__(self, stored: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.stored = stored

    def _keep(self, operation: str, **request: Any) -> dict[str, Any]:
        self.calls.append((operation, request))
        return {"Item": self.stored} if operation == "get_item" and self.stored else {}

    def put_item(self, **request: Any) -> dict[str, Any]:
        return self._keep("put_item", **request)

    def update_item(self, **request: Any) -> dict[str, Any]:
        return self._keep("update_item", **request)

    def get_item(self, **request: Any) -> dict[str, Any]:
        return self._keep("get_item", **request)

    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        return self._keep("transact_write_items", **request)

    def batch_get_item(self, **request: Any) -> dict[str, Any]:
        self.calls.append(("batch_get_item", request))
        return {"Responses": {}}

    def get_paginator(self, _: str) -> Any:
        recorder = self

        class Pages:
            def paginate(self, **request: Any) -> list[dict[str, Any]]:
                recorder.calls.append(("query", request))
                return [{"Items": []}]

        return Pages()


def item_bytes(item: dict[str, dict[str, str]]) -> int:
    """DynamoDB's item size: attribute names plus values (strings and numbers as text, an upper bound)."""
    return sum(len(name.encode()) + len(next(iter(value.values())).encode()) for name, value in item.items())


def largest_counts() -> dict[str, Any]:
    """A shard record's counts with every sample full: SAMPLE_SIZE rejects whose texts are all
    clipped at TEXT_BYTES, SKIPPED_SAMPLE_SIZE skipped keys as long as DynamoDB allows (2,048 and
    1,024 bytes, base64 when binary)."""
    wide = "\u00e9" * TEXT_BYTES  # clipped by JSON bytes
    reject = clip_sample(
        {"source": wide, "member": wide, "shardLine": 10**9, "offset": 10**13, "code": wide, "reason": wide}
        | {"raw": wide, "rawBase64": wide}
    )
    skipped = {"pk": "A" * math.ceil(2048 * 4 / 3), "sk": "B" * math.ceil(1024 * 4 / 3)}
    names = ["read", "written", "skipped", "rejected", "duplicates", "lines", "bytes", "requests", "retries"]
    return {
        **dict.fromkeys(names, 10**12),
        "sample": [reject] * SAMPLE_SIZE,
        "skippedSample": [skipped] * SKIPPED_SAMPLE_SIZE,
        "byReason": {f"REASON_{n}": 10**9 for n in range(20)},
        "rejectsKey": "k" * 1024,
        "graphKey": "k" * 1024,
        "runId": "r" * 80,
    }


def test_a_shard_record_and_its_csv_states_sit_on_its_block_key_not_the_jobs() -> None:
    client = Recorder()
    book = Ledger(client, "ledger", 7)
    index = 12_345
    book.shard_done(JOB, PLAN, index)
    book.put_csv_state(JOB, PLAN, index, "SUMMARY", {})
    list(book.csv_states_before(JOB, PLAN, index))
    book.record_shard(JOB, PLAN, index, {})
    keys = {json.dumps(request.get("Key") or request.get("Item") or {}) for _, request in client.calls}
    assert keys and not any(f'"JOB#{JOB}"' in key for key in keys)  # the job's key takes no per-shard call
    block = shard_key(JOB, PLAN, index)["pk"]
    assert all(
        (request.get("Key") or request.get("Item") or {}).get("pk", block) == block
        for _, request in client.calls
    )
    queried = [r["ExpressionAttributeValues"][":pk"] for op, r in client.calls if op == "query"]
    assert queried[0] == block  # the walk-back starts in its own block, then the ones before
    assert shard_key(JOB, PLAN, 0)["pk"] != shard_key(JOB, PLAN, ledger.BLOCK_SHARDS)["pk"]
    assert block_of(ledger.BLOCK_SHARDS - 1) == 0


def _written_units(calls: list[tuple[str, dict[str, Any]]]) -> int:
    return sum(math.ceil(item_bytes(r["Item"]) / WRITE_UNIT) for op, r in calls if op == "put_item")


def test_no_block_key_takes_more_than_a_partition_at_the_largest_run() -> None:
    """Worst case: all of a block's shards start (and each finds a record: a re-run) and finish
    within one second, each writing its largest record and both CSV states; and walkers poll it."""
    client = Recorder()
    book = Ledger(client, "ledger", 7)
    book.record_shard(JOB, PLAN, SHARDS - 1, largest_counts())
    ((_, record),) = client.calls
    record_units = math.ceil(item_bytes(record["Item"]) / WRITE_UNIT)
    client.calls.clear()
    state = {"first": 10**13, "end": 10**13, "state": 10**13, "exit": 10**13}
    summary = ShardSummary(10**13, 10**13, 10**13, 10**13, True, 10**13)._asdict()
    book.put_csv_state(JOB, PLAN, SHARDS - 1, "START", state)
    book.put_csv_state(JOB, PLAN, SHARDS - 1, "SUMMARY", summary)
    csv_units = _written_units(client.calls)
    csv_bytes = max(item_bytes(r["Item"]) for _, r in client.calls)

    writes = ledger.BLOCK_SHARDS * (record_units + csv_units)
    assert writes <= PARTITION_WCU, (record_units, csv_units)

    # Reads: each shard's shard_done (a consistent GetItem of the record, when a re-run finds it);
    # the CSV walk-back's Query of a block page: at first its own and the next block's shards at
    # FIRST_WAIT_SECONDS, then (a long run of uncertain shards) every Worker at MAX_WAIT_SECONDS.
    done_reads = ledger.BLOCK_SHARDS * math.ceil(item_bytes(record["Item"]) / READ_UNIT)
    page = min(ledger.CSV_PAGE_ITEMS, 2 * ledger.BLOCK_SHARDS) * csv_bytes
    page_units = math.ceil(page / READ_UNIT)
    burst = 2 * ledger.BLOCK_SHARDS / csvchain.FIRST_WAIT_SECONDS * page_units
    steady = min(WORKERS, SHARDS) / csvchain.MAX_WAIT_SECONDS * page_units
    assert done_reads + burst <= PARTITION_RCU, (done_reads, burst)
    assert steady <= PARTITION_RCU, steady


def test_no_marker_key_takes_more_than_a_partition_at_the_most_transactions_in_flight() -> None:
    """A shard's numeric-add markers: the records in flight of an ItemWriter built with
    `write_concurrency`'s cap (each transaction carries its records' markers), at the quickest
    round trip (5 ms), 2 units a marker
    (transactional), over MARKER_BUCKETS keys; the spread checked on offsets of fixed-width
    records (the least random a file gets)."""
    markers = Markers("ledger", JOB, PLAN, SHARDS - 1, 2_000_000_000)
    assert item_bytes(markers.item(10**13)) <= MARKER_UNITS * WRITE_UNIT
    counting = WritePlan(UpdateTarget, ("pk", "sk"), actions={"n": ADD}, counters=("n",))
    writer = ItemWriter(Recorder(), "target", counting, in_flight=IN_FLIGHT, markers=markers)
    # Each record in flight has its marker in flight: a transaction carries the markers of its
    # key's records waiting behind each other, up to every record the writer holds at once.
    in_flight = writer.records_bound
    assert len(writer._lanes) <= in_flight <= ledger.MARKED_IN_FLIGHT
    writer.close()
    assert ledger.FASTEST_TRANSACTION_SECONDS <= FASTEST_TRANSACTION
    per_second = in_flight / FASTEST_TRANSACTION * 2 * MARKER_UNITS
    for width in (1, 10, 64, 100, 1000, 4096):
        spread = Counter(marker_bucket(offset) for offset in range(0, width * 100_000, width))
        assert len(spread) == ledger.MARKER_BUCKETS
        busiest = max(spread.values()) / sum(spread.values())
        assert per_second * busiest <= PARTITION_WCU, (width, busiest)
    keys = {markers.item(offset)["pk"]["S"] for offset in range(1000)}
    assert len(keys) == ledger.MARKER_BUCKETS  # one shard's markers, spread
    assert markers.item(77) == markers.item(77)  # a record's marker key is fixed: exactly once


def test_no_heartbeat_key_takes_more_than_a_partition_with_every_worker_running() -> None:
    """Each Worker beats once a window (an ADD of 1 to its bucket) in the window's first
    PHASE_SPAN — its first beat too, so Workers started together do not beat together
    (test_rate_control.py) — and reads every bucket of the previous window (eventually consistent)."""
    client = Recorder()
    board = HeartbeatBoard(client, "ledger", JOB, "r" * 80)
    board.beat(WORKERS - 1, 10**9)
    board.count(10**9)
    beat = client.calls[0][1]
    beat_bytes = item_bytes({**beat["Key"], "beats": {"N": str(WORKERS)}, "expiresAt": {"N": "2000000000"}})
    assert beat_bytes <= WRITE_UNIT
    (keys,) = [r["RequestItems"]["ledger"]["Keys"] for op, r in client.calls if op == "batch_get_item"]
    assert len(keys) == budget.BUCKETS
    span = budget.PHASE_SPAN * budget.INTERVAL_SECONDS
    phases = Counter(int(budget.phase(index, budget.INTERVAL_SECONDS)) for index in range(WORKERS))
    crowded = max(phases.values()) / (WORKERS / span)  # the busiest second against an even spread
    writes = WORKERS / budget.BUCKETS / span * crowded
    reads = WORKERS / span * crowded * 0.5 * math.ceil(beat_bytes / READ_UNIT)
    assert writes <= PARTITION_WCU and reads <= PARTITION_RCU, (writes, reads)
    # And a Worker's ledger cost per window stays a few units, however many shards there are.
    assert 1 + budget.BUCKETS * 0.5 <= 3


# The upload ledger (`mapload upload`, adapters/multipart.py): S3 takes at least 3,500 PUTs a second
# per partitioned prefix (user guide, "Best practices design patterns: optimizing Amazon S3
# performance"), and one object's UploadParts are on one prefix: however many hosts send, no more
# parts a second than that arrive, and so no more part records.
S3_PUTS_PER_SECOND = 3_500
UPLOAD_HOSTS = 64  # the stated number of hosts uploading one object together
PART_BYTES = 8 * 1024 * 1024  # the smallest part `mapload upload` cuts
LONGEST_URI = ("b" * 63, "k" * 1024)  # S3's longest bucket name and key
MOST_PARTS = 10_000


def _upload_records() -> tuple[int, dict[str, int], int]:
    """Write units of one part's record (transactional), the keys 10,000 parts' records go to (and
    how many each), and the units of one count at the upload item's largest (every part counted:
    an UpdateItem costs the larger of the item before and after)."""
    from adapters import multipart

    client = Recorder()
    book = multipart.UploadLedger(client, "ledger", *LONGEST_URI)
    parts = [
        multipart.UploadedPart(n, '"' + "e" * 32 + '-1"', PART_BYTES, "x" * 24, "c" * 8)
        for n in range(1, MOST_PARTS + 1)
    ]
    for start in range(0, MOST_PARTS, multipart.COUNT_BATCH):
        book.record_parts("u" * 128, parts[start : start + multipart.COUNT_BATCH])
    sent = [r["TransactItems"] for op, r in client.calls if op == "transact_write_items"]
    records = [action["Put"]["Item"] for actions in sent for action in actions]
    record_units = 2 * max(math.ceil(item_bytes(item) / WRITE_UNIT) for item in records)
    keys = Counter(str(item["pk"]["S"]) for item in records)
    upload_item = {
        "pk": {"S": f"UPLOAD#s3://{'/'.join(LONGEST_URI)}"},
        "sk": {"S": "UPLOAD"},
        "owner": {"S": "o" * 32},
        "total": {"N": str(MOST_PARTS)},
        "name": {"S": "n" * 255},
        "uploadId": {"S": "u" * 128},
        "checksum": {"S": multipart.LEDGER_FORMAT},
        "partsDone": {"N": str(MOST_PARTS)},
        "lastCount": {"S": "o" * 32 + "#" + ",".join(["10000"] * multipart.COUNT_BATCH)},
        "createdAt": {"N": "2000000000"},
        "expiresAt": {"N": "2000000000"},
    }
    done = sum(len(str(n)) for n in range(1, MOST_PARTS + 1))  # doneParts, numbers as text: an upper bound
    count_units = math.ceil((item_bytes(upload_item) + len("doneParts") + done) / WRITE_UNIT)
    return record_units, dict(keys), count_units


def test_no_upload_ledger_key_takes_more_than_a_partition_at_s3_s_most_parts_a_second() -> None:
    """Issue 42 item 6: every part record and the counter once sat on the upload's one key, past a
    partition's 1,000 units at ~2.3 GB/s of 8 MiB parts. Part records are now spread over
    PART_KEYS keys by part number: at S3's most parts a second for one object (any number of
    hosts), parts sent in runs of consecutive numbers, the busiest key stays under. The counter
    (the upload item, one key) costs a count per batch of COUNT_BATCH parts, plus a partial batch
    per host every RECORD_SECONDS; its item grows with the parts counted (doneParts): at
    UPLOAD_HOSTS hosts it stays under a partition up to the rate asserted here, and is the one
    key left hot beyond it (docs/CONTRACTS.md)."""
    from adapters import multipart

    record_units, keys, count_units = _upload_records()
    assert len(keys) == multipart.PART_KEYS and f"UPLOAD#s3://{'/'.join(LONGEST_URI)}" not in keys
    assert max(keys.values()) <= math.ceil(MOST_PARTS / multipart.PART_KEYS)  # an even spread
    # A second's parts: a run of consecutive numbers, the busiest key ceil(run / PART_KEYS) of them.
    busiest = math.ceil(S3_PUTS_PER_SECOND / multipart.PART_KEYS)
    assert busiest * record_units <= PARTITION_WCU, (busiest, record_units)

    def counter_units(parts_per_second: float) -> float:
        counts = parts_per_second / multipart.COUNT_BATCH + UPLOAD_HOSTS / multipart.RECORD_SECONDS
        return counts * count_units

    issue_rate = 2.3e9 / PART_BYTES  # parts a second at the rate the issue names
    # The layout before: records and counter on one key, over a partition at that rate.
    assert issue_rate * record_units + counter_units(issue_rate) > PARTITION_WCU
    # The counter alone: under a partition at that rate, with every part counted (its largest).
    assert counter_units(issue_rate) <= PARTITION_WCU, (count_units, counter_units(issue_rate))
    ceiling = (PARTITION_WCU / count_units - UPLOAD_HOSTS / multipart.RECORD_SECONDS) * multipart.COUNT_BATCH
    assert ceiling * PART_BYTES >= 2.3e9  # ~2.5 GB/s at 64 hosts: the counter's bound, stated


def test_the_ledger_client_has_a_connection_for_each_thread_finalize_reads_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters import clients

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.reset()
    try:
        assert clients.ledger_dynamodb().meta.config.max_pool_connections >= ledger.READ_THREADS
    finally:
        clients.reset()


def test_the_csv_walk_back_crosses_blocks_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard early in a block walks back into the blocks before it, nearest first."""
    monkeypatch.setattr(ledger, "BLOCK_SHARDS", 3)
    stored: list[dict[str, Any]] = []

    class Blocks(Recorder):
        def put_item(self, **request: Any) -> dict[str, Any]:
            stored.append(request["Item"])
            return {}

        def get_paginator(self, _: str) -> Any:
            class Pages:
                def paginate(self, **request: Any) -> list[dict[str, Any]]:
                    values = request["ExpressionAttributeValues"]
                    low, high = values[":low"]["S"], values[":high"]["S"]
                    items = [i for i in stored if i["pk"] == values[":pk"] and low <= i["sk"]["S"] <= high]
                    return [{"Items": sorted(items, key=lambda i: i["sk"]["S"], reverse=True)}]

            return Pages()

    book = Ledger(Blocks(), "ledger", 7)
    order = list(range(8))
    random.Random(3).shuffle(order)
    for index in order:
        book.put_csv_state(JOB, PLAN, index, "START", {"n": index})
    assert [n for n, _, _ in book.csv_states_before(JOB, PLAN, 7)] == [6, 5, 4, 3, 2, 1, 0]
    assert [n for n, _, _ in book.csv_states_before(JOB, PLAN, 3)] == [2, 1, 0]
    assert list(book.csv_states_before(JOB, PLAN, 0)) == []
