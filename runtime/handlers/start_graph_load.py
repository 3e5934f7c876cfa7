"""StartGraphLoad: check a property graph's edge endpoints, then start the Neptune bulk load of a
job's staged files, once per run (graph_loads/start.py) with the function's clients."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters import clients
from adapters.ledger import Ledger
from adapters.neptune import LoaderClient, base_url
from adapters.s3 import S3Store

# bench/endpoints.py reads check_edges and pass_size here.
from graph_loads.endpoint_check import DEFAULT_MEMORY_MIB
from graph_loads.start import start
from handlers.observability import entry_point
from handlers.settings import StartGraphLoadSettings

SETTINGS_CLASS = StartGraphLoadSettings


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """The event is Finalize's `job`, the report's `graph` section and `shardCount`; the result is
    the load's id, source and poll schedule, and the edge endpoint check (`danglingEdges`)."""
    settings = StartGraphLoadSettings.from_env(env)
    return start(
        event,
        settings,
        LoaderClient(base_url(settings.neptune_endpoint, settings.neptune_port), settings.neptune_region),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        S3Store(clients.s3()),
        now,
        int(env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE") or DEFAULT_MEMORY_MIB),  # Lambda sets it
    )


@entry_point("StartGraphLoad")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
