"""Composition root: the only place that reads context and os.environ; builds one MaploadStage."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from stacks.bundling import RUNTIME_ROOT, UNZIPPED_LIMIT_BYTES, is_bundled, tree_size
from stacks.config import (
    EnvironmentConfig,
    MaploadConfigError,
    check_existing_table,
    check_reservations,
    environment_names,
    load_environment,
    load_pipeline,
    overrides_from_context,
)
from stacks.pipeline import PIPELINE_STACK_ID, PipelineStack
from stacks.stage import MaploadStage, stage_id

ROOT = Path(__file__).resolve().parent
DEFAULT_ENV = "dev"
# Which stacks' assets CDK bundles: the CLI sets it from the command (deploy/synth/diff: the
# stacks they select; list/destroy: none). Tests and the embedded run bundle nothing: an empty
# pattern list, in post-CLI context (the CLI refuses user context keys starting with `aws:`).
BUNDLING_STACKS = "aws:cdk:bundling-stacks"
SKIP_BUNDLING: dict[str, Any] = {BUNDLING_STACKS: []}


def cdk_json_context() -> dict[str, Any]:
    """The `context` block of cdk.json (what the CLI would pass), for in-process builds."""
    document = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))
    context = document.get("context", {})
    assert isinstance(context, dict)
    return context


def build_app(
    context: dict[str, Any] | None = None,
    *,
    bundle: bool = False,
    outdir: str | None = None,
) -> cdk.App:
    """Build the app for one environment.

    `context=None` means "as the CDK CLI runs me": the CLI supplies cdk.json plus `-c` values.
    A dict (tests, the embedded runner) is laid over cdk.json's context: `{"env": "dev"}` picks
    the environment and `{"mapload:<field>": value}` overrides one setting of it.

    The settings are read from that context as given, not from the app's: `cdk.App` drops every
    null from its context (nested ones too), and null is how cdk.json says a setting is not set
    (`"sort_key": null`: no sort key; `"worker_reserved_concurrency": null`: no reservation).
    """
    settings = cli_context() if context is None else {**cdk_json_context(), **context}
    app = cdk.App(
        # Under the CLI the app also reads CDK_CONTEXT_JSON itself; the same values either way.
        context=settings,
        outdir=outdir,
        post_cli_context=None if bundle else SKIP_BUNDLING,
    )
    block = settings.get("mapload")
    if _flag(settings.get("pipeline")):
        # `-c pipeline=true`: the promotion pipeline, holding every environment's stage.
        overrides = overrides_from_context(settings)
        environments = [load_environment(block, name, overrides) for name in environment_names(block)]
        check_reservations(environments, *cli_account_and_region())
        PipelineStack(
            app,
            PIPELINE_STACK_ID,
            pipeline_config=load_pipeline(block, [env.name for env in environments]),
            environments=environments,
        )
    else:
        name = str(settings.get("env", DEFAULT_ENV))
        config = load_environment(block, name, overrides_from_context(settings))
        # Lambda's quota is per account and region: the other environments of cdk.json count too
        # (so a bad setting in one of them fails this deploy too: the error names which).
        others = [_other_environment(block, other) for other in environment_names(block) if other != name]
        check_reservations([config, *others], *cli_account_and_region())
        check_existing_table(config, *cli_account_and_region())
        MaploadStage(app, stage_id(config.name), config=config)
    # cdk-nag 3.x is a policy-validation plugin: it runs on every synth and fails it on any
    # unacknowledged finding.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def cli_account_and_region() -> tuple[str | None, str | None]:
    """Where an environment without `account`/`region` deploys: the CLI's (CDK_DEFAULT_*: unset
    without credentials, in which case CDK leaves the stacks environment-agnostic)."""
    return os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")


def _other_environment(block: Any, name: str) -> EnvironmentConfig:
    """Another environment of cdk.json, read to sum reservations; its error says which it is."""
    try:
        return load_environment(block, name)
    except MaploadConfigError as error:
        raise error.during(f"while summing reservations per account: {name}") from None


def _flag(value: Any) -> bool:
    """A context switch: `-c pipeline=true` arrives as the string "true"."""
    return value is True or (isinstance(value, str) and value.strip().lower() in {"true", "1", "yes"})


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


def cli_context() -> dict[str, Any]:
    """The context as the CLI passed it to the app, nulls included: CDK_CONTEXT_JSON plus, when
    that is too big for the environment, the file CONTEXT_OVERFLOW_LOCATION_ENV names."""
    context: dict[str, Any] = {}
    overflow = os.environ.get("CONTEXT_OVERFLOW_LOCATION_ENV")
    if overflow and Path(overflow).is_file():
        context.update(json.loads(Path(overflow).read_text(encoding="utf-8")))
    context.update(json.loads(os.environ.get("CDK_CONTEXT_JSON") or "{}"))
    return context


def requested_bundling() -> list[str]:
    """The stacks the command bundles, as the CLI passed them to the app (before any override of
    the app's). Without the CLI: CDK's default, every stack."""
    requested = cli_context().get(BUNDLING_STACKS)
    return ["**"] if requested is None else [str(pattern) for pattern in requested]


def report_packages(app: cdk.App, requested: list[str]) -> bool:
    """Print each package's size; print the refusals and return True if there are any."""
    sizes, refusals = lambda_packages(app, requested)
    for line in [*sizes, *refusals]:
        print(line, file=sys.stderr)
    return bool(refusals)


def main() -> int:
    running_under_cli = "CDK_OUTDIR" in os.environ or "CDK_CONTEXT_JSON" in os.environ
    try:
        # The CLI decides what to bundle; `python app.py` alone bundles every stack, as `cdk synth`.
        built = build_app(None if running_under_cli else {}, bundle=True)
    except MaploadConfigError as error:
        # The message names the setting (e.g. mapload.pipeline.connection_arn); no traceback.
        print(f"mapload: cdk.json / -c setting: {error}", file=sys.stderr)
        return 2
    assembly = built.synth()
    if report_packages(built, requested_bundling()):
        return 2
    # Under the CLI, CDK leaves validation failures to the CLI, which only reports on the stacks
    # a command selected: a bare `cdk synth` selects none of the stage's stacks and passed.
    failures = validation_failures(assembly.directory)
    for failure in failures:
        print(f"[validation] {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
