"""`mapload estimate`: the arithmetic of time and cost, checked by hand-computed cases."""

from __future__ import annotations

import pytest

from mapload import estimate as est
from mapload.cli import main

pytestmark = pytest.mark.runtime


def test_small_items_on_a_new_on_demand_table_are_bound_by_the_table() -> None:
    e = est.estimate(1_000_000, 100, concurrency=100, worker_items_per_second=1000.0, shard_mib=1)
    # 100 MB of rows in 1 MiB shards; 100 workers write 100,000/s, the table takes 4,000/s.
    assert e.write_units_per_item == 1 and e.write_units == 1_000_000
    assert e.shards == 96  # ceil(1e8 / 2**20)
    assert e.bound == "table" and e.items_per_second == 4000
    assert e.seconds == pytest.approx(250)
    assert e.dynamodb_on_demand_usd == pytest.approx(0.625)
    assert e.dynamodb_provisioned_usd is None
    assert e.workers_needed == 4
    # 96 workers x 250 s x 1 GB at the arm64 price, plus 98 invocations.
    assert e.lambda_usd == pytest.approx(96 * 250 * 0.0000133334 + 98 / 1e6 * 0.20)
    assert e.step_functions_usd == pytest.approx((6 + 3 * 96) * 0.000025)


def test_write_units_round_up_per_started_kilobyte() -> None:
    e = est.estimate(1000, 1025, wcu=3000, worker_items_per_second=10_000.0)
    assert e.write_units_per_item == 2 and e.write_units == 2000
    assert e.items_per_second == 1500  # 3,000 units/s / 2 units per item
    assert e.bound == "table"


def test_few_workers_are_the_bound_and_provisioned_capacity_bills_whole_hours() -> None:
    e = est.estimate(7_200_000, 200, wcu=40_000, concurrency=2, worker_items_per_second=1000.0, shard_mib=1)
    assert e.bound == "workers" and e.items_per_second == 2000
    assert e.seconds == pytest.approx(3600)
    assert e.dynamodb_provisioned_usd == pytest.approx(40_000 * 1 * 0.00065)
    assert e.total_usd == pytest.approx(e.dynamodb_provisioned_usd + e.lambda_usd + e.step_functions_usd)


def test_x86_costs_more_per_gb_second() -> None:
    arm = est.estimate(1_000_000, 100, architecture="arm64")
    x86 = est.estimate(1_000_000, 100, architecture="x86_64")
    assert x86.lambda_usd > arm.lambda_usd and x86.seconds == arm.seconds


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"rows": 0, "item_bytes": 10}, "--rows"),
        ({"rows": 1, "item_bytes": 500 * 1024}, "400 KB"),
        ({"rows": 1, "item_bytes": 10, "wcu": 0}, "--wcu"),
        ({"rows": 1, "item_bytes": 10, "concurrency": 0}, "--concurrency"),
    ],
)
def test_bad_arguments_say_which(kwargs: dict[str, int], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        est.estimate(**kwargs)


def test_the_command_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--rows", "1770000", "--item-bytes", "100", "--wcu", "8000"]) == 0
    out = capsys.readouterr().out
    assert "1,770,000" in out and "DynamoDB provisioned" in out and "(table)" in out
    assert main(["estimate", "--rows", "0", "--item-bytes", "100"]) == 2
    assert "--rows" in capsys.readouterr().err
