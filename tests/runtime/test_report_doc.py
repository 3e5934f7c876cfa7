"""docs/REPORT.md names every field of the report's schema (schemas/report.schema.json), and
names no field the schema lacks: the reference a user reads is the report's shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.runtime

ROOT = Path(__file__).resolve().parents[2]


def _schema_fields(node: dict[str, Any], prefix: str = "", depth: int = 2) -> set[str]:
    """The schema's property paths to `depth` levels (`records.read`, `graph.errors`, ...)."""
    found: set[str] = set()
    for name, sub in (node.get("properties") or {}).items():
        path = f"{prefix}{name}"
        found.add(path)
        if depth > 1 and isinstance(sub, dict):
            found |= _schema_fields(sub, f"{path}.", depth - 1)
    return found


def _doc_fields(text: str) -> set[str]:
    """The fields the first column of REPORT.md's field table names: `a.b` names a path; after it,
    `.c` or a bare `c` in the same cell is a sibling (`a.c`)."""
    table = text.split("| field | meaning |", 1)[1].split("\n\n", 1)[0]
    found: set[str] = set()
    for row in table.splitlines()[2:]:
        cell = row.split("|")[1]
        parent = ""
        for name in re.findall(r"`([^`]+)`", cell):
            if "." in name.strip("."):
                parent, _, _ = name.rpartition(".")
                found.add(name)
            elif name.startswith(".") or parent:
                found.add(f"{parent}.{name.lstrip('.')}" if parent else name)
            else:
                found.add(name)
        # a documented path's parents are named too (`records` by `records.read`)
        for name in list(found):
            while "." in name:
                name = name.rpartition(".")[0]
                found.add(name)
    return found


def test_report_md_names_every_field_of_the_report_schema_and_no_other() -> None:
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    documented = _doc_fields((ROOT / "docs" / "REPORT.md").read_text())
    fields = _schema_fields(schema)
    assert sorted(fields - documented) == [], "in the schema, not in docs/REPORT.md"
    assert sorted(documented - fields) == [], "in docs/REPORT.md, not in the schema"
