"""PollBulkPut: ask DynamoDB how a job's bulk put items operation is going (bulk_puts/poll.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters import clients
from adapters.bulk_puts import BulkOperations
from bulk_puts.poll import poll
from handlers.observability import entry_point
from handlers.settings import PollBulkPutSettings

SETTINGS_CLASS = PollBulkPutSettings


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """The event is $.bulkPut as `bulkPut`; the result is the same shape, `pending` while the
    operation runs and before its deadline."""
    PollBulkPutSettings.from_env(env)
    return poll(event, BulkOperations(clients.ledger_dynamodb()), now)


@entry_point("PollBulkPut")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
