"""The input has one definition: the models of logic/spec_model.py, which the runtime reads as JobSpec.

No public class of runtime/ is defined twice under one name (the input's models were once mirrored
by dataclasses of the same names), logic/spec.py defines no class of its own, and the published schema
is the one generated from the models.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest

from logic import spec, spec_model

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.runtime


def _classes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def test_no_public_class_name_is_defined_twice_in_the_runtime() -> None:
    names = Counter(
        name
        for path in (ROOT / "runtime").rglob("*.py")
        for name in _classes(path)
        if not name.startswith("_")  # a module's private helper is its own
    )
    assert [name for name, count in names.items() if count > 1] == []


def test_the_spec_module_defines_no_second_model() -> None:
    assert _classes(ROOT / "runtime" / "logic" / "spec.py") == []
    assert spec.JobSpec is spec_model.JobSpec


def test_the_published_schema_is_the_models_own() -> None:
    published = json.loads((ROOT / "schemas" / "input.schema.json").read_text(encoding="utf-8"))
    assert published == spec_model.json_schema()
