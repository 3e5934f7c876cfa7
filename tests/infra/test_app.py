"""The composition root: one stage per environment, stack wiring, handlers, no bundling."""

from __future__ import annotations

import ast
import json

import pytest

from stacks.config import MaploadConfigError
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


def test_bundling_is_skipped_without_docker(dev: Synth) -> None:
    # A skipped bundle stages the entry directory as is (no pip install output beside it).
    # The runtime's asset; besides it only CDK's own prebuilt AwsCustomResource provider (Graph).
    assets = [p for p in dev.outdir.iterdir() if p.name.startswith("asset.") and (p / "handlers").is_dir()]
    assert len(assets) == 1
    assert (assets[0] / "handlers" / "plan.py").is_file()
    assert (assets[0] / "requirements.txt").is_file()
    assert not (assets[0] / "boto3").exists()


def test_build_app_refuses_bare_setting_names_and_unknown_environments() -> None:
    import app

    with pytest.raises(MaploadConfigError, match=r"mapload:retry_interval_seconds"):
        app.build_app({"env": "dev", "retry_interval_seconds": 1})
    with pytest.raises(MaploadConfigError, match=r"unknown environment 'qa'"):
        app.build_app({"env": "qa"})
