"""Small units in stacks/, runtime/, mapload/ and bench/: short functions, and one helper per repeated block
(ast scan, no synth)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.infra.support import ROOT

pytestmark = pytest.mark.infra

MAX_LINES = 60
# A longer function says why in its docstring, with these words.
REASON = "Kept whole:"
# Blocks built in one place only: the helper that builds them (file, constructor as written).
ONE_BUILDER = {
    "tasks.LambdaInvoke": "stacks/lambda_tasks.py",
    "cloudwatch.Alarm": "stacks/monitoring.py",
}


def python_files(*directories: str) -> list[Path]:
    return sorted(p for d in directories for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def stacks_files() -> list[Path]:
    return python_files("stacks")


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def long_functions(path: Path) -> list[str]:
    name = str(path.relative_to(ROOT))
    return [
        f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_LINES
        and REASON not in (ast.get_docstring(node) or "")
    ]


def calls(path: Path, constructor: str) -> list[int]:
    """Lines where `path` calls `constructor` (e.g. tasks.LambdaInvoke) as written."""
    return [
        node.lineno
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == constructor
    ]


def test_no_function_is_longer_than_60_lines_without_saying_why() -> None:
    files = python_files("stacks", "runtime", "mapload", "bench")
    assert len(files) > 50
    too_long = [line for path in files for line in long_functions(path)]
    assert not too_long, f"split them, or say in the docstring '{REASON} ...': {too_long}"


@pytest.mark.parametrize("constructor", sorted(ONE_BUILDER))
def test_a_repeated_block_is_built_by_one_helper(constructor: str) -> None:
    builder = ONE_BUILDER[constructor]
    found = {str(p.relative_to(ROOT)): lines for p in stacks_files() if (lines := calls(p, constructor))}
    assert found == {builder: found.get(builder, [])}, f"{constructor} outside {builder}: {found}"
    assert len(found[builder]) == 1, f"{constructor} more than once in {builder}: {found[builder]}"
