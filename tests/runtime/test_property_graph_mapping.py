"""A record becomes checked openCypher rows by graph.vertices/graph.edges (logic/property_graph.py):
whole or rejected whole, with deterministic edge ids."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from logic.property_graph import PropertyRecord, edge_id, headers, make_property_mapper
from logic.spec.inputs import JobSpec
from logic.spec.parse import parse_spec
from logic.values import Reject

pytestmark = pytest.mark.runtime

SOURCE = "s3://source-bucket/people.csv"


def spec(**graph: Any) -> JobSpec:
    raw = {"source": SOURCE, "format": "csv", "jobId": "people", "graph": {"model": "property", **graph}}
    return parse_spec(raw, table_key={"pk": "S"})


PEOPLE = spec(
    vertices=[
        {
            "id": "person-{id}",
            "label": ["Person", "{kind}"],
            "properties": {
                "name": "{name}",
                "age": {"field": "age", "type": "Int", "optional": True},
                "born": {"field": "born", "type": "Date", "optional": True},
            },
        }
    ],
    edges=[
        {"from": "person-{id}", "to": "person-{boss}", "label": "REPORTS_TO"},
        {"from": "person-{id}", "to": "team-{team}", "label": "IN", "id": "in-{id}"},
    ],
)
ROW = {"id": "7", "kind": "Staff", "name": "Jo", "age": "41", "born": "1985-02-03", "boss": "1", "team": "x"}


def test_headers_hold_every_property_column_once() -> None:
    vertices, edges = headers(PEOPLE)
    assert vertices.cells == [":ID", ":LABEL", "name:String", "age:Int", "born:DateTime"]
    assert edges.cells == [":ID", ":START_ID", ":END_ID", ":TYPE"]


def test_a_record_becomes_its_vertices_and_edges() -> None:
    rows = make_property_mapper(PEOPLE, SOURCE)(ROW, 120)
    assert rows == PropertyRecord(
        [["person-7", "Person;Staff", "Jo", "41", "1985-02-03"]],
        [
            [edge_id(SOURCE, 120, 0), "person-7", "person-1", "REPORTS_TO"],
            ["in-7", "person-7", "team-x", "IN"],
        ],
    )


def test_edge_ids_are_deterministic_and_distinct() -> None:
    to_rows = make_property_mapper(PEOPLE, SOURCE)
    first = to_rows(ROW, 120)
    assert first == to_rows(ROW, 120)  # a re-run stages the same ids
    assert isinstance(first, PropertyRecord)
    others = {edge_id(SOURCE, offset, index) for offset in (0, 120, 121) for index in (0, 1)}
    others |= {edge_id(SOURCE + ".gz", 120, 0)}
    assert len(others) == 7
    assert first.edges[0][0] in others


def test_optional_properties_are_left_out_when_empty() -> None:
    rows = make_property_mapper(PEOPLE, SOURCE)({**ROW, "age": "", "born": None, "name": ""}, 0)
    assert isinstance(rows, PropertyRecord)
    assert rows.vertices == [["person-7", "Person;Staff", "", "", ""]]


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ({"age": "forty"}, "bad_value", "graph.vertices[0].properties.age: 'forty' is not a Int"),
        ({"born": "1985-02-30"}, "bad_value", "is not a Date"),
        ({"boss": None}, "missing_field", "field 'boss' needed by graph.edges[0].to"),
        ({"kind": ""}, "empty_value", "field 'kind' needed by graph.vertices[0].label is empty"),
        ({"kind": "A;B"}, "bad_value", "holds ';'"),
        ({"team": None}, "missing_field", "graph.edges[1].to"),
    ],
)
def test_a_record_is_rejected_whole(change: dict[str, Any], code: str, words: str) -> None:
    rows = make_property_mapper(PEOPLE, SOURCE)({**ROW, **change}, 0)
    assert isinstance(rows, Reject)
    assert rows.code == code and words in rows.reason


def test_a_required_typed_property_must_have_a_value() -> None:
    strict = spec(
        vertices=[{"id": "{id}", "label": "P", "properties": {"n": {"field": "n", "type": "Long"}}}]
    )
    rows = make_property_mapper(strict, SOURCE)({"id": "1", "n": ""}, 0)
    assert isinstance(rows, Reject) and rows.code == "missing_field"


def test_json_lines_values_keep_their_json_text() -> None:
    typed = spec(
        vertices=[
            {
                "id": "{id}",
                "label": "P",
                "properties": {
                    "n": {"field": "n", "type": "Long"},
                    "x": {"field": "x", "type": "Double"},
                    "ok": {"field": "ok", "type": "Bool"},
                },
            }
        ]
    )
    to_rows = make_property_mapper(typed, SOURCE)
    assert to_rows({"id": 5, "n": 12, "x": Decimal("1.5"), "ok": True}, 0) == PropertyRecord(
        [["5", "P", "12", "1.5", "true"]], []
    )
    rows = to_rows({"id": 5, "n": [1], "x": 1, "ok": True}, 0)
    assert isinstance(rows, Reject) and rows.code == "not_scalar"


def test_an_empty_endpoint_field_is_a_reject_naming_it_not_an_edge_to_a_prefix() -> None:
    # Given the root of a manager hierarchy: no manager
    rows = make_property_mapper(PEOPLE, SOURCE)({**ROW, "boss": ""}, 0)
    # Then the record is rejected naming the field and the flag, not staged with an edge to `person-`
    assert isinstance(rows, Reject) and rows.code == "empty_value"
    assert "field 'boss' needed by graph.edges[0].to is empty" in rows.reason
    assert '"optional": true' in rows.reason
    # ... and so is a vertex whose id field is empty (not a vertex `person-`)
    rows = make_property_mapper(PEOPLE, SOURCE)({**ROW, "id": ""}, 0)
    assert isinstance(rows, Reject) and "field 'id' needed by graph.vertices[0].id is empty" in rows.reason


OPTIONAL = spec(
    vertices=[
        {"id": "person-{id}", "label": "Person"},
        {"id": "team-{team}", "label": "Team", "optional": True},
    ],
    edges=[
        {"from": "person-{id}", "to": "person-{boss}", "label": "REPORTS_TO", "optional": True},
        {"from": "person-{id}", "to": "team-{team}", "label": "IN", "id": "in-{id}", "optional": True},
    ],
)


@pytest.mark.parametrize("empty", ["", None])
def test_an_optional_vertex_or_edge_whose_template_field_is_empty_is_left_out_and_counted(empty: Any) -> None:
    to_rows = make_property_mapper(OPTIONAL, SOURCE)
    # Given the root (no manager) in a team, and a person in no team
    root = to_rows({"id": "1", "boss": empty, "team": "x"}, 0)
    loner = to_rows({"id": "2", "boss": "1", "team": empty}, 10)
    # Then the record is mapped without what its empty fields would make, and says how many
    assert root == PropertyRecord(
        [["person-1", "Person"], ["team-x", "Team"]], [["in-1", "person-1", "team-x", "IN"]], 0, 1
    )
    assert loner == PropertyRecord(
        [["person-2", "Person"]], [[edge_id(SOURCE, 10, 0), "person-2", "person-1", "REPORTS_TO"]], 1, 1
    )
    # ... while a vertex that is not optional still rejects the record
    rows = to_rows({"id": empty, "boss": "1", "team": "x"}, 0)
    assert isinstance(rows, Reject) and "graph.vertices[0].id" in rows.reason


def test_optional_does_not_excuse_a_bad_value() -> None:
    typed = spec(
        edges=[
            {
                "from": "{a}",
                "to": "{b}",
                "label": "L",
                "optional": True,
                "properties": {"n": {"field": "n", "type": "Long"}},
            }
        ]
    )
    to_rows = make_property_mapper(typed, SOURCE)
    rows = to_rows({"a": "1", "b": "2", "n": "x"}, 0)
    assert isinstance(rows, Reject) and rows.code == "bad_value"
    rows = to_rows({"a": "1", "b": [2], "n": "1"}, 0)
    assert isinstance(rows, Reject) and rows.code == "not_scalar"
    assert to_rows({"a": "1", "b": "", "n": "x"}, 0) == PropertyRecord([], [], 0, 1)
