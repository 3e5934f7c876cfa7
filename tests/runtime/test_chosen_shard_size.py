"""The shard size Plan chooses when the input gives none (issue 44 item 10): one shard per worker,
1 to 64 MiB; a size the input gives is kept (and so its plan id); `mapload estimate` makes the
same choice; the report shows it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pipeline_support import ENV

from handlers import plan
from logic.planning import MAX_CHOSEN_SHARD_MIB, chosen_shard_mib
from mapload import estimate as est
from mapload.reports import report_lines

pytestmark = pytest.mark.runtime

MiB = 2**20
SPEC = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}},
    },
    "maxConcurrency": 4,
    "jobId": "sized",
}


def _csv(size: int) -> bytes:
    rows = [b"postcode,lat\n"]
    total, i = len(rows[0]), 0
    while total < size:
        row = f"AB{i} 1CD,{i}.5\n".encode()
        rows.append(row)
        total += len(row)
        i += 1
    return b"".join(rows)


def _plan(source: str, **extra: Any) -> dict[str, Any]:
    event = {"input": {**SPEC, "source": source, **extra}, "execution": {"name": "run-1", "id": "arn:run-1"}}
    return plan.handle(event, ENV)


@pytest.mark.parametrize(
    ("data_bytes", "workers", "chosen"),
    [
        (170 * 10**6, 100, 2.0),  # the UK postcode file: 100 workers busy, not 3
        (50 * 10**6, 100, 1.0),  # at least 1 MiB: no crumbs
        (10_000, 100, 1.0),  # a tiny file is one shard
        (10 * 2**40, 100, MAX_CHOSEN_SHARD_MIB),  # at most 64 MiB, whatever the file
        (17 * MiB, 4, 5.0),
    ],
)
def test_the_chosen_size_gives_each_worker_a_shard_within_its_bounds(
    data_bytes: int, workers: int, chosen: float
) -> None:
    assert chosen_shard_mib(data_bytes, workers) == chosen


def test_plan_chooses_a_size_that_keeps_the_workers_busy_and_the_report_shows_it(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="big.csv", Body=_csv(3 * MiB + 100))
    planned = _plan("s3://src/big.csv")
    # 3 MiB over 4 workers: 1 MiB shards, 4 of them (64 MiB shards would be one, on one worker).
    assert planned["shardCount"] == 4
    assert planned["job"]["spec"]["shardSizeMiB"] == 1.0
    assert planned["job"]["workers"] == 4


def test_a_size_the_input_gives_is_kept_and_its_plan_id_does_not_move(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="big.csv", Body=_csv(3 * MiB + 100))
    planned = _plan("s3://src/big.csv", shardSizeMiB=64)
    assert planned["shardCount"] == 1 and planned["job"]["spec"]["shardSizeMiB"] == 64
    assert planned["job"]["planId"] == "99161e650ee92d9dfac8"  # as planned before the choice existed


def test_estimate_makes_the_same_choice_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    e = est.estimate(1_770_000, 100, row_bytes=96, concurrency=100, worker_items_per_second=4200.0)
    assert e.shard_mib == chosen_shard_mib(1_770_000 * 96, 100) == 2.0 and e.shard_chosen
    assert e.shards == 82 and e.concurrency == 82
    given = est.estimate(1_770_000, 100, row_bytes=96, concurrency=100, shard_mib=64)
    assert given.shards == 3 and not given.shard_chosen
    assert "(2 MiB each, chosen as Plan chooses it" in est.render(e)


def test_the_summary_shows_the_shard_size() -> None:
    report = {"records": {}, "shards": {"done": 4, "total": 4, "sizeMiB": 1.0}, "seconds": 1}
    assert "  shards    4/4 done (1 MiB each)" in report_lines(report)
    assert json.dumps(report)  # plain JSON
