"""PollGraphLoad: ask the Neptune loader how the job's load is going; at its end, finish the report
(graph_loads/poll.py) with the function's clients."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters import clients
from adapters.ledger import Ledger
from adapters.neptune import LoaderClient, base_url
from adapters.s3 import S3Store
from graph_loads.poll import poll
from handlers.observability import entry_point, record_graph_load
from handlers.settings import PollGraphLoadSettings

SETTINGS_CLASS = PollGraphLoadSettings


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """The event is Finalize's `result` with StartGraphLoad's `load` (or a caught `error`); the
    result is Finalize's shape plus `graphStatus`, `pending` and the next `waitSeconds`."""
    settings = PollGraphLoadSettings.from_env(env)
    return poll(
        event,
        LoaderClient(base_url(settings.neptune_endpoint, settings.neptune_port), settings.neptune_region),
        S3Store(clients.s3()),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        now,
    )


@entry_point("PollGraphLoad", record=record_graph_load)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
