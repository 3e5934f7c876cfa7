"""Snapshot every synthesized template of the app's variants, and compare two snapshots.

A refactoring of stacks/ must not change what CloudFormation deploys (above all no logical id
of a stateful resource). Run `snapshot` before the change (e.g. from `git archive HEAD`
extracted elsewhere, with this tree's .venv), `snapshot` after it, then `compare`:

    .venv/bin/python scripts/template_snapshot.py snapshot /tmp/before
    .venv/bin/python scripts/template_snapshot.py snapshot /tmp/after
    .venv/bin/python scripts/template_snapshot.py compare /tmp/before /tmp/after

`compare` prints every difference; `aws:cdk:path` metadata (the construct path, which does not
reach CloudFormation) is reported apart from the rest and does not fail the comparison.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path.cwd()
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CDK_PATH = "aws:cdk:path"
# An asset's hash covers the files of its directory, __pycache__ included: two checkouts of the
# same commit can differ in it (and so the pipeline's publish ids that end in a hash of it).
# Compared as a placeholder.
ASSET_HASH = re.compile(r"\b[0-9a-f]{64}(:[0-9]{12}-[a-z0-9-]+-[0-9a-f]{8})?\b")


def variants() -> dict[str, dict[str, Any]]:
    """The contexts tests/infra synthesizes (the same dicts), plus staging and the pipeline."""
    from tests.infra import support
    from tests.infra.test_pipeline import PIPELINE_BLOCK, mapload_block

    cdk_json = json.loads((ROOT / "cdk.json").read_text())
    # As tests/infra/test_data_key.py's pipeline: smoke tests of environments with data keys.
    keyed = mapload_block(cdk_json, {**PIPELINE_BLOCK, "smoke_test_after": ["dev", "staging"]})
    keyed["environments"]["dev"]["data_key"] = support.DATA_KEY_ARN
    keyed["environments"]["staging"]["data_key"] = "create"
    return {
        "dev": support.DEV_CONTEXT,
        "staging": {"env": "staging"},
        "prod": {"env": "prod"},
        "variant": support.VARIANT_CONTEXT,
        "data_key_created": support.DATA_KEY_CREATED_CONTEXT,
        "data_key_imported": support.DATA_KEY_IMPORTED_CONTEXT,
        "pipeline": {"mapload": mapload_block(cdk_json), "pipeline": "true"},
        "pipeline_data_keys": {"mapload": keyed, "pipeline": "true"},
    }


def snapshot(target: Path, only: list[str]) -> None:
    import app as app_module

    for name, context in variants().items():
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory() as outdir:
            app_module.build_app(context, outdir=outdir).synth()
            for template in sorted(Path(outdir).rglob("*.template.json")):
                relative = template.relative_to(outdir)
                destination = target / name / str(relative).replace("/", "__")
                destination.parent.mkdir(parents=True, exist_ok=True)
                document = json.loads(ASSET_HASH.sub("<asset-hash>", template.read_text()))
                destination.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        print(f"snapshot: {name}", file=sys.stderr)


def _walk(before: Any, after: Any, where: str, out: list[str]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            if key not in after:
                out.append(f"{where}/{key}: removed")
            elif key not in before:
                out.append(f"{where}/{key}: added")
            else:
                _walk(before[key], after[key], f"{where}/{key}", out)
    elif before != after:
        out.append(f"{where}: {json.dumps(before)[:160]} -> {json.dumps(after)[:160]}")


def compare(before: Path, after: Path) -> int:
    substance: list[str] = []
    paths: list[str] = []
    names = {p.relative_to(before) for p in before.rglob("*.json")} | {
        p.relative_to(after) for p in after.rglob("*.json")
    }
    for name in sorted(names):
        if not (before / name).exists() or not (after / name).exists():
            substance.append(f"{name}: only in {'after' if (after / name).exists() else 'before'}")
            continue
        differences: list[str] = []
        _walk(
            json.loads((before / name).read_text()), json.loads((after / name).read_text()), "", differences
        )
        for line in differences:
            (paths if f"/Metadata/{CDK_PATH}" in line else substance).append(f"{name}{line}")
    for line in paths:
        print(f"metadata path: {line}")
    for line in substance:
        print(f"DIFFERS: {line}")
    print(f"{len(names)} templates; {len(substance)} differences in substance, {len(paths)} in {CDK_PATH}")
    return 1 if substance else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    take = commands.add_parser("snapshot")
    take.add_argument("directory", type=Path)
    take.add_argument("--only", nargs="*", default=[], help="variant names (default: all)")
    diff = commands.add_parser("compare")
    diff.add_argument("before", type=Path)
    diff.add_argument("after", type=Path)
    arguments = parser.parse_args()
    if arguments.command == "snapshot":
        snapshot(arguments.directory, arguments.only)
        return 0
    return compare(arguments.before, arguments.after)


if __name__ == "__main__":
    sys.exit(main())
