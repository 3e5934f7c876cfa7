"""Write schemas/config.schema.json from the settings model (stacks/config.py, made of each unit's
stacks/*_settings.py), and docs/SETTINGS.md's tables from that schema.

`python scripts/config_schema.py` writes both; `--check` exits 1 when either checked-in file differs
(tests/infra/test_config.py fails then too). Only the tables between the `generated` markers of
docs/SETTINGS.md are written; the prose around them is the page's own.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "config.schema.json"
SETTINGS = ROOT / "docs" / "SETTINGS.md"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.config import ENVIRONMENT_DEFAULTS, json_schema  # noqa: E402

# Each table sits between these lines: <!-- generated: NAME ... --> and <!-- end generated: NAME -->.
_TABLES = {"environment": "EnvironmentConfig", "pipeline": "PipelineConfig"}
_BEGIN = "<!-- generated: {name} (make schemas, from schemas/config.schema.json) -->"
_END = "<!-- end generated: {name} -->"


def render_schema() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def _value(value: Any) -> str:
    """A default as the table shows it: numbers as they are, anything else as JSON in backticks."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return json.dumps(value)
    return f"`{value}`" if isinstance(value, str) else f"`{json.dumps(value)}`"


def _default(name: str, field: Mapping[str, Any], per_environment: Mapping[str, Mapping[str, Any]]) -> str:
    if "default" not in field:
        return "required"
    cell = _value(field["default"])
    by_value: dict[str, list[str]] = {}
    for env, values in per_environment.items():
        if name in values:
            by_value.setdefault(_value(values[name]), []).append(env)
    own = "; ".join(f"{', '.join(envs)}: {value}" for value, envs in by_value.items())
    return f"{cell} ({own})" if own else cell


def render_table(schema: Mapping[str, Any], model: str) -> str:
    fields = schema["$defs"][model]["properties"]
    per_environment = ENVIRONMENT_DEFAULTS if model == "EnvironmentConfig" else {}
    rows = ["| field | default | meaning |", "|---|---|---|"]
    for name, field in fields.items():
        rows.append(f"| `{name}` | {_default(name, field, per_environment)} | {field['description']} |")
    return "\n".join(rows)


def render_settings(page: str, schema: Mapping[str, Any]) -> str:
    """The page with each generated table replaced by one rendered from `schema`."""
    for name, model in _TABLES.items():
        begin, end = _BEGIN.format(name=name), _END.format(name=name)
        pattern = re.compile(rf"{re.escape(begin)}\n.*?{re.escape(end)}", re.DOTALL)
        found = pattern.search(page)
        if found is None:
            raise SystemExit(f"{SETTINGS.relative_to(ROOT)} has no `{begin}` ... `{end}` block")
        # A blank line ends the table before the closing marker (Markdown would run them together).
        table = f"{begin}\n{render_table(schema, model)}\n\n{end}"
        start, stop = found.span()
        page = page[:start] + table + page[stop:]
    return page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when a checked-in file is stale")
    args = parser.parse_args()
    schema_text = render_schema()
    page = SETTINGS.read_text(encoding="utf-8")
    settings_text = render_settings(page, json.loads(schema_text))
    if args.check:
        stale = [
            str(path.relative_to(ROOT))
            for path, text in ((SCHEMA, schema_text), (SETTINGS, settings_text))
            if not path.exists() or path.read_text(encoding="utf-8") != text
        ]
        for path in stale:
            print(f"{path} is stale: run `make schemas`", file=sys.stderr)
        return 1 if stale else 0
    SCHEMA.write_text(schema_text, encoding="utf-8")
    SETTINGS.write_text(settings_text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
