"""Plan: validate the input, size the source objects, cut byte-range shards, write the manifest
(plans/service.py) with the function's clients."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters import clients
from adapters.bulk_puts import BulkOperations
from adapters.executions import execution_ended
from adapters.ledger import Ledger
from adapters.s3 import S3Store
from adapters.tables import describe_table
from handlers.observability import entry_point
from handlers.settings import PlanSettings
from plans.service import plan

SETTINGS_CLASS = PlanSettings


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """The event is the execution's `input` and its `execution` (name, id); the result is the
    planned `job`, the manifest's key and what the Shards map reads. `now`: the clock a failed
    run's `writersUntil` is compared with (the emulator's, in a test)."""
    settings = PlanSettings.from_env(env)
    return plan(
        event,
        settings,
        S3Store(clients.s3()),
        # A job held by an ended run whose bulk put operation still runs: cancelled first, kept held.
        Ledger(
            clients.ledger_dynamodb(),
            settings.ledger_table,
            settings.ledger_ttl_days,
            settle=BulkOperations(clients.ledger_dynamodb()).settle,
        ),
        functools.partial(
            execution_ended, clients.stepfunctions(), worker_timeout_seconds=settings.worker_timeout_seconds
        ),
        now,
        functools.partial(describe_table, clients.dynamodb()),
    )


@entry_point("Plan")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
