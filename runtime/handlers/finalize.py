"""Finalize: reconcile the ledger against the manifest, merge rejects, write the job report
(reports/service.py) with the function's clients."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters import clients
from adapters.ledger import Ledger
from adapters.s3 import S3Store
from handlers.observability import entry_point
from handlers.settings import FinalizeSettings
from reports.service import finalize

SETTINGS_CLASS = FinalizeSettings


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """The event is the execution's `state` (its input, Plan's `plan`, a caught `error`) and its
    `execution`; the result is the job's status, its report and the report's location. `now`: the
    clock of the `writersUntil` a failed Map Run leaves (the emulator's, in a test)."""
    settings = FinalizeSettings.from_env(env)
    return finalize(
        event,
        settings,
        S3Store(clients.s3()),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        now,
    )


@entry_point("Finalize")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
