"""The composition root: one stage per environment, stack wiring, handlers, what is bundled."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import aws_cdk as cdk
import pytest

from stacks import assembly_checks
from stacks.settings import MaploadConfigError
from tests.infra.support import ROOT, Synth, resources

pytestmark = pytest.mark.infra


def test_stage_and_stack_names(dev: Synth, prod: Synth) -> None:
    assert dev.stage.node.id == "Mapload-dev"
    assert dev.stage.data.stack_name == "Mapload-dev-Data"
    assert dev.stage.loader.stack_name == "Mapload-dev-Loader"
    assert prod.stage.data.stack_name == "Mapload-prod-Data"


def test_loader_is_deployed_after_data(dev: Synth) -> None:
    manifest = json.loads((dev.outdir / "assembly-Mapload-dev" / "manifest.json").read_text())
    artifacts = manifest["artifacts"]
    loader = next(a for a in artifacts.values() if a.get("displayName") == "Mapload-dev/Loader")
    data_id = next(k for k, a in artifacts.items() if a.get("displayName") == "Mapload-dev/Data")
    assert data_id in loader["dependencies"]


def test_every_handler_string_names_a_lambda_handler_in_runtime(dev: Synth) -> None:
    for logical, function in resources(dev.loader_json, "AWS::Lambda::Function").items():
        module, _, attribute = function["Properties"]["Handler"].rpartition(".")
        path = ROOT / "runtime" / (module.replace(".", "/") + ".py")
        assert path.is_file(), f"{logical}: {path} missing"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert attribute in defined, f"{logical}: {path.name} defines no {attribute}"


def test_tests_skip_bundling_and_stage_runtime_as_is(dev: Synth) -> None:
    # The tests (and the embedded run) bundle nothing: the function code is runtime/ itself.
    assert not [p for p in dev.outdir.glob("asset.*") if (p / "handlers").exists()]
    stagings = [c for c in dev.app.node.find_all() if isinstance(c, cdk.AssetStaging)]
    runtime = [c for c in stagings if Path(c.source_path) == ROOT / "runtime"]
    assert len(runtime) == 2  # one asset per package (stacks/bundling.py PACKAGES), each shared
    assert {Path(r.absolute_staged_path) for r in runtime} == {ROOT / "runtime"}


def test_an_unbundled_package_in_a_stack_the_command_deploys_is_refused(dev: Synth) -> None:
    # What the CLI asks for on `cdk deploy 'Mapload-dev/*'` (and synth, diff): bundle the selection.
    for requested in (["**"], ["Mapload-dev/*"], ["Mapload-dev/Loader"]):
        sizes, refusals = assembly_checks.lambda_packages(dev.app, requested)
        assert not sizes
        assert len(refusals) == 1, refusals
        assert "\n" not in refusals[0]
        assert refusals[0].startswith("mapload: refusing to synthesize Mapload-dev/Loader for deployment")
        assert "npx cdk deploy 'Mapload-dev/Loader'" in refusals[0]
    # `cdk list` / `cdk destroy` bundle nothing, and a command selecting other stacks deploys none of it.
    for requested in ([], ["Mapload-dev/Data"], ["Mapload-prod/*"], ["Mapload-dev"]):
        assert assembly_checks.lambda_packages(dev.app, requested) == ([], []), requested


def test_synth_fails_with_one_line_when_a_deployed_package_is_unbundled(
    dev: Synth, capsys: pytest.CaptureFixture[str]
) -> None:
    # main() exits 2 when this is True; the one line names the stack and what to run.
    assert assembly_checks.report_packages(dev.app, ["**"]) is True
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("mapload: refusing to synthesize Mapload-dev/Loader")
    assert assembly_checks.report_packages(dev.app, []) is False
    assert capsys.readouterr().err == ""


def test_a_cli_synth_that_skipped_bundling_of_a_deployed_stack_fails_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import app

    # As `cdk deploy 'Mapload-dev/*'` runs the app (its context in CDK_CONTEXT_JSON), with the
    # app overriding the CLI's choice as it used to (bundling skipped for every stack).
    context = {**app.cdk_json_context(), "env": "dev", app.BUNDLING_STACKS: ["Mapload-dev/*"]}
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps(context))
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path))
    build = app.build_app
    # (The jsii runtime started before this test set CDK_CONTEXT_JSON: the context goes in directly.)
    monkeypatch.setattr(app, "build_app", lambda *args, **kwargs: build(context, outdir=str(tmp_path)))
    assert app.requested_bundling() == ["Mapload-dev/*"]
    assert app.main() == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("mapload: refusing to synthesize Mapload-dev/Loader for deployment")


def test_build_app_refuses_bare_setting_names_and_unknown_environments() -> None:
    import app

    with pytest.raises(MaploadConfigError, match=r"mapload:retry_interval_seconds"):
        app.build_app({"env": "dev", "retry_interval_seconds": 1})
    with pytest.raises(MaploadConfigError, match=r"unknown environment 'qa'"):
        app.build_app({"env": "qa"})
