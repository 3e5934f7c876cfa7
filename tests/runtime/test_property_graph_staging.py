"""The Worker's loop stages a property graph (graph.model "property") as two openCypher CSV files,
vertices and edges apart, a record whole or not at all; the load asks for format opencypher."""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

import pytest

from adapters.property_graph import PropertyGraphStager
from logic import layout, opencypher
from logic.csvrecords import ShardRecords
from logic.graph_load import load_request
from logic.opencypher import Row
from logic.property_graph import edge_id, headers
from logic.spec.inputs import JobSpec
from logic.spec.parse import parse_spec, spec_to_json
from shards.records import process
from shards.rejects import RejectSink

pytestmark = pytest.mark.runtime

SOURCE = "s3://source-bucket/people.csv"
GRAPH: dict[str, Any] = {
    "model": "property",
    "vertices": [{"id": "{id}", "label": "Person", "properties": {"age": {"field": "age", "type": "Int"}}}],
    "edges": [{"from": "{id}", "to": "{boss}", "label": "REPORTS_TO"}],
}
HEADER = ["id", "age", "boss"]  # Plan reads the header line; shards hold the records after it
DATA = b"p1,41,p0\np2,forty,p1\np3,30,p1\n"


def spec(**graph: Any) -> JobSpec:
    raw = {"source": SOURCE, "format": "csv", "jobId": "people", "graph": {**GRAPH, **graph}}
    return parse_spec(raw, table_key={"pk": "S"})


def records(data: bytes) -> ShardRecords:
    """One shard of `data` as the Worker reads it: RFC 4180 records (a quoted field may hold a line break)."""
    return ShardRecords(
        lambda first: [data[first:]],
        start=0,
        end=len(data),
        object_size=len(data),
        data_start=0,
        max_record=64,
    )


def stage(
    job: JobSpec, data: bytes = DATA
) -> tuple[dict[str, int], RejectSink, PropertyGraphStager, bytes, bytes]:
    lines = records(data)
    rejects_out, vertices_out, edges_out = io.BytesIO(), io.BytesIO(), io.BytesIO()
    rejects = RejectSink(SOURCE, out=rejects_out)
    stager = PropertyGraphStager(
        headers(job), compress=bool(job.graph and job.graph.gzip), vertices=vertices_out, edges=edges_out
    )
    counts = process(lines, job, HEADER, None, rejects, stager, source=SOURCE)
    stager.finish()
    return counts, rejects, stager, vertices_out.getvalue(), edges_out.getvalue()


def rows(data: bytes) -> list[Any]:
    return list(opencypher.read(io.StringIO(data.decode(), newline="")))


def test_vertices_and_edges_are_staged_apart_and_a_bad_record_not_at_all() -> None:
    counts, rejects, stager, vertices, edges = stage(spec())
    assert counts["written"] == 2 and rejects.count == 1
    assert rejects.by_reason == {"bad_value": 1}
    assert (stager.vertices, stager.edges, stager.staged) == (2, 2, 4)
    node_header, edge_header = headers(spec())
    assert rows(vertices) == [
        node_header,
        Row("p1", ("Person",), properties={"age": "41"}),
        Row("p3", ("Person",), properties={"age": "30"}),
    ]
    # p2's edge is not staged although its own fields were fine: the record was rejected whole.
    assert rows(edges) == [
        edge_header,
        Row(edge_id(SOURCE, DATA.index(b"p1,"), 0), start="p1", end="p0", type="REPORTS_TO"),
        Row(edge_id(SOURCE, DATA.index(b"p3,"), 0), start="p3", end="p1", type="REPORTS_TO"),
    ]


def test_an_optional_edge_without_its_endpoint_is_left_out_and_counted_its_record_written() -> None:
    # Given the root of a hierarchy (no boss) and a record whose edge needs no optional
    edges = [{**GRAPH["edges"][0], "optional": True}]
    counts, rejects, stager, _, staged = stage(spec(edges=edges), b"p0,50,\np1,41,p0\n")
    # Then both records are written, the root's edge is left out and counted, nothing rejected
    assert (counts["read"], counts["written"], rejects.count) == (2, 2, 0)
    assert (stager.vertices, stager.edges, stager.skipped_vertices, stager.skipped_edges) == (2, 1, 0, 1)
    assert [row.end for row in rows(staged)[1:]] == ["p0"]


def test_a_re_run_stages_the_same_edge_ids() -> None:
    assert stage(spec())[4] == stage(spec())[4]


def test_nothing_is_written_for_a_file_without_rows() -> None:
    _, _, stager, vertices, edges = stage(spec(edges=[]))
    assert (stager.edges, edges) == (0, b"")
    assert vertices.startswith(b":ID,:LABEL,age:Int\r\n")


def test_gzip_stages_one_csv_per_gz() -> None:
    _, _, _, vertices, edges = stage(spec(gzip=True))
    assert gzip.decompress(vertices).startswith(b":ID,:LABEL,age:Int\r\n")
    assert gzip.decompress(edges).startswith(b":ID,:START_ID,:END_ID,:TYPE\r\n")


def test_each_shard_has_a_vertex_file_and_an_edge_file_under_the_graph_prefix() -> None:
    vertices, edges = layout.property_graph_keys("people", "run-1", 7, compressed=True)
    prefix = layout.graph_prefix("people", "run-1")
    assert (vertices, edges) == (prefix + "vertices/000007.csv.gz", prefix + "edges/000007.csv.gz")


def test_the_load_is_one_opencypher_load_with_user_edge_ids() -> None:
    graph = json.loads(json.dumps(spec_to_json(spec())["graph"]))
    body = load_request(
        graph, source="s3://staging/jobs/people/run-1/graph/", role_arn="arn:role", region="r"
    )
    assert body["format"] == "opencypher"
    assert body["userProvidedEdgeIds"] == "TRUE"
    assert "updateSingleCardinalityProperties" not in body
    rdf = {"statements": [], "updateSingleCardinalityProperties": True}
    assert load_request(rdf, source="s3://s/", role_arn="a", region="r")["format"] == "nquads"


def stage_opencypher(header: list[str], data: bytes) -> tuple[dict[str, int], RejectSink, bytes, bytes]:
    job = parse_spec(
        {"source": "s3://source-bucket/g/", "format": "opencypher", "jobId": "g"}, table_key={"pk": "S"}
    )
    own = opencypher.parse_header(header)
    lines = records(data)
    rejects_out, vertices_out, edges_out = io.BytesIO(), io.BytesIO(), io.BytesIO()
    rejects = RejectSink("s3://source-bucket/g/file.csv", out=rejects_out)
    stager = PropertyGraphStager((own, own), compress=False, vertices=vertices_out, edges=edges_out)
    counts = process(lines, job, header, None, rejects, stager)
    stager.finish()
    return counts, rejects, vertices_out.getvalue(), edges_out.getvalue()


def test_opencypher_rows_are_checked_and_staged_as_they_are() -> None:
    header = [":ID", ":LABEL", "name:String", "age:int"]
    data = b'p1,Person,"Smith, Jo",41\n\np2,Person;Admin,,\np3,Person,Al,forty\np4,Person,"open\n'
    counts, rejects, vertices, edges = stage_opencypher(header, data)
    assert (counts["read"], counts["written"], rejects.count) == (4, 2, 2)
    assert rejects.by_reason == {"opencypher_syntax": 1, "unbalanced_quote": 1}
    assert [r["reason"][:30] for r in rejects.sample] == [
        "column age:Int: 'forty' is not",
        "unbalanced quote: a quoted fie",
    ]
    # The header as Neptune reads it (type names normalized), the rows byte for byte.
    assert vertices == b':ID,:LABEL,name:String,age:Int\r\np1,Person,"Smith, Jo",41\r\np2,Person;Admin,,\r\n'
    assert edges == b""


def test_an_opencypher_field_holding_a_line_break_is_one_row_never_a_row_of_its_tail() -> None:
    # Neptune's openCypher CSV is RFC 4180: a quoted field may hold a line break. Read line by line,
    # the tail `x,Person,end"` would have been a (bogus) vertex x.
    header = [":ID", ":LABEL", "note:String"]
    data = b'p1,Person,"a, b\nx,Person,end"\np2,Person,"two\r\nlines"\n'
    counts, rejects, vertices, edges = stage_opencypher(header, data)
    assert (counts["lines"], counts["read"], counts["written"], rejects.count) == (4, 2, 2, 0)
    assert vertices == (
        b':ID,:LABEL,note:String\r\np1,Person,"a, b\nx,Person,end"\r\np2,Person,"two\r\nlines"\r\n'
    )
    assert edges == b""


def test_opencypher_relationship_rows_go_to_the_edge_file() -> None:
    counts, rejects, vertices, edges = stage_opencypher(
        [":ID", ":START_ID", ":END_ID", ":TYPE"], b"e1,p1,p2,KNOWS\ne2,p1,,KNOWS\n"
    )
    assert (counts["written"], rejects.count, vertices) == (1, 1, b"")
    assert edges == b":ID,:START_ID,:END_ID,:TYPE\r\ne1,p1,p2,KNOWS\r\n"
    assert "END_ID is empty" in rejects.sample[0]["reason"]


def test_the_load_of_opencypher_sources_is_opencypher() -> None:
    body = load_request({}, source="s3://s/", role_arn="a", region="r", source_format="opencypher")
    assert body["format"] == "opencypher"
