"""Neptune off in dev by default (~$117 a month idle), the choice visible in cdk.json, and the idle
cost of what is about to be deployed printed by synth (stacks/idle_cost.py)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from mapload.local import LOCAL_CONTEXT
from stacks.config import load_environment, overrides_from_context
from stacks.idle_cost import idle_cost_line
from tests.infra.support import Synth

pytestmark = pytest.mark.infra


def templates(synth: Synth) -> dict[str, dict[str, Any]]:
    stage = synth.stage
    stacks = [stage.data, stage.loader, *([stage.graph] if stage.graph is not None else [])]
    return {stack.stack_name: dict(Template.from_stack(stack).to_json()) for stack in stacks}


def test_each_environment_states_graph_enabled_in_cdk_json_and_dev_leaves_neptune_out(
    cdk_json: dict[str, Any],
) -> None:
    block = cdk_json["context"]["mapload"]
    stated = {env: settings.get("graph_enabled") for env, settings in block["environments"].items()}
    assert stated == {"dev": False, "staging": True, "prod": True}
    assert load_environment(block, "dev").graph is None
    # Without the line in cdk.json, dev's default is off too.
    bare = {"environments": {"dev": {}, "other": {}}}
    assert load_environment(bare, "dev").graph is None
    assert load_environment(bare, "other").graph is not None


def test_run_local_keeps_every_graph_path_whatever_cdk_json_says(cdk_json: dict[str, Any]) -> None:
    block = cdk_json["context"]["mapload"]
    assert load_environment(block, "dev", overrides_from_context(LOCAL_CONTEXT)).graph is not None


def test_synth_prints_the_idle_cost_neptune_first(dev: Synth, variant: Synth) -> None:
    with_graph = idle_cost_line("Mapload-dev", templates(dev))
    assert "\n" not in with_graph
    # 1 NCU × $0.1608 an hour × 730 hours, then the dashboard, the alarm topic's key, 4 alarms.
    assert with_graph.startswith("mapload: Mapload-dev costs about $121.78 a month idle")
    assert "1 × Neptune db.serverless instance at 1 NCU $117.38" in with_graph
    without = idle_cost_line("Mapload-dev", templates(variant))
    assert "Neptune db" not in without and without.endswith("no Neptune (graph_enabled: false)")
    assert "about $4.40 a month" in without
