"""How long a shard takes under a write budget (issue 42 item 1): Plan lowers the Workers it runs
until a shard takes at most half the Worker's timeout, where one Worker can, and says so; a shard
that takes longer even alone goes on at checkpoints (not refused); `mapload estimate` prints the
same estimate, from the same function (logic/shardtime.py)."""

from __future__ import annotations

from typing import Any

import pytest
from pipeline_support import ENV

from handlers import plan
from logic import shardtime
from logic.spec.inputs import Common
from logic.writemodes import record_units
from mapload import estimate as est

pytestmark = pytest.mark.runtime

MiB = 2**20
WORKER_TIMEOUT = int(ENV["WORKER_TIMEOUT_SECONDS"])  # 900: Lambda's most, the deployment's default
SPEC = {
    "format": "csv",
    "dynamodb": {"key": {"pk": "P#{id}", "sk": "R"}, "attributes": {"text": {"field": "text"}}},
    "jobId": "paced",
    "shardSizeMiB": 0.1,
}


def _csv(size: int, record: int = 200) -> bytes:
    """A CSV of records of `record` bytes each (line break included) up to `size` bytes."""
    rows = [b"id,text\n"]
    total, i = len(rows[0]), 0
    while total < size:
        head = f"{i:08d},".encode()
        row = head + b"x" * (record - len(head) - 1) + b"\n"
        rows.append(row)
        total += len(row)
        i += 1
    return b"".join(rows)


def _plan(aws: Any, **extra: Any) -> dict[str, Any]:
    aws.put_object(Bucket="src", Key="paced.csv", Body=_csv(MiB - 400))
    event = {
        "input": {**SPEC, "source": "s3://src/paced.csv", **extra},
        "execution": {"name": "run-1", "id": "arn:run-1"},
    }
    return plan.handle(event, ENV)


def test_at_the_defaults_a_budget_of_10000_runs_few_enough_workers_for_a_shard_in_half_the_timeout() -> None:
    # The numbers, from the code's own constants: 64 MiB shards of ~200-byte records
    # (~335,544 of one write unit), maxConcurrency 100, a budget of 10,000 write units/s.
    shard_bytes = Common.model_fields["shard_size_mib"].default * MiB
    concurrency = Common.model_fields["max_concurrency"].default
    records = shard_bytes / 200
    assert (shard_bytes, concurrency, round(records), record_units(200)) == (64 * MiB, 100, 335_544, 1)
    # At all 100 Workers each writes 100 units/s: 3,355 s a shard against the 900 s timeout.
    assert shardtime.shard_seconds(records, 1, 10_000, concurrency) == pytest.approx(3355.4, abs=0.1)
    timing = shardtime.shard_time(records, 200, 10_000, concurrency, WORKER_TIMEOUT)
    assert timing.workers == 13 and timing.fits
    assert timing.seconds == pytest.approx(436.2, abs=0.1) and timing.seconds <= WORKER_TIMEOUT / 2
    # ... and the next Worker would pass half the timeout: 13 is the most that fit.
    assert shardtime.shard_seconds(records, 1, 10_000, 14) > WORKER_TIMEOUT / 2


def test_a_records_size_is_its_sampled_lines_average_and_a_numeric_add_costs_a_transaction() -> None:
    assert shardtime.record_bytes(b"a,b\n" * 10 + b"partial") == 4.0  # the cut record is left out
    assert shardtime.record_bytes(b"no line break") == 13.0
    added = shardtime.shard_time(1000, 200, 100, 10, WORKER_TIMEOUT, numeric_add=True)
    assert added.units_per_record == 4  # twice (the item's unit + the marker's)
    assert added.workers == 10 and added.seconds == pytest.approx(400.0)


def test_plan_lowers_the_workers_under_a_budget_and_says_how_long_a_shard_takes(aws: Any) -> None:
    planned = _plan(aws, writeUnitsPerSecond=5)
    # 1 MiB of 200-byte records in 0.1 MiB shards: 10 shards of ~524 records, 10 Workers allowed
    # (the cap): each would write at 0.5 units/s, 1,049 s a shard; 4 Workers write one in ~419 s.
    assert planned["shardCount"] == 10
    assert planned["maxConcurrency"] == 4 and planned["job"]["workers"] == 4
    assert 400 < planned["job"]["shardSeconds"] <= WORKER_TIMEOUT / 2
    assert (
        "over 4 Worker(s)" in planned["shardTime"]
        and "within half the Worker's timeout" in planned["shardTime"]
    )
    # The budget (and so the Workers chosen) is no part of the plan: a re-run at another keeps its shards.
    assert planned["job"]["planId"] == _plan(aws, writeUnitsPerSecond=500)["job"]["planId"]


def test_a_shard_too_slow_even_for_one_worker_is_planned_to_go_on_at_checkpoints(aws: Any) -> None:
    planned = _plan(aws, writeUnitsPerSecond=0.5)
    assert planned["maxConcurrency"] == 1 and planned["job"]["workers"] == 1
    assert planned["job"]["shardSeconds"] > WORKER_TIMEOUT / 2
    assert (
        "even on one Worker: each shard stops at checkpoints and takes ~2 invocations" in planned["shardTime"]
    )


def test_without_a_budget_plan_keeps_its_concurrency_and_says_nothing_of_shard_time(aws: Any) -> None:
    planned = _plan(aws)
    assert planned["maxConcurrency"] == 10 and "shardTime" not in planned
    assert "shardSeconds" not in planned["job"]
    # A dry run writes nothing, so no budget paces it.
    assert "shardTime" not in _plan(aws, writeUnitsPerSecond=5, dryRun=True)


def test_estimate_prints_the_shard_time_at_the_budget_from_the_same_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    e = est.estimate(100_000_000, 200, wcu=40_000, budget=10_000)  # a table faster than the budget
    timing = shardtime.shard_time(64 * MiB / 200, 200, 10_000, 100, est.DEFAULT_WORKER_TIMEOUT_SECONDS)
    assert e.shard_time == timing and e.shard_time.workers == 13
    # Plan's 13 Workers run (and are billed), not maxConcurrency's 100; the budget bounds the rate.
    assert e.concurrency == 13 and e.bound == "budget"
    assert e.items_per_second == pytest.approx(10_000)
    hundred = est.estimate(100_000_000, 200, wcu=10_000)
    assert hundred.concurrency == 100 and hundred.seconds == pytest.approx(e.seconds)
    assert e.lambda_usd < hundred.lambda_usd / 5
    from mapload.cli import main

    assert main(["estimate", "--rows", "100000000", "--item-bytes", "200", "--budget", "10000"]) == 0
    out = capsys.readouterr().out
    assert "shard time (--budget, writeUnitsPerSecond)" in out and "over 13 Worker(s)" in out
    assert "~436 s a shard" in out and "/ 13 (Plan's under the budget; 64 MiB each" in out
    # Provisioned capacity (--wcu) is no budget: Plan keeps maxConcurrency, no shard time to give.
    assert hundred.shard_time is None and est.estimate(1000, 200).shard_time is None


def test_with_express_children_plan_refuses_a_shard_longer_than_five_minutes(aws: Any) -> None:
    from logic.errors import InputValidationError

    express = {**ENV, "MAP_EXECUTION_TYPE": "EXPRESS", "WORKER_TIMEOUT_SECONDS": "240"}
    aws.put_object(Bucket="src", Key="paced.csv", Body=_csv(MiB - 400))
    event = {
        "input": {**SPEC, "source": "s3://src/paced.csv"},
        "execution": {"name": "run-1", "id": "arn:run-1"},
    }
    # ~524 records a shard at 0.5 units/s on one Worker: ~1,048 s, past an EXPRESS child's 300 s.
    paced = {**event, "input": {**event["input"], "writeUnitsPerSecond": 0.5}}
    with pytest.raises(InputValidationError) as refused:
        plan.handle(paced, express)
    assert refused.value.field == "writeUnitsPerSecond"
    assert "more than the 300 s an EXPRESS child execution runs" in str(refused.value)
    assert "\n" not in str(refused.value)
    # STANDARD children loop Worker → MoreOfShard for as long as it takes: planned, not refused.
    assert plan.handle(paced, ENV)["maxConcurrency"] == 1
    # A budget under which a shard fits: at 5 units/s one Worker writes one in ~105 s (half of 240: 120).
    fits = plan.handle({**event, "input": {**event["input"], "writeUnitsPerSecond": 5}}, express)
    assert fits["maxConcurrency"] == 1 and fits["job"]["shardSeconds"] <= 120


def test_a_parquet_shards_records_are_its_rows_counted_in_the_footers(aws: Any) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    table = pa.table({"id": [f"{i:06d}" for i in range(10_000)], "n": list(range(10_000))})
    pq.write_table(table, out, row_group_size=1000)  # 10 row groups of 1,000 rows
    aws.put_object(Bucket="src", Key="t/rows.parquet", Body=out.getvalue())
    spec = {
        "format": "parquet",
        "source": "s3://src/t/",
        "jobId": "rows",
        "shardSizeMiB": 0.001,  # a row group a shard
        "dynamodb": {"key": {"pk": "ID#{id}", "sk": "X"}, "attributes": {"n": {"field": "n", "type": "N"}}},
        "writeUnitsPerSecond": 10,
    }
    planned = plan.handle({"input": spec, "execution": {"name": "run-1", "id": "arn:run-1"}}, ENV)
    # 1,000 rows of one unit each: 10 Workers would take 1,000 s a shard; 4 take 400 s (5: 500 s).
    assert planned["shardCount"] == 10
    assert planned["maxConcurrency"] == 4 and planned["job"]["shardSeconds"] == 400.0
    assert planned["shardTime"].startswith("~1,000 records of 1 write unit(s) a shard")


def test_the_report_and_its_summary_show_the_workers_and_the_shard_time_plan_chose(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline_support import run_pipeline

    from mapload.reports import report_lines

    # A 1 s Worker timeout (a limit of 0.5 s), so that a budget the test can wait for lowers the
    # Workers: 10 shards of ~131 records at 2,000 units/s; 10 Workers, 0.66 s a shard; 7, 0.46 s.
    monkeypatch.setitem(ENV, "WORKER_TIMEOUT_SECONDS", "1")
    aws.put_object(Bucket="src", Key="paced.csv", Body=_csv(MiB // 4 - 400))
    spec = {**SPEC, "source": "s3://src/paced.csv", "shardSizeMiB": 0.025, "writeUnitsPerSecond": 2000}
    result = run_pipeline(aws, spec)
    report = result["report"]
    assert report["status"] == "SUCCEEDED" and report["shards"]["total"] == 10
    assert report["shards"]["workers"] == 7 and 0.4 < report["shards"]["estimatedSeconds"] <= 0.5
    assert "s a shard on 7 Workers at the budget" in "\n".join(report_lines(report))
    # Without a budget the report has neither.
    unpaced = run_pipeline(aws, {**SPEC, "source": "s3://src/paced.csv", "jobId": "unpaced"})["report"]
    assert "workers" not in unpaced["shards"] and "estimatedSeconds" not in unpaced["shards"]
