"""Worker: process one shard of the manifest (shards/service.py) with the function's clients."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from adapters import clients
from adapters.ledger import Ledger
from adapters.s3 import S3Store
from handlers.observability import entry_point
from handlers.settings import WorkerSettings
from shards.service import process_shard
from shards.sync_buckets import sync_bucket

SETTINGS_CLASS = WorkerSettings


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], remaining: Callable[[], float] | None = None
) -> dict[str, Any]:
    """The event is one manifest entry (`shard`) and the planned job (`job`); the result is the
    shard's `index`, `more` (it stopped before its deadline at a checkpoint: the state machine
    invokes the Worker again) and its metric fields (or `skipped` when the ledger has it done).
    `remaining`: the invocation's time left in seconds (Lambda's context, the emulator's clock).
    An event of the Sync Map (writeMode sync) is a `bucket` and the job: that bucket is synced."""
    settings = WorkerSettings.from_env(env)
    pool = settings.write_ceiling + 2  # a connection for each request in flight, at most
    if "bucket" in event:  # writeMode sync's second Map: one bucket (shards/sync_buckets.py)
        return sync_bucket(
            int(event["bucket"]),
            event["job"],
            settings,
            S3Store(clients.s3()),
            Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
            clients.batch_writes(pool),
        )
    return process_shard(
        event["shard"],
        event["job"],
        settings,
        S3Store(clients.s3()),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        # BatchWriteItem and the single-item PutItem/UpdateItem/DeleteItem: adapters/dynamodb_wire.py
        clients.batch_writes(pool),
        remaining=remaining,
    )


@entry_point("Worker", emit_metrics=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ, remaining=lambda: context.get_remaining_time_in_millis() / 1000)
