"""Property graphs end to end: CSV records staged as openCypher CSV by the synthesized state
machine and loaded by the embedded loader into its LadybugDB graph; two jobs, the second's edges
joining vertices the first loaded."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mapload import ROOT
from mapload.emulator.property_store import PropertyGraphStore
from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

REPORT_SCHEMA = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
OPTIONS = {"pollSeconds": 1, "timeoutMinutes": 5}
PEOPLE = [("p1", "Ada", "36"), ("p2", "Alan", "41"), ("p3", "Grace", ""), ("p4", "Edsger", "72")]
REPORTS_TO = [("p2", "p1"), ("p3", "p1"), ("p4", "p2")]


def run(
    tmp_path: Path, name: str, text: str, graph: dict[str, Any], store: Path, **spec: Any
) -> dict[str, Any]:
    source = tmp_path / f"{name}.csv"
    source.write_text(text)
    raw = {"format": "csv", "jobId": name, "graph": {"model": "property", **OPTIONS, **graph}, **spec}
    report = run_local(source, raw, report_path=tmp_path / f"{name}.json", quiet=True, graph_store=store)
    # Each `mapload run-local` is its own process; here the runs share one, and the RDF store in
    # the same directory releases its lock only when the finished run's loader is collected.
    gc.collect()
    jsonschema.validate(report, REPORT_SCHEMA)
    records = report["records"]
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
    return report


def test_vertices_then_edges_in_a_second_job_load_and_answer_cypher(tmp_path: Path) -> None:
    store = tmp_path / "graph-db"
    people = "id,name,age\n" + "".join(f"{i},{n},{a}\n" for i, n, a in PEOPLE)
    vertex = {
        "id": "{id}",
        "label": "Person",
        "properties": {"name": "{name}", "age": {"field": "age", "type": "Int", "optional": True}},
    }
    first = run(tmp_path, "people", people, {"vertices": [vertex]}, store, shardSizeMiB=0.00003)
    assert first["status"] == "SUCCEEDED", first["error"]
    assert first["shards"]["total"] > 1
    assert first["graph"]["status"] == "LOAD_COMPLETED"
    assert first["graph"]["staged"] == first["graph"]["loaded"] == len(PEOPLE)
    assert (first["graph"]["store"]["vertices"], first["graph"]["store"]["edges"]) == (len(PEOPLE), 0)

    reports = "id,boss\n" + "".join(f"{a},{b}\n" for a, b in REPORTS_TO)
    edge = {"from": "{id}", "to": "{boss}", "label": "REPORTS_TO"}
    second = run(tmp_path, "reports", reports, {"edges": [edge]}, store)
    assert second["status"] == "SUCCEEDED", second["error"]
    assert second["graph"]["staged"] == second["graph"]["loaded"] == len(REPORTS_TO)
    # Every endpoint is a vertex the first job loaded: looked up in the graph, none dangles.
    dangling = second["graph"]["danglingEdges"]
    assert (dangling["count"], dangling["edges"], dangling["lookedUp"], dangling["blocked"]) == (
        0,
        3,
        4,
        False,
    )
    assert (second["graph"]["store"]["vertices"], second["graph"]["store"]["edges"]) == (4, 3)

    graph = PropertyGraphStore(store)
    try:
        reports_of_ada = graph.query(
            "MATCH (a:Vertex)-[e:Edge]->(b:Vertex) WHERE b.id = 'p1' AND e.type = 'REPORTS_TO' "
            "AND list_contains(a.labels, 'Person') RETURN a.name ORDER BY a.name"
        )
        assert reports_of_ada == [["Alan"], ["Grace"]]
        assert graph.query("MATCH (v:Vertex {id: 'p3'}) RETURN v.age, v.name") == [[None, "Grace"]]
        assert graph.query("MATCH (v:Vertex {id: 'p4'}) RETURN v.age") == [[72]]
    finally:
        graph.close()

    # The same edges again: the deterministic ids make every one a duplicate, nothing is added.
    again = run(tmp_path, "reports", reports, {"edges": [edge]}, store)
    assert again["status"] == "SUCCEEDED", again["error"]
    assert (again["graph"]["loaded"], again["graph"]["duplicates"]) == (0, len(REPORTS_TO))
    assert again["graph"]["store"]["edges"] == 3


def test_a_dangling_edge_holds_the_load_back_by_default_and_the_report_names_it(tmp_path: Path) -> None:
    store = tmp_path / "graph-db"
    people = "id,name,age\n" + "".join(f"{i},{n},{a}\n" for i, n, a in PEOPLE)
    vertex = {"id": "{id}", "label": "Person"}
    assert run(tmp_path, "people", people, {"vertices": [vertex]}, store)["status"] == "SUCCEEDED"
    # One record per shard: its vertex, and an edge to its boss; p9 is a vertex of nobody.
    staff = "id,boss\n" + "".join(
        f"s{i},{boss}\n" for i, boss in enumerate(["p1", "s0", "p9", "s5", "s1", "p2"])
    )
    graph = {"vertices": [vertex], "edges": [{"from": "{id}", "to": "{boss}", "label": "REPORTS_TO"}]}
    held = run(tmp_path, "staff", staff, graph, store, shardSizeMiB=0.000008)
    assert held["shards"]["total"] >= 4
    assert held["status"] == "FAILED"
    assert held["error"]["type"] == "DanglingEdgesError" and held["error"]["where"] == "GraphLoad"
    assert "'p9'" in held["error"]["message"] and "graph.maxDanglingPercent is 0" in held["error"]["message"]
    assert held["graph"]["status"] == "BLOCKED" and held["graph"]["loadId"] is None
    dangling = held["graph"]["danglingEdges"]
    assert (dangling["count"], dangling["edges"], dangling["missingVertices"], dangling["blocked"]) == (
        1,
        6,
        1,
        True,
    )
    # Looked up: p1, p2 (the first job's) and p9; s0, s1, s5 are this job's vertices in other shards.
    assert dangling["lookedUp"] == 3
    assert [(e["from"], e["to"], e["missing"]) for e in dangling["sample"]] == [("s2", "p9", ["p9"])]
    assert held["records"]["written"] == 6  # the records were read and staged; only the load waits
    counts = PropertyGraphStore(store)
    try:
        assert counts.counts() == (len(PEOPLE), 0)  # nothing of the held job reached the graph
    finally:
        counts.close()
        gc.collect()

    # Within a tolerance the load starts, and the loader's own error for that edge is reported.
    tolerant = run(
        tmp_path,
        "staff",
        staff,
        {**graph, "maxDanglingPercent": 20, "failOnError": False},
        store,
        shardSizeMiB=0.000008,
    )
    # Neptune skips that edge, loads the rest and ends the load LOAD_FAILED; the job accepts it,
    # as the check tolerated exactly that edge.
    assert tolerant["status"] == "SUCCEEDED", tolerant["error"]
    assert tolerant["graph"]["status"] == "LOAD_FAILED"
    assert tolerant["graph"]["danglingEdges"]["blocked"] is False
    assert tolerant["graph"]["loadId"] is not None
    assert tolerant["graph"]["errors"]["insertErrors"] == tolerant["graph"]["errors"]["tolerated"] == 1
    assert tolerant["graph"]["loaded"] == 6 + 5  # the six vertices and every edge but that one
    assert tolerant["graph"]["store"]["edges"] == 5


def test_an_edge_the_check_does_not_cover_fails_the_load_with_the_loaders_error(tmp_path: Path) -> None:
    # Endpoints in an ID space are not checked (logic/endpoints.py): the loader's own refusal of
    # an edge between vertices the graph lacks reaches the report, as for RDF.
    text = ":ID,:START_ID(people),:END_ID(people),:TYPE\ne1,x1,x2,REPORTS_TO\n"
    report = load_opencypher(tmp_path, "orphans", text, tmp_path / "graph-db")
    assert report["graph"]["danglingEdges"]["count"] == 0
    assert report["graph"]["danglingEdges"]["lookedUp"] == 0
    assert report["status"] == "FAILED"
    assert report["graph"]["status"] == "LOAD_FAILED"
    assert report["graph"]["errors"]["insertErrors"] == 1
    assert report["graph"]["errors"]["first"][0]["errorCode"] == "FROM_OR_TO_VERTEX_ARE_MISSING"


def load_opencypher(tmp_path: Path, name: str, text: str, store: Path, **spec: Any) -> dict[str, Any]:
    source = tmp_path / f"{name}.csv"
    source.write_text(text)
    raw = {"format": "opencypher", "jobId": name, "graph": OPTIONS, **spec}
    report = run_local(source, raw, report_path=tmp_path / f"{name}.json", quiet=True, graph_store=store)
    gc.collect()  # as in run() above
    jsonschema.validate(report, REPORT_SCHEMA)
    return report


def test_opencypher_files_are_checked_staged_as_they_are_and_loaded(tmp_path: Path) -> None:
    store = tmp_path / "graph-db"
    nodes = (
        ":ID,:LABEL,name:String,born:DateTime\n"
        'p1,Person,"Lovelace, Ada",1815-12-10\np2,Person,Babbage,\np3,Person,X,never\n'
    )
    first = load_opencypher(tmp_path, "nodes", nodes, store, maxRejectedPercent=50)
    assert first["status"] == "SUCCEEDED", first["error"]
    assert (first["records"]["written"], first["records"]["rejected"]) == (2, 1)
    assert first["rejects"]["sample"][0]["code"] == "opencypher_syntax"
    assert first["graph"]["loaded"] == 2
    second = load_opencypher(
        tmp_path, "knows", ":ID,:START_ID,:END_ID,:TYPE,since:Int\nk1,p1,p2,KNOWS,1833\n", store
    )
    assert second["status"] == "SUCCEEDED", second["error"]
    assert second["graph"]["store"] == {"statements": 0, "path": str(store), "vertices": 2, "edges": 1}
    graph = PropertyGraphStore(store)
    try:
        assert graph.query(
            "MATCH (a:Vertex)-[e:Edge]->(b:Vertex) RETURN a.name, e.type, e.since, b.name"
        ) == [["Lovelace, Ada", "KNOWS", 1833, "Babbage"]]
    finally:
        graph.close()


def test_a_bad_opencypher_header_fails_the_job_before_anything_is_staged(tmp_path: Path) -> None:
    report = load_opencypher(tmp_path, "bad", ":ID,:START_ID,:END_ID\ne1,p1,p2\n", tmp_path / "graph-db")
    assert report["status"] == "FAILED"
    assert report["error"]["type"] == "InputValidationError" and report["error"]["where"] == "Plan"
    assert "needs a :TYPE column" in report["error"]["message"]
    assert report["records"]["read"] == 0


def test_a_manager_hierarchy_whose_root_has_no_manager_loads_with_optional(tmp_path: Path) -> None:
    # Given a manager hierarchy as a naive export writes it: the root's manager cell is empty
    people = "id,name,boss\n1,Ada,\n2,Alan,1\n3,Grace,1\n4,Edsger,2\n"
    vertex = {"id": "person-{id}", "label": "Person", "properties": {"name": "{name}"}}
    edge = {"from": "person-{id}", "to": "person-{boss}", "label": "REPORTS_TO"}
    # When the edge is not optional, Then the root's record is a reject naming the field (not an
    # edge to a vertex `person-`); its vertex is not staged either, so the edges to it dangle
    graph = {"vertices": [vertex], "edges": [edge]}
    strict = run(tmp_path, "strict", people, graph, tmp_path / "strict-db", maxRejectedPercent=50)
    assert (strict["records"]["rejected"], strict["rejects"]["byReason"]) == (1, {"empty_value": 1})
    assert "field 'boss' needed by graph.edges[0].to is empty" in strict["rejects"]["sample"][0]["reason"]
    assert '"optional": true' in strict["rejects"]["sample"][0]["reason"]
    assert "'person-1'" in strict["error"]["message"] and "'person-'" not in strict["error"]["message"]
    # When it is optional, Then every person and every edge but the root's loads, the load is not
    # blocked, and the report counts the edge left out (the root's record is still one written)
    graph = {"vertices": [vertex], "edges": [{**edge, "optional": True}]}
    report = run(tmp_path, "people", people, graph, tmp_path / "graph-db")
    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["records"] == {**report["records"], "read": 4, "written": 4, "rejected": 0}
    assert report["graph"]["status"] == "LOAD_COMPLETED"
    assert (report["graph"]["skippedVertices"], report["graph"]["skippedEdges"]) == (0, 1)
    assert (report["graph"]["vertices"], report["graph"]["edges"]) == (4, 3)
    assert report["graph"]["danglingEdges"]["count"] == 0
    assert (report["graph"]["store"]["vertices"], report["graph"]["store"]["edges"]) == (4, 3)
