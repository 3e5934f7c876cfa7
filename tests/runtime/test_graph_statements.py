"""Graph input validation, statements from CSV/JSON Lines records, and N-Quads/N-Triples lines
checked by pyoxigraph — including the W3C N-Quads syntax suite, used as it is."""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest

from adapters.rdf import GraphStager
from logic.errors import InputValidationError
from logic.graph import make_graph_mapper
from logic.records import iter_shard_lines
from logic.spec.parse import parse_spec, spec_to_json
from logic.values import Reject
from shards.records import process
from shards.rejects import RejectSink

pytestmark = pytest.mark.runtime

TABLE_KEY = {"pk": "S", "sk": "S"}
# <repo>/../shared/testdata: beside the clone in CI, beside the work tree here.
W3C = Path(__file__).resolve().parents[2] / ".." / "shared" / "testdata" / "w3c-rdf-n-quads"
EX = "http://example.org/"


def spec(**raw: Any) -> Any:
    return parse_spec({"source": "s3://src/data", "jobId": "j", **raw}, table_key=TABLE_KEY)


def csv_graph(*statements: dict[str, Any], **graph: Any) -> Any:
    return spec(format="csv", graph={"statements": list(statements), **graph})


# What a RejectSink or GraphStager wrote (the Worker streams it to S3; here it stays in memory).
WRITTEN: dict[int, io.BytesIO] = {}


def in_memory(make: Callable[[io.BytesIO], Any]) -> Any:
    out = io.BytesIO()
    made = make(out)
    WRITTEN[id(made)] = out
    return made


def written(sink_or_stager: RejectSink | GraphStager) -> bytes:
    return WRITTEN[id(sink_or_stager)].getvalue()


def run_rdf(data: bytes, fmt: str = "nquads") -> tuple[dict[str, int], RejectSink, GraphStager]:
    job = spec(format=fmt, graph={})
    lines = iter_shard_lines([data], read_from=0, start=0, end=len(data))
    rejects = in_memory(lambda out: RejectSink("s3://src/data", out=out))
    stager = in_memory(lambda out: GraphStager(compress=False, out=out))
    counts = process(lines, job, None, None, rejects, stager)
    stager.finish()
    return counts, rejects, stager


def rejected(sink: RejectSink) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in written(sink).splitlines()]


# -- input -----------------------------------------------------------------------------------


def test_graph_empty_object_takes_every_default_for_rdf_formats() -> None:
    job = spec(format="nquads", graph={})
    assert job.dynamodb is None
    assert job.graph is not None
    assert (job.graph.parallelism, job.graph.fail_on_error, job.graph.queue_request) == ("HIGH", True, True)
    assert (job.graph.poll_seconds, job.graph.timeout_minutes, job.graph.gzip) == (30, 720, False)
    # Without a graph section an RDF format still goes to the graph.
    assert spec(format="ntriples").graph == job.graph
    assert parse_spec(spec_to_json(job), table_key=TABLE_KEY) == job


def test_graph_statements_round_trip_through_spec_to_json() -> None:
    job = csv_graph(
        {
            "subject": EX + "person/{id}",
            "predicate": EX + "name",
            "object": {"literal": "{name}", "language": "en"},
        },
        {
            "subject": {"blank": "{id}"},
            "predicate": EX + "age",
            "object": {"literal": "{age}", "datatype": "xsd:integer", "optional": True},
            "graph": EX + "g",
        },
        parallelism="LOW",
        dependencies=["abc-123"],
        pollSeconds=1,
        timeoutMinutes=5,
        gzip=True,
    )
    assert job.dynamodb is None
    assert parse_spec(spec_to_json(job), table_key=TABLE_KEY) == job
    assert (
        spec_to_json(job)["graph"]["statements"][1]["object"]["datatype"]
        == "http://www.w3.org/2001/XMLSchema#integer"
    )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"format": "nquads", "dynamodb": {"key": {"pk": "x", "sk": "y"}}}, "dynamodb"),
        ({"format": "nquads", "graph": {"statements": [{}]}}, "graph.statements"),
        ({"format": "csv", "graph": {}}, "graph.statements"),
        ({"format": "csv"}, "dynamodb"),
        (
            {"format": "csv", "graph": {"statements": [{"subject": "x", "predicate": EX, "object": EX}]}},
            "graph.statements[0].subject",
        ),
        (
            {
                "format": "csv",
                "graph": {"statements": [{"subject": EX + "{a}", "predicate": EX + "p<", "object": EX}]},
            },
            "graph.statements[0].predicate",
        ),
        (
            {"format": "csv", "graph": {"statements": [{"subject": EX, "predicate": EX}]}},
            "graph.statements[0].object",
        ),
        (
            {
                "format": "csv",
                "graph": {
                    "statements": [
                        {
                            "subject": EX,
                            "predicate": EX,
                            "object": {"literal": "{a}", "language": "not a tag"},
                        }
                    ]
                },
            },
            "graph.statements[0].object.language",
        ),
        (
            {
                "format": "csv",
                "graph": {
                    "statements": [
                        {"subject": EX, "predicate": EX, "object": {"literal": "a", "datatype": "integer"}}
                    ]
                },
            },
            "graph.statements[0].object.datatype",
        ),
        (
            {
                "format": "csv",
                "graph": {"statements": [{"subject": {"literal": "a"}, "predicate": EX, "object": EX}]},
            },
            "graph.statements[0].subject",
        ),
        ({"format": "nquads", "graph": {"parallelism": "FAST"}}, "graph.parallelism"),
        ({"format": "nquads", "graph": {"pollSeconds": 0}}, "graph.pollSeconds"),
        ({"format": "nquads", "graph": {"timeoutMinutes": 1.5}}, "graph.timeoutMinutes"),
        ({"format": "nquads", "graph": {"failOnErrors": True}}, "graph.failOnErrors"),
        ({"format": "nquads", "graph": {"dependencies": ["not ok!"]}}, "graph.dependencies[0]"),
        ({"format": "nquads", "graph": []}, "graph"),
    ],
)
def test_graph_errors_name_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputValidationError) as caught:
        spec(**raw)
    assert caught.value.field == field


def test_a_csv_header_without_a_statement_field_names_the_statement() -> None:
    from logic.spec.checks import check_fields

    job = csv_graph({"subject": EX + "{id}", "predicate": EX + "p", "object": {"literal": "{nmae}"}})
    with pytest.raises(InputValidationError, match="did you mean 'name'") as caught:
        check_fields(job, ["id", "name"])
    assert caught.value.field == "graph.statements[0].object"


# -- statements from records -----------------------------------------------------------------


def quads_of(job: Any, fields: dict[str, Any]) -> list[ox.Quad] | Reject:
    from adapters.rdf import to_quad

    rendered = make_graph_mapper(job)(fields)
    if isinstance(rendered, Reject):
        return rendered
    quads = [to_quad(s) for s in rendered]
    for quad in quads:
        if isinstance(quad, Reject):
            return quad
    return [q for q in quads if not isinstance(q, Reject)]


HOSTILE = [
    'a "quoted" value',
    "new\nline and \r return",
    "back\\slash",
    "> <http://evil/> .",
    "#fragment?query=1&x",
    "ünïcødé ✓",
    "_:blank",
    "{braces}",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_no_value_breaks_the_staged_syntax(value: str) -> None:
    job = csv_graph(
        {"subject": EX + "thing/{id}", "predicate": EX + "label", "object": {"literal": "{v}"}},
        {
            "subject": {"blank": "{v}"},
            "predicate": EX + "see",
            "object": EX + "ref/{v}",
            "graph": EX + "g/{v}",
        },
    )
    quads = quads_of(job, {"id": value, "v": value})
    assert isinstance(quads, list) and len(quads) == 2
    staged = ox.serialize(quads, format=ox.RdfFormat.N_QUADS)
    assert staged.count(b"\n") == 2  # one statement per line, whatever the value
    back = list(ox.parse(input=staged, format=ox.RdfFormat.N_QUADS))
    assert back == quads
    assert back[0].object.value == value  # the literal keeps the value exactly
    assert back[0].subject.value.startswith(EX + "thing/")
    assert "/" not in back[0].subject.value[len(EX + "thing/") :]  # the value cannot add path segments


def test_literals_keep_datatype_and_language() -> None:
    job = csv_graph(
        {
            "subject": EX + "{id}",
            "predicate": EX + "n",
            "object": {"literal": "{n}", "datatype": "xsd:integer"},
        },
        {
            "subject": EX + "{id}",
            "predicate": EX + "l",
            "object": {"literal": "{label}", "language": "en-GB"},
        },
    )
    quads = quads_of(job, {"id": "1", "n": "42", "label": "colour"})
    assert isinstance(quads, list)
    assert str(quads[0].object) == '"42"^^<http://www.w3.org/2001/XMLSchema#integer>'
    assert str(quads[1].object) == '"colour"@en-gb' or str(quads[1].object).lower() == '"colour"@en-gb'


def test_record_rejects_name_the_reason() -> None:
    job = csv_graph(
        {
            "subject": EX + "{id}",
            "predicate": EX + "n",
            "object": {"literal": "{n}", "datatype": "xsd:integer"},
        },
        {"subject": EX + "{id}", "predicate": EX + "o", "object": {"literal": "{opt}", "optional": True}},
    )
    assert quads_of(job, {"id": "1", "n": "4x2"}) == Reject(
        "bad_literal", "'4x2' in graph.statements[0].object is not a valid xsd:integer"
    )
    missing = quads_of(job, {"n": "1"})
    assert isinstance(missing, Reject) and missing.code == "missing_field" and "'id'" in missing.reason
    empty = quads_of(job, {"id": "", "n": "1"})
    assert isinstance(empty, Reject) and empty.code == "empty_value"
    nested = quads_of(job, {"id": {"a": 1}, "n": "1"})
    assert isinstance(nested, Reject) and nested.code == "not_scalar"
    # An optional object whose field is absent leaves its statement out; the record still loads.
    only_first = quads_of(job, {"id": "1", "n": "7"})
    assert isinstance(only_first, list) and len(only_first) == 1


# -- N-Quads / N-Triples lines ---------------------------------------------------------------


def test_each_bad_line_is_rejected_with_line_offset_and_the_parsers_reason() -> None:
    data = (
        b'<http://a/s> <http://a/p> "ok" .\n'
        b"# a comment is not a record\n"
        b"\n"
        b'<http://a/s> <http://a/p> "unterminated .\n'
        b"<http://a/s> <http://a/p> <http://a/o> <http://a/g> .\n"
        b"<http://a/s> <http://a/p> <http://a/o> . <http://a/s> <http://a/p> <http://a/o2> .\n"
        b"\xff\xfe not utf-8\n"
    )
    counts, sink, stager = run_rdf(data)
    assert (counts["read"], counts["written"], sink.count) == (5, 2, 3)
    assert counts["lines"] == 7
    records = rejected(sink)
    assert [(r["shardLine"], r["code"]) for r in records] == [
        (4, "rdf_syntax"),
        (6, "rdf_syntax"),
        (7, "invalid_utf8"),
    ]
    assert records[0]["offset"] == data.index(b'<http://a/s> <http://a/p> "unterminated')
    assert records[0]["reason"].startswith("N-Quads syntax error at columns ")
    assert "single triple or quad" in records[1]["reason"]
    assert stager.staged == 2
    staged = written(stager)
    assert len(list(ox.parse(input=staged, format=ox.RdfFormat.N_QUADS))) == 2


def test_ntriples_refuses_a_graph_name() -> None:
    data = (
        b"<http://a/s> <http://a/p> <http://a/o> .\n<http://a/s> <http://a/p> <http://a/o> <http://a/g> .\n"
    )
    counts, sink, _ = run_rdf(data, "ntriples")
    assert (counts["written"], sink.count) == (1, 1)
    assert rejected(sink)[0]["reason"].startswith("N-Triples syntax error")


def test_gzip_staging_is_one_text_file_per_gz() -> None:
    stager = in_memory(lambda out: GraphStager(compress=True, out=out))
    quad = ox.Quad(ox.NamedNode("http://a/s"), ox.NamedNode("http://a/p"), ox.Literal("x"))
    stager.add([quad, quad])
    stager.finish()
    text = gzip.decompress(written(stager))
    assert text.count(b"\n") == 2 and len(list(ox.parse(input=text, format=ox.RdfFormat.N_QUADS))) == 2


def _manifest() -> dict[str, str]:
    """file name -> positive|negative, from the suite's manifest.ttl."""
    manifest = (W3C / "manifest.ttl").read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for block in manifest.split(" .\n"):
        kind = re.search(r"rdft:TestNQuads(Positive|Negative)Syntax", block)
        action = re.search(r"mf:action\s+<([^>]+)>", block)
        if kind and action:
            found[action.group(1)] = kind.group(1).lower()
    return found


MANIFEST = _manifest() if (W3C / "manifest.ttl").exists() else {}


def test_the_w3c_suite_is_there() -> None:
    assert len([k for k, v in MANIFEST.items() if v == "positive"]) == 53, W3C
    assert len([k for k, v in MANIFEST.items() if v == "negative"]) == 34


@pytest.mark.parametrize("name", sorted(k for k, v in MANIFEST.items() if v == "positive"))
def test_w3c_positive_files_load_completely(name: str) -> None:
    data = (W3C / name).read_bytes()
    expected = list(ox.parse(input=data, format=ox.RdfFormat.N_QUADS))
    counts, sink, stager = run_rdf(data)
    assert sink.count == 0, rejected(sink)
    assert counts["written"] == counts["read"] == stager.staged == len(expected)
    staged = list(ox.parse(input=written(stager), format=ox.RdfFormat.N_QUADS))
    assert staged == expected


@pytest.mark.parametrize("name", sorted(k for k, v in MANIFEST.items() if v == "negative"))
def test_w3c_negative_files_reject_every_bad_line_and_keep_the_rest(name: str) -> None:
    data = (W3C / name).read_bytes()
    counts, sink, stager = run_rdf(data)
    records = rejected(sink)
    assert records, f"{name}: nothing rejected"
    # The whole-file parser stops at the first bad line: it is our first reject.
    with pytest.raises(SyntaxError) as caught:
        list(ox.parse(input=data, format=ox.RdfFormat.N_QUADS))
    assert records[0]["shardLine"] == caught.value.lineno
    # Nothing else lost: every other statement line is staged, each exactly once.
    lines = [line for line in data.split(b"\n") if line.strip() and not line.lstrip().startswith(b"#")]
    assert counts["read"] == len(lines) == counts["written"] + sink.count
    kept = [
        line
        for index, line in enumerate(data.split(b"\n"), start=1)
        if index not in {r["shardLine"] for r in records}
    ]
    good = [
        q
        for line in kept
        if line.strip() and not line.lstrip().startswith(b"#")
        for q in ox.parse(input=line, format=ox.RdfFormat.N_QUADS)
    ]
    assert stager.staged == len(good) == counts["written"]
    assert list(ox.parse(input=written(stager), format=ox.RdfFormat.N_QUADS)) == good
