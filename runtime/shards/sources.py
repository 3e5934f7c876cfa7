"""The shard's records as read from S3: physical lines, or CSV records that may span lines."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from adapters.csvchain import LedgerChain
from adapters.ledger import Ledger
from adapters.s3 import ObjectInfo, RangedFile, S3Store
from logic import parquet
from logic.csvrecords import ShardRecords
from logic.job import ManifestEntry
from logic.records import Line, iter_shard_lines
from logic.spec.inputs import JobSpec
from logic.values import ParquetRow, Reject

# Formats read as csv.reader's records (logic/csvrecords.py): a quoted field may hold a line break.
CSV_RECORD_FORMATS = ("csv", "opencypher")
# How long an uncertain CSV shard waits for the shards before it to publish (adapters/csvchain.py)
# before it raises CsvStartPendingError and gives its concurrency slot back: the state machine
# retries it with a backoff of up to a minute, for about as long as a throttled invocation.
CSV_START_WAIT_SECONDS = 20.0


def physical_lines(store: S3Store, obj: ObjectInfo, start: int, end: int) -> Iterator[Line]:
    read_from = start - 1 if start > 0 else 0
    return iter_shard_lines(store.stream(obj, read_from), read_from=read_from, start=start, end=end)


def csv_chain(
    store: S3Store, obj: ObjectInfo, spec: JobSpec, ledger: Ledger, job_id: str, plan_id: str, index: int
) -> LedgerChain | None:
    """Where a CSV shard publishes its start state or summary, and resolves an unknown start state."""
    if spec.format not in CSV_RECORD_FORMATS or spec.csv is None:
        return None
    comment = spec.csv.comment
    return LedgerChain(
        ledger,
        job_id,
        plan_id,
        index,
        lambda first, end: physical_lines(store, obj, first, end),
        max_record=spec.csv.max_record_bytes,
        comment=comment.encode() if comment is not None else None,
        delimiter=spec.csv.delimiter.encode(),
        deadline=time.monotonic() + CSV_START_WAIT_SECONDS,
        now=time.monotonic,
        sleep=time.sleep,
    )


def shard_lines(
    store: S3Store,
    obj: ObjectInfo,
    spec: JobSpec,
    start: int,
    end: int,
    data_start: int,
    chain: LedgerChain | None = None,
) -> Iterable[Line] | ShardRecords:
    """The shard's lines; for CSV its records (logic/csvrecords.py: read from a window before
    `start`, past `end` to complete the last record)."""
    if spec.format not in CSV_RECORD_FORMATS or spec.csv is None:
        return physical_lines(store, obj, start, end)
    return ShardRecords(
        lambda first: store.stream(obj, first),
        start=start,
        end=end,
        object_size=obj.size,
        data_start=data_start,
        max_record=spec.csv.max_record_bytes,
        comment=spec.csv.comment.encode() if spec.csv.comment is not None else None,
        delimiter=spec.csv.delimiter.encode(),
        chain=chain,
    )


# A Parquet shard's memory: a batch of this many rows (as Arrow columns and as Fields), plus the
# reader's buffer per projected column: pages are read and decoded as the batch needs them
# (a buffered stream, no pre-buffering of whole column chunks).
PARQUET_BUFFER_BYTES = 1024 * 1024


def parquet_rows(
    store: S3Store, obj: ObjectInfo, spec: JobSpec, shard: ManifestEntry | Mapping[str, Any], skip: int = 0
) -> Iterator[ParquetRow]:
    """The rows of the shard's row groups (`rowGroups`: [first, stop)), only the columns the mapping
    reads, through ranged GETs pinned to the planned ETag; the first `skip` rows (an earlier
    segment's) are not yielded, whole row groups of them not read. A row group whose pages cannot be decoded
    gives its rows not yet read as `undecodable_page` rejects; the next row group is read anyway."""
    import pyarrow  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from logic.parquet_values import batch_fields

    ranged = RangedFile(store, obj)
    source = pq.ParquetFile(ranged, pre_buffer=False, buffer_size=PARQUET_BUFFER_BYTES)
    columns = parquet.columns_read(spec, source.schema_arrow.names)
    entry = ManifestEntry.parse(shard)
    first, stop = entry.row_groups or (0, 0)
    row, number = entry.first_row or 0, 0
    for group in range(first, stop):
        rows = source.metadata.row_group(group).num_rows
        if number + rows <= skip:  # read by an earlier segment (logic/checkpoints.py): not read again
            number += rows
            row += rows
            continue
        done = 0
        try:
            batches = source.iter_batches(
                batch_size=parquet.BATCH_ROWS, row_groups=[group], columns=columns, use_threads=False
            )
            for batch in batches:
                for fields in batch_fields(batch):
                    number += 1
                    if number > skip:
                        yield ParquetRow(number, group, row + done, fields)
                    done += 1
        except (pyarrow.ArrowException, OSError) as error:
            if ranged.failure is not None:  # S3 failed, not the data: the shard is retried
                raise ranged.failure from None
            reason = f"row group {group} cannot be decoded: {' '.join(str(error).split())}"
            for lost in range(done, rows):
                number += 1
                if number > skip:
                    yield ParquetRow(number, group, row + lost, Reject("undecodable_page", reason))
        row += rows
