"""StartGraphLoad: check a property graph's edge endpoints, then start the Neptune bulk load of a
job's staged files, once per run."""

from __future__ import annotations

import csv
import itertools
import json
import os
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from adapters import clients
from adapters.ledger import Ledger
from adapters.neptune import LoaderClient, base_url
from adapters.s3 import S3Store
from handlers.observability import entry_point
from handlers.settings import StartGraphLoadSettings
from logic import endpoints, graph_load, layout, opencypher
from logic.errors import EndpointCheckLimitError
from logic.spec.graph import DEFAULT_POLL_SECONDS, DEFAULT_TIMEOUT_MINUTES

SETTINGS_CLASS = StartGraphLoadSettings
# The function's memory sizes the edge endpoint check's passes (logic/endpoints.py per_pass):
# Lambda (and the embedded run) say it in AWS_LAMBDA_FUNCTION_MEMORY_SIZE; this is for a caller
# that does not, Lambda's smallest.
DEFAULT_MEMORY_MIB = 128
# Open ids asked of the graph at a time: the ids it answers with are new strings, never a whole
# pass's worth at once.
LOOKUP_CHUNK = 50_000
# Id files read at once by the check (their S3 round trips overlap; decoding holds the GIL).
READS_IN_FLIGHT = 8
# How far the loader's clock (a load's startTime) may be behind this function's (the claim's).
CLOCK_SKEW_SECONDS = 10


def endpoint_check(
    event: Mapping[str, Any],
    bucket: str,
    store: S3Store,
    client: LoaderClient,
    memory_mib: int = DEFAULT_MEMORY_MIB,
) -> dict[str, Any]:
    """graph.danglingEdges: the check (`check_edges`), or why it was skipped."""
    graph = event["job"]["spec"].get("graph") or {}
    edges = int((event.get("graph") or {}).get("edges") or 0)
    max_percent = float(graph.get("maxDanglingPercent") or 0)
    dependencies = [str(d) for d in graph.get("dependencies") or []]
    pending = (
        d for d in dependencies if client.status(d)["overallStatus"].get("status") != graph_load.COMPLETED
    )
    reason = endpoints.skip_reason(max_percent, pending) if edges else None
    if reason is not None:
        return endpoints.skipped(reason, edges=edges, max_percent=max_percent)
    return check_edges(event, bucket, store, client.existing_vertex_ids, pass_size(event, memory_mib))


def pass_size(event: Mapping[str, Any], memory_mib: int) -> int:
    """The open ids one pass of the check holds, from the job's open endpoint counts (the report's
    graph section, summed by Finalize) and the function's memory."""
    staged = event.get("graph") or {}
    opened, text = int(staged.get("openEndpoints") or 0), int(staged.get("openEndpointBytes") or 0)
    return endpoints.per_pass(memory_mib, opened, text)


def check_edges(
    event: Mapping[str, Any],
    bucket: str,
    store: S3Store,
    lookup: Callable[[Collection[str]], set[str]],
    per_pass: int,
) -> dict[str, Any]:
    """graph.danglingEdges of a property graph job (logic/endpoints.py): the endpoints no shard
    staged, looked up in the graph; the staged edge files read again only for shards that
    reference an id found nowhere, to count and sample the edges that dangle."""
    job = event["job"]
    job_id, plan_id = str(job["jobId"]), str(job.get("planId") or job["runId"])
    graph = job["spec"].get("graph") or {}
    staged = event.get("graph") or {}
    edges = int(staged.get("edges") or 0)
    max_percent = float(graph.get("maxDanglingPercent") or 0)
    if not edges:  # nothing can dangle: no file is read
        return endpoints.verdict(
            endpoints.DanglingEdges(set()), edges=0, looked_up=0, max_percent=max_percent
        )
    keys = [layout.graph_ids_keys(job_id, plan_id, index) for index in range(int(event["shardCount"]))]

    def fetch(key: str) -> bytes:  # compressed: a few MB even for a shard of millions of ids
        return store.get_staged(bucket, key)

    # The open ids in passes of at most `per_pass` (the Workers counted them, Finalize summed
    # them): memory stays bounded however many ids the job references without staging them
    # (an edges-only job: all of its endpoints).
    parts = endpoints.passes(int(staged.get("openEndpoints") or 0), per_pass)
    with ThreadPoolExecutor(max_workers=READS_IN_FLIGHT) as pool:
        found = _missing(pool, fetch, keys, (parts, per_pass), endpoints.allowed(edges, max_percent), lookup)
        missing, opened = found.missing, found.opened
        dangling = endpoints.DanglingEdges(missing)
        gzipped = bool(graph.get("gzip"))
        index_of = {open_key: index for index, (_, open_key) in enumerate(keys)}
        reread = opened if missing else []  # none dangles unless some id was found nowhere
        for open_key, data in zip(reread, _ahead(pool, fetch, reread), strict=True):
            if not found.complete and len(dangling.sample) >= endpoints.SAMPLE_SIZE:
                break  # surely held back: a sample is all the rest would add (the count is a bound)
            if not missing.isdisjoint(endpoints.decode_ids(data)):
                index = index_of[open_key]
                edges_key = layout.property_graph_keys(job_id, plan_id, index, compressed=gzipped)[1]
                _count_dangling(store, bucket, edges_key, gzipped, index, dangling)
    if not found.complete:  # each id found nowhere ends an edge, and an edge has two ends
        dangling.count = max(dangling.count, -(-len(missing) // 2))
    return endpoints.verdict(
        dangling, edges=edges, looked_up=found.looked_up, max_percent=max_percent, complete=found.complete
    )


@dataclass
class _Missing:
    missing: set[str] = field(default_factory=set)  # the open ids found nowhere
    opened: list[str] = field(default_factory=list)  # the open endpoint files that hold any id
    looked_up: int = 0
    complete: bool = True  # False: stopped once the load was surely held back


def _missing(
    pool: ThreadPoolExecutor,
    fetch: Callable[[str], bytes],
    keys: list[tuple[str, str]],
    passes: tuple[int, int],
    allowed: int,
    lookup: Callable[[Collection[str]], set[str]],
) -> _Missing:
    """The passes over the id files: each merges its hash part of the open ids, less every
    shard's vertices, and asks the graph for the rest. A shard whose vertices cover all of its
    edges' endpoints has an empty open file: read in the first pass, never again."""
    parts, per_pass = passes
    found = _Missing()
    for part in range(parts):
        wanted = endpoints.unresolved(
            _open_ids(pool, fetch, [key for _, key in keys], found.opened)
            if part == 0
            else map(endpoints.decode_ids, _ahead(pool, fetch, found.opened)),
            map(endpoints.decode_ids, _ahead(pool, fetch, [vertices_key for vertices_key, _ in keys])),
            (part, parts),
        )
        found.looked_up += len(wanted)
        found.missing |= _not_in_graph(wanted, lookup)
        del wanted
        if part + 1 < parts and endpoints.surely_blocked(len(found.missing), allowed):
            # Edges loaded before their vertices, say: stop before the ids found nowhere outgrow
            # the memory a pass was sized for; the counts are then lower bounds.
            found.complete = False
            break
        # The ids found nowhere stay beside each later pass: at most half a pass's worth, so the
        # two together keep within 1.5 times the share a pass was sized for.
        if len(found.missing) > per_pass // 2:  # a tolerance that could still let so many through
            raise EndpointCheckLimitError(
                f"{len(found.missing):,} edge endpoint ids (and counting) are neither vertices of this job "
                f"nor in the graph: more than the check holds beside its passes ({per_pass // 2:,} ids in "
                "this function's memory). Raise the environment's control_memory_mib, load the missing "
                "vertices first, or set graph.maxDanglingPercent to 100 to load without the check"
            )
    return found


def _not_in_graph(wanted: set[str], lookup: Callable[[Collection[str]], set[str]]) -> set[str]:
    """The ids of `wanted` the graph does not hold, asked LOOKUP_CHUNK at a time."""
    absent: set[str] = set()
    ids = iter(wanted)
    while chunk := list(itertools.islice(ids, LOOKUP_CHUNK)):
        found = lookup(chunk)
        absent.update(i for i in chunk if i not in found)
    return absent


def _ahead(pool: ThreadPoolExecutor, fetch: Callable[[str], bytes], keys: list[str]) -> Iterator[bytes]:
    """Each key's object in order, up to READS_IN_FLIGHT fetched ahead (S3's round trips overlap);
    a consumer that stops early leaves at most that many fetches unused."""
    window: deque[Future[bytes]] = deque()
    pending = iter(keys)
    for key in itertools.islice(pending, READS_IN_FLIGHT):
        window.append(pool.submit(fetch, key))
    while window:
        ready = window.popleft().result()
        for key in itertools.islice(pending, 1):
            window.append(pool.submit(fetch, key))
        yield ready


def _open_ids(
    pool: ThreadPoolExecutor, fetch: Callable[[str], bytes], keys: list[str], opened: list[str]
) -> Iterator[Iterator[str]]:
    """Each open endpoint file's ids, in turn; the keys of those that hold any go to `opened` as
    they are read (the ids stream: a file's ids are never all held at once here)."""
    for key, data in zip(keys, _ahead(pool, fetch, keys), strict=True):
        ids = endpoints.decode_ids(data)
        first = next(ids, None)
        if first is not None:
            opened.append(key)
            yield itertools.chain((first,), ids)


def _count_dangling(
    store: S3Store, bucket: str, key: str, gzipped: bool, index: int, dangling: endpoints.DanglingEdges
) -> None:
    """Each edge of one staged edge file (RFC 4180 rows under its own header) to the tally."""
    with store.open_staged_text(bucket, key, gzipped=gzipped) as text:
        rows = csv.reader(text)
        header = opencypher.parse_header(next(rows))
        at = [header.position(system) for system in (":ID", ":START_ID", ":END_ID")]
        checked = header.checked(":START_ID"), header.checked(":END_ID")
        for cells in rows:
            edge_id, start, end = (cells[i] for i in at)
            dangling.add(edge_id, start, end, index, checked)


def start(
    event: Mapping[str, Any],
    settings: StartGraphLoadSettings,
    client: LoaderClient,
    ledger: Ledger,
    store: S3Store,
    now: Callable[[], float] = time.time,
    memory_mib: int = DEFAULT_MEMORY_MIB,
) -> dict[str, Any]:
    job = event["job"]
    job_id, run_id = str(job["jobId"]), str(job["runId"])
    graph = job["spec"].get("graph") or {}
    # Workers stage under the plan's prefix (a resumed job reuses the shards an earlier run staged).
    plan_id = str(job.get("planId") or run_id)
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
        elif graph_load.is_property_graph(graph, str(job["spec"].get("format") or "")):
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
                source_format=str(job["spec"].get("format") or ""),
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


def handle(
    event: Mapping[str, Any], env: Mapping[str, str], now: Callable[[], float] = time.time
) -> dict[str, Any]:
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
