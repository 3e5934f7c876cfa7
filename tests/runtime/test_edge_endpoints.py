"""The edge endpoint check of a property graph job (logic/endpoints.py, graph_loads/endpoint_check.py):
merged per-shard id sets and a graph lookup find exactly the edges whose endpoint is neither a
vertex of the job nor in the graph, however the records fall into shards. And what holding a
shard's ids costs a Worker (`worker_peak_mib`, the model Plan bounds shardSizeMiB by)."""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_support import REGION

from adapters.s3 import S3Store
from graph_loads.endpoint_check import check_edges, endpoint_check, pass_size
from logic import endpoints, layout, opencypher
from logic.errors import EndpointCheckLimitError, StagedFileGoneError
from logic.spec.inputs import MAX_SHARD_SIZE_MIB, Common

pytestmark = pytest.mark.runtime

IDS = st.text(alphabet='ab,"\n é', min_size=1, max_size=3)
EDGE = st.tuples(IDS, IDS)
# A record: the vertex ids and edges (from, to) it produces, and the shard it falls into.
RECORDS = st.lists(st.tuples(st.lists(IDS, max_size=2), st.lists(EDGE, max_size=2), st.integers(0, 4)))


def shard_files(records: Sequence[tuple[list[str], list[tuple[str, str]], int]]) -> dict[int, Any]:
    """Per shard: its ShardIds, as the Worker's stager fills them, and its edges."""
    shards: dict[int, Any] = {}
    for vertices, edges, shard in records:
        ids, staged = shards.setdefault(shard, (endpoints.ShardIds(), []))
        for vertex in vertices:
            ids.vertex(vertex)
        for start, end in edges:
            ids.edge(start, end)
            staged.append((f"e{len(staged)}-{shard}", start, end))
    return shards


def read_back(data: bytes) -> list[str]:
    return list(endpoints.decode_ids(data))


@settings(max_examples=200, deadline=None)
@given(RECORDS, st.sets(IDS))
def test_the_merged_check_finds_exactly_the_edges_no_vertex_of_the_job_or_the_graph_ends(
    records: list[tuple[list[str], list[tuple[str, str]], int]], in_graph: set[str]
) -> None:
    shards = shard_files(records)
    files = {
        index: (
            read_back(endpoints.encode_ids(sorted(ids.vertices))),
            read_back(endpoints.encode_ids(ids.open_endpoints())),
        )
        for index, (ids, _) in shards.items()
    }
    wanted = endpoints.unresolved((opened for _, opened in files.values()), (v for v, _ in files.values()))
    looked_up: list[Sequence[str]] = []

    def lookup(ids: Sequence[str]) -> set[str]:
        looked_up.append(ids)
        return set(ids) & in_graph

    missing = wanted - lookup(sorted(wanted))
    dangling = endpoints.DanglingEdges(missing)
    for index, (_, staged) in shards.items():
        for edge_id, start, end in staged:
            dangling.add(edge_id, start, end, index)

    # The reference: one global pass over every record, no shards.
    job_vertices = {v for vertices, _, _ in records for v in vertices}
    known = job_vertices | in_graph
    expected = [(s, e) for _, edges, _ in records for s, e in edges if s not in known or e not in known]
    assert dangling.count == len(expected)
    assert missing == {i for edge in expected for i in edge if i not in known}
    # Only ids the job references and does not stage are looked up in the graph.
    assert set(looked_up[0]) == {i for _, edges, _ in records for edge in edges for i in edge} - job_vertices
    assert len(dangling.sample) == min(len(expected), endpoints.SAMPLE_SIZE)


@given(RECORDS, st.integers(1, 5))
def test_passes_over_hash_parts_find_the_same_open_ids_each_once(
    records: list[tuple[list[str], list[tuple[str, str]], int]], parts: int
) -> None:
    shards = [ids for ids, _ in shard_files(records).values()]
    whole = endpoints.unresolved([s.open_endpoints() for s in shards], [s.vertices for s in shards])
    found = [
        endpoints.unresolved(
            [s.open_endpoints() for s in shards], [s.vertices for s in shards], (part, parts)
        )
        for part in range(parts)
    ]
    assert set().union(*found) == whole
    assert sum(map(len, found)) == len(whole)  # no id in two parts


@given(st.lists(st.text()), st.integers(1, 4), st.integers(8, 64))
def test_id_files_round_trip_any_text_across_chunks(ids: list[str], chunk: int, block: int) -> None:
    original = endpoints.CHUNK_IDS, endpoints.INFLATE_BLOCK
    # The encoder works a chunk of ids at a time, the decoder a block of bytes: ids straddle both.
    endpoints.CHUNK_IDS, endpoints.INFLATE_BLOCK = chunk, block
    try:
        data = endpoints.encode_ids(ids)
        assert read_back(data) == ids
        assert endpoints.count_ids(data) == len(ids)
        assert endpoints.text_size(data) == len(gzip.decompress(data))  # graph.openEndpointBytes
    finally:
        endpoints.CHUNK_IDS, endpoints.INFLATE_BLOCK = original


@pytest.mark.parametrize("cut", [0, 5, -9, -1])
def test_an_id_file_cut_short_is_refused_not_read_as_fewer_ids(cut: int) -> None:
    # An id file the check read in part would let an edge pass as resolved, or dangle, wrongly.
    data = endpoints.encode_ids([f"vertex-{i}" for i in range(1000)])
    with pytest.raises(ValueError, match="cut short"):
        read_back(data[:cut])
    with pytest.raises(ValueError, match="cut short"):
        read_back(gzip.compress(gzip.decompress(data)[:-4]))  # a whole gzip, its last id cut


def test_the_job_vertices_are_not_read_once_every_endpoint_is_resolved() -> None:
    def never() -> Iterator[list[str]]:
        raise AssertionError("read")
        yield []

    assert endpoints.unresolved([[]], never()) == set()
    assert endpoints.unresolved([["a"]], itertools.chain([["a"]], never())) == set()


@pytest.mark.parametrize(
    ("count", "edges", "max_percent", "held"),
    [
        (0, 0, 0, False),
        (0, 10, 0, False),
        (1, 10, 0, True),
        (1, 10, 10, False),
        (2, 10, 10, True),
        (3, 3, 100, False),
    ],
)
def test_the_tolerance_holds_the_load_only_past_it(
    count: int, edges: int, max_percent: float, held: bool
) -> None:
    assert endpoints.blocked(count, edges, max_percent) is held


# -- StartGraphLoad's check over staged files in S3 ---------------------------------------------


def stage(aws: Any, shards: dict[int, tuple[list[str], list[tuple[str, str, str]]]], gzipped: bool) -> int:
    """What Workers leave for job j, plan p: id files and edge files, as shards/staging.py writes them;
    the open endpoints of all shards (the report's graph.openEndpoints)."""
    header = opencypher.relationship_header([])
    opened = 0
    for index, (vertices, edges) in shards.items():
        ids = endpoints.ShardIds()
        for vertex in vertices:
            ids.vertex(vertex)
        for _, start, end in edges:
            ids.edge(start, end)
        vertices_key, open_key = layout.graph_ids_keys("j", "p", index)
        aws.put_object(Bucket="stg", Key=vertices_key, Body=endpoints.encode_ids(sorted(ids.vertices)))
        aws.put_object(Bucket="stg", Key=open_key, Body=endpoints.encode_ids(ids.open_endpoints()))
        opened += ids.opened
        if edges:
            text = io.StringIO(newline="")
            writer = csv.writer(text, lineterminator="\r\n")
            writer.writerow(header.cells)
            writer.writerows([edge_id, start, end, "KNOWS"] for edge_id, start, end in edges)
            data = text.getvalue().encode()
            key = layout.property_graph_keys("j", "p", index, compressed=gzipped)[1]
            aws.put_object(Bucket="stg", Key=key, Body=gzip.compress(data) if gzipped else data)
    return opened


ALL = 1_000_000  # open ids a pass: one pass for every job here


def event(shards: int, edges: int, opened: int = 0, **graph: Any) -> dict[str, Any]:
    spec = {"format": "csv", "graph": {"model": "property", **graph}}
    return {
        "job": {"jobId": "j", "runId": "r", "planId": "p", "spec": spec},
        "shardCount": shards,
        "graph": {"edges": edges, "openEndpoints": opened},
    }


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_edge_across_shards_is_resolved_one_to_the_graph_too_one_to_nowhere_dangles(
    aws: Any, gzipped: bool
) -> None:
    opened = stage(
        aws,
        {
            0: (["a"], [("e1", "a", "b")]),  # b is a vertex of shard 1
            1: (
                ["b"],
                [("e2", "b", "g"), ("e3", 'x,"y"\nz', "a")],
            ),  # g is in the graph; the other is nowhere
            2: ([], []),
        },
        gzipped,
    )
    asked: list[list[str]] = []

    def lookup(ids: Collection[str]) -> set[str]:
        asked.append(sorted(ids))
        return {"g"} & set(ids)

    store = S3Store(boto3.client("s3", region_name=REGION))
    assert opened == 4  # b (shard 0); g, x,"y"\nz and a (shard 1)
    check = check_edges(event(3, 3, opened, gzip=gzipped), "stg", store, lookup, ALL)
    assert asked == [["g", 'x,"y"\nz']]
    assert (check["count"], check["edges"], check["lookedUp"], check["missingVertices"]) == (1, 3, 2, 1)
    assert check["blocked"] is True and check["maxPercent"] == 0 and check["percent"] == 33.3333
    assert check["sample"] == [
        {"id": "e3", "from": 'x,"y"\nz', "to": "a", "missing": ['x,"y"\nz'], "shard": 1}
    ]
    tolerant = check_edges(
        event(3, 3, opened, gzip=gzipped, maxDanglingPercent=40), "stg", store, lookup, ALL
    )
    assert tolerant["blocked"] is False and tolerant["count"] == 1
    # Two open ids a pass: several passes (which ids share one depends on the process's str
    # hash seed), each id looked up once, the same answer (within the tolerance, so no pass stops
    # the check early).
    asked.clear()
    multi = check_edges(
        event(3, 3, opened, gzip=gzipped, maxDanglingPercent=40), "stg", store, lookup, per_pass=2
    )
    assert multi == tolerant
    assert all(asked) and sorted(i for ids in asked for i in ids) == ["g", 'x,"y"\nz']
    assert len(asked) >= 2 or len({hash(i) % 2 for i in ("g", 'x,"y"\nz')}) == 1  # 2 passes


def test_a_job_whose_edges_all_end_at_its_own_vertices_asks_the_graph_nothing(aws: Any) -> None:
    stage(aws, {0: (["a", "b"], [("e1", "a", "b")]), 1: ([], [("e2", "b", "a")])}, False)

    def lookup(ids: Sequence[str]) -> set[str]:
        raise AssertionError(f"looked up {ids}")

    check = check_edges(event(2, 2), "stg", S3Store(boto3.client("s3", region_name=REGION)), lookup, ALL)
    assert (check["count"], check["lookedUp"], check["blocked"]) == (0, 0, False)


def test_a_long_id_is_clipped_in_the_sample_so_the_ledger_item_and_payloads_stay_small() -> None:
    long = "v" * 100_000
    dangling = endpoints.DanglingEdges({long})
    for n in range(50):
        dangling.add(f"e{n}", long, long, 0)
    assert dangling.count == 50 and len(dangling.sample) == endpoints.SAMPLE_SIZE
    assert dangling.sample[0]["missing"] == [dangling.sample[0]["from"]]
    assert dangling.sample[0]["from"].endswith("... (100,000 characters)")
    assert len(json.dumps(dangling.sample)) < 10_000


def test_the_summary_line_names_the_dangling_edges_and_whether_the_load_was_held() -> None:
    from mapload.reports import report_lines

    dangling = endpoints.DanglingEdges({"p9"})
    dangling.add("e1", "s2", "p9", 3)
    check = endpoints.verdict(dangling, edges=6, looked_up=3, max_percent=0)
    lines = report_lines(
        {"graph": {"staged": 12, "loaded": None, "status": "BLOCKED", "danglingEdges": check}}
    )
    assert "  endpoints dangling edges 1 of 6 (16.6667%, limit 0%) · load held back · e.g. e1 -> p9" in lines
    check = endpoints.verdict(endpoints.DanglingEdges(set()), edges=6, looked_up=3, max_percent=0)
    lines = report_lines(
        {"graph": {"staged": 12, "loaded": 12, "status": "LOAD_COMPLETED", "danglingEdges": check}}
    )
    assert "  endpoints dangling edges 0 of 6 (0%, limit 0%)" in lines


def test_the_summary_line_says_how_many_optional_vertices_and_edges_were_left_out() -> None:
    from mapload.reports import report_lines

    graph = {"staged": 7, "loaded": 7, "status": "LOAD_COMPLETED", "skippedVertices": 0, "skippedEdges": 1}
    (line,) = [line for line in report_lines({"graph": graph}) if line.startswith("  graph ")]
    assert line.endswith(" · optional left out: 0 vertices, 1 edges")
    (line,) = [line for line in report_lines({"graph": {**graph, "skippedEdges": 0}}) if "graph " in line]
    assert "optional" not in line


def test_ids_in_an_id_space_are_neither_recorded_nor_counted() -> None:
    from adapters.property_graph import PropertyGraphStager

    nodes = opencypher.parse_header([":ID(people)", ":LABEL"])
    edges = opencypher.parse_header([":ID", ":START_ID(people)", ":END_ID", ":TYPE"])
    stager = PropertyGraphStager((nodes, edges), compress=False, vertices=io.BytesIO(), edges=io.BytesIO())
    stager.add_line(opencypher.NODE, "p1,Person", opencypher.parse_line(nodes, "p1,Person"))
    stager.add_line(opencypher.RELATIONSHIP, "e1,p1,q2,KNOWS", opencypher.parse_line(edges, "e1,p1,q2,KNOWS"))
    assert (stager.ids.vertices, stager.ids.open_endpoints()) == (set(), ["q2"])
    dangling = endpoints.DanglingEdges({"p1", "q2"})
    dangling.add("e1", "p1", "q2", 0, (edges.checked(":START_ID"), edges.checked(":END_ID")))
    assert dangling.sample[0]["missing"] == ["q2"]


class Loader:
    """The loader client as endpoint_check uses it: its dependencies' statuses, its id query."""

    def __init__(self, statuses: dict[str, str]) -> None:
        self.statuses = statuses
        self.asked: list[list[str]] = []

    def status(self, load_id: str) -> dict[str, Any]:
        return {"overallStatus": {"status": self.statuses[load_id]}}

    def existing_vertex_ids(self, ids: Collection[str]) -> set[str]:
        self.asked.append(sorted(ids))
        return set()


class NoFiles:
    def get_staged(self, bucket: str, key: str) -> bytes:
        raise AssertionError(f"read {key}")


def test_a_job_without_edges_reads_nothing_and_nothing_dangles() -> None:
    loader = Loader({})
    check = endpoint_check(event(5, 0), "stg", NoFiles(), loader)  # type: ignore[arg-type]
    assert (check["count"], check["edges"], check["lookedUp"], check["blocked"]) == (0, 0, 0, False)
    assert loader.asked == [] and endpoints.tolerated(check) == 0


def test_a_tolerance_of_100_percent_skips_the_check_and_tolerates_every_edge() -> None:
    loader = Loader({})
    check = endpoint_check(event(5, 7, 9, maxDanglingPercent=100), "stg", NoFiles(), loader)  # type: ignore[arg-type]
    assert check == {
        "skipped": "graph.maxDanglingPercent is 100: no count of dangling edges could hold the load back",
        "edges": 7,
        "maxPercent": 100.0,
        "blocked": False,
    }
    assert endpoints.tolerated(check) == 7 and loader.asked == []


def test_a_load_depending_on_one_not_completed_is_not_checked_its_vertices_may_come(aws: Any) -> None:
    # The edges of this job end at vertices a load it depends on is still adding.
    loader = Loader({"vertices-load": "LOAD_IN_PROGRESS", "done": "LOAD_COMPLETED"})
    graph = {"dependencies": ["done", "vertices-load"], "maxDanglingPercent": 10, "failOnError": False}
    check = endpoint_check(event(1, 30, 1, **graph), "stg", NoFiles(), loader)  # type: ignore[arg-type]
    assert check["skipped"].startswith("graph.dependencies: load vertices-load has not completed")
    assert endpoints.tolerated(check) == 3  # 10 % of 30 edges: what the check would have let by
    # Once every load it depends on has completed, its vertices are in the graph: checked.
    loader.statuses["vertices-load"] = "LOAD_COMPLETED"
    opened = stage(aws, {0: (["a"], [("e1", "a", "b")])}, False)
    store = S3Store(boto3.client("s3", region_name=REGION))
    checked = endpoint_check(event(1, 1, opened, **graph), "stg", store, loader)  # type: ignore[arg-type]
    assert loader.asked == [["b"]] and (checked["count"], checked["missingVertices"]) == (1, 1)


@pytest.mark.parametrize(
    ("edges", "max_percent", "allowed"), [(0, 50, 0), (10, 0, 0), (10, 9.99, 0), (10, 10, 1), (3, 100, 3)]
)
def test_what_a_tolerance_allows_is_the_most_the_check_lets_by(
    edges: int, max_percent: float, allowed: int
) -> None:
    assert endpoints.allowed(edges, max_percent) == allowed
    assert not endpoints.blocked(allowed, edges, max_percent)
    assert endpoints.blocked(allowed + 1, edges, max_percent) or allowed == edges


def test_passes_read_a_shards_empty_open_file_once_and_the_rest_each_pass(aws: Any) -> None:
    # Shard 1's vertices cover its edge (an empty open file); x and y are nowhere, g1-g3 in the graph.
    shards = {
        0: (["a"], [("e1", "a", "x"), ("e4", "a", "g1"), ("e5", "a", "g2")]),
        1: (["b", "d"], [("e2", "b", "d")]),
        2: (["c"], [("e3", "c", "y"), ("e6", "c", "g3")]),
    }
    opened = stage(aws, shards, False)
    reads: list[str] = []

    class Counting(S3Store):
        def get_bytes(self, bucket: str, key: str) -> bytes:
            reads.append(key)
            return super().get_bytes(bucket, key)

    store = Counting(boto3.client("s3", region_name=REGION))

    def lookup(ids: Collection[str]) -> set[str]:
        return {i for i in ids if i.startswith("g")}

    check = check_edges(event(3, 6, opened, maxDanglingPercent=100), "stg", store, lookup, per_pass=4)
    assert (opened, check["count"], check["missingVertices"]) == (5, 2, 2)
    open_keys = [layout.graph_ids_keys("j", "p", i)[1] for i in range(3)]
    # Two passes (four open ids each at most), then once more to count the dangling edges.
    assert [reads.count(key) for key in open_keys] == [3, 1, 3]


def test_an_id_file_gone_from_staging_fails_the_check_naming_it_not_a_partial_load(aws: Any) -> None:
    # A re-run skips shards the ledger records done; staging may have expired their files.
    opened = stage(aws, {0: (["a"], [("e1", "a", "b")]), 1: (["b"], [("e2", "b", "a")])}, False)
    gone = layout.graph_ids_keys("j", "p", 1)[0]
    aws.delete_object(Bucket="stg", Key=gone)
    store = S3Store(boto3.client("s3", region_name=REGION))
    with pytest.raises(StagedFileGoneError, match=f"s3://stg/{gone}, staged by a shard .* new jobId"):
        check_edges(event(2, 2, opened), "stg", store, lambda ids: set(), ALL)


def test_a_pass_holds_about_the_memory_share_it_was_sized_for() -> None:
    """Passes sized for a small function (per_pass): the check's Python allocations stay within
    the memory share the budget gives them (plus a tenth), however many passes that takes."""
    import random
    import sys
    import tracemalloc
    import uuid

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import endpoints as bench  # type: ignore[import-not-found]

    rng = random.Random(16)
    shards = [
        bench.Shard([], [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(2)] * 25_000, [])
        for _ in range(4)
    ]
    for shard in shards:
        shard.ends = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in shard.starts]
    job = bench._dangle(bench.Job("uuids", shards), rng)
    files = bench.id_files(job)
    counts = bench.open_endpoints(job, files)
    spec = {"format": "csv", "graph": {"model": "property", "maxDanglingPercent": 100}}  # every pass
    check = {"job": {"jobId": bench.JOB, "runId": bench.PLAN, "spec": spec}, "shardCount": 4}
    check["graph"] = {"edges": job.edges, **counts}
    memory_mib = 24
    per_pass = pass_size(check, memory_mib)
    assert endpoints.passes(counts["openEndpoints"], per_pass) >= 3
    tracemalloc.start()
    try:
        verdict = check_edges(
            check, bench.BUCKET, bench.MemoryStore({**files, **job.staged}), bench.graph_lookup, per_pass
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert verdict["count"] == bench.DANGLING
    assert peak <= memory_mib * 2**20 * (endpoints.MEMORY_SHARE + 0.1)


def test_edges_staged_before_their_vertices_stop_the_check_once_the_load_is_surely_held(aws: Any) -> None:
    # Every endpoint is nowhere (the vertices' job has not run): after the first pass more ids are
    # missing than twice the edges a 0 % tolerance allows, so no further pass is read or asked.
    ids = [f"v{i}" for i in range(40)]
    shards = {
        k: ([], [(f"e{k}-{n}", ids[n], ids[n + 20]) for n in range(k * 5, k * 5 + 5)]) for k in range(4)
    }
    opened = stage(aws, shards, False)
    asked: list[list[str]] = []

    def lookup(chunk: Collection[str]) -> set[str]:
        asked.append(sorted(chunk))
        return set()

    store = S3Store(boto3.client("s3", region_name=REGION))
    check = check_edges(event(4, 20, opened), "stg", store, lookup, per_pass=10)
    assert endpoints.passes(opened, 10) == 4 and len(asked) == 1
    assert check["blocked"] is True and check["complete"] is False
    assert (
        0 < check["missingVertices"] == check["lookedUp"] < 40
        and check["count"] >= check["missingVertices"] / 2
    )


def test_an_endpoint_that_already_is_a_vertex_of_the_shard_is_not_held_again() -> None:
    # Given a shard whose edges start at its own vertices (a vertex and its edges in one record)
    ids = endpoints.ShardIds()
    ids.vertex("a")
    ids.edge("a", "b")
    # ... and one edge that comes before its vertex
    ids.edge("c", "a")
    ids.vertex("c")
    # Then only the ends not yet known as vertices are held, and the open ones are those left
    assert ids.endpoints == {"b", "c"}
    assert ids.open_endpoints() == ["b"]


# bench/shard_memory.py, Python 3.12: the Worker's peak RSS (MiB) on worst-case shards of these
# sizes (MiB), every id new: edges only with 7-digit ids, a vertex and an edge a record, edges
# only with 8-digit ids (docs/NEPTUNE.md, "Size"). The model must be above each, not far.
MEASURED_PEAK_MIB = {
    "edges": {8: 197, 16: 280, 20: 429, 32: 473, 39: 736, 64: 857, 78: 1368, 96: 1380, 128: 1652},
    "vertices+edges": {8: 202, 20: 413, 39: 671, 64: 804, 78: 1252},
    "edges, 8 digits": {8: 206, 20: 327, 39: 562, 64: 918},
}
# Edges only between ids a template makes, http://example.org/node/{a} -> .../{b}: 24 characters
# around each 7-digit field (bench/shard_memory.py --shapes iri).
IRI_SHAPE = endpoints.IdShape(per_field=1, fixed_bytes=24)
MEASURED_IRI_PEAK_MIB = {8: 235, 20: 507, 39: 890, 64: 1117}


@pytest.mark.parametrize("shape", MEASURED_PEAK_MIB)
def test_the_worker_memory_model_is_above_every_measured_peak_but_not_far(shape: str) -> None:
    for shard_mib, measured in MEASURED_PEAK_MIB[shape].items():
        assert measured <= endpoints.worker_peak_mib(shard_mib) <= measured * 1.5, shard_mib
    # ... within 30 % where the shape is the worst one measured at that size
    for shard_mib in (8, 20, 39, 64):
        worst = max(sizes[shard_mib] for sizes in MEASURED_PEAK_MIB.values())
        assert endpoints.worker_peak_mib(shard_mib) <= worst * 1.3, shard_mib


def test_ids_a_template_makes_longer_are_modelled_by_their_text_too() -> None:
    for shard_mib, measured in MEASURED_IRI_PEAK_MIB.items():
        assert measured <= endpoints.worker_peak_mib(shard_mib, IRI_SHAPE) <= measured * 1.25, shard_mib
    # The plain model would let a default Worker take a 64 MiB shard of them: it ran to 1,117 MiB.
    assert endpoints.worker_peak_mib(64) <= 1024 < MEASURED_IRI_PEAK_MIB[64]
    assert endpoints.max_shard_mib(1024, MAX_SHARD_SIZE_MIB, IRI_SHAPE) < 64


def test_the_model_steps_up_where_a_set_doubles_its_table() -> None:
    # A set's table doubles once 3/5 full: at 10,066,329 ids, 8 bytes each a shard of 76.8 MiB
    below, above = endpoints.worker_peak_mib(76.7), endpoints.worker_peak_mib(76.9)
    assert above - below > 256  # the new 512 MiB table beside the old 256 MiB one
    assert endpoints.set_slots(10_066_328) == 2**24 and endpoints.set_slots(10_066_329) == 2**25


@pytest.mark.parametrize("memory", [256, 512, 1024, 1769, 3008, 10240])
def test_the_largest_property_graph_shard_is_the_largest_whose_worst_case_fits(memory: int) -> None:
    # When the largest shard for a Worker of `memory` MiB is asked for
    largest = endpoints.max_shard_mib(memory, MAX_SHARD_SIZE_MIB)
    # Then it is the largest whole MiB whose modelled worst case fits the Worker
    assert 1 <= largest < MAX_SHARD_SIZE_MIB
    assert endpoints.worker_peak_mib(largest) <= memory < endpoints.worker_peak_mib(largest + 1)


def test_the_default_worker_holds_the_default_shard_and_more_memory_holds_more() -> None:
    default = Common.model_fields["shard_size_mib"].default
    assert endpoints.max_shard_mib(1024, MAX_SHARD_SIZE_MIB) >= default == 64
    sizes = [endpoints.max_shard_mib(memory, MAX_SHARD_SIZE_MIB) for memory in (512, 1024, 2048, 4096)]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert endpoints.max_shard_mib(100, MAX_SHARD_SIZE_MIB) == 0  # the baseline alone nearly fills it


def test_ids_found_nowhere_past_a_pass_while_the_tolerance_could_still_pass_fail_the_check_naming_what_to_do(
    aws: Any,
) -> None:
    # Half the edges may dangle: 20 ids found nowhere after two passes do not yet say the load is
    # held back, and more than a pass's 10 would outgrow the memory the passes were sized for.
    ids = [f"v{i}" for i in range(40)]
    shards = {
        k: ([], [(f"e{k}-{n}", ids[n], ids[n + 20]) for n in range(k * 5, k * 5 + 5)]) for k in range(4)
    }
    opened = stage(aws, shards, False)
    store = S3Store(boto3.client("s3", region_name=REGION))
    graph = {"maxDanglingPercent": 50, "failOnError": False}
    with pytest.raises(
        EndpointCheckLimitError,
        match=r"more than the check holds beside its passes \(5 ids.*control_memory_mib",
    ):
        check_edges(event(4, 20, opened, **graph), "stg", store, lambda ids: set(), per_pass=10)


def test_an_edge_file_gone_from_staging_fails_the_count_naming_it(aws: Any) -> None:
    opened = stage(aws, {0: (["a"], [("e1", "a", "b")])}, False)
    gone = layout.property_graph_keys("j", "p", 0, compressed=False)[1]
    aws.delete_object(Bucket="stg", Key=gone)
    store = S3Store(boto3.client("s3", region_name=REGION))
    with pytest.raises(StagedFileGoneError, match=f"s3://stg/{gone}, staged by a shard"):
        check_edges(event(1, 1, opened), "stg", store, lambda ids: set(), ALL)
