"""Starting a job's Neptune bulk load, once per run: the edge endpoint check first (a property
graph's), then a claim in the ledger, then the loader's POST (or the load an earlier attempt began)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters.ledger import Ledger
from adapters.neptune import LoaderClient
from adapters.s3 import S3Store
from graph_loads.endpoint_check import DEFAULT_MEMORY_MIB, endpoint_check
from graph_loads.settings import StartSettings
from logic import graph_load, layout
from logic.job import PlannedJob
from logic.spec.graph import DEFAULT_POLL_SECONDS, DEFAULT_TIMEOUT_MINUTES

# How far the loader's clock (a load's startTime) may be behind this function's (the claim's).
CLOCK_SKEW_SECONDS = 10


def start(
    event: Mapping[str, Any],
    settings: StartSettings,
    client: LoaderClient,
    ledger: Ledger,
    store: S3Store,
    now: Callable[[], float] = time.time,
    memory_mib: int = DEFAULT_MEMORY_MIB,
) -> dict[str, Any]:
    """Start the load of the job's staged graph files (`event`: StartGraphLoad's input, `job`,
    `graph`, `shardCount`), once per run; the result is the load's id, source and poll schedule
    (`loadId` None when the endpoint check held it back) and the check (`danglingEdges`)."""
    job = PlannedJob.parse(event["job"])
    event = {**event, "job": job}  # parsed once: the endpoint check reads it too
    job_id, run_id, graph = job.job_id, job.run_id, job.graph
    # Workers stage under the plan's prefix (a resumed job reuses the shards an earlier run staged).
    plan_id = job.plan
    source = f"s3://{settings.staging_bucket}/{layout.graph_prefix(job_id, plan_id)}"
    recorded = ledger.graph_load(job_id, run_id)
    check: dict[str, Any] | None = None
    if recorded and recorded.get("loadId"):
        # A retried start (the Lambda timed out after the POST, say): never a second load.
        load_id, started = str(recorded["loadId"]), float(recorded.get("startedAt") or now())
        check = json.loads(str(recorded["danglingEdges"])) if recorded.get("danglingEdges") else None
    else:
        if recorded and recorded.get("danglingEdges"):
            # Claimed after a check that let the load start (it may have started): never checked
            # again, so a retry can neither pay for the check twice nor hold back a started load.
            check = json.loads(str(recorded["danglingEdges"]))
        elif graph_load.is_property_graph(graph, job.source_format):
            check = endpoint_check(event, settings.staging_bucket, store, client, memory_mib)
            if check["blocked"]:  # nothing claimed, nothing started: Poll finishes the report
                return {**_answer(None, source, graph, now()), "danglingEdges": check}
        # Claim first, POST second: a claim without a load id means an earlier attempt may have
        # started the load and died before recording it - adopt that load if the loader has it.
        adopted = None
        if not ledger.claim_graph_load(job_id, run_id, source, dangling=check):
            claimed = ledger.graph_load(job_id, run_id) or {}
            # Only a load started after the claim can be that attempt's (clocks differ a little).
            since = float(claimed.get("claimedAt") or 0) - CLOCK_SKEW_SECONDS
            adopted = str(claimed["loadId"]) if claimed.get("loadId") else client.find_load(source, since)
        if adopted is None:
            body = graph_load.load_request(
                graph,
                source=source,
                role_arn=settings.loader_role_arn,
                region=settings.neptune_region,
                source_format=job.source_format,
            )
            adopted = client.start(body)
        load_id = ledger.record_graph_load(job_id, run_id, adopted)
        started = now()
    return {**_answer(load_id, source, graph, started), "danglingEdges": check}


def _answer(load_id: str | None, source: str, graph: Mapping[str, Any], started: float) -> dict[str, Any]:
    return {
        # None: the endpoint check held the load back (danglingEdges says why).
        "loadId": load_id,
        "source": source,
        "waitSeconds": int(graph.get("pollSeconds") or DEFAULT_POLL_SECONDS),
        # When the load started (epoch seconds): the poll interval grows with its age.
        "startedAt": int(started),
        # The poll loop's overall deadline (epoch seconds), from the input's timeoutMinutes.
        "deadline": int(started + 60 * int(graph.get("timeoutMinutes") or DEFAULT_TIMEOUT_MINUTES)),
    }
