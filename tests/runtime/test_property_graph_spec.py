"""graph.model "property": graph.vertices and graph.edges parse, normalize, round-trip and fail
naming the field; the published schema agrees."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from logic import endpoints
from logic.errors import InputValidationError
from logic.spec.checks import check_fields, check_shard_memory, id_shape
from logic.spec.fields import Template
from logic.spec.graph import property_type
from logic.spec.inputs import MAX_SHARD_SIZE_MIB
from logic.spec.parse import parse_spec, spec_to_json

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = jsonschema.Draft202012Validator(json.loads((ROOT / "schemas" / "input.schema.json").read_text()))
TABLE_KEY = {"pk": "S"}
PEOPLE: dict[str, Any] = {
    "source": "s3://source-bucket/people.csv",
    "format": "csv",
    "jobId": "people",
    "graph": {
        "model": "property",
        "vertices": [
            {
                "id": "person-{id}",
                "label": ["Person", "{kind}"],
                "properties": {"name": "{name}", "age": {"field": "age", "type": "Int", "optional": True}},
            }
        ],
        "edges": [{"from": "person-{id}", "to": "person-{boss}", "label": "REPORTS_TO"}],
    },
}


def parse(raw: Any) -> Any:
    return parse_spec(raw, table_key=TABLE_KEY)


def with_graph(**graph: Any) -> dict[str, Any]:
    raw = copy.deepcopy(PEOPLE)
    raw["graph"] = {"model": "property", **graph}
    return raw


def test_a_property_graph_parses_into_vertices_and_edges() -> None:
    graph = parse(PEOPLE).graph
    assert graph.model == "property" and graph.statements == ()
    (vertex,) = graph.vertices
    assert [label.text for label in vertex.labels] == ["Person", "{kind}"]
    assert [
        (name, property_type(p), not isinstance(p, Template) and p.optional)
        for name, p in vertex.properties.items()
    ] == [
        ("name", "String", False),
        ("age", "Int", True),
    ]
    (edge,) = graph.edges
    assert (edge.from_.fields, edge.to.fields, edge.id) == (("id",), ("boss",), None)


def test_rdf_stays_the_default_model() -> None:
    raw = {
        **PEOPLE,
        "graph": {"statements": [{"subject": "urn:{id}", "predicate": "urn:p", "object": "urn:o"}]},
    }
    assert parse(raw).graph.model == "rdf"
    assert parse({**raw, "graph": {**raw["graph"], "model": "rdf"}}) == parse(raw)


@pytest.mark.parametrize(
    "raw",
    [
        PEOPLE,
        with_graph(
            edges=[{"from": "{a}", "to": "{b}", "label": "L", "id": "{a}-{b}", "properties": {"w": "{w}"}}]
        ),
        with_graph(vertices=[{"id": "{a}", "label": "A"}], gzip=True, parallelism="LOW"),
    ],
)
def test_spec_to_json_round_trips_a_property_graph(raw: dict[str, Any]) -> None:
    spec = parse(raw)
    normalized = spec_to_json(spec)
    assert parse(normalized) == spec
    assert SCHEMA.is_valid(normalized) and SCHEMA.is_valid(raw)


@pytest.mark.parametrize(
    ("graph", "field", "words"),
    [
        ({"model": "graphs"}, "graph.model", '"rdf" (the default) or "property"'),
        ({}, "graph.vertices", "non-empty list of vertices or of edges"),
        ({"vertices": [], "edges": []}, "graph.vertices", "non-empty list of vertices or of edges"),
        (
            {"vertices": [{"id": "{a}", "label": "A"}], "statements": []},
            "graph.statements",
            'not allowed when graph.model is "property"',
        ),
        ({"vertices": [{"id": "", "label": "A"}]}, "graph.vertices[0].id", "must not be empty"),
        ({"vertices": [{"id": "{a}", "label": []}]}, "graph.vertices[0].label", "at least one"),
        ({"vertices": [{"id": "{a}"}]}, "graph.vertices[0].label", "required"),
        (
            {"vertices": [{"id": "{a}", "label": "A", "properties": {"first name": "{n}"}}]},
            "graph.vertices[0].properties",
            "may not hold spaces",
        ),
        (
            {
                "vertices": [
                    {"id": "{a}", "label": "A", "properties": {"n": {"field": "n", "type": "Integer"}}}
                ]
            },
            "graph.vertices[0].properties.n.type",
            "String, Int, Long",
        ),
        ({"edges": [{"from": "{a}", "label": "L"}]}, "graph.edges[0].to", "required"),
        ({"edges": [{"from": "{a}", "to": "{b}", "label": "L", "id": None}]}, "graph.edges[0].id", "null"),
        (
            {
                "edges": [{"from": "{a}", "to": "{b}", "label": "L"}],
                "updateSingleCardinalityProperties": True,
            },
            "graph.updateSingleCardinalityProperties",
            "not supported",
        ),
        (
            {"edges": [{"from": "{a}", "to": "{b}", "label": "L"}], "maxDanglingPercent": 5},
            "graph.maxDanglingPercent",
            "needs graph.failOnError false",
        ),
        (
            {"edges": [{"from": "{a}", "to": "{b}", "label": "L"}], "maxDanglingPercent": 101},
            "graph.maxDanglingPercent",
            "100",
        ),
    ],
)
def test_bad_property_graphs_name_the_field(graph: dict[str, Any], field: str, words: str) -> None:
    raw = with_graph(**graph)
    with pytest.raises(InputValidationError) as caught:
        parse(raw)
    assert caught.value.field == field
    assert words in str(caught.value)
    assert not SCHEMA.is_valid(raw)


def test_a_property_name_has_one_type_per_section() -> None:
    raw = with_graph(
        vertices=[
            {"id": "{a}", "label": "A", "properties": {"n": "{n}"}},
            {"id": "{b}", "label": "B", "properties": {"n": {"field": "n", "type": "Long"}}},
        ],
        edges=[
            {"from": "{a}", "to": "{b}", "label": "L", "properties": {"n": {"field": "n", "type": "Long"}}}
        ],
    )
    with pytest.raises(InputValidationError) as caught:
        parse(raw)
    assert caught.value.field == "graph.vertices[1].properties.n"
    assert "Long here but String in graph.vertices[0]" in str(caught.value)
    # Vertices and edges are separate files: the same name may differ between them.
    del raw["graph"]["vertices"][1]
    assert property_type(parse(raw).graph.edges[0].properties["n"]) == "Long"


def test_vertex_and_edge_templates_must_name_columns() -> None:
    spec = parse(PEOPLE)
    check_fields(spec, ["id", "kind", "name", "age", "boss"])
    with pytest.raises(InputValidationError) as caught:
        check_fields(spec, ["id", "kind", "name", "age"])
    assert caught.value.field == "graph.edges[0].to"
    with pytest.raises(InputValidationError) as caught:
        check_fields(spec, ["id", "kind", "name", "boss"])
    assert caught.value.field == "graph.vertices[0].properties.age.field"


OPENCYPHER: dict[str, Any] = {"source": "s3://source-bucket/graph/", "format": "opencypher", "jobId": "g"}


def test_opencypher_sources_go_to_the_graph_as_a_property_graph() -> None:
    spec = parse(OPENCYPHER)
    assert spec.dynamodb is None and spec.graph is not None and spec.graph.model == "property"
    normalized = spec_to_json(spec)
    assert "csv" not in normalized and "model" not in normalized["graph"]
    assert parse(normalized) == spec
    assert SCHEMA.is_valid(normalized) and SCHEMA.is_valid(OPENCYPHER)


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"dynamodb": {"key": {"pk": "{id}"}}}, "dynamodb", "graph target only"),
        ({"csv": {"delimiter": ";"}}, "csv", "only allowed when format is 'csv'"),
        ({"graph": {"vertices": []}}, "graph.vertices", "unknown field"),
        (
            {"graph": {"updateSingleCardinalityProperties": True}},
            "graph.updateSingleCardinalityProperties",
            "not",
        ),
        (
            {"graph": {"maxDanglingPercent": 0.5, "failOnError": True}},
            "graph.maxDanglingPercent",
            "needs graph.failOnError false",
        ),
    ],
)
def test_opencypher_sources_refuse_what_does_not_apply(extra: dict[str, Any], field: str, words: str) -> None:
    raw = {**OPENCYPHER, **extra}
    with pytest.raises(InputValidationError) as caught:
        parse(raw)
    assert caught.value.field == field and words in str(caught.value)
    assert not SCHEMA.is_valid(raw)


def test_an_opencypher_header_is_checked_when_plan_reads_it() -> None:
    spec = parse(OPENCYPHER)
    check_fields(spec, [":ID", ":LABEL", "name:String", "tags:String[]"])
    check_fields(spec, [":ID", ":START_ID", ":END_ID", ":TYPE", "since:DateTime"])
    with pytest.raises(InputValidationError) as caught:
        check_fields(spec, [":ID", ":START_ID", ":END_ID"])
    assert caught.value.field == "source"
    assert "not an openCypher CSV header: a relationship file needs a :TYPE column" in str(caught.value)


def test_a_tolerance_with_failonerror_false_or_none_at_all_is_accepted() -> None:
    for graph in ({"maxDanglingPercent": 5, "failOnError": False}, {"maxDanglingPercent": 0}, {}):
        raw = with_graph(edges=[{"from": "{a}", "to": "{b}", "label": "L"}], **graph)
        assert SCHEMA.is_valid(raw)
        spec = parse(raw)
        assert spec.graph.max_dangling_percent == graph.get("maxDanglingPercent", 0)
        assert spec_to_json(spec)["graph"]["maxDanglingPercent"] == spec.graph.max_dangling_percent


def test_the_bounds_the_docs_state_are_the_rules() -> None:
    """docs/SETTINGS.md and docs/NEPTUNE.md state the largest shard for a few Worker sizes: checked here."""
    number = r"(\d{1,3}(?:,\d{3})*)"
    settings = (ROOT / "docs" / "SETTINGS.md").read_text(encoding="utf-8")
    row = next(line for line in settings.splitlines() if line.startswith("| `worker_memory_mib`"))
    stated = re.findall(rf"{number} at {number}", row.split("naming the largest allowed:")[1])
    guide = " ".join((ROOT / "docs" / "NEPTUNE.md").read_text(encoding="utf-8").split())  # lines joined
    guide = guide.split("the largest shard it allows is", 1)[1]
    in_guide = rf"{number} (?:MiB )?at (?:`worker_memory_mib` )?(?:the default )?{number}"
    from stacks.config import EnvironmentConfig

    described = EnvironmentConfig.model_fields["worker_memory_mib"].description or ""
    in_settings = re.findall(rf"{number} at {number}", described.split("naming the largest allowed")[1])
    for pairs in (stated, re.findall(in_guide, guide[:300]), in_settings):
        assert len(pairs) >= 5, pairs
        for largest, memory in pairs:
            assert endpoints.max_shard_mib(int(memory.replace(",", "")), MAX_SHARD_SIZE_MIB) == int(largest)


def test_every_largest_shard_a_doc_names_for_a_worker_memory_is_the_rule() -> None:
    """One number: a figure anywhere in the docs that names a Worker memory's largest shard (as
    Plan's message says it, or for the ids of a template) is what Plan computes."""
    number = r"(\d+(?:,\d{3})*)"
    checked = 0
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for largest, memory in re.findall(rf"at most {number} with worker_memory_mib {number}", text):
            assert endpoints.max_shard_mib(int(memory.replace(",", "")), MAX_SHARD_SIZE_MIB) == int(
                largest.replace(",", "")
            ), (page.name, largest, memory)
            checked += 1
        for largest, memory in re.findall(rf"{number} at the default `worker_memory_mib` {number}", text):
            assert endpoints.max_shard_mib(int(memory.replace(",", "")), MAX_SHARD_SIZE_MIB) == int(largest)
            checked += 1
        for largest, template, memory in re.findall(rf"{number} for `([^`]+)` ids at {number}", text):
            literal = "".join(Template.parse(template).literals)
            shape = endpoints.IdShape(fixed_bytes=len(literal))
            assert endpoints.max_shard_mib(int(memory.replace(",", "")), MAX_SHARD_SIZE_MIB, shape) == int(
                largest
            ), (page.name, template)
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize(
    "raw",
    [
        PEOPLE,
        {"source": "s3://source-bucket/edges.csv", "format": "opencypher", "jobId": "edges"},
        {**PEOPLE, "dryRun": True},  # a dry run answers for the load it rehearses
    ],
    ids=["graph.model property", "format opencypher", "dry run"],
)
def test_a_property_graph_shard_larger_than_the_worker_holds_is_refused_naming_the_fields(
    raw: dict[str, Any],
) -> None:
    # Given a property graph input one MiB past what a Worker of 1,024 MiB holds of its ids
    largest = endpoints.max_shard_mib(1024, MAX_SHARD_SIZE_MIB, id_shape(parse(raw)))
    spec = parse({**raw, "shardSizeMiB": largest + 1})
    # When Plan checks it against the Worker's memory
    with pytest.raises(InputValidationError) as refused:
        check_shard_memory(spec, worker_memory_mib=1024)
    # Then the refusal names the field, the largest value allowed and the setting to raise, on one line
    assert refused.value.field == "shardSizeMiB"
    message = str(refused.value)
    assert message.startswith(f"shardSizeMiB: {largest + 1} MiB is more than a property graph Worker")
    assert f"at most {largest} with worker_memory_mib 1024" in message
    assert "\n" not in message
    # ... and the largest itself, or the same shard with a larger Worker, is accepted
    check_shard_memory(parse({**raw, "shardSizeMiB": largest}), worker_memory_mib=1024)
    check_shard_memory(spec, worker_memory_mib=2048)


def test_the_smallest_worker_takes_a_fraction_of_a_mib_and_says_so_of_more() -> None:
    # Lambda's smallest, 128 MiB: a couple of MiB besides the interpreter; the baseline alone
    # nearly fills 100 MiB
    check_shard_memory(parse({**PEOPLE, "shardSizeMiB": 0.05}), worker_memory_mib=100)
    with pytest.raises(InputValidationError, match=r"holds here: less than 1 with worker_memory_mib 100 "):
        check_shard_memory(parse({**PEOPLE, "shardSizeMiB": 1}), worker_memory_mib=100)
    largest = endpoints.max_shard_mib(128, MAX_SHARD_SIZE_MIB, id_shape(parse(PEOPLE)))
    check_shard_memory(parse({**PEOPLE, "shardSizeMiB": largest}), worker_memory_mib=128)
    with pytest.raises(
        InputValidationError, match=rf"holds here: at most {largest} with worker_memory_mib 128 "
    ):
        check_shard_memory(parse({**PEOPLE, "shardSizeMiB": largest + 1}), worker_memory_mib=128)


def test_dynamodb_and_rdf_shards_are_not_bounded_by_the_worker_memory() -> None:
    dynamodb = {
        "source": "s3://source-bucket/a.csv",
        "format": "csv",
        "jobId": "items",
        "dynamodb": {"key": {"pk": "A#{id}"}},
        "shardSizeMiB": MAX_SHARD_SIZE_MIB,
    }
    rdf = {"source": "s3://source-bucket/a.nq", "format": "nquads", "jobId": "triples", "shardSizeMiB": 10240}
    for raw in (dynamodb, rdf):
        check_shard_memory(parse(raw), worker_memory_mib=128)


@pytest.mark.parametrize(
    ("graph", "per_field", "fixed"),
    [
        ({"edges": [{"from": "{a}", "to": "{b}", "label": "L"}]}, 1, 0),
        (
            {
                "vertices": [{"id": "person-{id}", "label": "P"}],
                "edges": [{"from": "person-{id}", "to": "person-{boss}", "label": "L"}],
            },
            1,
            7,
        ),
        (
            {
                "vertices": [{"id": "{a}", "label": "P"}],
                "edges": [{"from": "{a}", "to": "n-{a}", "label": "L"}],
            },
            2,
            2,
        ),
        ({"edges": [{"from": "{a}-{b}", "to": "{c}", "label": "L"}]}, 2 / 3, 1 + 8),
        ({"edges": [{"from": "ä-{a}", "to": "{b}", "label": "L"}]}, 1, 8),
    ],
    ids=["fields", "prefixed", "two ids a field", "two fields an id", "non-ASCII text"],
)
def test_the_id_shape_counts_ids_a_field_makes_and_the_text_templates_add(
    graph: dict[str, Any], per_field: float, fixed: int
) -> None:
    raw = {"source": "s3://source-bucket/x.csv", "format": "csv", "jobId": "x"}
    spec = parse({**raw, "graph": {"model": "property", **graph}})
    assert id_shape(spec) == endpoints.IdShape(per_field=per_field, fixed_bytes=fixed)


def test_ids_made_longer_by_a_template_lower_the_largest_shard() -> None:
    # The default 64 MiB shard of plain ids fits the default Worker; of IRI ids it does not (1,117 MiB
    # measured by bench/shard_memory.py --shapes iri), and Plan says so before any Worker starts.
    iri = "http://example.org/node/"
    edges = [{"from": iri + "{a}", "to": iri + "{b}", "label": "L"}]
    plain = [{"from": "{a}", "to": "{b}", "label": "L"}]
    raw = {"source": "s3://source-bucket/x.csv", "format": "csv", "jobId": "x", "shardSizeMiB": 64}
    check_shard_memory(parse({**raw, "graph": {"model": "property", "edges": plain}}), worker_memory_mib=1024)
    with pytest.raises(InputValidationError, match="at most 52 with worker_memory_mib 1024") as refused:
        check_shard_memory(
            parse({**raw, "graph": {"model": "property", "edges": edges}}), worker_memory_mib=1024
        )
    assert refused.value.field == "shardSizeMiB"


def test_optional_vertices_and_edges_are_normalized_only_when_true() -> None:
    # Given the same graph with and without "optional" on its vertex and edge
    vertex = {"id": "person-{id}", "label": "Person"}
    edge = {"from": "person-{id}", "to": "person-{boss}", "label": "REPORTS_TO"}
    plain = parse(with_graph(vertices=[vertex], edges=[edge]))
    optional = with_graph(vertices=[{**vertex, "optional": True}], edges=[{**edge, "optional": True}])
    assert SCHEMA.is_valid(optional)
    # Then "optional": false is the default, left out of the normalized spec (plan ids do not move),
    # and true is kept, and round-trips
    assert parse(with_graph(vertices=[{**vertex, "optional": False}], edges=[edge])) == plain
    assert "optional" not in json.dumps(spec_to_json(plain))
    normalized = spec_to_json(parse(optional))
    flags = normalized["graph"]["vertices"][0]["optional"], normalized["graph"]["edges"][0]["optional"]
    assert flags == (True, True)
    assert parse(normalized) == parse(optional)
    # ... and a flag that is not a boolean is refused naming it
    with pytest.raises(InputValidationError) as refused:
        parse(with_graph(edges=[{**edge, "optional": "yes"}]))
    assert refused.value.field == "graph.edges[0].optional"
    assert not SCHEMA.is_valid(with_graph(edges=[{**edge, "optional": "yes"}]))


def test_the_shard_size_the_guide_says_plan_chooses_for_its_example_is_the_one_it_chooses() -> None:
    from logic.spec.checks import fit_shard_size
    from stacks.config import EnvironmentConfig

    # Given the guide's property graph example (no shardSizeMiB) and the size it says Plan chooses
    guide = (ROOT / "docs" / "NEPTUNE.md").read_text(encoding="utf-8")
    block, said = re.search(
        r"```json\n(\{[^`]*\"model\": \"property\"[^`]*)```\s*\(`optional`"
        r".*?Plan chooses (\d+) at the default",
        guide,
        re.DOTALL,
    ).groups()  # type: ignore[union-attr]
    raw = json.loads(block.replace("SOURCE-BUCKET", "source-bucket"))
    assert "shardSizeMiB" not in raw
    raw["jobId"] = "people"
    # Then Plan chooses that size at the default Worker memory, and the Worker holds it
    memory = EnvironmentConfig.model_fields["worker_memory_mib"].default
    spec = fit_shard_size(parse(raw), worker_memory_mib=memory)
    assert spec.shard_size_mib == int(said) < 64
    check_shard_memory(spec, worker_memory_mib=memory)
