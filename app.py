"""Composition root: the only place that reads context and os.environ; builds one MaploadStage."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import cx_api
from cdk_nag import AwsSolutionsChecks

from stacks.assembly_checks import BUNDLING_STACKS, report_packages, report_validation
from stacks.config import EnvironmentConfig, environment_names, load_environment, overrides_from_context
from stacks.data_settings import check_existing_table
from stacks.idle_cost import idle_cost_line
from stacks.loader_settings import check_reservations
from stacks.pipeline import PIPELINE_STACK_ID, PipelineStack
from stacks.pipeline_settings import load_pipeline
from stacks.settings import MaploadConfigError
from stacks.stage import MaploadStage, stage_id
from stacks.stateful import DEPLOYED_CONTEXT, load_deployed, refusals

ROOT = Path(__file__).resolve().parent
DEFAULT_ENV = "dev"
# Tests and the embedded run bundle nothing (stacks/assembly_checks.py BUNDLING_STACKS).
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


def report_stateful(assembly: cx_api.CloudAssembly, context: dict[str, Any]) -> bool:
    """With `-c mapload-deployed=FILE` (make deploy: what CloudFormation holds now, from
    scripts/deployed_state.py), print a line for each deployed stateful resource the synthesized
    templates would replace or remove; True if there is one (stacks/stateful.py)."""
    path = context.get(DEPLOYED_CONTEXT)
    if not path:
        return False
    try:
        deployed = load_deployed(str(path))
    except ValueError as error:
        print(f"mapload: {error}", file=sys.stderr)
        return True
    synthesized = {stack.stack_name: dict(stack.template) for stack in assembly.stacks_recursively}
    lines = refusals(deployed, synthesized, str(context.get("env", DEFAULT_ENV)))
    for line in lines:
        print(line, file=sys.stderr)
    return bool(lines)


def report_idle_cost(assembly: cx_api.CloudAssembly) -> None:
    """Print what each environment synthesized costs a month idle (stacks/idle_cost.py)."""
    stages: dict[str, dict[str, Any]] = {}
    for stack in assembly.stacks_recursively:
        stage, _, _stack_id = stack.stack_name.rpartition("-")
        if stage.startswith(stage_id("")):
            stages.setdefault(stage, {})[stack.stack_name] = dict(stack.template)
    for stage, templates in sorted(stages.items()):
        print(idle_cost_line(stage, templates), file=sys.stderr)


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
    if report_stateful(assembly, cli_context() if running_under_cli else {}):
        return 2
    report_idle_cost(assembly)
    # Under the CLI, CDK leaves validation failures to the CLI, which only reports on the stacks
    # a command selected: a bare `cdk synth` selects none of the stage's stacks and passed.
    return 1 if report_validation(assembly.directory) else 0


if __name__ == "__main__":
    sys.exit(main())
