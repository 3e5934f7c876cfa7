"""The execution input: defaults, errors naming the field, round trip, agreement with the JSON Schema."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typed_support import TYPED_ATTRIBUTES

from logic.errors import InputValidationError
from logic.spec.checks import check_fields
from logic.spec.inputs import JobSpec
from logic.spec.parse import parse_s3_uri, parse_spec, parse_template, spec_to_json

pytestmark = pytest.mark.runtime

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "input.schema.json").read_text())
TABLE_KEY = {"pk": "S", "sk": "S"}

POSTCODES: dict[str, Any] = {
    "version": 1,
    "source": "s3://source-bucket/ukpostcodes.csv",
    "format": "csv",
    "csv": {"header": True, "delimiter": ",", "columns": None, "comment": None},
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {
            "latitude": {"field": "latitude", "type": "N"},
            "longitude": {"field": "longitude", "type": "N"},
            "label": "{postcode} ({latitude})",
        },
    },
    "shardSizeMiB": 64,
    "maxConcurrency": 100,
    "maxRejectedPercent": 1,
    "jobId": "postcodes-2026-11",
    "dryRun": False,
}
MINIMAL: dict[str, Any] = {
    "source": "s3://source-bucket/data.jsonl",
    "format": "jsonl",
    "dynamodb": {"key": {"pk": "ITEM#{id}", "sk": "V1"}, "attributes": "*"},
}


def changed(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `base` with the dotted `path` set to `value` (or removed when value is DELETE)."""
    out = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = out
    for name in parents:
        node = node[name]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return out


DELETE = object()


def parse(raw: Any, execution_name: str | None = "run-1") -> JobSpec:
    return parse_spec(raw, table_key=TABLE_KEY, execution_name=execution_name)


def test_the_readme_example_parses() -> None:
    spec = parse(POSTCODES)
    assert spec.bucket == "source-bucket"
    assert spec.key == "ukpostcodes.csv"
    assert not spec.is_prefix
    assert spec.job_id == "postcodes-2026-11"
    assert spec.shard_size_bytes == 64 * 1024 * 1024
    assert [k.name for k in spec.dynamodb.key_attributes] == ["pk", "sk"]
    assert list(spec.dynamodb.attributes) == ["latitude", "longitude", "label"]


def test_defaults_are_filled_in() -> None:
    spec = parse({**MINIMAL, "format": "csv", "source": "s3://source-bucket/in/"}, execution_name="exec-7")
    assert spec.csv is not None
    assert (spec.csv.header, spec.csv.delimiter, spec.csv.columns, spec.csv.comment) == (
        True,
        ",",
        None,
        None,
    )
    assert (spec.shard_size_mib, spec.max_concurrency, spec.max_rejected_percent) == (64, 100, 1)
    assert (spec.job_id, spec.dry_run, spec.version) == ("exec-7", False, 1)
    assert spec.is_prefix
    assert spec.dynamodb.copy_all


def test_jsonl_has_no_csv_options() -> None:
    assert parse(MINIMAL).csv is None


def test_fractional_shard_sizes_make_small_shards() -> None:
    assert parse({**MINIMAL, "shardSizeMiB": 1 / 1024}).shard_size_bytes == 1024
    assert parse({**MINIMAL, "shardSizeMiB": 1e-9}).shard_size_bytes == 1


def with_mode(mode: str, **dynamodb: Any) -> dict[str, Any]:
    """POSTCODES in write mode `mode`, its dynamodb section given the other fields too."""
    return changed(POSTCODES, "dynamodb", {**POSTCODES["dynamodb"], "writeMode": mode, **dynamodb})


VERSIONED = with_mode("newerWins", version="latitude")
TYPED = changed(
    POSTCODES,
    "dynamodb.attributes",
    {**TYPED_ATTRIBUTES, "codes": {**TYPED_ATTRIBUTES["codes"], "optional": True}},
)
UPDATING = changed(
    with_mode("update"),
    "dynamodb.attributes",
    {
        "tags": {"field": "tags", "type": "SS", "update": "add"},
        "first": {"field": "latitude", "type": "N", "update": "setIfAbsent"},
        "latitude": {"field": "latitude", "type": "N", "update": "set"},
        "seen": {"field": "latitude", "type": "N", "update": "add"},
    },
)
DELETING = changed(
    with_mode("delete"), "dynamodb", {"key": POSTCODES["dynamodb"]["key"], "writeMode": "delete"}
)


def test_write_modes_and_typed_attributes_parse() -> None:
    assert parse(POSTCODES).dynamodb.write_mode == "put"
    versioned = parse(VERSIONED).dynamodb
    assert (versioned.write_mode, versioned.version) == ("newerWins", "latitude")
    typed = parse(TYPED).dynamodb.attributes
    assert (typed["tags"].separator, typed["codes"].separator) == (";", "|")
    assert (typed["expires"].type, typed["expires"].from_) == ("N", "iso8601")
    updating = {name: a.update for name, a in parse(UPDATING).dynamodb.attributes.items()}
    assert updating == {"tags": "add", "first": "setIfAbsent", "latitude": "set", "seen": "add"}
    assert parse(DELETING).dynamodb.attributes == {}


def test_a_whole_number_written_as_float_is_an_integer() -> None:
    assert parse({**MINIMAL, "maxConcurrency": 8.0}).max_concurrency == 8


@pytest.mark.parametrize(
    "raw",
    [
        POSTCODES,
        MINIMAL,
        VERSIONED,
        TYPED,
        UPDATING,
        DELETING,
        changed(
            POSTCODES,
            "csv",
            {"header": False, "columns": ["postcode", "latitude", "longitude"], "comment": "#"},
        ),
    ],
)
def test_spec_to_json_round_trips(raw: dict[str, Any]) -> None:
    spec = parse(raw)
    normalized = spec_to_json(spec)
    assert parse_spec(normalized, table_key=TABLE_KEY) == spec
    assert json.loads(json.dumps(normalized)) == normalized
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(normalized)


def test_the_normalized_form_is_explicit() -> None:
    normalized = spec_to_json(parse(POSTCODES))
    assert normalized["dynamodb"]["attributes"]["latitude"] == {
        "field": "latitude",
        "type": "N",
        "optional": False,
    }
    assert normalized["csv"] == {
        "header": True,
        "delimiter": ",",
        "columns": None,
        "comment": None,
        "maxRecordBytes": 1024 * 1024,
    }


# (input, field path named by the error, words the message contains)
BAD_INPUTS: list[tuple[Any, str, str]] = [
    (with_mode("overwrite"), "dynamodb.writeMode", "putIfAbsent, newerWins, update, delete"),
    (with_mode("newerWins"), "dynamodb.version", "required when writeMode is newerWins"),
    (with_mode("put", version="latitude"), "dynamodb.version", "only allowed when writeMode is newerWins"),
    (with_mode("newerWins", version=""), "dynamodb.version", "non-empty"),
    (with_mode("newerWins", version="label"), "dynamodb.version", "not a mapped attribute of type N"),
    (with_mode("newerWins", version="nope"), "dynamodb.version", "not a mapped attribute of type N"),
    (
        changed(VERSIONED, "dynamodb.attributes.latitude.optional", True),
        "dynamodb.version",
        "not a mapped attribute of type N",
    ),
    (with_mode("delete"), "dynamodb.attributes", "not allowed when writeMode is delete"),
    (
        changed(with_mode("delete"), "dynamodb.attributes", {}),
        "dynamodb.attributes",
        "not allowed when writeMode is delete",
    ),
    (
        changed(POSTCODES, "dynamodb.attributes.latitude.update", "set"),
        "dynamodb.attributes.latitude.update",
        "only allowed when writeMode is update",
    ),
    (
        changed(
            UPDATING, "dynamodb.attributes.latitude", {"field": "latitude", "type": "S", "update": "add"}
        ),
        "dynamodb.attributes.latitude.update",
        "add is only for numbers (N) and sets",
    ),
    (
        changed(UPDATING, "dynamodb.attributes.latitude.update", "increment"),
        "dynamodb.attributes.latitude.update",
        "set, add, setIfAbsent",
    ),
    (
        changed(TYPED, "dynamodb.attributes.tags.separator", ""),
        "dynamodb.attributes.tags.separator",
        "non-empty",
    ),
    (
        changed(TYPED, "dynamodb.attributes.data.separator", ","),
        "dynamodb.attributes.data.separator",
        "only for sets",
    ),
    (
        changed(TYPED, "dynamodb.attributes.tags.from", "iso8601"),
        "dynamodb.attributes.tags.from",
        "only for type N",
    ),
    (
        changed(TYPED, "dynamodb.attributes.expires.from", "unix"),
        "dynamodb.attributes.expires.from",
        "iso8601",
    ),
    (changed(TYPED, "dynamodb.attributes.map.type", "MAP"), "dynamodb.attributes.map.type", "NULL, B, SS"),
    (
        changed(TYPED, "dynamodb.attributes.tags.separator", None),
        "dynamodb.attributes.tags.separator",
        "null",
    ),
    ([1, 2], "$", "JSON object"),
    (changed(POSTCODES, "shardSize", 3), "shardSize", "did you mean 'shardSizeMiB'?"),
    (changed(POSTCODES, "version", 2), "version", "unsupported version"),
    (changed(POSTCODES, "version", "1"), "version", "unsupported version"),
    (changed(POSTCODES, "source", DELETE), "source", "required"),
    (changed(POSTCODES, "source", "https://bucket/key"), "source", "s3://"),
    (changed(POSTCODES, "source", "s3://Bad_Bucket/key"), "source", "bucket name"),
    (changed(POSTCODES, "source", 7), "source", "string"),
    (changed(POSTCODES, "format", DELETE), "format", "required"),
    (changed(POSTCODES, "format", "xml"), "format", "csv, jsonl"),
    (changed(POSTCODES, "format", "turtle"), "format", "csv, jsonl, nquads, ntriples"),
    (changed(POSTCODES, "format", "jsonl"), "csv", "only allowed when format is 'csv'"),
    (changed(POSTCODES, "csv", "yes"), "csv", "object"),
    (changed(POSTCODES, "csv.headers", True), "csv.headers", "did you mean 'header'?"),
    (changed(POSTCODES, "csv.header", "true"), "csv.header", "true or false"),
    (changed(POSTCODES, "csv.delimiter", ";;"), "csv.delimiter", "one character"),
    (changed(POSTCODES, "csv.delimiter", ""), "csv.delimiter", "one character"),
    (changed(POSTCODES, "csv.delimiter", '"'), "csv.delimiter", "cannot be a delimiter"),
    (changed(POSTCODES, "csv.delimiter", "\n"), "csv.delimiter", "cannot be a delimiter"),
    (changed(POSTCODES, "csv.comment", ""), "csv.comment", "non-empty"),
    (changed(POSTCODES, "csv.columns", ["a", "b"]), "csv.columns", "only allowed when csv.header is false"),
    (changed(POSTCODES, "csv.header", False), "csv.columns", "required when csv.header is false"),
    (changed(changed(POSTCODES, "csv.header", False), "csv.columns", "a,b"), "csv.columns", "list"),
    (changed(changed(POSTCODES, "csv.header", False), "csv.columns", []), "csv.columns", "at least one"),
    (
        changed(changed(POSTCODES, "csv.header", False), "csv.columns", ["a", ""]),
        "csv.columns[1]",
        "non-empty",
    ),
    (
        changed(changed(POSTCODES, "csv.header", False), "csv.columns", ["a", "a"]),
        "csv.columns[1]",
        "duplicate",
    ),
    (
        changed(changed(POSTCODES, "csv.header", False), "csv.columns", ["postcode", "lat", "longitude"]),
        "dynamodb.attributes.latitude.field",
        "not a column",
    ),
    (changed(POSTCODES, "dynamodb", DELETE), "dynamodb", "required"),
    (changed(POSTCODES, "dynamodb", []), "dynamodb", "object"),
    (changed(POSTCODES, "dynamodb.tableName", "x"), "dynamodb.tableName", "unknown field"),
    (changed(POSTCODES, "dynamodb.table", "x"), "dynamodb.table", "not a DynamoDB table name"),
    (changed(POSTCODES, "dynamodb.key", DELETE), "dynamodb.key", "pk (S), sk (S)"),
    (changed(POSTCODES, "dynamodb.key.sk", DELETE), "dynamodb.key.sk", "missing"),
    (changed(POSTCODES, "dynamodb.key.sort", "X"), "dynamodb.key.sort", "not a key attribute"),
    (changed(POSTCODES, "dynamodb.key.pk", ""), "dynamodb.key.pk", "must not be empty"),
    (changed(POSTCODES, "dynamodb.key.pk", 5), "dynamodb.key.pk", "template string"),
    (changed(POSTCODES, "dynamodb.key.pk", "P#{postcode"), "dynamodb.key.pk", "unclosed '{'"),
    (changed(POSTCODES, "dynamodb.key.pk", "P#postcode}"), "dynamodb.key.pk", "unmatched '}'"),
    (changed(POSTCODES, "dynamodb.key.sk", "{}"), "dynamodb.key.sk", "empty field name"),
    (changed(POSTCODES, "dynamodb.attributes", "all"), "dynamodb.attributes", '"*"'),
    (changed(POSTCODES, "dynamodb.attributes.pk", "x"), "dynamodb.attributes.pk", "key attribute"),
    (changed(POSTCODES, "dynamodb.attributes.label", "{a}}"), "dynamodb.attributes.label", "unmatched '}'"),
    (
        changed(POSTCODES, "dynamodb.attributes.latitude", 5),
        "dynamodb.attributes.latitude",
        "template string",
    ),
    (
        changed(POSTCODES, "dynamodb.attributes.latitude.type", "NUMBER"),
        "dynamodb.attributes.latitude.type",
        "S, N, BOOL",
    ),
    (
        changed(POSTCODES, "dynamodb.attributes.latitude.optinal", True),
        "dynamodb.attributes.latitude.optinal",
        "did you mean 'optional'?",
    ),
    (
        changed(POSTCODES, "dynamodb.attributes.latitude.field", DELETE),
        "dynamodb.attributes.latitude.field",
        "required",
    ),
    (
        changed(POSTCODES, "dynamodb.attributes.latitude.optional", "no"),
        "dynamodb.attributes.latitude.optional",
        "true or false",
    ),
    (changed(POSTCODES, "shardSizeMiB", 0), "shardSizeMiB", "more than 0"),
    (changed(POSTCODES, "shardSizeMiB", 10241), "shardSizeMiB", "at most 10240"),
    (changed(POSTCODES, "shardSizeMiB", "64"), "shardSizeMiB", "number"),
    (changed(POSTCODES, "shardSizeMiB", True), "shardSizeMiB", "number"),
    (changed(POSTCODES, "maxConcurrency", 0), "maxConcurrency", "at least 1"),
    (changed(POSTCODES, "maxConcurrency", 10001), "maxConcurrency", "at most 10000"),
    (changed(POSTCODES, "maxConcurrency", 2.5), "maxConcurrency", "whole number"),
    (changed(POSTCODES, "maxRejectedPercent", -1), "maxRejectedPercent", "at least 0"),
    (changed(POSTCODES, "maxRejectedPercent", 101), "maxRejectedPercent", "at most 100"),
    (changed(POSTCODES, "jobId", "has space"), "jobId", "letters, digits"),
    (changed(POSTCODES, "jobId", "x" * 81), "jobId", "1-80"),
    (changed(POSTCODES, "jobId", None), "jobId", "letters, digits"),
    (changed(POSTCODES, "dryRun", "false"), "dryRun", "true or false"),
]


@pytest.mark.parametrize(
    ("raw", "field", "words"), BAD_INPUTS, ids=[f"{i}-{f}" for i, (_, f, _w) in enumerate(BAD_INPUTS)]
)
def test_errors_name_the_field(raw: Any, field: str, words: str) -> None:
    with pytest.raises(InputValidationError) as caught:
        parse(raw)
    assert caught.value.field == field
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"{field}: ")


def test_a_missing_job_id_without_execution_name_is_an_error() -> None:
    with pytest.raises(InputValidationError) as caught:
        parse(changed(POSTCODES, "jobId", DELETE), execution_name=None)
    assert caught.value.field == "jobId"


def test_an_execution_name_that_is_no_job_id_is_an_error() -> None:
    with pytest.raises(InputValidationError, match="execution name 'bad name'"):
        parse(changed(POSTCODES, "jobId", DELETE), execution_name="bad name")


def test_unknown_field_without_a_close_match_lists_the_allowed_ones() -> None:
    with pytest.raises(InputValidationError, match="allowed: version, source"):
        parse({**POSTCODES, "zzz": 1})


def test_a_bad_table_key_is_a_deployment_error() -> None:
    with pytest.raises(ValueError, match="table_key"):
        parse_spec(POSTCODES, table_key={"pk": "X"})


def test_number_keys_and_single_keys() -> None:
    spec = parse_spec(
        {**MINIMAL, "dynamodb": {"key": {"id": "{id}"}, "attributes": {}}},
        table_key={"id": "N"},
        execution_name="r",
    )
    assert [(k.name, k.type) for k in spec.dynamodb.key_attributes] == [("id", "N")]


def test_input_validation_error_survives_pickling() -> None:
    error = InputValidationError("dynamodb.key.sk", "missing")
    again = pickle.loads(pickle.dumps(error))
    assert (again.field, str(again)) == ("dynamodb.key.sk", "dynamodb.key.sk: missing")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/key.csv", ("bucket", "key.csv")),
        ("s3://bucket/dir/sub/", ("bucket", "dir/sub/")),
        ("s3://bucket/", ("bucket", "")),
        ("s3://bucket", ("bucket", "")),
        ("s3://my.bucket-1/a b/c", ("my.bucket-1", "a b/c")),
    ],
)
def test_parse_s3_uri(uri: str, expected: tuple[str, str]) -> None:
    assert parse_s3_uri(uri) == expected


@pytest.mark.parametrize(
    "uri", ["bucket/key", "s3:/bucket/key", "s3://ab/key", "s3://-bucket/key", "s3://UPPER/key"]
)
def test_parse_s3_uri_rejects(uri: str) -> None:
    with pytest.raises(InputValidationError) as caught:
        parse_s3_uri(uri)
    assert caught.value.field == "source"


@pytest.mark.parametrize(
    ("text", "literals", "fields"),
    [
        ("LOCATION", ("LOCATION",), ()),
        ("{id}", ("", ""), ("id",)),
        ("P#{a}#{b}", ("P#", "#", ""), ("a", "b")),
        ("{{literal}}", ("{literal}",), ()),
        ("{{{a}}}", ("{", "}"), ("a",)),
        ("{post code}", ("", ""), ("post code",)),
    ],
)
def test_templates(text: str, literals: tuple[str, ...], fields: tuple[str, ...]) -> None:
    template = parse_template(text, "t")
    assert (template.literals, template.fields) == (literals, fields)


def test_check_fields_against_a_header() -> None:
    spec = parse(POSTCODES)
    check_fields(spec, ["postcode", "latitude", "longitude", "extra"])
    with pytest.raises(InputValidationError) as caught:
        check_fields(spec, ["Postcode", "latitude", "longitude"])
    assert caught.value.field == "dynamodb.key.pk"
    assert "did you mean 'Postcode'?" in str(caught.value)


# The JSON Schema documents the input: it must accept and reject what parse_spec does.
SCHEMA_GOOD: list[dict[str, Any]] = [
    POSTCODES,
    VERSIONED,
    TYPED,
    UPDATING,
    DELETING,
    with_mode("putIfAbsent"),
    changed(with_mode("update"), "dynamodb.attributes", "*"),
    MINIMAL,
    changed(POSTCODES, "csv", {"header": False, "columns": ["postcode", "latitude", "longitude"]}),
    changed(POSTCODES, "csv", {"delimiter": "\t", "comment": "//"}),
    changed(POSTCODES, "csv", DELETE),
    changed(POSTCODES, "version", DELETE),
    changed(POSTCODES, "shardSizeMiB", 0.001),
    changed(POSTCODES, "maxConcurrency", 10000),
    changed(POSTCODES, "maxRejectedPercent", 0),
    changed(POSTCODES, "dryRun", True),
    changed(POSTCODES, "source", "s3://source-bucket/"),
    changed(POSTCODES, "source", "s3://source-bucket"),
    changed(POSTCODES, "dynamodb.key.sk", "{{braces}}#{latitude}"),
    changed(POSTCODES, "dynamodb.attributes", {}),
    changed(POSTCODES, "dynamodb.attributes", DELETE),
    changed(POSTCODES, "dynamodb.attributes.flag", {"field": "latitude", "type": "BOOL", "optional": True}),
    changed(POSTCODES, "dynamodb.attributes.copy", {"field": "postcode"}),
    changed(POSTCODES, "dynamodb.attributes.empty", ""),
]
# What only parse_spec can judge: the deployment's table key, and columns named by the spec.
SCHEMA_CANNOT_JUDGE = {
    ("dynamodb.key.sk", "missing"),
    ("dynamodb.key.sort", "not a key attribute"),
    ("dynamodb.attributes.pk", "key attribute"),
    ("dynamodb.attributes.latitude.field", "not a column"),
    ("dynamodb.version", "not a mapped attribute of type N"),
}


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("raw", SCHEMA_GOOD)
def test_schema_and_parse_spec_accept_the_same_inputs(raw: dict[str, Any]) -> None:
    parse(raw)
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(raw)) == []


@pytest.mark.parametrize(("raw", "field", "words"), BAD_INPUTS)
def test_schema_and_parse_spec_reject_the_same_inputs(raw: Any, field: str, words: str) -> None:
    with pytest.raises(InputValidationError):
        parse(raw)
    schema_valid = jsonschema.Draft202012Validator(SCHEMA).is_valid(raw)
    if (field, words) in SCHEMA_CANNOT_JUDGE:
        assert schema_valid, "the schema now judges this case: remove it from SCHEMA_CANNOT_JUDGE"
    else:
        assert not schema_valid, f"the schema accepts an input parse_spec rejects at {field}"


def test_without_attributes_items_hold_the_key_alone() -> None:
    spec = parse(changed(POSTCODES, "dynamodb.attributes", DELETE))
    assert (spec.dynamodb.attributes, spec.dynamodb.copy_all) == ({}, False)
    assert spec_to_json(spec)["dynamodb"]["attributes"] == {}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": None}, "format: must not be null: one of csv, jsonl, nquads, ntriples"),
        ({"shardSizeMiB": 0}, "shardSizeMiB: must be more than 0, got 0"),
        ({"maxConcurrency": 10**400}, "maxConcurrency: must be at most 10000, got 1000000"),
        ({"csv": []}, 'csv: must be an object like {"header": true, "delimiter": ","}, got a list'),
        ({"format": "x" * 200}, "format: 'xxxxxxxx"),
    ],
)
def test_messages_say_null_bounds_as_written_and_cut_long_values(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputValidationError) as refused:
        parse({**POSTCODES, **change})
    text = str(refused.value)
    assert text.startswith(message), text
    assert len(text) < 200, text  # a 400-digit number or a 200-character format is cut
