"""StartBulkPut: hand a bulkPutItems job's staged items to DynamoDB's bulk put items operation,
once per run (bulk_puts/start.py) with the function's clients."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters import clients
from adapters.bulk_puts import BulkOperations
from adapters.ledger import Ledger
from adapters.s3 import S3Store
from bulk_puts.start import start
from handlers.observability import entry_point
from handlers.settings import StartBulkPutSettings

SETTINGS_CLASS = StartBulkPutSettings


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """The event is Plan's `job` and `shardCount`; the result is $.bulkPut: the operation, its
    status, counters and poll schedule (logic/bulk_put.py `answer`)."""
    settings = StartBulkPutSettings.from_env(env)
    return start(
        event,
        settings,
        BulkOperations(clients.ledger_dynamodb()),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        S3Store(clients.s3()),
        now,
    )


@entry_point("StartBulkPut")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
