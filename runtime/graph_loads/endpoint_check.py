"""The edge endpoint check of a property graph job before its load: ids no shard staged, looked up
in the graph, and the staged edges that dangle (logic/endpoints.py holds the rules)."""

from __future__ import annotations

import csv
import itertools
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from adapters.neptune import LoaderClient
from adapters.s3 import S3Store
from logic import endpoints, graph_load, layout, opencypher
from logic.errors import EndpointCheckLimitError
from logic.job import PlannedJob

# The function's memory sizes the edge endpoint check's passes (logic/endpoints.py per_pass):
# Lambda (and the embedded run) say it in AWS_LAMBDA_FUNCTION_MEMORY_SIZE; this is for a caller
# that does not, Lambda's smallest.
DEFAULT_MEMORY_MIB = 128
# Open ids asked of the graph at a time: the ids it answers with are new strings, never a whole
# pass's worth at once.
LOOKUP_CHUNK = 50_000
# Id files read at once by the check (their S3 round trips overlap; decoding holds the GIL).
READS_IN_FLIGHT = 8


def endpoint_check(
    event: Mapping[str, Any],
    bucket: str,
    store: S3Store,
    client: LoaderClient,
    memory_mib: int = DEFAULT_MEMORY_MIB,
) -> dict[str, Any]:
    """graph.danglingEdges: the check (`check_edges`), or why it was skipped."""
    graph = PlannedJob.parse(event["job"]).graph
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
    job = PlannedJob.parse(event["job"])
    job_id, plan_id, graph = job.job_id, job.plan, job.graph
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
