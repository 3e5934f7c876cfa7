"""StartGraphLoad: start the Neptune bulk load of a job's staged files, once per run."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters import clients
from adapters.ledger import Ledger
from adapters.neptune import LoaderClient, base_url
from handlers.observability import entry_point
from handlers.settings import StartGraphLoadSettings
from logic import graph_load, layout

SETTINGS_CLASS = StartGraphLoadSettings


def start(
    event: Mapping[str, Any],
    settings: StartGraphLoadSettings,
    client: LoaderClient,
    ledger: Ledger,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    job = event["job"]
    job_id, run_id = str(job["jobId"]), str(job["runId"])
    graph = job["spec"].get("graph") or {}
    # Workers stage under the plan's prefix (a resumed job reuses the shards an earlier run staged).
    plan_id = str(job.get("planId") or run_id)
    source = f"s3://{settings.staging_bucket}/{layout.graph_prefix(job_id, plan_id)}"
    recorded = ledger.graph_load(job_id, run_id)
    if recorded and recorded.get("loadId"):
        # A retried start (the Lambda timed out after the POST, say): never a second load.
        load_id, started = str(recorded["loadId"]), float(recorded.get("startedAt") or now())
    else:
        # Claim first, POST second: a claim without a load id means an earlier attempt may have
        # started the load and died before recording it - adopt that load if the loader has it.
        adopted = None
        if not ledger.claim_graph_load(job_id, run_id, source):
            adopted = client.find_load(source)
        if adopted is None:
            body = graph_load.load_request(
                graph,
                source=source,
                role_arn=settings.loader_role_arn,
                region=settings.neptune_region,
                source_format=str(job["spec"].get("format") or ""),
            )
            adopted = client.start(body)
        load_id = ledger.record_graph_load(job_id, run_id, adopted)
        started = now()
    return {
        "loadId": load_id,
        "source": source,
        "waitSeconds": int(graph.get("pollSeconds") or 30),
        # When the load started (epoch seconds): the poll interval grows with its age.
        "startedAt": int(started),
        # The poll loop's overall deadline (epoch seconds), from the input's timeoutMinutes.
        "deadline": int(started + 60 * int(graph.get("timeoutMinutes") or 720)),
    }


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], now: Callable[[], float] = time.time
) -> dict[str, Any]:
    settings = StartGraphLoadSettings.from_env(env)
    return start(
        event,
        settings,
        LoaderClient(base_url(settings.neptune_endpoint, settings.neptune_port), settings.neptune_region),
        Ledger(clients.ledger_dynamodb(), settings.ledger_table, settings.ledger_ttl_days),
        now,
    )


@entry_point("StartGraphLoad")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, os.environ)
