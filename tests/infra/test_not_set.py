"""One "not set" rule: null in cdk.json (or `-c mapload:<field>=null`) means the setting is not
set, through `cdk deploy`/`cdk synth`, run-local and the pipeline, although `cdk.App` drops every
null from its context; and the Worker reservations of environments sharing an account add up."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import app as app_module
from stacks.config import EnvironmentConfig, load_environment
from stacks.loader_settings import check_reservations
from stacks.pipeline import PIPELINE_STACK_ID, PipelineStack
from stacks.settings import MaploadConfigError
from stacks.stage import MaploadStage, stage_id
from tests.infra.support import ROOT, output_target

pytestmark = pytest.mark.infra

NOT_SET = {"sort_key": None, "worker_reserved_concurrency": None, "max_concurrency_cap": 50}


def _context(cdk_json: dict[str, Any], env: str = "dev", **settings: Any) -> dict[str, Any]:
    """cdk.json's context with `settings` written into one environment's block, as a user edits it."""
    context = copy.deepcopy(cdk_json["context"])
    context["mapload"]["environments"][env].update(settings)
    return context


def _stage(built: Any, env: str = "dev") -> EnvironmentConfig:
    stage = built.node.find_child(stage_id(env))
    assert isinstance(stage, MaploadStage)
    return stage.config


def _not_set(config: EnvironmentConfig) -> None:
    assert config.data.table_sort_key is None
    assert config.data.table_key == {"pk": "S"}
    assert config.loader.worker_reserved_concurrency is None


def test_null_in_cdk_json_is_not_set_in_process(cdk_json: dict[str, Any]) -> None:
    """The embedded run and the tests build the app from a dict laid over cdk.json."""
    _not_set(_stage(app_module.build_app({**_context(cdk_json, **NOT_SET), "env": "dev"})))


def test_null_in_cdk_json_is_not_set_under_the_cli(
    cdk_json: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`cdk deploy` passes cdk.json's context as CDK_CONTEXT_JSON, or, when that is too big for the
    environment, in the file CONTEXT_OVERFLOW_LOCATION_ENV names."""
    context = {**_context(cdk_json, **NOT_SET), "env": "dev"}
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps(context))
    _not_set(_stage(app_module.build_app(None)))
    overflow = tmp_path / "context.json"
    overflow.write_text(json.dumps(context))
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps({"env": "dev"}))
    monkeypatch.setenv("CONTEXT_OVERFLOW_LOCATION_ENV", str(overflow))
    _not_set(_stage(app_module.build_app(None)))


def _pipeline(context: dict[str, Any]) -> dict[str, Any]:
    """`context` with the pipeline's block, every environment in one account and region."""
    context["mapload"]["pipeline"] = {
        "account": "111111111111",
        "region": "eu-west-2",
        "connection_arn": "arn:aws:codeconnections:eu-west-2:111111111111:connection/0a1b2c3d-1111",
        "repository": "example-org/mapload",
    }
    for env in context["mapload"]["environments"].values():
        env.update(account="111111111111", region="eu-west-2")
    return {**context, "pipeline": "true"}


def test_null_in_cdk_json_is_not_set_in_the_pipeline(cdk_json: dict[str, Any]) -> None:
    built = app_module.build_app(_pipeline(_context(cdk_json, "prod", **NOT_SET)))
    pipeline = built.node.find_child(PIPELINE_STACK_ID)
    assert isinstance(pipeline, PipelineStack)
    _not_set(pipeline.stages["prod"].config)
    assert pipeline.stages["dev"].config.table_sort_key is not None


@pytest.mark.parametrize("given", [None, "null"])
def test_null_from_the_command_line_is_the_same_rule(given: Any) -> None:
    """`-c mapload:sort_key=null` arrives as the string "null"; an in-process override as None."""
    overrides = {"sort_key": given, "worker_reserved_concurrency": given}
    config = load_environment({"environments": {"dev": {}}}, "dev", overrides)
    assert config.data.table_sort_key is None
    assert config.loader.worker_reserved_concurrency is None
    contexts = {f"mapload:{field}": given for field in overrides}
    assert app_module.overrides_from_context(contexts) == overrides


def _target_key(template: dict[str, Any]) -> list[str]:
    table = template["Resources"][output_target(template, "TableName")]["Properties"]
    return [part["AttributeName"] for part in table["KeySchema"]]


def test_null_sort_key_through_the_real_cdk_cli(cdk_json: dict[str, Any], tmp_path: Path) -> None:
    """`npx cdk synth` with a cdk.json whose dev has `"sort_key": null`: the table has no sk."""
    document = copy.deepcopy(cdk_json)
    document["context"] = _context(cdk_json, **NOT_SET)
    document["app"] = f"{sys.executable} {ROOT / 'app.py'}"
    (tmp_path / "cdk.json").write_text(json.dumps(document))
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'runtime'}",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    cdk = shutil.which("cdk", path=str(ROOT / "node_modules" / ".bin"))
    assert cdk is not None
    # Selecting only the Data stack bundles nothing the check refuses; synth writes every template.
    done = subprocess.run(
        [cdk, "synth", "Mapload-dev/Data", "-c", "env=dev", "-o", str(tmp_path / "out"), "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (data,) = (tmp_path / "out" / "assembly-Mapload-dev").glob("*Data*.template.json")
    assert _target_key(json.loads(data.read_text())) == ["pk"]
    (loader,) = (tmp_path / "out" / "assembly-Mapload-dev").glob("*Loader*.template.json")
    worker = json.loads(loader.read_text())["Resources"]
    assert not [r for r in worker.values() if "ReservedConcurrentExecutions" in r.get("Properties", {})]


def test_null_sort_key_through_the_embedded_runs_synth(cdk_json: dict[str, Any]) -> None:
    """run-local synthesizes in a subprocess from a JSON context (mapload/synth.py)."""
    from mapload.synth import synthesize

    stacks = synthesize({"env": "dev", "mapload": _context(cdk_json, **NOT_SET)["mapload"]})
    (data,) = [stack for stack in stacks if stack.name.endswith("Data")]
    assert _target_key(data.template) == ["pk"]


# -- reserved concurrency per account -----------------------------------------------------------


def _environments(**blocks: dict[str, Any]) -> list[EnvironmentConfig]:
    block = {"environments": blocks}
    return [load_environment(block, name) for name in blocks]


def test_reservations_of_environments_sharing_an_account_and_region_add_up() -> None:
    shared = {"account": "123456789012", "region": "eu-west-2", "max_concurrency_cap": 100}
    with pytest.raises(MaploadConfigError) as caught:
        check_reservations(
            _environments(
                staging={**shared, "worker_reserved_concurrency": 800},
                prod={**shared, "worker_reserved_concurrency": 800},
            )
        )
    assert caught.value.field == "mapload.environments.prod.worker_reserved_concurrency"
    assert "staging 800 + prod 800 = 1600" in str(caught.value) and "at most 900" in str(caught.value)
    # Another account, or another region (Lambda's quota is per account and region), is its own.
    for other in ({"account": "210987654321"}, {"region": "us-east-1"}):
        check_reservations(
            _environments(
                staging={**shared, "worker_reserved_concurrency": 800},
                prod={**shared, **other, "worker_reserved_concurrency": 800},
            )
        )
    # The same account with room for both, or one without a reservation.
    check_reservations(
        _environments(
            staging={**shared, "worker_reserved_concurrency": 450},
            prod={**shared, "worker_reserved_concurrency": 450},
        )
    )
    check_reservations(_environments(staging={**shared, "worker_reserved_concurrency": 800}, prod={**shared}))


def test_environments_without_an_account_are_one_account_the_clis() -> None:
    with pytest.raises(MaploadConfigError, match=r"account null, the CLI's, region null, the CLI's"):
        check_reservations(
            _environments(
                staging={"worker_reserved_concurrency": 500, "max_concurrency_cap": 100},
                prod={"worker_reserved_concurrency": 500, "max_concurrency_cap": 100},
            )
        )


def test_an_environment_without_an_account_shares_the_clis_with_one_that_names_it() -> None:
    """`account: null` deploys to the CLI's account: with CDK_DEFAULT_ACCOUNT/REGION known, it is
    one group with an environment naming that account, as check_existing_table compares."""
    environments = _environments(
        staging={"worker_reserved_concurrency": 500, "max_concurrency_cap": 100},
        prod={
            "account": "123456789012",
            "region": "eu-west-2",
            "worker_reserved_concurrency": 500,
            "max_concurrency_cap": 100,
        },
    )
    shared = r"account 123456789012, region eu-west-2\) reserve staging 500"
    with pytest.raises(MaploadConfigError, match=shared):
        check_reservations(environments, "123456789012", "eu-west-2")
    check_reservations(environments, "210987654321", "eu-west-2")  # the CLI's is another account


def test_a_bad_setting_in_another_environment_says_which_while_deploying_this_one(
    cdk_json: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    context = _context(cdk_json, "prod", worker_timeout_seconds=-1)
    with pytest.raises(MaploadConfigError) as caught:
        app_module.build_app({**context, "env": "dev"})
    message = str(caught.value)
    assert message.startswith("while summing reservations per account: prod: mapload.environments.prod.")
    assert caught.value.field == "mapload.environments.prod.worker_timeout_seconds" and "\n" not in message


def test_synth_checks_every_environment_of_cdk_json_not_only_the_one_it_builds(
    cdk_json: dict[str, Any],
) -> None:
    context = _context(cdk_json, "staging", worker_reserved_concurrency=800)
    context["mapload"]["environments"]["prod"]["worker_reserved_concurrency"] = 800
    with pytest.raises(MaploadConfigError, match=r"staging 800 \+ prod 800 = 1600"):
        app_module.build_app({**context, "env": "dev"})


def test_the_pipeline_sums_the_reservations_of_the_stages_sharing_an_account(
    cdk_json: dict[str, Any],
) -> None:
    context = _context(cdk_json, "staging", worker_reserved_concurrency="500", max_concurrency_cap=500)
    context["mapload"]["environments"]["prod"].update(
        worker_reserved_concurrency=500, max_concurrency_cap=500
    )
    with pytest.raises(MaploadConfigError, match=r"staging 500 \+ prod 500 = 1000 .*at most 900"):
        app_module.build_app(_pipeline(context))


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_the_default_reserves_nothing_so_a_new_account_can_deploy_it(
    env: str, cdk_json: dict[str, Any]
) -> None:
    """A new account's concurrency quota may be far below 1,000: any reservation could be refused."""
    for block in ({}, cdk_json["context"]["mapload"]["environments"][env]):
        loader = load_environment({"environments": {env: block}}, env).loader
        assert loader.worker_reserved_concurrency is None
        assert loader.max_concurrency_cap <= loader.lambda_concurrency_limit


def test_zero_is_refused_it_would_throttle_every_invocation() -> None:
    for given in (0, "0"):
        with pytest.raises(MaploadConfigError, match=r"0 would throttle every invocation.*null"):
            load_environment({"environments": {"dev": {"worker_reserved_concurrency": given}}}, "dev")


def test_without_a_reservation_the_cap_is_bounded_by_the_accounts_quota() -> None:
    with pytest.raises(MaploadConfigError, match=r"max_concurrency_cap: 2000 .*lambda_concurrency_limit"):
        load_environment({"environments": {"dev": {"max_concurrency_cap": 2000}}}, "dev")


# -- existing_table in another account or region -------------------------------------------------

TABLE_ARN = "arn:aws:dynamodb:eu-west-2:123456789012:table/People"


@pytest.mark.parametrize(
    ("site", "words"),
    [
        ({"account": "210987654321"}, "names a table in account 123456789012, but the environment "),
        ({"region": "us-east-1"}, "names a table in region eu-west-2, but the environment deploys to"),
    ],
)
def test_an_existing_table_in_another_account_or_region_is_refused_naming_the_setting(
    site: dict[str, str], words: str
) -> None:
    block = {"environments": {"dev": {"existing_table": TABLE_ARN, **site}}}
    with pytest.raises(MaploadConfigError) as caught:
        load_environment(block, "dev")
    assert caught.value.field == "mapload.environments.dev.existing_table"
    assert words in str(caught.value) and "TransactWriteItems" in str(caught.value)
    # Its own account and region, or a bare name (always the environment's own), load.
    same = {"existing_table": TABLE_ARN, "account": "123456789012", "region": "eu-west-2"}
    assert load_environment({"environments": {"dev": same}}, "dev").table_existing_name == "People"
    named = {"existing_table": "People", **site}
    assert load_environment({"environments": {"dev": named}}, "dev").table_existing_name == "People"


def test_without_account_and_region_the_table_is_compared_with_the_clis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context = {"env": "dev", "mapload:existing_table": TABLE_ARN}
    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", "123456789012")
    monkeypatch.setenv("CDK_DEFAULT_REGION", "us-east-1")
    with pytest.raises(MaploadConfigError, match=r"existing_table: names a table in region eu-west-2"):
        app_module.build_app(context)
    monkeypatch.setenv("CDK_DEFAULT_REGION", "eu-west-2")
    assert _stage(app_module.build_app(context)).table_existing_name == "People"
    # Without credentials the CLI knows no account: nothing to compare with, the stacks stay agnostic.
    monkeypatch.delenv("CDK_DEFAULT_ACCOUNT")
    monkeypatch.delenv("CDK_DEFAULT_REGION")
    assert _stage(app_module.build_app(context)).table_existing_name == "People"
