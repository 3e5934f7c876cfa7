"""schemas/input.schema.json is generated from the input's models, and it and parse_spec agree.

The drift cases once found between a hand-written schema and a hand-written validator are each
refused by both; property tests generate inputs from the schema (hypothesis-jsonschema) and
mutate valid ones, and parse_spec and the schema must judge them alike, but for the documented
checks only the loader makes (the table's key, columns, the poll budget).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import hypothesis.internal.conjecture.utils as conjecture_utils
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import _from_schema, from_schema

from logic.errors import InputValidationError
from logic.spec.inputs import json_schema
from logic.spec.parse import parse_spec, spec_to_json

pytestmark = [
    pytest.mark.runtime,
    # The strategies' reprs hold the whole schema: Hypothesis warns that they are long.
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
SCHEMA: dict[str, Any] = json.loads((ROOT / "schemas" / "input.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
TABLE_KEY = {"pk": "S", "sk": "S"}
# What only parse_spec judges (the schema's description lists them): words of the error.
SEMANTIC = (
    "not a key attribute",
    "missing: give a template",
    "is a key attribute",
    "not a column",
    "would poll",
    "not a mapped attribute of type N",
    "one column per property name",
)
PROPERTY = settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))


class _Many:
    """hypothesis-jsonschema 0.23.1 (the latest) calls `many.more()`, which Hypothesis replaced by
    iterating a `with many(...)` block; this adapter gives it the old interface."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._many = conjecture_utils.many(*args, **kwargs)
        self._many.__enter__()
        self._elements = iter(self._many)

    def more(self) -> bool:
        if next(self._elements, StopIteration) is StopIteration:
            self._many.__exit__(None, None, None)
            return False
        return True

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


class _ConjectureUtils:
    many = _Many


_from_schema.cu = _ConjectureUtils  # type: ignore[attr-defined]


def parse(raw: Any) -> Any:
    return parse_spec(raw, table_key=TABLE_KEY, execution_name="run-1")


def test_the_checked_in_schema_is_the_generated_one() -> None:
    # `make schemas` writes it; scripts/input_schema.py --check is the same test for CI scripts.
    assert json_schema() == SCHEMA, "schemas/input.schema.json is stale: run `make schemas`"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


STATEMENT = {
    "subject": "http://example.org/{id}",
    "predicate": "http://example.org/p",
    "object": {"literal": "x"},
}
CSV = {
    "source": "s3://source-bucket/in.csv",
    "format": "csv",
    "dynamodb": {"key": {"pk": "P#{id}", "sk": "S"}, "attributes": {"n": {"field": "n", "type": "N"}}},
    "jobId": "job-1",
}
GRAPH_CSV = {"source": "s3://source-bucket/in.csv", "format": "csv", "graph": {"statements": [STATEMENT]}}
NQUADS = {"source": "s3://source-bucket/in.nq", "format": "nquads"}


def _patterns(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
        return found.union(*(_patterns(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_patterns(value) for value in node))
    return set()


PROBES = [
    *(
        "",
        "a",
        "\n",
        "a\n",
        "a\r",
        "\u2028",
        "job-1",
        "job-1\n",
        "#",
        "#\n",
        ",",
        ";\n",
        '"',
        "en-GB",
        "en\n",
    ),
    *(
        "s3://bucket",
        "s3://bucket\n",
        "s3://bucket/k\n",
        "s3://Bucket/k",
        "http://e.org/{a}",
        "http://e.org/{a}\n",
    ),
    *(
        "http://e.org/{{a}}",
        "{a}",
        "{a}\n",
        "{{",
        "}",
        "xsd:int",
        "xsd:int\n",
        "load-1",
        "load-1\n",
        "a b",
        "\U0001f600",
    ),
]


@pytest.mark.skipif(shutil.which("node") is None, reason="node (the CDK CLI's runtime) is not installed")
def test_every_pattern_matches_the_same_strings_in_python_and_ecma_262() -> None:
    # JSON Schema patterns are ECMA-262 regexes (ajv compiles them with the "u" flag); Python's
    # jsonschema and the loader run them with re.search. Both must agree, e.g. on a final "\n".
    patterns = sorted(_patterns(SCHEMA))
    script = (
        "const [patterns, probes] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(patterns.map(p => [new RegExp(p, 'u'), new RegExp(p)]"
        ".map(r => probes.map(s => r.test(s))))));"
    )
    out = subprocess.run(
        ["node", "-e", script],
        input=json.dumps([patterns, PROBES]),
        capture_output=True,
        text=True,
        check=True,
    )
    bmp = [all(ord(c) <= 0xFFFF for c in probe) for probe in PROBES]  # without "u" a 😀 is 2 units
    for pattern, (unicode, plain) in zip(patterns, json.loads(out.stdout), strict=True):
        python = [re.search(pattern, probe) is not None for probe in PROBES]
        assert unicode == python, pattern
        assert [p for p, b in zip(plain, bmp, strict=True) if b] == [
            p for p, b in zip(python, bmp, strict=True) if b
        ]


def _with(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = out
    for name in parents:
        node = node[int(name)] if isinstance(node, list) else node[name]
    node[last] = value
    return out


# Inputs the old hand-written schema accepted and the validator refused (issue 13), and the like.
DRIFT: list[tuple[dict[str, Any], str]] = [
    (
        _with(GRAPH_CSV, "graph.statements.0.subject", {"iri": "http://example.org/{id}", "optional": True}),
        "graph.statements[0].subject.optional",
    ),
    (
        _with(GRAPH_CSV, "graph.statements.0.subject", {"blank": "b{id}", "optional": True}),
        "graph.statements[0].subject.optional",
    ),
    (_with(NQUADS, "graph", {"statements": [STATEMENT]}), "graph.statements"),
    (_with(_with(NQUADS, "format", "ntriples"), "graph", {"statements": [STATEMENT]}), "graph.statements"),
    (_with(CSV, "jobId", "job-1\n"), "jobId"),
    (_with(CSV, "csv", {"comment": "#\n"}), "csv.comment"),
    (_with(CSV, "source", "s3://source-bucket\n"), "source"),
    (_with(CSV, "csv", {"delimiter": ";\n"}), "csv.delimiter"),
    (_with(CSV, "dynamodb", None), "dynamodb"),
    (_with(NQUADS, "graph", {"dependencies": ["load-1\n"]}), "graph.dependencies[0]"),
    (
        _with(GRAPH_CSV, "graph.statements.0.object", {"literal": "x", "language": "en\n"}),
        "graph.statements[0].object.language",
    ),
    (
        _with(GRAPH_CSV, "graph.statements.0.predicate", "http://example.org/{{p}}"),
        "graph.statements[0].predicate",
    ),
]


@pytest.mark.parametrize(("raw", "field"), DRIFT, ids=[field for _, field in DRIFT])
def test_the_schema_and_parse_spec_both_refuse_what_once_drifted(raw: dict[str, Any], field: str) -> None:
    assert not VALIDATOR.is_valid(raw)
    with pytest.raises(InputValidationError) as caught:
        parse(raw)
    assert caught.value.field == field
    assert "\n" not in str(caught.value).replace("\\n", "")


@pytest.mark.parametrize(
    "raw",
    [
        CSV,
        GRAPH_CSV,
        NQUADS,
        _with(NQUADS, "graph", {"statements": []}),
        _with(GRAPH_CSV, "graph.statements.0.subject", {"iri": "http://example.org/{id}", "optional": False}),
        _with(GRAPH_CSV, "graph.statements.0.object", {"iri": "http://example.org/{id}", "optional": True}),
    ],
)
def test_the_schema_and_parse_spec_both_accept_the_seeds(raw: dict[str, Any]) -> None:
    assert VALIDATOR.is_valid(raw)
    parse(raw)


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


@cache
def _strategy(text: str) -> st.SearchStrategy[Any]:
    """Values of the schema node `text` (JSON): objects with properties and arrays are composed
    here, field by field, and filtered by the node's own schema; everything else is
    hypothesis-jsonschema's (given the whole input schema at once it needs seconds per example)."""
    node = _resolve(json.loads(text))
    valid = jsonschema.Draft202012Validator({**node, "$defs": SCHEMA["$defs"]}).is_valid
    branches = node.get("oneOf") or node.get("anyOf")
    if branches and "properties" not in node:
        return st.one_of([_strategy(json.dumps(branch)) for branch in branches]).filter(valid)
    if "properties" in node:
        fields = {name: _strategy(json.dumps(sub)) for name, sub in node["properties"].items()}
        required = node.get("required", [])
        return st.fixed_dictionaries(
            {name: fields[name] for name in required},
            optional={name: fields[name] for name in fields if name not in required},
        ).filter(valid)
    if node.get("type") == "array" and "$ref" in node.get("items", {}):
        items = _strategy(json.dumps(node["items"]))
        return st.lists(items, min_size=node.get("minItems", 0), max_size=min(node.get("maxItems", 3), 3))
    return from_schema({**node, "$defs": SCHEMA["$defs"]})


def test_a_name_with_a_newline_is_quoted_so_the_error_stays_one_line() -> None:
    raw = _with(CSV, "dynamodb.attributes", {"a\nb": {"field": "a\nb", "type": "X"}})
    with pytest.raises(InputValidationError) as caught:
        parse(raw)
    assert caught.value.field == "dynamodb.attributes.'a\\nb'.type"
    assert "\n" not in str(caught.value)


def test_columns_with_a_newline_are_quoted_so_the_error_stays_one_line() -> None:
    raw = _with(CSV, "csv", {"header": False, "columns": ["#\n", "n"]})
    with pytest.raises(InputValidationError, match="not a column") as caught:
        parse(raw)
    assert "\n" not in str(caught.value)


def _semantic_or_accepted(raw: Any) -> None:
    try:
        spec = parse(raw)
    except InputValidationError as error:
        assert any(words in error.message for words in SEMANTIC), (raw, str(error))
        assert error.field and "\n" not in str(error).replace("\\n", "")
        return
    # Plan hands the Workers spec_to_json's form: a field it left out would silently be its
    # default in every Worker. The normalized form is a valid input and parses to the same spec.
    normalized = spec_to_json(spec)
    assert VALIDATOR.is_valid(normalized), normalized
    assert parse(normalized) == spec


@PROPERTY
@given(
    _strategy(json.dumps({"$ref": "#/$defs/CsvInput"}))
    | _strategy(json.dumps({"$ref": "#/$defs/JsonlInput"}))
    | _strategy(json.dumps({"$ref": "#/$defs/RdfInput"}))
)
def test_inputs_generated_from_the_schema_are_accepted(raw: dict[str, Any]) -> None:
    assert VALIDATOR.is_valid(raw)
    if "dynamodb" in raw:  # the table's key is the deployment's: give it (still a valid input)
        raw["dynamodb"]["key"] = {"pk": "P#{id}", "sk": "S"}
        if isinstance(raw["dynamodb"].get("attributes"), dict):
            raw["dynamodb"]["attributes"].pop("pk", None)
            raw["dynamodb"]["attributes"].pop("sk", None)
        assert VALIDATOR.is_valid(raw)
    _semantic_or_accepted(raw)


TRICKY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=10_000_001),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        ["", "*", "#\n", "x\n", "csv", "jsonl", "nquads", "S", "N", "BOOL", "HIGH", "{a}", "{{", "}"]
    ),
    st.sampled_from(
        ["http://e.org/{a}", "s3://bucket/k", "s3://bucket\n", "xsd:int", "en-GB", "a b", "load-1"]
    ),
    st.text(max_size=4),
    st.lists(st.sampled_from(["a", "", "a", STATEMENT]), max_size=3),
    st.fixed_dictionaries({}, optional={"iri": st.just("http://e.org/x"), "optional": st.booleans()}),
    st.fixed_dictionaries(
        {}, optional={"literal": st.just("x"), "language": st.just("en"), "datatype": st.just("xsd:int")}
    ),
)
NAMES = st.sampled_from(
    [
        *SCHEMA["$defs"]["CsvInput"]["properties"],
        *SCHEMA["$defs"]["CsvOptions"]["properties"],
        *SCHEMA["$defs"]["RecordGraph"]["properties"],
        *SCHEMA["$defs"]["Statement"]["properties"],
        *SCHEMA["$defs"]["LiteralTerm"]["properties"],
        "iri",
        "blank",
        "key",
        "attributes",
        "pk",
        "sk",
        "n",
        "type",
        "field",
        "0",
    ]
)


@st.composite
def _mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A valid seed with a few values replaced, added or removed at any depth."""
    raw = copy.deepcopy(
        draw(
            st.sampled_from(
                [CSV, GRAPH_CSV, NQUADS, _with(CSV, "csv", {"header": False, "columns": ["id", "n"]})]
            )
        )
    )
    for _ in range(draw(st.integers(1, 3))):
        node: Any = raw
        while True:
            children = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
            children = [(k, v) for k, v in children if isinstance(v, dict | list)]
            if not children or draw(st.booleans()):
                break
            node = draw(st.sampled_from(children))[1]
        key = draw(NAMES) if isinstance(node, dict) else draw(st.integers(0, max(0, len(node) - 1)))
        if isinstance(node, list) and not node:
            node.append(copy.deepcopy(draw(TRICKY)))  # TRICKY shares STATEMENT: never mutate it
        elif isinstance(node, dict) and key in node and draw(st.booleans()):
            del node[key]
        else:
            node[key] = copy.deepcopy(draw(TRICKY))
    return raw


@PROPERTY
@given(_mutated())
def test_parse_spec_accepts_only_what_the_schema_accepts(raw: dict[str, Any]) -> None:
    schema_accepts = VALIDATOR.is_valid(raw)
    try:
        parse(raw)
    except InputValidationError as error:
        assert error.field and "\n" not in str(error).replace("\\n", "")
        if schema_accepts:
            assert any(words in error.message for words in SEMANTIC), (raw, str(error))
    else:
        assert schema_accepts, raw


def _schema_fields() -> dict[str, dict[str, Any]]:
    """Every input field two levels deep (`csv.header`), as the format branches define it."""

    def resolved(node: dict[str, Any]) -> list[dict[str, Any]]:
        # A field's object form(s): a $ref among anyOf, or every $ref of a oneOf (graph.model's forms).
        for option in node.get("anyOf", [node]):
            if "$ref" in option:
                return [dict(SCHEMA["$defs"][option["$ref"].rsplit("/", 1)[1]])]
            if "oneOf" in option:
                return [form for choice in option["oneOf"] for form in resolved(choice)]
        return [node]

    fields: dict[str, dict[str, Any]] = {}
    for branch in ("CsvInput", "JsonlInput", "RdfInput", "OpencypherInput", "DynamoDbJsonInput"):
        for name, node in SCHEMA["$defs"][branch]["properties"].items():
            fields.setdefault(name, node)
            for form in resolved(node):
                for member, inner in form.get("properties", {}).items():
                    fields.setdefault(f"{name}.{member}", inner)
    return fields


def test_the_input_reference_lists_every_field_with_the_schemas_default() -> None:
    page = (ROOT / "docs" / "INPUT.md").read_text(encoding="utf-8")
    table = page.split("# Input reference (version 1)", 1)[1].split("\n\n| field |", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `([\w.]+)` \| (.*?) \|", table, flags=re.MULTILINE))
    fields = _schema_fields()
    assert set(rows) == set(fields), (sorted(set(fields) - set(rows)), sorted(set(rows) - set(fields)))
    for name, cell in rows.items():
        literal = re.fullmatch(r"`(.+)`", cell)
        if literal and "default" in fields[name]:
            default = fields[name]["default"]
            shown = literal.group(1)
            assert (shown if isinstance(default, str) else json.loads(shown)) == default, (name, cell)
