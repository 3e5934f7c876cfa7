"""The edge endpoint check of a property graph job, before its load starts (stdlib only).

An edge whose start or end vertex is neither a vertex this job staged nor already in the graph
would fail in the loader, late and one by one. Each shard records the ids of the vertices it
staged and the endpoint ids its own vertices do not cover (`ShardIds`, one file each per shard).
StartGraphLoad merges them (`unresolved`): what no shard staged is looked up in the graph, and an
edge with an endpoint found nowhere is dangling (`DanglingEdges`); `verdict` weighs their share
against graph.maxDanglingPercent. Memory holds the ids the job references but does not stage,
never the whole graph or all of the job's vertices.

Ids in an ID space (`:ID(space)`, `:START_ID(space)`, `:END_ID(space)` in openCypher sources) are
not checked: Neptune keeps ID spaces across loads, and how such an id reads back through
openCypher's id() is not something this check can confirm, so it neither records nor looks them
up (the loader still refuses an edge whose vertex is missing). Records mapped by graph.vertices
and graph.edges never use ID spaces.
"""

from __future__ import annotations

import bisect
import gzip
import io
import itertools
import json
import math
import zlib
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any

from logic.clipping import ID_BYTES
from logic.clipping import clip as clip_text

SAMPLE_SIZE = 10
CHUNK_IDS = 50_000
INFLATE_BLOCK = 4 << 20  # bytes of an id file decompressed at a time
# What one open id costs StartGraphLoad besides its characters (measured in CPython: ~90 bytes in
# a set with the lookup's list, up to ~120 right after the set grows), and the share of the
# function's memory a pass's ids may take (the interpreter, boto3 and the files read take the rest).
ID_OVERHEAD_BYTES = 130
MEMORY_SHARE = 0.45
# A property graph Worker's memory grows with its shard: ShardIds holds the shard's ids in sets.
# Its peak RSS on the worst shards (every id new), measured by bench/shard_memory.py (the Worker's
# own work() under Python 3.12, as on Lambda), is a staircase rather than a line: each id holds its
# str object and, at the end, a slot of the sorted list and its sort (ID_LIST_BYTES), while a
# set's table of 16-byte slots doubles each time it is 3/5 full (CPython), holding the old table
# beside the new one meanwhile. `worker_peak_mib` is that model for ids of ID_MIN_CHARS characters
# or more taken from the source (one byte more each, for its delimiter), at the length that costs
# most per byte of shard; an id's str is what CPython allocates for it (`str_bytes`). Besides the
# ids: the 1 KiB shard's 87 MiB (interpreter, libraries, clients), rounded up, and what the stager
# and its upload parts hold, ~45-62 MiB measured beside ShardIds alone from a 20 MiB shard on,
# rounded up and taken as growing to it from nothing.
ID_MIN_CHARS = 7
ID_SOURCE_BYTES = ID_MIN_CHARS + 1
ID_LIST_BYTES = 13
SET_SLOT_BYTES = 16
WORKER_BASELINE_MIB = 96
STAGER_MIB, STAGER_FULL_AT_MIB = 64, 20


class ShardIds:
    """The vertex ids a shard staged, and the endpoint ids of its edges that were not yet among them
    (an endpoint that already is a vertex of the shard is not open: it is not held twice)."""

    def __init__(self) -> None:
        self.vertices: set[str] = set()
        self.endpoints: set[str] = set()
        self.opened = 0  # how many open endpoints `open_endpoints` found
        self.opened_bytes = 0  # their file's text, decompressed (the Worker sets it: `text_size`)

    def vertex(self, vertex_id: str) -> None:
        self.vertices.add(vertex_id)

    def edge(self, start: str, end: str) -> None:
        self.endpoint(start)
        self.endpoint(end)

    def endpoint(self, vertex_id: str) -> None:
        """One end of an edge (called alone when the other is in an ID space: not checked)."""
        if vertex_id not in self.vertices:
            self.endpoints.add(vertex_id)

    def open_endpoints(self) -> list[str]:
        """The endpoints this shard's own vertices do not cover, sorted (a file's bytes are the same
        on every run). A list, not a set difference: `endpoints - vertices` copies the endpoints into
        a new table twice their count's size, which was a Worker's peak (~64 bytes an id more)."""
        vertices = self.vertices
        ids = [i for i in self.endpoints if i not in vertices]
        ids.sort()
        self.opened = len(ids)
        return ids


def set_slots(ids: int) -> int:
    """The table size of a CPython set of `ids` items: a power of two, doubled once 3/5 full (a
    set under 50,000 items grows 4x at a time instead: a few MiB at most, left out)."""
    slots = 8
    while ids * 5 >= (slots - 1) * 3:
        slots *= 2
    return slots


@dataclass(frozen=True)
class IdShape:
    """How a job's id templates make ids from a record's fields, beyond the plain worst case of one
    id a field: `per_field` ids a field read by them (two templates over one field make two), and
    `fixed_bytes` the most text a template adds to its field (`http://example.org/node/{id}`: 24;
    a second field counts as ID_SOURCE_BYTES more)."""

    per_field: float = 1.0
    fixed_bytes: int = 0


def str_bytes(chars: int) -> int:
    """What CPython allocates for an ASCII str of `chars` characters: a 40-byte header, the
    characters and a NUL, in 16-byte blocks."""
    return -(-(41 + chars) // 16) * 16


def worker_peak_mib(shard_mib: float, shape: IdShape = IdShape()) -> float:
    """A property graph Worker's peak RSS (MiB) on the worst shard of `shard_mib` MiB: at the id
    length that costs most, the larger of the end (every id, the sets' tables, the sorted list) and
    the last doubling of the tables (the ids then, the new tables beside the old half)."""

    def held(chars: int) -> float:
        ids = math.ceil(shard_mib * 2**20 / (chars + 1) * shape.per_field)
        size = str_bytes(chars + shape.fixed_bytes)
        slots = set_slots(ids)
        end = ids * (size + ID_LIST_BYTES) + slots * SET_SLOT_BYTES
        doubling = slots * 3 // 10 * size + slots * 3 // 2 * SET_SLOT_BYTES
        return max(end, doubling)

    # Past 16 characters more never costs more per byte of shard (a str grows 16 bytes at a time).
    worst = max(held(chars) for chars in range(ID_MIN_CHARS, ID_MIN_CHARS + 17))
    stager = STAGER_MIB * min(1.0, shard_mib / STAGER_FULL_AT_MIB)
    return WORKER_BASELINE_MIB + stager + worst / 2**20


def max_shard_mib(worker_memory_mib: int, largest: int, shape: IdShape = IdShape()) -> int:
    """The largest whole shardSizeMiB, up to `largest`, whose worst property graph shard a Worker
    of `worker_memory_mib` holds; 0 if not even 1 MiB (`worker_peak_mib` never decreases, so a
    bisection finds it)."""
    return bisect.bisect_right(
        range(1, largest + 1), float(worker_memory_mib), key=lambda mib: worker_peak_mib(mib, shape)
    )


def encode_ids(ids: Iterable[str]) -> bytes:
    """Ids as a gzip file of JSON strings, one per line (an id may hold any character), written a
    chunk at a time: a shard's millions of ids never sit in memory twice as text."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0) as zipped:
        chunks = iter(ids)
        while chunk := list(itertools.islice(chunks, CHUNK_IDS)):
            zipped.write("".join(encode_basestring(i) + "\n" for i in chunk).encode("utf-8"))
    return out.getvalue()


def text_size(data: bytes) -> int:
    """An `encode_ids` file's decompressed size, from its gzip trailer (ISIZE: the size modulo
    4 GiB; an id file is far smaller)."""
    return int.from_bytes(data[-4:], "little") if len(data) >= 4 else 0


def decode_ids(data: bytes) -> Iterator[str]:
    """The ids of an `encode_ids` file, from its gzip bytes: inflated a block at a time and parsed
    with one json.loads per block, the ids handed on by C (`chain`), not one Python step each."""
    return itertools.chain.from_iterable(_id_blocks(data))


def count_ids(data: bytes) -> int:
    """How many ids an `encode_ids` file holds (its lines), without parsing one."""
    return sum(block.count(b"\n") for block in _inflated(data))


def _id_blocks(data: bytes) -> Iterator[list[str]]:
    tail = b""
    for inflated in _inflated(data):
        block = tail + inflated
        cut = block.rfind(b"\n") + 1
        tail = block[cut:]
        if cut:
            # Each line is one JSON string (encode_ids escapes a line break inside an id).
            yield json.loads(b"[" + block[: cut - 1].replace(b"\n", b",") + b"]")
    if tail.strip():
        raise ValueError("an id file does not end with a newline: it was cut short")


def _inflated(data: bytes) -> Iterator[bytes]:
    """A gzip file's decompressed bytes, at most about INFLATE_BLOCK of them at a time (an
    edges-only shard's file inflates to ~100 MB: never held whole)."""
    inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer
    view = memoryview(data)
    for at in range(0, len(view), INFLATE_BLOCK // 8):
        pending = view[at : at + INFLATE_BLOCK // 8]
        while pending:
            yield inflate.decompress(pending, INFLATE_BLOCK)
            pending = memoryview(inflate.unconsumed_tail)
    yield inflate.flush()
    if not inflate.eof:
        raise ValueError("an id file's gzip stream ends early: it was cut short")


def per_pass(memory_mib: int, open_ids: int, open_bytes: int) -> int:
    """How many open ids one pass may hold in a function of `memory_mib`: MEMORY_SHARE of it, at
    ID_OVERHEAD_BYTES an id (a str object, its set slot, the lookup's pointer to it) plus the
    id's own length, taken from the open files' text (`open_bytes` over `open_ids`)."""
    mean = open_bytes / open_ids if open_ids else 0
    return max(1, int(memory_mib * 2**20 * MEMORY_SHARE // (ID_OVERHEAD_BYTES + mean)))


def passes(open_ids: int, per_pass: int) -> int:
    """How many passes keep at most about `per_pass` open ids in memory at once, for `open_ids`
    open endpoints over all shards (an upper bound: shards share ids)."""
    return max(1, -(-open_ids // per_pass))


def unresolved(
    endpoints: Iterable[Iterable[str]], vertices: Iterable[Iterable[str]], part: tuple[int, int] = (0, 1)
) -> set[str]:
    """The endpoint ids no shard staged as a vertex: every shard's open endpoints, less every
    shard's vertices. `vertices` is read lazily and not at all once nothing is left open.

    `part` (i, n): only the ids whose hash is i modulo n, so n passes over the files hold a
    n-th of the ids each (str hashes are stable within the process that runs the passes)."""
    index, parts = part
    wanted: set[str] = set()
    for ids in endpoints:
        wanted.update(ids if parts == 1 else (i for i in ids if hash(i) % parts == index))
    if wanted:
        for ids in vertices:
            wanted.difference_update(ids)
            if not wanted:
                break
    return wanted


@dataclass
class DanglingEdges:
    """The edges with an endpoint in `missing`: counted, and the first few kept as a sample."""

    missing: AbstractSet[str]
    count: int = 0
    sample: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self, edge_id: str, start: str, end: str, shard: int, checked: tuple[bool, bool] = (True, True)
    ) -> None:
        """One staged edge; an end in an ID space (`checked` False) is never counted missing."""
        absent = [i for i, check in zip((start, end), checked, strict=True) if check and i in self.missing]
        if not absent:
            return
        self.count += 1
        if len(self.sample) < SAMPLE_SIZE:
            self.sample.append(
                {
                    "id": clip(edge_id),
                    "from": clip(start),
                    "to": clip(end),
                    "missing": [clip(i) for i in sorted(set(absent))],
                    "shard": shard,
                }
            )


def clip(text: str) -> str:
    """An id as samples show it: the sample travels in the ledger item (400 KB) and the state
    machine's payloads (256 KiB), so a long id is cut to ID_BYTES of JSON, saying how long it was."""
    return clip_text(text, ID_BYTES)


def blocked(count: int, edges: int, max_percent: float) -> bool:
    """More than `max_percent` of `edges` dangling (0: any dangling edge blocks the load)."""
    return count * 100 > max_percent * edges


def allowed(edges: int, max_percent: float) -> int:
    """The most dangling edges that do not block the load (the largest count `blocked` lets by)."""
    return int(max_percent * edges // 100)


def skip_reason(max_percent: float, pending: Iterable[str]) -> str | None:
    """Why the check is not run, or None: a tolerance of 100 % can hold nothing back; and a load
    that waits for other loads (graph.dependencies; `pending`: those not completed yet) may find
    vertices they add."""
    if max_percent >= 100:
        return "graph.maxDanglingPercent is 100: no count of dangling edges could hold the load back"
    waiting = list(pending)
    if waiting:
        return (
            f"graph.dependencies: load {waiting[0]} has not completed, and the vertices it adds count; "
            "the loader itself refuses an edge whose vertex is still missing"
        )
    return None


def skipped(reason: str, *, edges: int, max_percent: float) -> dict[str, Any]:
    """The report's graph.danglingEdges when the check did not run."""
    return {"skipped": reason, "edges": edges, "maxPercent": max_percent, "blocked": False}


def tolerated(verdict: dict[str, Any] | None) -> int:
    """How many insert errors for missing vertices the load may end with and still succeed: the
    dangling edges the check counted and let through, or, where it did not run, the most the
    tolerance allows."""
    if verdict is None:
        return 0
    if "skipped" in verdict:
        return allowed(int(verdict["edges"]), float(verdict["maxPercent"]))
    return 0 if verdict["blocked"] else int(verdict["count"])


def surely_blocked(missing_ids: int, allowed_edges: int) -> bool:
    """Held back whatever the passes still to come find: each of `missing_ids` (ids found nowhere)
    ends at least one staged edge, and an edge has two ends, so at least half as many edges
    dangle."""
    return -(-missing_ids // 2) > allowed_edges


def verdict(
    dangling: DanglingEdges, *, edges: int, looked_up: int, max_percent: float, complete: bool = True
) -> dict[str, Any]:
    """The report's graph.danglingEdges: how many edges dangle, of how many, the ids the job
    referenced without staging them (`lookedUp`, checked in the graph), the tolerance, whether the
    load is held back, and a sample. `complete` false: the check stopped once the load was sure to
    be held back (count, lookedUp and missingVertices are then lower bounds)."""
    return {
        "count": dangling.count,
        "edges": edges,
        "percent": round(100 * dangling.count / edges, 4) if edges else 0,
        "maxPercent": max_percent,
        "lookedUp": looked_up,
        "missingVertices": len(dangling.missing),
        "blocked": not complete or blocked(dangling.count, edges, max_percent),
        "complete": complete,
        "sample": dangling.sample,
    }
