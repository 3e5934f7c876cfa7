"""dynamodb.engine: "lambda" (the default) or "bulkPutItems", with its performanceTier; refused in
one line, naming the field, where bulk put items cannot serve the job (logic/spec/dynamodb.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from logic.errors import InputValidationError
from logic.spec.dynamodb import BULK_PUT_ITEMS, ENGINES, LAMBDA, WRITE_MODE_TYPES
from logic.spec.parse import parse_spec, spec_to_json

pytestmark = pytest.mark.runtime

TABLE_KEY = {"pk": "S", "sk": "S"}
BASE: dict[str, Any] = {
    "source": "s3://source-bucket/ukpostcodes.csv",
    "format": "csv",
    "jobId": "bulk",
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {"latitude": {"field": "latitude", "type": "N"}},
        "engine": "bulkPutItems",
    },
}


def given(**dynamodb: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw["dynamodb"].update(dynamodb)
    return {k: v for k, v in raw.items()}


def refusal(raw: dict[str, Any]) -> InputValidationError:
    with pytest.raises(InputValidationError) as caught:
        parse_spec(raw, table_key=TABLE_KEY)
    assert "\n" not in str(caught.value)
    return caught.value


def test_the_engines_are_the_user_facing_names() -> None:
    assert ENGINES == (LAMBDA, BULK_PUT_ITEMS) == ("lambda", "bulkPutItems")


def test_lambda_is_the_default_and_leaves_the_normalized_form_as_it_was() -> None:
    raw = given()
    del raw["dynamodb"]["engine"]
    spec = parse_spec(raw, table_key=TABLE_KEY)
    assert spec.dynamodb is not None and spec.dynamodb.engine == "lambda"
    assert not spec.dynamodb.bulk
    assert "engine" not in spec_to_json(spec)["dynamodb"]  # a plan id of an older input is unchanged


def test_bulk_put_items_parses_with_its_tier() -> None:
    spec = parse_spec(given(performanceTier="ACCELERATED"), table_key=TABLE_KEY)
    assert spec.dynamodb is not None and spec.dynamodb.bulk
    assert spec.dynamodb.performance_tier == "ACCELERATED"
    again = parse_spec(spec_to_json(spec), table_key=TABLE_KEY)
    assert again == spec
    plain = parse_spec(given(), table_key=TABLE_KEY)
    assert plain.dynamodb is not None and plain.dynamodb.performance_tier == "STANDARD"


def test_only_put_may_use_bulk_put_items() -> None:
    assert [name for name, mode in WRITE_MODE_TYPES.items() if BULK_PUT_ITEMS in mode.engines] == ["put"]


@pytest.mark.parametrize(
    ("mode", "extra", "words"),
    [
        ("update", {}, "cannot update"),
        ("delete", {"attributes": None}, "cannot delete"),
        ("sync", {"dataset": "d"}, "only puts"),
        ("putIfAbsent", {}, "condition"),
        ("newerWins", {"version": "latitude"}, "condition"),
    ],
)
def test_a_write_mode_bulk_put_items_cannot_do_is_refused(
    mode: str, extra: dict[str, Any], words: str
) -> None:
    raw = given(writeMode=mode, **extra)
    if extra.get("attributes", 1) is None:
        del raw["dynamodb"]["attributes"]
    error = refusal(raw)
    assert error.field == "dynamodb.engine"
    assert words in error.message and f"writeMode {mode}" in error.message


def test_a_numeric_add_is_refused_as_an_update() -> None:
    raw = given(writeMode="update", attributes={"n": {"field": "latitude", "type": "N", "update": "add"}})
    assert refusal(raw).field == "dynamodb.engine"


def test_a_performance_tier_needs_bulk_put_items() -> None:
    raw = given(performanceTier="STANDARD")
    del raw["dynamodb"]["engine"]
    error = refusal(raw)
    assert error.field == "dynamodb.performanceTier"
    assert "bulkPutItems" in error.message


def test_an_unknown_tier_or_engine_is_refused() -> None:
    assert refusal(given(performanceTier="FAST")).field == "dynamodb.performanceTier"
    assert refusal(given(engine="glue")).field == "dynamodb.engine"


def test_a_graph_target_is_refused_with_bulk_put_items() -> None:
    raw = given()
    statement = {"subject": "http://example.org/{postcode}", "predicate": "http://example.org/p"}
    raw["graph"] = {"statements": [{**statement, "object": {"literal": "{postcode}"}}]}
    error = refusal(raw)
    assert error.field == "dynamodb.engine"
    assert "graph" in error.message
