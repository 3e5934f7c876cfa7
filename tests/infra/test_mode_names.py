"""No code outside the input package compares a write mode by its name (ast scan): what a mode does
is its model's (logic/spec/dynamodb.py: batched, items per request, conditional, counters, engines,
estimate), so a new mode or engine is one model and one row of the writers' map, not a hunt."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.infra.support import ROOT

pytestmark = pytest.mark.infra

# The modes as writeMode spells them (logic/spec/dynamodb.py WRITE_MODES; spelled here too, so the
# scan does not depend on the code it scans).
MODE_NAMES = {"put", "putIfAbsent", "newerWins", "update", "delete", "sync"}
# Names that hold a mode's name, or the sets of names the modes were once sorted into (`mode`
# only as an attribute, `plan.mode`: a bare `mode` may be anything).
MODE_HOLDERS = {
    "write_mode",
    "PUT",
    "PUT_IF_ABSENT",
    "NEWER_WINS",
    "UPDATE",
    "DELETE",
    "MODES",
    "WRITE_MODES",
    "BATCHED",
    "CONDITIONAL",
}
INPUT_PACKAGE = ROOT / "runtime" / "logic" / "spec"


def _names_a_mode(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in MODE_NAMES
    if isinstance(node, ast.Name):
        return node.id in MODE_HOLDERS
    if isinstance(node, ast.Attribute):
        return node.attr in MODE_HOLDERS or node.attr == "mode"
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_mode(element) for element in node.elts)
    return False


def mode_comparisons(path: Path) -> list[str]:
    """`file:line` of each comparison (==, !=, in, not in, a match case) that names a write mode."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        compared = (
            (node.left, *node.comparators)
            if isinstance(node, ast.Compare)
            else (node.value,)
            if isinstance(node, ast.MatchValue)
            else ()
        )
        if any(_names_a_mode(side) for side in compared):
            found.append(f"{path.name}:{node.lineno}")
    return found


def python_files(*directories: str) -> list[Path]:
    return sorted(
        p
        for d in directories
        for p in (ROOT / d).rglob("*.py")
        if "__pycache__" not in p.parts and INPUT_PACKAGE not in p.parents
    )


def test_no_code_outside_the_input_package_compares_a_write_mode_by_name() -> None:
    files = python_files("runtime", "mapload")
    assert len(files) > 50 and not any(INPUT_PACKAGE in p.parents for p in files)
    found = [hit for path in files for hit in mode_comparisons(path)]
    assert not found, f"ask the mode's model (logic/spec/dynamodb.py) instead: {found}"


def test_the_scan_sees_a_mode_compared_by_name(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "a = target.write_mode == 'put'\n"
        "b = plan.mode in BATCHED\n"
        "c = mode != DELETE\n"
        "d = x in ('update', 'delete')\n"
        "match m:\n"
        "    case 'newerWins':\n"
        "        pass\n"
        "e = plan.mode.operation == 'DeleteItem'\n"  # what the mode does: fine
        "f = target.batched\n"
    )
    assert [hit.split(":")[1] for hit in mode_comparisons(sample)] == ["1", "2", "3", "4", "6"]
