"""`mapload estimate`: how long a load takes on AWS and what it costs, from documented limits and
list prices and the per-worker rate the benchmark (`make bench`) measured. Arithmetic only.

Prices are us-east-1 list prices (other regions differ); check them before relying on a number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from adapters.ledger import MARKED_IN_FLIGHT
from logic import sync
from logic.mapping import MAX_ITEM_BYTES
from logic.planning import chosen_shard_mib
from logic.shardtime import ShardTime, shard_time
from logic.spec.dynamodb import BULK_PUT_ITEMS, WRITE_MODES, PutTarget, SyncTarget, write_mode_type
from logic.spec.inputs import Common
from logic.writemodes import record_units

# The defaults of what is estimated: the input's (maxConcurrency, shardSizeMiB), read from its
# models; the environment's (worker_memory_mib, lambda_architecture) from stacks/loader_settings.py, which
# the installed command cannot import: tests/contract/test_spec_limits.py checks they are equal.
DEFAULT_CONCURRENCY: int = Common.model_fields["max_concurrency"].default
DEFAULT_SHARD_MIB: float = float(Common.model_fields["shard_size_mib"].default)
DEFAULT_MEMORY_MIB = 1024
DEFAULT_ARCHITECTURE = "arm64"
DEFAULT_WORKER_TIMEOUT_SECONDS = 900
ARCHITECTURES = ("arm64", "x86_64")

# -- documented limits (DynamoDB developer guide, "Service, account, and table quotas" and
#    "Warm throughput"; Lambda developer guide, "Lambda quotas"; as of 2025) ------------------
WRITE_UNIT_BYTES = 1024  # one write unit per started KB of item size (standard writes)
PARTITION_WRITE_UNITS = 1000  # write units/s one partition accepts
NEW_ON_DEMAND_WRITE_UNITS = 4000  # a new on-demand table's warm throughput (writes/s)
# On demand, a table takes up to twice its previous peak at once; past twice the peak within the
# same 30 minutes it may throttle ("Pre-warming a table for on-demand capacity mode"): its ceiling
# is modelled as its warm throughput doubling each 30 minutes it is driven at it, up to the quota.
ON_DEMAND_DOUBLING_SECONDS = 1800
TABLE_WRITE_QUOTA = 40_000  # default per-table write quota (on demand and provisioned)
ACCOUNT_LAMBDA_CONCURRENCY = 1000  # default concurrent executions per account and region

# -- us-east-1 list prices (aws.amazon.com/dynamodb/pricing, /lambda/pricing,
#    /step-functions/pricing; on-demand writes after the November 2024 cut. Written down
#    2026-11-30 from articles quoting those pages, not from the pages themselves: verify) -------
ON_DEMAND_USD_PER_MILLION_WRITE_UNITS = 0.625
PROVISIONED_USD_PER_WCU_HOUR = 0.00065
LAMBDA_USD_PER_GB_SECOND = {"arm64": 0.0000133334, "x86_64": 0.0000166667}
LAMBDA_USD_PER_MILLION_REQUESTS = 0.20
STANDARD_USD_PER_STATE_TRANSITION = 0.000025
# State transitions: Plan/Finalize/Done and the Map's own (~6 per job), 3 per shard's child
# execution (start, Worker, end) — STANDARD children.
TRANSITIONS_PER_JOB = 6
TRANSITIONS_PER_SHARD = 3

# S3 Standard requests (aws.amazon.com/s3/pricing; from articles quoting it, 2026-12-07: verify):
# PUT/COPY/POST/LIST, and GET, per 1,000. DELETE is free.
S3_USD_PER_THOUSAND_PUTS = 0.005
S3_USD_PER_THOUSAND_GETS = 0.0004

# -- writeMode sync: a later sync writes only what changed (issue 47's postcodes: ~0.3 % a month)
DEFAULT_CHANGE_RATE = 0.003

# -- bulk put items (DynamoDB developer guide, BulkPutItems.* pages; API reference,
#    StartBulkPutItems): it writes no faster than MaxWriteRequestUnits, at least 1,024 (mapload
#    sends the job's writeUnitsPerSecond: Plan refuses less). Its price is not in the sources found
#    (the developer guide's pages name tiers "at different price points", no figure): never
#    modelled unless given (--bulk-price-per-gib); nor is its own throughput without a cap.
BULK_MIN_WRITE_UNITS = 1024

# -- measured by `make bench` (docs/PERFORMANCE.md): one worker, one shard, 16 requests in
#    flight, 20 ms round trip to the endpoint, on the 2-CPU benchmark machine (2026-11-30) -----
BENCH_WORKER_ITEMS_PER_SECOND = 4200.0
BENCH_WORKER_CPU_MICROSECONDS_PER_ITEM = 58.0
# The same loop in a write mode other than put (single-item calls through dynamodb_wire, lanes by
# key; make bench's write-mode table, 2026-12-02): 580-660 µs of CPU an item in the Worker's
# process, so one core's worth of loop writes about 1,500 items/s (the local table, not the loop,
# bound the measured rates; 190 before the low-level path and the lanes by key).
BENCH_SINGLE_ITEM_WORKER_ITEMS_PER_SECOND = 1500.0
# An update with a numeric add (`"update": "add"` on an N attribute): each record one
# TransactWriteItems (its UpdateItem and a marker Put in the ledger) through the botocore client,
# at most MARKED_IN_FLIGHT (runtime/adapters/ledger.py) in flight. 1 s over the CPU a record make
# bench's numeric-add row measured (2026-12-02: 3,600 µs, the embedded emulator's included, so
# the loop alone is faster): it binds before 16 in flight's round trips (800/s) would.
BENCH_ADD_WORKER_ITEMS_PER_SECOND = 280.0
# The conditions of those measurements (bench/run.py's defaults are these).
BENCH_WRITE_CONCURRENCY = 16
BENCH_ROUND_TRIP_MS = 20.0
# A worker's window (runtime/logic/ratecontrol.py): `write_concurrency` requests in flight per
# REFERENCE_ROUND_TRIP_MS of the quickest round trip, at most `max_write_concurrency` (its default
# in stacks/loader_settings.py; tests/infra/test_write_ceiling.py checks they are equal).
REFERENCE_ROUND_TRIP_MS = 20.0
DEFAULT_MAX_WRITE_CONCURRENCY = 64


def requests_in_flight(
    in_flight: int, round_trip_ms: float, max_in_flight: int = DEFAULT_MAX_WRITE_CONCURRENCY
) -> float:
    """The cap of a worker's window at this round trip: `in_flight` (write_concurrency) per 20 ms,
    never below it, never above `max_in_flight`."""
    return min(
        float(max(in_flight, max_in_flight)),
        max(in_flight, in_flight * round_trip_ms / REFERENCE_ROUND_TRIP_MS),
    )


def worker_rate(
    write_mode: str = PutTarget.name,
    *,
    in_flight: int = BENCH_WRITE_CONCURRENCY,
    round_trip_ms: float = BENCH_ROUND_TRIP_MS,
    loop_items_per_second: float | None = None,
    max_in_flight: int = DEFAULT_MAX_WRITE_CONCURRENCY,
    numeric_add: bool = False,
) -> float:
    """Items/s one worker writes in `write_mode`: at most its window's requests per round trip
    (`requests_in_flight`: `in_flight` per 20 ms, up to `max_in_flight`), each carrying
    its mode's `items_per_request` (25 for put, delete and putIfAbsent, 1 for single-item
    writes), and no more than its loop's rate (default: the one make bench measured for batches,
    or for single items). At 16 in flight and 20 ms, round trips allow 20,000 items/s in batches
    and 800 in single items; at 50 ms the window widens to 40 requests and allows the same.
    `numeric_add` (an update that adds numbers): one record a transaction, the same window up to
    MARKED_IN_FLIGHT, and the transactions' loop rate."""
    mode = write_mode_type(write_mode)
    if numeric_add:
        max_in_flight = min(max_in_flight, MARKED_IN_FLIGHT)
        in_flight = min(in_flight, MARKED_IN_FLIGHT)
    if loop_items_per_second is None:
        loop_items_per_second = (
            BENCH_ADD_WORKER_ITEMS_PER_SECOND
            if numeric_add
            else BENCH_WORKER_ITEMS_PER_SECOND
            if mode.batched
            else BENCH_SINGLE_ITEM_WORKER_ITEMS_PER_SECOND
        )
    per_round_trip = requests_in_flight(in_flight, round_trip_ms, max_in_flight) * mode.items_per_request
    return min(loop_items_per_second, per_round_trip / (round_trip_ms / 1000))


def counts(write_mode: str) -> bool:
    """Whether `write_mode` may add numbers (a transaction a record); False for no such mode."""
    try:
        return write_mode_type(write_mode).counts
    except ValueError:
        return False


def units_per_record(item_bytes: int, numeric_add: bool = False) -> int:
    """Write units one record consumes (logic/writemodes.py `record_units`): its item's, one per
    started KB; with a numeric add, a transaction's (twice the item's and its ledger marker's)."""
    return record_units(item_bytes, numeric_add)


@dataclass(frozen=True)
class SyncEstimate:
    """A later sync of the same file (writeMode sync) at `change_rate`: the changed items' writes
    against a put reload's, and the staging shuffle every sync makes (every item staged in S3 by
    the Shards Map, read back and merged by the Sync Map's buckets)."""

    change_rate: float
    changes: int  # items put (new, changed) or deleted
    write_units: int
    requests: int  # BatchWriteItem requests
    dynamodb_usd: float  # on demand
    reload_write_units: int  # a put reload of the whole file
    reload_usd: float
    buckets: int  # logic/sync.py bucket_count: the dataset's, from its first sync's size
    s3_puts: int  # a staged object a shard, a merged bucket a bucket
    s3_gets: int  # a ranged GET a shard's section of a bucket, a baseline bucket a bucket
    s3_usd: float
    staged_bytes: int | None  # gzip, every item once (None: not measured: give --file)


@dataclass(frozen=True)
class BulkEstimate:
    """The same put job on bulk put items: the Workers stage the items (no writes), then the
    service writes them at most at MaxWriteRequestUnits (the job's writeUnitsPerSecond)."""

    max_write_units: int | None  # None: no budget, no cap sent
    refused: str | None  # why Plan refuses the engine for this job
    seconds: float | None  # the service's writes at the cap (None: not known)
    staging_seconds: float  # the staging Workers, at the put loop's CPU a record
    lambda_usd: float
    step_functions_usd: float
    json_bytes: int  # the items' DynamoDB JSON (at least their size when unmeasured)
    json_measured: bool
    price_usd: float | None  # --bulk-price-per-gib × GiB; None: not published


@dataclass(frozen=True)
class Estimate:
    rows: int
    item_bytes: int
    write_mode: str
    numeric_add: bool
    write_units_per_item: int
    write_units: int
    requests: int  # write requests sent (without retries)
    shards: int
    concurrency: int
    worker_items_per_second: float  # one worker, in this write mode
    workers_items_per_second: float
    table_write_units_per_second: float
    bound: str  # "table", "budget" or "workers" (at the end of the load)
    shard_mib: float
    shard_chosen: bool  # the size Plan would choose (the input gives none), not a given one
    table_model: str  # how the table's write ceiling was modelled, in words
    items_per_second: float
    seconds: float
    dynamodb_on_demand_usd: float
    dynamodb_provisioned_usd: float | None
    lambda_usd: float
    step_functions_usd: float
    # Workers that saturate the table: more only wait (and are billed for waiting).
    workers_needed: int
    # With a writeUnitsPerSecond budget (--budget): a shard's time and the Workers Plan runs for
    # it (logic/shardtime.py, Plan's rule), which `concurrency` is then; None without one.
    shard_time: ShardTime | None = None
    # writeMode sync: a later sync at a change rate (`SyncEstimate`); None for other modes.
    sync: SyncEstimate | None = None
    # A put job on the other engine, bulk put items (`BulkEstimate`); None for other modes.
    bulk: BulkEstimate | None = None

    @property
    def total_usd(self) -> float:
        dynamodb = (
            self.dynamodb_provisioned_usd
            if self.dynamodb_provisioned_usd is not None
            else self.dynamodb_on_demand_usd
        )
        return dynamodb + self.lambda_usd + self.step_functions_usd


def _check_arguments(
    rows: int,
    item_bytes: int,
    wcu: int | None,
    concurrency: int,
    architecture: str,
    write_mode: str,
    numeric_add: bool = False,
    budget: float | None = None,
) -> None:
    """ValueError naming the option, for an argument no load can have."""
    if rows < 1:
        raise ValueError(f"--rows must be at least 1, got {rows}")
    if not 1 <= item_bytes <= MAX_ITEM_BYTES:
        raise ValueError(
            f"--item-bytes must be 1..{MAX_ITEM_BYTES} (DynamoDB's 400 KB item limit), got {item_bytes}"
        )
    if wcu is not None and wcu < 1:
        raise ValueError(f"--wcu must be at least 1, got {wcu}")
    if budget is not None and budget < 1:
        raise ValueError(f"--budget (writeUnitsPerSecond) must be at least 1, got {budget}")
    if concurrency < 1:
        raise ValueError(f"--concurrency must be at least 1, got {concurrency}")
    if architecture not in LAMBDA_USD_PER_GB_SECOND:
        raise ValueError(f"architecture must be one of {', '.join(LAMBDA_USD_PER_GB_SECOND)}")
    try:
        mode = write_mode_type(write_mode)
    except ValueError:
        raise ValueError(
            f"--write-mode must be one of {', '.join(WRITE_MODES)}, got {write_mode!r}"
        ) from None
    if numeric_add and not mode.counts:
        raise ValueError(f"--numeric-add goes with --write-mode update, got {write_mode!r}")


def _lambda_usd(running: int, seconds: float, shards: int, memory_mib: int, architecture: str) -> float:
    """Every running worker is busy (writing or waiting on the table) for the whole load; one
    invocation per shard, plus Plan and Finalize."""
    gb_seconds = running * seconds * memory_mib / 1024
    return (
        gb_seconds * LAMBDA_USD_PER_GB_SECOND[architecture]
        + (shards + 2) / 1e6 * LAMBDA_USD_PER_MILLION_REQUESTS
    )


def _provisioned_usd(wcu: int | None, seconds: float) -> float | None:
    """Provisioned capacity's cost (billed by the whole hour); None without `wcu`."""
    return None if wcu is None else wcu * math.ceil(seconds / 3600) * PROVISIONED_USD_PER_WCU_HOUR


def estimate(
    rows: int,
    item_bytes: int,
    *,
    wcu: int | None = None,
    budget: float | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard_mib: float | None = None,
    row_bytes: int | None = None,
    worker_items_per_second: float | None = None,
    memory_mib: int = DEFAULT_MEMORY_MIB,
    architecture: str = DEFAULT_ARCHITECTURE,
    write_mode: str = PutTarget.name,
    numeric_add: bool = False,
    warm_wcu: int | None = None,
    worker_timeout_seconds: int = DEFAULT_WORKER_TIMEOUT_SECONDS,
    change_rate: float | None = None,
    json_bytes: int | None = None,
    staged_bytes: int | None = None,
    bulk_price_per_gib: float | None = None,
) -> Estimate:
    """Time and cost of loading `rows` items of `item_bytes` each.

    `wcu`: the table's provisioned write capacity (units/s), a fixed ceiling. Without it the table
    is on demand (`on_demand_seconds`): it starts at `warm_wcu` (its warm throughput:
    `table_warm_write_units`, or the peak it has reached; default a new table's 4,000/s) and
    doubles each 30 minutes up to the table quota. The load runs at the lowest of that, the
    budget and what `concurrency` workers write; each shard is one worker.
    A `write_mode` other than put writes single items: the same write units, 25 times the
    requests, fewer items/s per worker (`worker_rate`, whose loop rate `worker_items_per_second`
    replaces); `numeric_add` (update only), a transaction a record (`units_per_record`).
    `budget`: the job's `writeUnitsPerSecond`, a ceiling of its own below the table's; with it, a
    shard's time and the Workers Plan runs for it (`shard_time`, Plan's rule: a shard within half
    of `worker_timeout_seconds`), which then run (and are billed) instead of `concurrency`.
    writeMode sync: also a later sync at `change_rate` (default DEFAULT_CHANGE_RATE; `staged_bytes`
    an item's staged line, gzip, measured); put: also the bulk put items engine (`json_bytes` an
    item's DynamoDB JSON, measured; `bulk_price_per_gib` a price the user gives).
    Kept whole: the model's steps in order, each feeding the next (size, records, shards, table
    model, time)."""
    _check_arguments(rows, item_bytes, wcu, concurrency, architecture, write_mode, numeric_add, budget)
    _check_engine_arguments(write_mode, change_rate, bulk_price_per_gib)
    if warm_wcu is not None and (warm_wcu < 1 or wcu is not None):
        raise ValueError(
            "--warm-wcu must be at least 1" if warm_wcu < 1 else "--warm-wcu is for on demand: not with --wcu"
        )
    units_per_item = units_per_record(item_bytes, numeric_add)
    write_units = rows * units_per_item
    source_bytes = rows * (row_bytes if row_bytes is not None else item_bytes)
    chosen = shard_mib is None  # chosen as Plan chooses it for an input that gives none
    if shard_mib is None:
        shard_mib = chosen_shard_mib(source_bytes, concurrency)
    shards = max(1, math.ceil(source_bytes / (shard_mib * 2**20)))
    running = min(concurrency, shards)
    record_bytes = row_bytes if row_bytes is not None else item_bytes
    timing = (
        None
        if budget is None or write_mode_type(write_mode).staged  # a sync's Shards Map only stages
        else shard_time(
            min(rows, shard_mib * 2**20 / record_bytes),
            item_bytes,
            budget,
            running,
            worker_timeout_seconds,
            numeric_add=numeric_add,
        )
    )
    if timing is not None:
        running = timing.workers  # Plan's: the most that keep a shard within half the timeout
    per_worker = worker_rate(
        write_mode, loop_items_per_second=worker_items_per_second, numeric_add=numeric_add
    )
    workers = running * per_worker
    # The Workers write no faster than the budget lets them, whatever the table accepts.
    sending = workers if budget is None else min(workers, budget / units_per_item)
    if wcu is not None:
        table = float(wcu)
        seconds = rows / min(table / units_per_item, sending)
        model = f"fixed at {wcu:,} write units/s (--wcu)"
    else:
        warm = float(warm_wcu if warm_wcu is not None else NEW_ON_DEMAND_WRITE_UNITS)
        seconds, table = on_demand_seconds(rows, units_per_item, sending, warm)
        model = (
            f"on demand: from {warm:,.0f} write units/s ("
            + ("--warm-wcu" if warm_wcu is not None else "a new table's warm throughput")
            + f"), doubling each {ON_DEMAND_DOUBLING_SECONDS // 60} min of load up to the "
            f"{max(TABLE_WRITE_QUOTA, warm):,.0f} quota"
        )
    table_items = table / units_per_item
    bound = "table" if table_items < sending else ("budget" if sending < workers else "workers")
    items_per_second = rows / seconds
    transitions = TRANSITIONS_PER_JOB + TRANSITIONS_PER_SHARD * shards
    on_demand = write_units / 1e6 * ON_DEMAND_USD_PER_MILLION_WRITE_UNITS
    synced = None
    if write_mode_type(write_mode).staged:  # sync: the changes only
        rate = DEFAULT_CHANGE_RATE if change_rate is None else change_rate
        synced = sync_estimate(rows, units_per_item, source_bytes, shards, rate, on_demand, staged_bytes)
    bulk = None
    if BULK_PUT_ITEMS in write_mode_type(write_mode).engines and not numeric_add:
        staging = rows * BENCH_WORKER_CPU_MICROSECONDS_PER_ITEM / 1e6 / running
        bulk = bulk_estimate(
            write_units,
            budget,
            staging,
            _lambda_usd(running, staging, shards, memory_mib, architecture),
            transitions * STANDARD_USD_PER_STATE_TRANSITION,
            rows * (json_bytes if json_bytes is not None else item_bytes),
            json_bytes is not None,
            bulk_price_per_gib,
        )
    return Estimate(
        rows=rows,
        item_bytes=item_bytes,
        write_mode=write_mode,
        numeric_add=numeric_add,
        write_units_per_item=units_per_item,
        write_units=write_units,
        requests=math.ceil(rows / write_mode_type(write_mode).items_per_request),
        shards=shards,
        shard_mib=shard_mib,
        shard_chosen=chosen,
        concurrency=running,
        worker_items_per_second=per_worker,
        workers_items_per_second=workers,
        table_write_units_per_second=table,
        bound=bound,
        table_model=model,
        items_per_second=items_per_second,
        seconds=seconds,
        dynamodb_on_demand_usd=on_demand,
        dynamodb_provisioned_usd=_provisioned_usd(wcu, seconds),
        lambda_usd=_lambda_usd(running, seconds, shards, memory_mib, architecture),
        step_functions_usd=transitions * STANDARD_USD_PER_STATE_TRANSITION,
        workers_needed=math.ceil(table_items / per_worker),
        shard_time=timing,
        sync=synced,
        bulk=bulk,
    )


def _check_engine_arguments(write_mode: str, change_rate: float | None, price: float | None) -> None:
    """ValueError naming the option: a change rate is a sync's, a fraction; a price is not negative."""
    if change_rate is not None and not write_mode_type(write_mode).staged:
        raise ValueError(f"--change-rate goes with --write-mode sync, got {write_mode!r}")
    if change_rate is not None and not 0 <= change_rate <= 1:
        raise ValueError(f"--change-rate must be 0..1 (a fraction of the records), got {change_rate}")
    if price is not None and price < 0:
        raise ValueError(f"--bulk-price-per-gib must be at least 0, got {price}")


def sync_estimate(
    rows: int,
    units_per_item: int,
    source_bytes: int,
    shards: int,
    change_rate: float,
    reload_usd: float,
    staged_bytes: int | None,
) -> SyncEstimate:
    """A later sync at `change_rate` (items new, changed or removed, a fraction of `rows`): the
    changes' write units (a delete costs its stored item's, modelled as the same size) against a
    put reload's, and the S3 requests of its staging. A shard's section of a bucket is one ranged
    GET: a shard of r items has items in a bucket with probability 1 - (1 - 1/B)^r."""
    changes = math.ceil(rows * change_rate)
    units = changes * units_per_item
    buckets = sync.bucket_count(source_bytes)
    per_shard = rows / shards
    sections = round(shards * buckets * (1 - (1 - 1 / buckets) ** per_shard))
    puts, gets = shards + buckets, sections + buckets
    return SyncEstimate(
        change_rate=change_rate,
        changes=changes,
        write_units=units,
        requests=math.ceil(changes / SyncTarget.items_per_request),
        dynamodb_usd=units / 1e6 * ON_DEMAND_USD_PER_MILLION_WRITE_UNITS,
        reload_write_units=rows * units_per_item,
        reload_usd=reload_usd,
        buckets=buckets,
        s3_puts=puts,
        s3_gets=gets,
        s3_usd=puts / 1000 * S3_USD_PER_THOUSAND_PUTS + gets / 1000 * S3_USD_PER_THOUSAND_GETS,
        staged_bytes=None if staged_bytes is None else rows * staged_bytes,
    )


def bulk_estimate(
    write_units: int,
    budget: float | None,
    staging_seconds: float,
    lambda_usd: float,
    step_functions_usd: float,
    json_bytes: int,
    json_measured: bool,
    price_per_gib: float | None,
) -> BulkEstimate:
    """The put job on bulk put items: the service's writes at MaxWriteRequestUnits (the budget;
    under BULK_MIN_WRITE_UNITS Plan refuses; none: no cap, and the service's own rate is not
    documented in numbers), the staging Workers' Lambda time, and the price only if given."""
    cap = None if budget is None else math.floor(budget)
    refused = None
    if cap is not None and cap < BULK_MIN_WRITE_UNITS:
        refused = (
            f"writeUnitsPerSecond {cap:,} is under bulk put items' least MaxWriteRequestUnits "
            f"({BULK_MIN_WRITE_UNITS:,}): Plan refuses the engine"
        )
    return BulkEstimate(
        max_write_units=cap,
        refused=refused,
        seconds=write_units / cap if cap is not None and refused is None else None,
        staging_seconds=staging_seconds,
        lambda_usd=lambda_usd,
        step_functions_usd=step_functions_usd,
        json_bytes=json_bytes,
        json_measured=json_measured,
        price_usd=None if price_per_gib is None else json_bytes / 2**30 * price_per_gib,
    )


def on_demand_seconds(rows: int, units_per_item: int, workers: float, warm: float) -> tuple[float, float]:
    """The seconds an on-demand table takes `rows` items at, and the ceiling it reached (write
    units/s): it accepts `warm` at first and twice as much after each ON_DEMAND_DOUBLING_SECONDS
    (its new peak), up to the table quota (or `warm` when that is higher); the workers' rate
    bounds each step too."""
    quota = max(float(TABLE_WRITE_QUOTA), warm)
    ceiling, seconds, left = min(warm, quota), 0.0, float(rows)
    while True:
        rate = min(ceiling / units_per_item, workers)
        if ceiling >= quota or rate >= workers or left <= rate * ON_DEMAND_DOUBLING_SECONDS:
            return seconds + left / rate, ceiling
        left -= rate * ON_DEMAND_DOUBLING_SECONDS
        seconds += ON_DEMAND_DOUBLING_SECONDS
        ceiling = min(ceiling * 2, quota)


def _writes(write_mode: str, numeric_add: bool = False) -> str:
    if numeric_add:
        return "TransactWriteItems (UpdateItem and a ledger marker's Put), 1 record per request"
    mode = write_mode_type(write_mode)
    per_request = mode.items_per_request
    return f"{mode.estimate.requests}, {per_request} item{'s' if per_request > 1 else ''} per request"


def render(e: Estimate) -> str:
    def usd(value: float) -> str:
        return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"

    minutes, secs = divmod(e.seconds, 60)
    rows = [
        ("items", f"{e.rows:,} of {e.item_bytes:,} bytes = {e.write_units_per_item} write unit(s) each"),
        ("write units", f"{e.write_units:,}"),
        ("writes (writeMode)", f"{_writes(e.write_mode, e.numeric_add)} ({e.write_mode})"),
        ("write requests", f"{e.requests:,}"),
        (
            "shards / workers in flight",
            f"{e.shards:,} / {e.concurrency:,} ("
            + ("Plan's under the budget; " if e.shard_time else "")
            + f"{e.shard_mib:g} MiB each"
            + (", chosen as Plan chooses it: no shardSizeMiB given)" if e.shard_chosen else ")"),
        ),
        ("one worker writes", f"{e.worker_items_per_second:,.0f} items/s"),
        ("workers could write", f"{e.workers_items_per_second:,.0f} items/s"),
        ("table accepts", f"{e.table_write_units_per_second:,.0f} write units/s" + _reached(e)),
        ("table model", e.table_model),
        ("rate (bound by)", f"{e.items_per_second:,.0f} items/s ({e.bound})"),
        ("workers that saturate the table", f"{e.workers_needed:,} (maxConcurrency)"),
        ("time", f"{int(minutes)} min {secs:.0f} s"),
        *([("shard time (--budget, writeUnitsPerSecond)", e.shard_time.describe())] if e.shard_time else []),
        ("DynamoDB on demand", usd(e.dynamodb_on_demand_usd)),
    ]
    if e.dynamodb_provisioned_usd is not None:
        rows.append(("DynamoDB provisioned (whole hours)", usd(e.dynamodb_provisioned_usd)))
    rows += [
        ("Lambda", usd(e.lambda_usd)),
        ("Step Functions", usd(e.step_functions_usd)),
        ("total" + (" (provisioned)" if e.dynamodb_provisioned_usd is not None else ""), usd(e.total_usd)),
    ]
    width = max(len(name) for name, _ in rows)
    table = [*(f"{name:<{width}}  {value}" for name, value in rows)]
    return "\n".join([*table, *_sync_rows(e, usd), *_engine_rows(e, usd), "", *_notes(e)])


def _duration(seconds: float) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes)} min {secs:.0f} s"


def _sync_rows(e: Estimate, usd: Callable[[float], str]) -> list[str]:
    """writeMode sync: a later sync at the change rate against a put reload of the same file."""
    s = e.sync
    if s is None:
        return []
    staged = (
        f"~{s.staged_bytes / 2**20:,.1f} MiB gzip (measured)"
        if s.staged_bytes is not None
        else "not measured (give --file and --spec)"
    )
    rows = [
        (
            f"a later sync at --change-rate {s.change_rate:.1%}",
            f"{s.changes:,} items put or deleted = {s.write_units:,} write units, "
            f"{s.requests:,} BatchWriteItem requests, {usd(s.dynamodb_usd)} on demand",
        ),
        ("a put reload", f"{s.reload_write_units:,} write units, {usd(s.reload_usd)} on demand"),
        (
            "sync staging (every run)",
            f"{e.rows:,} items staged in {e.shards:,} shard objects, merged in {s.buckets:,} "
            f"buckets; S3: {s.s3_puts:,} PUTs, {s.s3_gets:,} GETs ({usd(s.s3_usd)}); staged {staged}",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    return ["", *(f"{name:<{width}}  {value}" for name, value in rows)]


def _engine_rows(e: Estimate, usd: Callable[[float], str]) -> list[str]:
    """A put job on both engines, side by side; another mode: why bulk put items cannot serve it."""
    b = e.bulk
    if b is None:
        mode = f"{e.write_mode} with --numeric-add" if e.numeric_add else e.write_mode
        return ["", f"bulkPutItems: not for writeMode {mode} (it only puts items)"]
    if b.refused is not None:
        bulk_time = b.refused
    elif b.seconds is None:
        bulk_time = (
            "not known: no writeUnitsPerSecond, no MaxWriteRequestUnits cap; its own rate is not documented"
        )
    else:
        bulk_time = f"{_duration(b.seconds)} at MaxWriteRequestUnits {b.max_write_units:,} (no faster)"
    size = f"{b.json_bytes / 2**30:,.3f} GiB" + ("" if b.json_measured else " at least")
    price = (
        f"{usd(b.price_usd)} at --bulk-price-per-gib of {size} DynamoDB JSON"
        if b.price_usd is not None
        else "not published in the sources found: give --bulk-price-per-gib"
    )
    rows = [
        ("engine", "lambda (dynamodb.engine default)", "bulkPutItems"),
        ("time", _duration(e.seconds), f"staging {_duration(b.staging_seconds)}, then {bulk_time}"),
        ("DynamoDB", f"{usd(e.dynamodb_on_demand_usd)} on demand", price),
        ("Lambda", usd(e.lambda_usd), f"{usd(b.lambda_usd)} (staging Workers)"),
        ("Step Functions", usd(e.step_functions_usd), f"{usd(b.step_functions_usd)} + the hand-off's polls"),
    ]
    first = max(len(r[0]) for r in rows)
    second = max(len(r[1]) for r in rows)
    return ["", *(f"{a:<{first}}  {b_:<{second}}  {c}" for a, b_, c in rows)]


def _reached(e: Estimate) -> str:
    return " (the ceiling reached)" if e.table_model.startswith("on demand") else ""


def _notes(e: Estimate) -> list[str]:
    """What the estimate assumes, and what this load's write mode and size imply."""
    notes = [
        f"Assumes {BENCH_WORKER_ITEMS_PER_SECOND:,.0f} items/s per worker for batches (measured by "
        f"`make bench` at {BENCH_ROUND_TRIP_MS:g} ms round trip), us-east-1 list prices, and a table "
        "whose partitions take 1,000 write units/s each.",
    ]
    mode = write_mode_type(e.write_mode)
    if mode.estimate.note is not None:
        notes.append(mode.estimate.note)
    if e.numeric_add:
        notes.append(
            "A numeric add writes each record exactly once through a TransactWriteItems with a marker "
            f"in the ledger: {e.write_units_per_item} write units a record (twice the item's and the "
            f"marker's), and a worker writes {e.worker_items_per_second:,.0f} records/s (the "
            "transactions' loop make bench measured; the window is the single-item modes')."
        )
        notes.append(
            "Adds to one key from many shards (a hot counter) share that item: DynamoDB takes one "
            "transaction on it at a time (the others are cancelled with TransactionConflict and "
            f"retried) and at most {1000 // max(1, e.write_units_per_item):,} of these a second (its "
            "partition's 1,000 write units); a shard sends the records of a key waiting behind each "
            "other in one transaction, yet records that add to a few keys load at those keys' pace, "
            "whatever the concurrency: fold them to one record per key first (docs/INPUT.md)."
        )
    elif not mode.batched:
        notes.append(
            f"writeMode {e.write_mode} writes one item per request: the same write units as put, "
            f"{PutTarget.items_per_request}x the requests, and more worker time: a worker writes "
            f"{e.worker_items_per_second:,.0f} items/s (make bench's write-mode table; its "
            f"{BENCH_WRITE_CONCURRENCY} requests in flight alone would allow "
            f"{worker_rate(e.write_mode, loop_items_per_second=math.inf):,.0f}/s at "
            f"{BENCH_ROUND_TRIP_MS:g} ms)."
        )
    if e.table_write_units_per_second > TABLE_WRITE_QUOTA:
        notes.append(
            f"Above the default per-table quota of {TABLE_WRITE_QUOTA:,} write units/s: ask for more first."
        )
    if e.concurrency > ACCOUNT_LAMBDA_CONCURRENCY:
        notes.append(
            f"More workers than the default {ACCOUNT_LAMBDA_CONCURRENCY:,} concurrent Lambda executions."
        )
    return notes
