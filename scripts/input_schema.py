"""Write schemas/input.schema.json from the input's pydantic models (runtime/logic/spec/).

`python scripts/input_schema.py` writes it; `--check` exits 1 when the checked-in file differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "input.schema.json"
sys.path.insert(0, str(ROOT / "runtime"))

from logic.spec.inputs import json_schema  # noqa: E402  (runtime/ is the Lambda code root)


def render() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when the checked-in schema is stale")
    args = parser.parse_args()
    if args.check:
        if SCHEMA.read_text() != render():
            print(f"{SCHEMA.relative_to(ROOT)} is stale: run `make schemas`", file=sys.stderr)
            return 1
        return 0
    SCHEMA.write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
