"""A field added to the input later is left out of the normalized form while it is at its default
(logic/spec/fields.py omit_default, as a graph element's `optional` is), so inputs that do not give
it keep their normalized form and their plan ids: the golden file does not move."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, create_model

from logic.spec.fields import omit_default
from logic.spec.graph import Edge, PropertyGraph, Vertex
from logic.spec.inputs import JobSpec, RecordInput
from logic.spec.parse import parse_spec, spec_to_json

GOLDEN = Path(__file__).parent / "golden"

pytestmark = pytest.mark.runtime


def _golden() -> list[tuple[dict[str, Any], str]]:
    inputs = (GOLDEN / "spec_inputs.jsonl").read_text(encoding="ascii").split("\n")[:-1]
    normalized = (GOLDEN / "spec_normalized.jsonl").read_text(encoding="ascii").split("\n")[:-1]
    return [(json.loads(line), expected) for line, expected in zip(inputs, normalized, strict=True)]


def _with_a_new_field(spec: JobSpec, entry: dict[str, Any], default: Any) -> JobSpec:
    """The input of `entry` (parsed as `spec`) read by its model extended with a field `addedLater`
    (`default`), as the next issue might add one."""
    extended = create_model(  # type: ignore[call-overload]
        f"Extended{type(spec).__name__}", __base__=type(spec), added_later=(int, default)
    )
    table_key = tuple(entry["tableKey"].items())
    validated: JobSpec = extended.model_validate(entry["input"], context={"table_key": table_key})
    assert type(validated).model_fields["added_later"].alias == "addedLater"
    return validated.model_copy(update={"job_id": spec.job_id})  # as parse_spec names the job


def test_a_field_added_at_its_default_leaves_every_golden_normalized_form_as_it_is() -> None:
    moved = []
    for number, (entry, expected) in enumerate(_golden(), start=1):
        spec = parse_spec(entry["input"], table_key=entry["tableKey"], execution_name=entry["executionName"])
        extended = _with_a_new_field(spec, entry, omit_default(0))
        if json.dumps(spec_to_json(extended), sort_keys=True) != expected:
            moved.append(number)
    assert not moved, f"normalized spec moved for input lines {moved[:20]} (of {len(moved)})"


def test_the_added_field_is_in_the_normalized_form_once_given_and_only_then() -> None:
    entry, expected = _golden()[0]
    spec = parse_spec(entry["input"], table_key=entry["tableKey"], execution_name=entry["executionName"])
    extended = _with_a_new_field(spec, entry, omit_default(0))
    given = (
        type(extended)
        .model_validate(
            {**entry["input"], "addedLater": 7}, context={"table_key": tuple(entry["tableKey"].items())}
        )
        .model_copy(update={"job_id": spec.job_id})
    )
    assert spec_to_json(given) == {**json.loads(expected), "addedLater": 7}
    # A field declared without omit_default would have moved every plan id: what the rule prevents.
    plain = _with_a_new_field(spec, entry, Field(default=0))
    assert spec_to_json(plain) == {**json.loads(expected), "addedLater": 0}


def test_a_field_added_to_a_graph_element_at_its_default_leaves_the_golden_forms_as_they_are() -> None:
    """The same one level down: a vertex and an edge with a new field, in every recorded property
    graph input (their `optional`, added after the first recorded forms, is left out so too)."""
    new_field: Any = {"added_later": (int, omit_default(0))}
    vertex = create_model("ExtendedVertex", __base__=Vertex, **new_field)
    edge = create_model("ExtendedEdge", __base__=Edge, **new_field)
    graph = create_model(
        "ExtendedPropertyGraph",
        __base__=PropertyGraph,
        vertices=(list[vertex], Field(default_factory=list)),  # type: ignore[valid-type]
        edges=(list[edge], Field(default_factory=list)),  # type: ignore[valid-type]
    )
    checked = 0
    for entry, expected in _golden():
        spec = parse_spec(entry["input"], table_key=entry["tableKey"], execution_name=entry["executionName"])
        if not isinstance(spec.graph, PropertyGraph) or not isinstance(spec, RecordInput):
            continue
        extended = create_model(  # type: ignore[call-overload]
            f"Extended{type(spec).__name__}", __base__=type(spec), graph=(graph | None, None)
        )
        table_key = tuple(entry["tableKey"].items())
        validated = extended.model_validate(entry["input"], context={"table_key": table_key})
        assert type(validated.graph).__name__ == "ExtendedPropertyGraph"
        normalized = spec_to_json(validated.model_copy(update={"job_id": spec.job_id}))
        assert json.dumps(normalized, sort_keys=True) == expected
        checked += 1
    assert checked > 10
