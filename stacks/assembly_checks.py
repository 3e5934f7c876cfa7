"""What a synthesized app is checked for before it is deployed: its Lambda packages, its validation report."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import aws_cdk as cdk

from stacks.bundling import RUNTIME_ROOT, UNZIPPED_LIMIT_BYTES, is_bundled, tree_size

# Which stacks' assets CDK bundles: the CLI sets it from the command (deploy/synth/diff: the
# stacks they select; list/destroy: none). Tests and the embedded run bundle nothing: an empty
# pattern list, in post-CLI context (the CLI refuses user context keys starting with `aws:`).
BUNDLING_STACKS = "aws:cdk:bundling-stacks"


def validation_failures(assembly_directory: str) -> list[str]:
    """Violations a failed validation plugin (cdk-nag) wrote to the cloud assembly's report."""
    report_path = Path(assembly_directory) / "validation-report.json"
    if not report_path.exists():
        return []
    report = json.loads(report_path.read_text(encoding="utf-8"))
    return [
        f"{plugin.get('pluginName')}: {violation.get('ruleName')} at "
        + ", ".join(c.get("constructPath", "?") for c in violation.get("violatingConstructs", []))
        for plugin in report.get("pluginReports", [])
        if plugin.get("conclusion") == "failure"
        for violation in plugin.get("violations", [])
    ]


def _matches(path: str, pattern: str) -> bool:
    """CDK's stack pattern match (minimatch on the stack's path): `*` stays within one level."""
    regex = "".join(
        ".*" if part == "**" else "[^/]*" if part == "*" else re.escape(part)
        for part in re.split(r"(\*\*|\*)", pattern)
    )
    return re.fullmatch(regex, path) is not None


def lambda_packages(app: cdk.App, requested: list[str]) -> tuple[list[str], list[str]]:
    """Each Lambda package the assembly holds: (size lines, refusals).

    A stack the command bundles (its path matches `requested`, the CLI's bundling patterns) must
    hold a built package; an unbundled one is runtime/ itself, which Lambda could not import.
    """
    sizes: list[str] = []
    refusals: list[str] = []
    for construct in app.node.find_all():
        if not isinstance(construct, cdk.AssetStaging) or Path(construct.source_path) != RUNTIME_ROOT:
            continue
        stack = cdk.Stack.of(construct).node.path
        if is_bundled(construct.absolute_staged_path):
            size = tree_size(Path(construct.absolute_staged_path))
            sizes.append(
                f"mapload: {stack} Lambda package {Path(construct.absolute_staged_path).name}: "
                f"{size / 2**20:.1f} MiB unzipped (Lambda allows {UNZIPPED_LIMIT_BYTES // 2**20} MiB)"
            )
            if size > UNZIPPED_LIMIT_BYTES:
                refusals.append(
                    f"mapload: {stack}'s Lambda package {Path(construct.absolute_staged_path).name} is "
                    "over Lambda's unzipped limit"
                )
        elif any(_matches(stack, pattern) for pattern in requested) and not any(
            refusal.startswith(f"mapload: refusing to synthesize {stack} ") for refusal in refusals
        ):
            # One line per stack, however many of its packages (stacks/bundling.py PACKAGES) are unbundled.
            refusals.append(
                f"mapload: refusing to synthesize {stack} for deployment with an unbundled Lambda "
                "package (runtime/ without its dependencies): bundling was skipped for it; run "
                f"`npx cdk deploy '{stack}'` from the CLI without overriding {BUNDLING_STACKS}"
            )
    return sizes, refusals


def report_packages(app: cdk.App, requested: list[str]) -> bool:
    """Print each package's size; print the refusals and return True if there are any."""
    sizes, refusals = lambda_packages(app, requested)
    for line in [*sizes, *refusals]:
        print(line, file=sys.stderr)
    return bool(refusals)


def report_validation(assembly_directory: str) -> bool:
    """Print each validation failure the assembly's report holds; return True if there are any."""
    failures = validation_failures(assembly_directory)
    for failure in failures:
        print(f"[validation] {failure}", file=sys.stderr)
    return bool(failures)
