"""Settings changes that would replace or remove a deployed stateful resource (stacks/stateful.py):
each is synthesized before (as deployed: what scripts/deployed_state.py keeps of its templates)
and after, and synth refuses it in one line naming the setting to set back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from stacks.stateful import DEPLOYED_CONTEXT, refusals, stateful_resources
from tests.infra.support import DATA_KEY_ARN, Synth, synthesize

pytestmark = pytest.mark.infra

GRAPH = {"env": "dev", "mapload:graph_enabled": "true"}
CONTEXTS: dict[str, dict[str, Any]] = {
    "graph": GRAPH,
    "graph, another cap": {**GRAPH, "mapload:max_concurrency_cap": 10},
    "graph, data key created": {**GRAPH, "mapload:data_key": "create"},
    "graph, data key ARN": {**GRAPH, "mapload:data_key": DATA_KEY_ARN},
    "no graph": {"env": "dev", "mapload:graph_enabled": "false"},
    "no graph, new table key": {
        "env": "dev",
        "mapload:graph_enabled": "false",
        "mapload:partition_key": '{"name": "id", "type": "S"}',
    },
    "no graph, existing table": {
        "env": "dev",
        "mapload:graph_enabled": "false",
        "mapload:existing_table": "People",
    },
}


@pytest.fixture(scope="module")
def synths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synth]:
    return {
        name: synthesize(context, tmp_path_factory.mktemp(name.replace(" ", "_").replace(",", "")))
        for name, context in CONTEXTS.items()
    }


def templates(synth: Synth) -> dict[str, dict[str, Any]]:
    stage = synth.stage
    stacks = [stage.data, stage.loader, *([stage.graph] if stage.graph is not None else [])]
    return {stack.stack_name: dict(Template.from_stack(stack).to_json()) for stack in stacks}


def deployed(synth: Synth) -> dict[str, dict[str, dict[str, Any]]]:
    """What scripts/deployed_state.py keeps of the templates CloudFormation holds."""
    return {name: stateful_resources(template) for name, template in templates(synth).items()}


def refused(synths: dict[str, Synth], before: str, after: str) -> list[str]:
    return refusals(deployed(synths[before]), templates(synths[after]), "dev")


@pytest.mark.parametrize(
    ("before", "after"),
    [("graph", "graph"), ("graph", "graph, another cap"), ("no graph", "graph")],
)
def test_a_change_that_keeps_every_stateful_resource_passes(
    synths: dict[str, Synth], before: str, after: str
) -> None:
    assert refused(synths, before, after) == []


@pytest.mark.parametrize(
    ("before", "after", "kind", "setting"),
    [
        # The default changed under a deployed cluster (issue 44): it must stay.
        ("graph", "no graph", "AWS::Neptune::DBCluster", "set graph_enabled: true"),
        # Neptune's storage key cannot change: data_key set on a deployed cluster replaces it.
        ("graph", "graph, data key created", "AWS::Neptune::DBCluster", "set data_key: null"),
        ("graph, data key ARN", "graph", "AWS::Neptune::DBCluster", f'set data_key: "{DATA_KEY_ARN}"'),
        ("graph, data key created", "graph, data key ARN", "AWS::KMS::Key", 'set data_key: "create"'),
        (
            "no graph",
            "no graph, new table key",
            "AWS::DynamoDB::Table",
            'set partition_key: {"name": "pk", "type": "S"} and sort_key: {"name": "sk", "type": "S"}',
        ),
        ("no graph", "no graph, existing table", "AWS::DynamoDB::Table", "set existing_table: null"),
    ],
)
def test_a_change_that_would_lose_a_stateful_resource_is_refused_naming_the_setting(
    synths: dict[str, Synth], before: str, after: str, kind: str, setting: str
) -> None:
    lines = refused(synths, before, after)
    mine = [line for line in lines if kind in line]
    assert mine, lines
    for line in mine:
        assert "\n" not in line
        assert line.startswith("mapload: refusing to synthesize Mapload-dev-")
        assert f"{setting} in cdk.json's mapload.environments.dev" in line


def test_cdk_deploy_with_the_deployed_state_fails_at_synth_with_one_line(
    synths: dict[str, Synth],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """As `make deploy` runs it: a dev deployed with its cluster, cdk.json now saying no graph."""
    import app

    state = tmp_path / "deployed-dev.json"
    state.write_text(json.dumps({"stacks": deployed(synths["graph"])}))
    context = {
        **app.cdk_json_context(),
        "env": "dev",
        "mapload:graph_enabled": "false",
        app.BUNDLING_STACKS: [],
        DEPLOYED_CONTEXT: str(state),
    }
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps(context))
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "out"))
    build = app.build_app
    monkeypatch.setattr(
        app, "build_app", lambda *args, **kwargs: build(context, outdir=str(tmp_path / "out"))
    )
    assert app.main() == 2
    refusal = [line for line in capsys.readouterr().err.splitlines() if "refusing" in line]
    assert len(refusal) == 1, refusal
    assert "AWS::Neptune::DBCluster" in refusal[0] and "set graph_enabled: true" in refusal[0]
    # Without the deployed state (a first deploy, tests, the embedded run), nothing is compared.
    context.pop(DEPLOYED_CONTEXT)
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps(context))
    assert app.main() == 0


def test_the_deployed_state_is_read_from_cloudformation_stack_by_stack(tmp_path: Path) -> None:
    """scripts/deployed_state.py: each of the environment's stacks' deployed templates; a stack
    that does not exist adds nothing (a first deploy compares nothing)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("deployed_state", "scripts/deployed_state.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    graph = {
        "Resources": {
            "Cluster": {"Type": "AWS::Neptune::DBCluster", "Properties": {"StorageEncrypted": True}}
        }
    }

    class Missing(Exception):
        pass

    class CloudFormation:
        class exceptions:
            ClientError = Missing

        def get_template(self, StackName: str, TemplateStage: str) -> dict[str, Any]:
            if StackName == "Mapload-dev-Graph":
                return {"TemplateBody": json.dumps(graph)}
            raise Missing(f"Stack with id {StackName} does not exist")

    templates = script.deployed_templates(CloudFormation(), "dev")
    assert templates == {"Mapload-dev-Graph": graph}
    assert stateful_resources(graph) == {
        "Cluster": {
            "Type": "AWS::Neptune::DBCluster",
            "KmsKeyId": None,
            "StorageEncrypted": True,
            "DBClusterIdentifier": None,
        }
    }
