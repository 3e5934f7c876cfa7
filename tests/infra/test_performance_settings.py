"""Performance settings: table capacity (on demand, warm, provisioned), Lambda architecture, Map
child execution type, and maxConcurrency against the account's Lambda concurrency."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stacks.config import load_environment
from stacks.settings import MaploadConfigError
from tests.infra.support import Synth, flat, iter_functions, only, output_target, resources, synthesize

pytestmark = pytest.mark.infra

FAST: dict[str, Any] = {
    "env": "dev",
    "mapload:graph_enabled": False,
    "mapload:table_billing_mode": "provisioned",
    "mapload:table_write_capacity": 5000,
    "mapload:table_read_capacity": 50,
    "mapload:table_warm_write_units": 12000,
    "mapload:lambda_architecture": "x86_64",
    "mapload:map_execution_type": "EXPRESS",
    "mapload:worker_timeout_seconds": 146,  # the largest that keeps the retries EXPRESS needs
    "mapload:worker_reserved_concurrency": 100,
}


@pytest.fixture(scope="module")
def fast(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(FAST, tmp_path_factory.mktemp("fast"))


def _env(**fields: Any) -> Any:
    return load_environment({"environments": {"dev": fields}}, "dev")


def _target(synth: Synth) -> dict[str, Any]:
    return dict(synth.data_json["Resources"][output_target(synth.data_json, "TableName")]["Properties"])


def test_default_target_table_is_on_demand_without_warm_throughput(dev: Synth) -> None:
    props = _target(dev)
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert "WarmThroughput" not in props and "ProvisionedThroughput" not in props


def test_provisioned_warm_table_x86_functions_and_express_children(fast: Synth) -> None:
    props = _target(fast)
    assert props["ProvisionedThroughput"] == {"ReadCapacityUnits": 50, "WriteCapacityUnits": 5000}
    assert props["WarmThroughput"] == {"WriteUnitsPerSecond": 12000}
    assert "BillingMode" not in props or props["BillingMode"] == "PROVISIONED"
    ledger = fast.data_json["Resources"][output_target(fast.data_json, "LedgerTableName")]["Properties"]
    assert ledger["BillingMode"] == "PAY_PER_REQUEST"  # the ledger keeps on-demand
    for _, fn in iter_functions(fast.loader_json):
        assert fn["Properties"]["Architectures"] == ["x86_64"]
    machine = only(resources(fast.loader_json, "AWS::StepFunctions::StateMachine"))["Properties"]
    definition = str(machine["DefinitionString"])
    assert '\\"ExecutionType\\":\\"EXPRESS\\"' in definition or '"ExecutionType":"EXPRESS"' in definition
    # Plan knows: it refuses a job whose shard outlasts an EXPRESS child (tests/runtime/test_shard_time.py).
    plan = fast.loader_json["Resources"][output_target(fast.loader_json, "PlanFunctionName")]
    assert plan["Properties"]["Environment"]["Variables"]["MAP_EXECUTION_TYPE"] == "EXPRESS"


def test_on_demand_table_can_be_pre_warmed() -> None:
    config = _env(table_warm_write_units=40000)
    assert config.data.table_billing_mode == "on_demand"
    assert config.data.table_warm_write_units == 40000


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"table_billing_mode": "provisioned"}, "table_write_capacity", "required"),
        (
            {"table_billing_mode": "provisioned", "table_write_capacity": 10},
            "table_read_capacity",
            "required",
        ),
        ({"table_write_capacity": 10}, "table_write_capacity", "only for table_billing_mode provisioned"),
        ({"table_billing_mode": "pay_per_request"}, "table_billing_mode", "on_demand, provisioned"),
        ({"table_warm_write_units": 1000}, "table_warm_write_units", "between 4000"),
        ({"lambda_architecture": "arm"}, "lambda_architecture", "arm64, x86_64"),
        ({"map_execution_type": "EXPRESS"}, "map_execution_type", "worker_timeout_seconds to at most 240"),
        (
            {"max_concurrency_cap": 2000, "worker_reserved_concurrency": 100},
            "max_concurrency_cap",
            "worker_reserved_concurrency is 100",
        ),
        (
            {"lambda_concurrency_limit": 150, "worker_reserved_concurrency": 100},
            "worker_reserved_concurrency",
            "at most 50",
        ),
        (
            {"worker_reserved_concurrency": 950, "max_concurrency_cap": 950},
            "worker_reserved_concurrency",
            "100 unreserved",
        ),
        ({"worker_reserved_concurrency": 0}, "worker_reserved_concurrency", "0 would throttle"),
    ],
)
def test_bad_performance_settings_name_the_field(fields: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(MaploadConfigError) as caught:
        _env(**fields)
    assert caught.value.field == f"mapload.environments.dev.{field}"
    assert words in str(caught.value)


def test_express_children_fit_when_the_worker_timeout_does() -> None:
    config = _env(map_execution_type="EXPRESS", worker_timeout_seconds=240)
    assert config.loader.map_execution_type == "EXPRESS"


def test_a_raised_lambda_quota_allows_more_shards_in_flight() -> None:
    config = _env(max_concurrency_cap=3000, worker_reserved_concurrency=3000, lambda_concurrency_limit=5000)
    assert (config.loader.max_concurrency_cap, config.loader.worker_reserved_concurrency) == (3000, 3000)


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_the_default_cap_fits_the_accounts_quota_without_a_reservation(env: str) -> None:
    loader = load_environment({"environments": {env: {}}}, env).loader
    assert loader.worker_reserved_concurrency is None
    assert loader.max_concurrency_cap <= loader.lambda_concurrency_limit


@pytest.mark.parametrize("name", ["dev", "prod", "variant", "fast"])
def test_the_worker_has_its_reserved_concurrency_and_plan_caps_within_it(
    name: str, request: pytest.FixtureRequest
) -> None:
    """Template: the Worker's ReservedConcurrentExecutions is the setting, and the cap Plan applies
    to maxConcurrency (MAX_CONCURRENCY_CAP) never exceeds it, so no Map run asks for Workers
    Lambda would throttle."""
    synth: Synth = request.getfixturevalue(name)
    template = synth.loader_json
    worker = template["Resources"][output_target(template, "WorkerFunctionName")]["Properties"]
    plan = template["Resources"][output_target(template, "PlanFunctionName")]["Properties"]
    loader = synth.stage.config.loader
    expected = loader.worker_reserved_concurrency
    # null (the default): no reservation at all; never 0, which would throttle every invocation.
    assert worker.get("ReservedConcurrentExecutions") == expected
    bound = loader.lambda_concurrency_limit if expected is None else expected
    assert int(plan["Environment"]["Variables"]["MAX_CONCURRENCY_CAP"]) <= bound
    # Only the Worker reserves: the control functions draw on the account's unreserved pool.
    reserved = [
        logical
        for logical, fn in iter_functions(template)
        if "ReservedConcurrentExecutions" in fn["Properties"]
    ]
    assert reserved == ([] if expected is None else [output_target(template, "WorkerFunctionName")])


def test_settings_page_lists_every_performance_setting() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "SETTINGS.md").read_text()
    for name in (
        "table_billing_mode",
        "table_warm_write_units",
        "table_write_capacity",
        "table_read_capacity",
        "lambda_architecture",
        "map_execution_type",
        "lambda_concurrency_limit",
        "worker_reserved_concurrency",
    ):
        assert f"`{name}`" in text, name


# -- EXPRESS children: the whole retry schedule within 5 minutes --------------------------------

EXPRESS_LIMIT_SECONDS = 300  # an EXPRESS execution ends after 5 minutes, retries included


def _schedule_seconds(task: dict[str, Any]) -> float:
    """The longest the synthesized Task can run (computed here, apart from the stack's own):
    its last attempt up to TimeoutSeconds; each retry a failed attempt (none for throttling, which
    Lambda refuses before the function runs; the Worker's own 20 s wait plus 10 s for a pending
    CSV start; else up to TimeoutSeconds) and its wait at its longest (jitter only shortens it)."""
    timeout = float(task["TimeoutSeconds"])
    total = timeout
    for retrier in task.get("Retry", []):
        errors = set(retrier["ErrorEquals"])
        attempt = 0.0 if errors == {"Lambda.TooManyRequestsException"} else timeout
        attempt = min(30.0, timeout) if errors == {"CsvStartPendingError"} else attempt
        interval, rate = retrier.get("IntervalSeconds", 1), retrier.get("BackoffRate", 2.0)
        cap = retrier.get("MaxDelaySeconds", float("inf"))
        for n in range(retrier.get("MaxAttempts", 3)):
            total += attempt + min(interval * rate**n, cap)
    return total


def _worker_state(synth_template: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    machine = only(resources(synth_template, "AWS::StepFunctions::StateMachine"))
    asl = json.loads(flat(machine["Properties"]["DefinitionString"]))
    shards = asl["States"]["Shards"]
    return dict(shards["ItemProcessor"]["States"]["Worker"]), shards["ItemProcessor"]["ProcessorConfig"]


def test_express_children_fit_their_whole_retry_schedule_in_five_minutes(fast: Synth) -> None:
    worker, processor = _worker_state(fast.loader_json)
    assert processor["ExecutionType"] == "EXPRESS"
    assert _schedule_seconds(worker) <= EXPRESS_LIMIT_SECONDS, worker.get("Retry")


def test_a_shorter_express_worker_keeps_the_retries_that_fit(tmp_path: Path) -> None:
    from aws_cdk.assertions import Template

    import app as app_module

    built = app_module.build_app({**FAST, "mapload:worker_timeout_seconds": 60}, outdir=str(tmp_path))
    stage = built.node.find_child("Mapload-dev")
    worker, _ = _worker_state(dict(Template.from_stack(stage.loader).to_json()))
    assert _schedule_seconds(worker) <= EXPRESS_LIMIT_SECONDS
    kept = {error for retrier in worker["Retry"] for error in retrier["ErrorEquals"]}
    assert {"Lambda.TooManyRequestsException", "CsvStartPendingError"} <= kept


@pytest.mark.parametrize(("timeout", "missing"), [(240, "every retry"), (180, "no CSV start retry")])
def test_an_express_worker_timeout_that_leaves_too_few_retries_is_refused_at_synth(
    timeout: int, missing: str, tmp_path: Path
) -> None:
    """240 s: the Task's 300 s timeout is the whole EXPRESS child, so one throttle failed the job;
    180 s kept throttling retries but none for a pending CSV start (`missing`)."""
    import app as app_module

    with pytest.raises(MaploadConfigError) as caught:
        app_module.build_app({**FAST, "mapload:worker_timeout_seconds": timeout}, outdir=str(tmp_path))
    message = str(caught.value)
    assert caught.value.field == "worker_timeout_seconds" and "\n" not in message
    assert "map_execution_type" in message and "at most 146" in message


def test_standard_children_keep_the_whole_schedule_which_would_not_fit_express(dev: Synth) -> None:
    worker, processor = _worker_state(dev.loader_json)
    assert processor["ExecutionType"] == "STANDARD"
    assert _schedule_seconds(worker) > 20 * 60  # throttling alone waits ~20-36 minutes


def test_the_stack_and_the_runtime_agree_on_the_csv_start_wait() -> None:
    from shards.sources import CSV_START_WAIT_SECONDS as RUNTIME
    from stacks.lambda_tasks import CSV_START_WAIT_SECONDS

    assert CSV_START_WAIT_SECONDS == RUNTIME
