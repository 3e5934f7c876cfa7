"""Edge endpoint check rows of `make bench`: mapload's per-shard id files merged by StartGraphLoad
against one set of every vertex id of the job, on generated jobs, no network.

Two jobs of N vertices' worth, spread over S shards (seeded): "one file" (each record a vertex and
two edges from it, each to a random vertex of the job, so mostly of another shard; 0.1 % of
edges end at a vertex an earlier job loaded) and "edges only" (2N edges, no vertices, every
endpoint a vertex an earlier job loaded, so every endpoint is looked up). In both, a few edges end
at ids nowhere (`MISSING`). The graph is an in-memory lookup that finds every id but those.

Rows: (1) mapload as built: each shard's `ShardIds` written as `encode_ids` files (as the Worker's
`staging.finish_graph` does, shards one after another here), then StartGraphLoad's own `check_edges` over
them and the staged edge files, read from memory through `open_text` as from S3; (1a) that
`check_edges` alone, what runs in the 512 MiB / 300 s Lambda; (2) the simple alternative: one
set of every vertex id of the job, every edge's endpoints checked against it, the rest looked up,
then every edge again to count the dangling ones; its ids come from memory, no file read or parsed
(its best case: its set holds the generator's own strings); (2b) the same reading what the
Workers stage: the vertex id files and the edge CSV files, every shard's.

Each figure's time is its best of `REPEATS` rounds, the rows in turns in this process; peak memory
is tracemalloc's peak over one more run of each row (Python allocations, not RSS; the generated
job itself is not counted). `python bench/endpoints.py [--vertices N] [--shards S]` prints the
table alone.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import gzip
import io
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runtime"))

from graph_loads.endpoint_check import check_edges, pass_size  # noqa: E402
from logic import layout, opencypher  # noqa: E402
from logic.endpoints import (  # noqa: E402
    DanglingEdges,
    ShardIds,
    count_ids,
    decode_ids,
    encode_ids,
    passes,
    text_size,
    verdict,
)

REPEATS = 3
SEED = 16
# Ids neither the job nor the graph holds, and how many edges end at one of them.
MISSING = frozenset(f"gone-{k}" for k in range(5))
DANGLING = 20
EARLIER_SHARE = 0.001  # "one file": edge ends at a vertex an earlier job loaded
# stacks/loader_settings.py control_timeout_seconds, control_memory_mib
LAMBDA_SECONDS, LAMBDA_MIB = 300, 512
JOB, PLAN, BUCKET = "bench", "plan", "staging"
# check_edges as StartGraphLoad runs it, with a tolerance that never stops it before its last pass
# (at 100 StartGraphLoad itself would skip the check: the rows measure the check).
WHOLE_CHECK = {"model": "property", "maxDanglingPercent": 100}


@dataclass
class Shard:
    vertices: list[str]
    starts: list[str]
    ends: list[str]

    def edges(self, index: int) -> Iterator[tuple[str, str, str]]:
        """(id, start, end) of each edge, the id as the stager's default derives one."""
        for n, (start, end) in enumerate(zip(self.starts, self.ends, strict=True)):
            yield f"e{index}-{n}", start, end


@dataclass
class Job:
    name: str
    shards: list[Shard]
    staged: dict[str, bytes] = field(default_factory=dict)  # the staged edge files, by key

    @property
    def vertices(self) -> int:
        return sum(len(s.vertices) for s in self.shards)

    @property
    def edges(self) -> int:
        return sum(len(s.starts) for s in self.shards)


def _vertex(i: int) -> str:
    return f"vertex-{i:07d}"


def one_file(n: int, shards: int, rng: random.Random) -> Job:
    """Records in order, each a vertex and two edges from it to random vertices of the job."""
    ids = [_vertex(i) for i in range(n)]
    out = []
    for k in range(shards):
        own = ids[k * n // shards : (k + 1) * n // shards]
        ends = [
            f"earlier-{rng.randrange(n)}" if rng.random() < EARLIER_SHARE else ids[rng.randrange(n)]
            for _ in range(2 * len(own))
        ]
        out.append(Shard(own, [v for v in own for _ in (0, 1)], ends))
    return _dangle(Job("one file", out), rng)


def edges_only(n: int, shards: int, rng: random.Random) -> Job:
    """2n edges between the n vertices a job loaded earlier; no vertex of its own."""
    earlier = [_vertex(i) for i in range(n)]
    out = []
    for k in range(shards):
        count = (k + 1) * 2 * n // shards - k * 2 * n // shards
        starts = [earlier[rng.randrange(n)] for _ in range(count)]
        out.append(Shard([], starts, [earlier[rng.randrange(n)] for _ in range(count)]))
    return _dangle(Job("edges only", out), rng)


def _dangle(job: Job, rng: random.Random) -> Job:
    """`DANGLING` edges of random shards end at an id nowhere; then the job's edge files staged."""
    full = [s for s in job.shards if s.ends]
    gone = sorted(MISSING)
    for n in range(DANGLING):
        shard = rng.choice(full)
        shard.ends[rng.randrange(len(shard.ends))] = gone[n % len(gone)]
    header = opencypher.relationship_header([]).cells
    for index, shard in enumerate(job.shards):
        text = io.StringIO(newline="")
        writer = csv.writer(text, lineterminator="\r\n")  # as the stager writes (property_graph.py)
        writer.writerow(header)
        writer.writerows((*edge, "LINKS") for edge in shard.edges(index))
        job.staged[_edges_key(index)] = text.getvalue().encode()
    return job


def _edges_key(index: int) -> str:
    return layout.property_graph_keys(JOB, PLAN, index, compressed=False)[1]


def graph_lookup(ids: Sequence[str]) -> set[str]:
    """The graph: every id is a vertex but the `MISSING` ones."""
    return set(ids) - MISSING


class MemoryStore:
    """The staging bucket in memory, read as `S3Store.open_text` and `get_bytes` read it."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get_bytes(self, bucket: str, key: str) -> bytes:
        return self.objects[key]

    get_staged = get_bytes

    @contextlib.contextmanager
    def open_text(self, bucket: str, key: str, *, gzipped: bool) -> Iterator[io.TextIOWrapper]:
        raw: Any = io.BytesIO(self.objects[key])
        yield io.TextIOWrapper(
            gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw, encoding="utf-8", newline=""
        )

    open_staged_text = open_text


# -- the rows --------------------------------------------------------------------------------------


def id_files(job: Job) -> dict[str, bytes]:
    """What each shard's Worker writes for the check (shards/staging.py `finish_graph`), by key."""
    files = {}
    for index, shard in enumerate(job.shards):
        ids = ShardIds()
        for vertex in shard.vertices:
            ids.vertex(vertex)
        for start, end in zip(shard.starts, shard.ends, strict=True):
            ids.edge(start, end)
        vertices_key, open_key = layout.graph_ids_keys(JOB, PLAN, index)
        files[vertices_key] = encode_ids(sorted(ids.vertices))
        files[open_key] = encode_ids(ids.open_endpoints())
    return files


def mapload_check(job: Job, files: dict[str, bytes], opened: dict[str, int]) -> dict[str, Any]:
    """StartGraphLoad's check over the id files and the staged edge files; the open endpoint count
    comes with the event, as Finalize sums the Workers' counts (graph.openEndpoints)."""
    event = {
        # A tolerance that never stops the check early: every pass runs, the check's whole cost.
        "job": {"jobId": JOB, "runId": PLAN, "spec": {"format": "csv", "graph": WHOLE_CHECK}},
        "shardCount": len(job.shards),
        "graph": {"edges": job.edges, **opened},
    }
    store = MemoryStore({**files, **job.staged})
    return check_edges(event, BUCKET, store, graph_lookup, pass_size(event, LAMBDA_MIB))  # type: ignore[arg-type]


def open_endpoints(job: Job, files: dict[str, bytes]) -> dict[str, int]:
    """graph.openEndpoints and .openEndpointBytes, as the Workers count them and Finalize sums them."""
    keys = [layout.graph_ids_keys(JOB, PLAN, i)[1] for i in range(len(job.shards))]
    return {
        "openEndpoints": sum(count_ids(files[key]) for key in keys),
        "openEndpointBytes": sum(text_size(files[key]) for key in keys),
    }


def simple_check(job: Job) -> dict[str, Any]:
    """One set of every vertex id of the job; the edges checked against it, from memory."""
    return _simple(
        (shard.vertices for shard in job.shards),
        lambda: ((index, shard.edges(index)) for index, shard in enumerate(job.shards)),
        job.edges,
    )


def simple_from_files(job: Job, files: dict[str, bytes]) -> dict[str, Any]:
    """The same over what the Workers stage: every vertex id file, every edge file (twice)."""
    store = MemoryStore(files)

    def vertices() -> Iterator[Iterator[str]]:
        for index in range(len(job.shards)):
            yield decode_ids(store.get_bytes(BUCKET, layout.graph_ids_keys(JOB, PLAN, index)[0]))

    def edges() -> Iterator[tuple[int, Iterator[tuple[str, str, str]]]]:
        for index in range(len(job.shards)):
            rows = csv.reader(io.StringIO(job.staged[_edges_key(index)].decode("utf-8"), newline=""))
            next(rows)
            yield index, ((cells[0], cells[1], cells[2]) for cells in rows)

    return _simple(vertices(), edges, job.edges)


def _simple(
    vertex_ids: Iterable[Iterable[str]],
    edges: Callable[[], Iterable[tuple[int, Iterable[tuple[str, str, str]]]]],
    count: int,
) -> dict[str, Any]:
    known: set[str] = set()
    for ids in vertex_ids:
        known.update(ids)
    wanted: set[str] = set()
    for _, shard in edges():
        for _, start, end in shard:
            if start not in known:
                wanted.add(start)
            if end not in known:
                wanted.add(end)
    missing = wanted - graph_lookup(sorted(wanted)) if wanted else set()
    dangling = DanglingEdges(missing)
    if missing:
        for index, shard in edges():
            for edge_id, start, end in shard:
                dangling.add(edge_id, start, end, index)
    return verdict(dangling, edges=count, looked_up=len(wanted), max_percent=0)


# -- measuring -------------------------------------------------------------------------------------


@dataclass
class Row:
    shape: str
    name: str
    seconds: float
    peak: int  # bytes, tracemalloc
    file_bytes: int | None  # id files, all shards
    check: dict[str, Any]


def _peak(run: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(job: Job, repeats: int = REPEATS) -> list[Row]:
    files = id_files(job)
    size = sum(len(b) for b in files.values())
    opened = open_endpoints(job, files)  # what the Workers count and Finalize sums
    best = [float("inf")] * 4
    checks: list[dict[str, Any]] = [{}] * 4
    for _ in range(repeats):
        started = time.perf_counter()
        id_files(job)
        staged = time.perf_counter()
        checks[1] = mapload_check(job, files, opened)
        checked = time.perf_counter()
        checks[2] = simple_check(job)
        simple = time.perf_counter()
        checks[3] = simple_from_files(job, files)
        done = time.perf_counter()
        for i, seconds in enumerate((checked - started, checked - staged, simple - checked, done - simple)):
            best[i] = min(best[i], seconds)
    checks[0] = checks[1]
    peaks = [
        _peak(lambda: mapload_check(job, id_files(job), opened)),
        _peak(lambda: mapload_check(job, files, opened)),
        _peak(lambda: simple_check(job)),
        _peak(lambda: simple_from_files(job, files)),
    ]
    names = (
        "1 mapload: Workers' id files, then check_edges",
        "1a of which check_edges (StartGraphLoad)",
        "2 one set of every vertex id, from memory",
        "2b one set of every vertex id, reading the staged files",
    )
    sizes = (size, size, None, None)
    return [Row(job.name, *row) for row in zip(names, best, peaks, sizes, checks, strict=True)]


def table(vertices: int, shards: int = 64, repeats: int = REPEATS) -> str:
    rng = random.Random(SEED)
    jobs = [one_file(vertices, shards, rng), edges_only(vertices, shards, rng)]
    out = [
        f"Edge endpoint check ({vertices:,} vertices' worth, {2 * vertices:,} edges, {shards} shards; "
        f"best of {repeats} rounds; in memory, no S3, the graph a set)",
        "",
        "| job | approach | seconds | ids/s | peak MiB | id file bytes/shard | looked up | dangling "
        "| × row 2 time |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    models = []
    for job in jobs:
        rows = measure(job, repeats)
        ids = job.vertices + 2 * job.edges  # every id the check accounts for
        base = rows[2].seconds
        for r in rows:
            per_shard = f"{r.file_bytes / shards:,.0f}" if r.file_bytes is not None else "—"
            out.append(
                f"| {r.shape} | {r.name} | {r.seconds:.2f} | {ids / r.seconds:,.0f} | {r.peak / 2**20:,.1f} "
                f"| {per_shard} | {r.check['lookedUp']:,} | {r.check['count']:,} | {r.seconds / base:.2f} |"
            )
        models.append(_model(job, rows[1], id_files(job)))
    out += ["", "Model from the measured numbers (row 1a scaled; " + "; ".join(models) + ")."]
    return "\n".join(out)


def _model(job: Job, check: Row, files: dict[str, bytes]) -> str:
    """How many vertices+edges of this shape one StartGraphLoad gets through in its time and memory.
    A pass holds at most what `pass_size` allows in LAMBDA_MIB (logic/endpoints.py per_pass), so
    memory stays bounded, and each further pass reads every id file again: time grows with the
    passes. Row 1a's time and peak per open id scaled; S3 reads, Neptune round trips (1,000 ids a
    request) and the interpreter itself are not counted, so these are upper bounds."""
    items = job.vertices + job.edges
    counts = open_endpoints(job, files)
    opened = counts["openEndpoints"]
    per_pass = pass_size({"graph": counts}, LAMBDA_MIB)  # the same per id at any scale
    seconds_per_item = check.seconds / items

    def seconds(n: float) -> float:
        return passes(int(opened * n / items), per_pass) * n * seconds_per_item

    low, high = 0.0, float(items)
    while seconds(high) <= LAMBDA_SECONDS:
        low, high = high, 2 * high
    for _ in range(60):  # seconds() grows with n: bisect to where it reaches the limit
        middle = (low + high) / 2
        low, high = (middle, high) if seconds(middle) <= LAMBDA_SECONDS else (low, middle)
    at = passes(int(opened * low / items), per_pass)
    pass_mib = check.peak / max(1, opened) * (opened * low / items / at) / 2**20
    return (
        f"{job.name}: ≈ {low / 1e6:,.0f} M vertices+edges within {LAMBDA_SECONDS} s in {at} "
        f"pass{'es' if at > 1 else ''} of ≤ {per_pass:,} open ids, measured ≈ {pass_mib:,.0f} MiB a pass "
        f"of {LAMBDA_MIB}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vertices", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    options = parser.parse_args()
    if options.vertices < options.shards or options.shards < 1:
        parser.error("--vertices must be at least --shards, and --shards at least 1")
    print(table(options.vertices, options.shards, options.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
