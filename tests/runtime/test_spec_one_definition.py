"""The input has one definition: the models of logic/spec/, which the runtime reads as JobSpec.

No public class of runtime/ or stacks/ is defined twice under one name (the input's models were once
mirrored by dataclasses of the same names), parsing and checks define no class of their own, the published
schema is the one generated from the models, its rules carried by their types (one model per
writeMode), and a default of the input is written in the models only.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from logic.errors import InputValidationError
from logic.spec import checks, dynamodb, graph, inputs
from logic.spec import csv_options as csv
from logic.spec import parse as spec

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.runtime


def _classes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def test_no_public_class_name_is_defined_twice_in_the_runtime_and_the_settings() -> None:
    names = Counter(
        name
        for folder in ("runtime", "stacks")  # the input spec and the settings (stacks/*_settings.py)
        for path in (ROOT / folder).rglob("*.py")
        for name in _classes(path)
        if not name.startswith("_")  # a module's private helper is its own
    )
    assert [name for name, count in names.items() if count > 1] == []


def test_parsing_and_checks_define_no_second_model() -> None:
    for module in ("parse.py", "checks.py"):
        assert _classes(ROOT / "runtime" / "logic" / "spec" / module) == []
    assert spec.JobSpec is inputs.JobSpec and checks.JobSpec is inputs.JobSpec


def test_the_published_schema_is_the_models_own() -> None:
    published = json.loads((ROOT / "schemas" / "input.schema.json").read_text(encoding="utf-8"))
    assert published == inputs.json_schema()


def _target_schemas(schema: dict[str, Any]) -> list[dict[str, Any]]:
    defs = schema["$defs"]
    return [defs[name] for name in defs if name.endswith("Target")]


def test_each_write_mode_is_its_own_model_with_the_fields_it_allows() -> None:
    schema = inputs.json_schema()
    modes = Counter(
        target["properties"]["writeMode"]["const"]
        for target in _target_schemas(schema)
        if "writeMode" in target["properties"]
    )
    # One model per mode for CSV/JSON Lines records, one for DynamoDB JSON (key optional).
    assert modes == dict.fromkeys(dynamodb.WRITE_MODES, 2)
    for target in _target_schemas(schema):
        mode = target["properties"].get("writeMode", {}).get("const")
        assert not {"if", "allOf", "then", "else"} & set(target), f"{target['title']} restates a rule"
        assert ("version" in target["properties"]) == (mode == "newerWins")
        assert ("attributes" in target["properties"]) == (mode not in ("delete", None))
    assert "update" not in schema["$defs"]["TypedField"]["properties"]
    assert "update" in schema["$defs"]["UpdateField"]["properties"]


def test_the_validated_target_is_the_model_of_its_mode() -> None:
    raw = {"source": "s3://bucket/k.csv", "format": "csv", "dynamodb": {"key": {"pk": "{id}"}}}
    for mode, extra, kind in [
        (None, {}, dynamodb.PutTarget),
        ("putIfAbsent", {}, dynamodb.PutIfAbsentTarget),
        ("update", {}, dynamodb.UpdateTarget),
        ("delete", {}, dynamodb.DeleteTarget),
        ("newerWins", {"version": "v", "attributes": {"v": {"field": "v", "type": "N"}}}, None),
    ]:
        given = {**raw["dynamodb"], **extra, **({"writeMode": mode} if mode else {})}  # type: ignore[dict-item]
        parsed = spec.parse_spec({**raw, "dynamodb": given}, table_key={"pk": "S"}, execution_name="j")
        assert type(parsed.dynamodb) is (kind or dynamodb.NewerWinsTarget)
        assert parsed.dynamodb is not None and parsed.dynamodb.write_mode == (mode or "put")


def _literal_defaults(path: Path, names: set[str]) -> list[str]:
    """`x.get("name", <constant>)` calls naming an input field: a default written a second time."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            args = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
            if len(args) == len(node.args) == 2 and args[0] in names:
                found.append(f"{path.name}:{node.lineno} {args[0]}")
    return found


def test_the_graph_loader_options_and_common_fields_take_their_defaults_from_the_model() -> None:
    names = {
        field.alias or name
        for model in (graph.GraphOptions, inputs.Common)
        for name, field in model.model_fields.items()
    }
    found = [
        hit
        for path in (ROOT / "runtime").rglob("*.py")
        if path.parent.name != "spec"  # the models' own
        for hit in _literal_defaults(path, names)
    ]
    assert found == []


# The models whose schema still has a hand-written rule: each one between fields that no field's
# type states (a comment by its json_schema_extra says which).
KEPT_RULES = {
    "TypedField",
    "UpdateField",
    "PropertyGraph",
    "OpencypherGraph",
    "CsvInput",
    "JsonlInput",
    "ParquetInput",
    # performanceTier with engine bulkPutItems alone (logic/spec/dynamodb.py _engine_schema).
    *(f"{export}{mode}Target" for export in ("", "Export") for mode in ("Put", "PutIfAbsent", "NewerWins")),
    *(f"{export}{mode}Target" for export in ("", "Export") for mode in ("Update", "Delete", "Sync")),
}


def test_no_schema_restates_a_rule_a_type_carries() -> None:
    defs = inputs.json_schema()["$defs"]
    written = {"if", "then", "else", "allOf", "anyOf", "not", "dependentSchemas"}
    assert {name for name, node in defs.items() if written & set(node)} == KEPT_RULES


def test_a_literal_in_a_language_is_its_own_model() -> None:
    statement: dict[str, Any] = {"subject": "http://e.org/{id}", "predicate": "http://e.org/p"}
    raw = {"source": "s3://bucket/k.csv", "format": "csv", "graph": {"statements": [statement]}}
    for term, kind in [
        ({"literal": "{n}", "language": "en"}, graph.LanguageLiteral),
        ({"literal": "{n}", "language": None, "datatype": "xsd:int"}, graph.LiteralTerm),
    ]:
        statement["object"] = term
        parsed = spec.parse_spec(raw, table_key={"pk": "S"}, execution_name="j")
        assert parsed.graph is not None
        assert [type(given.object) for given in parsed.graph.statements] == [kind]
    defs = inputs.json_schema()["$defs"]
    assert defs["LanguageLiteral"]["properties"]["datatype"]["type"] == "null"
    assert defs["LiteralTerm"]["properties"]["language"]["type"] == "null"


def test_csv_without_a_header_is_its_own_model_which_requires_columns() -> None:
    raw = {"source": "s3://bucket/k.csv", "format": "csv", "dynamodb": {"key": {"pk": "{id}"}}}
    for options, kind in [
        ({"header": False, "columns": ["id"]}, csv.HeaderlessCsvOptions),
        ({"header": True, "columns": None}, csv.CsvOptions),
    ]:
        parsed = spec.parse_spec({**raw, "csv": options}, table_key={"pk": "S"}, execution_name="j")
        assert type(parsed.csv) is kind
    defs = inputs.json_schema()["$defs"]
    assert "columns" in defs["HeaderlessCsvOptions"]["required"]
    assert defs["CsvOptions"]["properties"]["header"]["const"] is True


def test_an_update_action_outside_writemode_update_names_the_mode_the_input_gave() -> None:
    attributes = {"aput": {"field": "n", "type": "N", "update": "add"}}
    raw = {"source": "s3://bucket/k.csv", "format": "csv"}
    for mode in ("putIfAbsent", "newerWins"):
        target = {"key": {"pk": "{id}"}, "writeMode": mode, "attributes": attributes}
        if mode == "newerWins":
            target["version"] = "aput"
        with pytest.raises(InputValidationError) as caught:
            spec.parse_spec({**raw, "dynamodb": target}, table_key={"pk": "S"}, execution_name="j")
        assert caught.value.field == "dynamodb.attributes.aput.update"
        assert caught.value.message == f"only allowed when writeMode is update (writeMode is {mode!r})"
