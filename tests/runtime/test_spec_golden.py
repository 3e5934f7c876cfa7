"""Plan ids must not move: the normalized spec of every recorded input is byte-identical to its golden line.

The plan fingerprint (logic/planning.py plan_id) hashes the normalized spec that Plan hands the
Workers, so a re-run after an upgrade trusts the shards an earlier run recorded only while that
form is unchanged. golden/spec_inputs.jsonl holds the inputs (the examples, the README's specs and
the spec dicts tests/runtime passed to parse_spec, each with its table key and execution name);
golden/spec_normalized.jsonl holds, line for line, `json.dumps(normalized, sort_keys=True)` as the
loader produced it when they were recorded. Never regenerate the golden file to make this pass: a
change of the normalized form needs a plan-format version in the plan id instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logic.spec import parse_spec, spec_to_json

GOLDEN = Path(__file__).parent / "golden"

pytestmark = pytest.mark.runtime


def _lines(name: str) -> list[str]:
    return (GOLDEN / name).read_text(encoding="ascii").split("\n")[:-1]


def test_the_normalized_spec_of_every_recorded_input_is_byte_identical() -> None:
    inputs, golden = _lines("spec_inputs.jsonl"), _lines("spec_normalized.jsonl")
    assert len(inputs) == len(golden) > 600
    moved = []
    for number, (line, expected) in enumerate(zip(inputs, golden, strict=True), start=1):
        entry = json.loads(line)
        spec = parse_spec(entry["input"], table_key=entry["tableKey"], execution_name=entry["executionName"])
        if json.dumps(spec_to_json(spec), sort_keys=True) != expected:
            moved.append(number)
    assert not moved, f"normalized spec moved for input lines {moved[:20]} (of {len(moved)})"


def test_the_recorded_inputs_cover_every_format_and_write_mode() -> None:
    normalized = [json.loads(line) for line in _lines("spec_normalized.jsonl")]
    formats = {spec["format"] for spec in normalized}
    assert formats == {"csv", "jsonl", "nquads", "ntriples", "opencypher", "dynamodb-json"}
    modes = {spec["dynamodb"]["writeMode"] for spec in normalized if "dynamodb" in spec}
    assert modes == {"put", "putIfAbsent", "newerWins", "update", "delete"}
    assert any(spec.get("graph", {}).get("model") == "property" for spec in normalized)
