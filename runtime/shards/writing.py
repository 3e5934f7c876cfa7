"""Sending a shard's mapped items to DynamoDB: the writer for its write mode and engine, batching,
the budget."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from adapters.budget import HeartbeatBoard, SharedBudget
from adapters.dynamodb import REFUSED_CODE, BatchWriter, ItemWriter
from adapters.keyed_batches import KeyedBatchWriter
from adapters.ledger import Ledger, Markers
from logic.batching import BATCH_ITEMS, Batcher
from logic.ratecontrol import write_units
from logic.report import SKIPPED_SAMPLE_SIZE
from logic.spec.dynamodb import (
    BULK_PUT_ITEMS,
    LAMBDA,
    DeleteTarget,
    DynamoDbTarget,
    Engine,
    NewerWinsTarget,
    PutIfAbsentTarget,
    PutTarget,
    SyncTarget,
    UpdateTarget,
)
from logic.spec.inputs import JobSpec
from logic.values import Item
from logic.writemodes import WritePlan, write_plan
from shards.bulk_staging import BulkStager
from shards.rejects import RejectSink
from shards.settings import ShardSettings
from shards.sync_staging import SyncStager

Writer = BatchWriter | ItemWriter | KeyedBatchWriter | SyncStager | BulkStager


class Sender:
    """Hands mapped items to the writer: `put` in batches of 25 (the Batcher keeps the later of two
    records with one key and counts the other in `duplicates`), any other write mode one item at a
    time in file order (no dedupe: each record's condition or update must see the ones before;
    delete and putIfAbsent are batched by their writer, keys in file order). Staged for bulk put
    items (BulkStager), a put's items go to the stager whole: it keeps the later of a key's
    records over the whole shard (the service writes a shard's items in no set order).

    A record DynamoDB refuses for what it is (an update that would take the stored item past
    400 KB, a key it does not take: adapters/dynamodb.py REFUSED_CODES) goes to `rejects` with
    DynamoDB's words, and is counted in `refused` (accepted by the mapping, not written)."""

    def __init__(self, writer: Writer | None, spec: JobSpec, rejects: RejectSink) -> None:
        assert spec.dynamodb is not None
        self._writer = writer
        self._rejects = rejects
        batched = spec.dynamodb.later_wins and not isinstance(writer, BulkStager)
        self._batcher = Batcher(BATCH_ITEMS) if batched else None
        self.refused = 0

    def add(self, item: Item, offset: int, record: Any = None) -> None:
        """Send `item`, mapped from `record`, the record at byte `offset` of its object."""
        if self._batcher is None:
            if isinstance(self._writer, SyncStager):
                self._writer.add(item)
            elif isinstance(self._writer, BulkStager):
                self._writer.add(item, record)
            elif isinstance(self._writer, ItemWriter):
                self._writer.submit(item.key, item.attributes, self._writer.units(item.size), offset, record)
            elif isinstance(self._writer, KeyedBatchWriter):
                self._writer.submit(item.key, item.attributes, self._writer.units(item.size), record)
            self._reject_refused()
            return
        self._send(self._batcher.add(item))

    def finish(self) -> int:
        """Send what is left and, for a writer that may refuse a record, wait for every answer
        (the writer's close; closing again later returns its stats); the duplicates superseded
        in a batch."""
        if self._batcher is None:
            if isinstance(self._writer, ItemWriter | KeyedBatchWriter):
                self._writer.close()
                self._reject_refused()
            return self._writer.duplicates if isinstance(self._writer, BulkStager) else 0
        self._send(self._batcher.flush())
        return self._batcher.duplicates

    def _reject_refused(self) -> None:
        """Reject the records DynamoDB refused so far (in this thread: the sink is not shared)."""
        if not isinstance(self._writer, ItemWriter | KeyedBatchWriter):
            return
        for record, reason in self._writer.take_refused():
            self._rejects.add(record, REFUSED_CODE, reason)
            self.refused += 1

    def _send(self, batch: list[Item] | None) -> None:
        if batch and isinstance(self._writer, BatchWriter):
            self._writer.submit([i.attributes for i in batch], write_units(i.size for i in batch))


# What a writer is built from: the clients (batches, single items), the settings, the table it
# writes (the job's), the mode's plan (None for put) and the shard's markers (a numeric ADD's).
WriterFactory = Callable[[Any, Any, ShardSettings, str, WritePlan | None, Markers], Writer]


def _batch_writer(
    db: Any, _item_db: Any, settings: ShardSettings, table: str, _plan: WritePlan | None, _m: Markers
) -> Writer:
    return BatchWriter(db, table, in_flight=settings.write_concurrency, max_in_flight=settings.write_ceiling)


def _keyed_batch_writer(
    db: Any, item_db: Any, settings: ShardSettings, table: str, plan: WritePlan | None, _markers: Markers
) -> Writer:
    assert plan is not None
    return KeyedBatchWriter(
        db,
        item_db,
        table,
        plan,
        in_flight=settings.write_concurrency,
        max_in_flight=settings.write_ceiling,
        sample=SKIPPED_SAMPLE_SIZE,
    )


def _sync_stager(
    _db: Any, _item_db: Any, _settings: ShardSettings, _table: str, plan: WritePlan | None, _m: Markers
) -> Writer:
    assert plan is not None
    return SyncStager(plan.key)


def _bulk_stager(
    _db: Any, _item_db: Any, _settings: ShardSettings, _table: str, _plan: WritePlan | None, _m: Markers
) -> Writer:
    return BulkStager()


def _item_writer(
    _db: Any, item_db: Any, settings: ShardSettings, table: str, plan: WritePlan | None, markers: Markers
) -> Writer:
    assert plan is not None
    return ItemWriter(
        item_db,
        table,
        plan,
        in_flight=settings.write_concurrency,
        max_in_flight=settings.write_ceiling,
        sample=SKIPPED_SAMPLE_SIZE,
        markers=markers if plan.counters else None,
    )


# The writer of each write mode and engine: put in BatchWriteItem (BatchWriter); delete and
# putIfAbsent batched by key (KeyedBatchWriter, batches through `db`); newerWins and update one item
# at a time (ItemWriter); sync staged by bucket in S3 (SyncStager: the Sync Map writes it); put
# with engine bulkPutItems staged as DynamoDB JSON Lines (BulkStager: the bulk put items operation
# writes them).
# A mode's model says which engines it allows (tests hold the two equal).
WRITERS: Mapping[tuple[type[DynamoDbTarget], Engine], WriterFactory] = {
    (PutTarget, LAMBDA): _batch_writer,
    (PutIfAbsentTarget, LAMBDA): _keyed_batch_writer,
    (DeleteTarget, LAMBDA): _keyed_batch_writer,
    (NewerWinsTarget, LAMBDA): _item_writer,
    (UpdateTarget, LAMBDA): _item_writer,
    (SyncTarget, LAMBDA): _sync_stager,
    (PutTarget, BULK_PUT_ITEMS): _bulk_stager,
}


def writer_factory(mode: type[DynamoDbTarget], engine: Engine = LAMBDA) -> WriterFactory:
    """The writer of `mode` (a write mode's model, or a model derived from one) with `engine`."""
    for model in mode.__mro__:
        found = WRITERS.get((model, engine))
        if found is not None:
            return found
    raise ValueError(f"no writer for {mode.__name__} with engine {engine!r}")


def writer(
    db: Any, item_db: Any, spec: JobSpec, settings: ShardSettings, markers: Markers, table: str | None = None
) -> Writer | None:
    """The writer of the spec's write mode (WRITERS) into `table` (the job's; None: the environment's),
    with its plan and the shard's markers; None in a dry run or without a DynamoDB target."""
    if spec.dry_run or spec.dynamodb is None:
        return None
    build = writer_factory(type(spec.dynamodb), spec.dynamodb.engine)
    return build(db, item_db, settings, table or settings.table_name, write_plan(spec.dynamodb), markers)


def conditional(writer: Writer | None) -> bool:
    """Whether `writer` writes with a condition a replayed write can fail (putIfAbsent, newerWins)."""
    if isinstance(writer, KeyedBatchWriter):
        return issubclass(writer.plan.mode, PutIfAbsentTarget)
    return isinstance(writer, ItemWriter) and writer.plan.version is not None


def skipped_keys(writer: Writer | None, spec: JobSpec) -> list[dict[str, str]]:
    """The sample of skipped keys as JSON: {key attribute: value} (numbers as text, binary as base64)."""
    if not isinstance(writer, ItemWriter | KeyedBatchWriter) or spec.dynamodb is None:
        return []
    names = list(spec.dynamodb.key)

    def text(value: Any) -> str:
        return base64.b64encode(value).decode() if isinstance(value, bytes) else str(value)

    return [dict(zip(names, map(text, key), strict=True)) for key in writer.skipped_keys]


def budget(
    writer: Writer | None,
    spec: JobSpec,
    ledger: Ledger,
    settings: ShardSettings,
    job_id: str,
    run_id: str,
    index: int,
    workers: int,
) -> contextlib.AbstractContextManager[Any]:
    """The job's write budget, re-shared among the running shards (adapters/budget.py), if it has
    one; `workers`: how many Workers can run at once (no share is larger than budget / workers)."""
    if writer is None or isinstance(writer, SyncStager | BulkStager) or spec.write_units_per_second is None:
        return contextlib.nullcontext()
    board = HeartbeatBoard(ledger.client, ledger.table, job_id, run_id, settings.ledger_ttl_days * 86_400)
    return SharedBudget(board, index, spec.write_units_per_second, writer, workers=workers)
