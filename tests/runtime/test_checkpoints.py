"""A shard that cannot finish in one invocation (issue 42 item 1): the Worker stops before its
deadline at a checkpoint and the next invocation goes on from there — the state machine's loop, a
second invocation racing it, a re-run after a crash — every record counted once, the report
reconciling, the rejects numbered by their lines in the file. Through the handlers on moto; the
deadline is a fake `remaining` that runs out after a given number of records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from pipeline_support import ENV, REGION
from virtual_clock import VirtualClock

from adapters.ledger import Ledger
from handlers import finalize, plan, worker
from logic.checkpoints import STOP_MARGIN_SECONDS
from logic.job import PlannedJob

pytestmark = pytest.mark.runtime

ROWS = 300
BAD = {17, 150, 251}  # rows whose lat is not a number: rejected
SPEC = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}},
    },
    "shardSizeMiB": 1,
    "maxConcurrency": 4,
}


def _csv() -> bytes:
    rows = []
    for i in range(ROWS):
        postcode = f'"AB{i}\n1CD"' if i % 50 == 7 else f"AB{i} 1CD"  # a quoted line break now and then
        rows.append(f"{postcode},{'x' if i in BAD else f'{i}.5'}\n".encode())
    return b"postcode,lat\n" + b"".join(rows)


class Deadline:
    """Time left that runs out after `records` records: plenty until then, none after."""

    def __init__(self, records: int) -> None:
        self.calls = 0
        self.records = records

    def __call__(self) -> float:
        self.calls += 1
        # The first call sets the margin; then one call per record read after the first.
        return 10 * STOP_MARGIN_SECONDS if self.calls <= self.records else 0.0


CLOCK = VirtualClock()


def _plan(run: str) -> dict[str, Any]:
    event = {
        "input": {**SPEC, "source": "s3://src/a.csv", "jobId": "long"},
        "execution": {"name": run, "id": f"arn:{run}"},
    }
    return plan.handle(event, ENV, now=CLOCK.time)


def _shard(aws: Any, planned: dict[str, Any]) -> dict[str, Any]:
    (shard,) = json.loads(aws.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    return {"shard": shard, "job": planned["job"]}


def _turns(event: dict[str, Any], records: int) -> Iterator[dict[str, Any]]:
    """The Worker invoked again while it answers `more` (the state machine's loop)."""
    while True:
        answer = worker.handle(event, ENV, remaining=Deadline(records))
        yield answer
        if not answer["more"]:
            return


def _finalize(planned: dict[str, Any], run: str, error: dict[str, str] | None = None) -> dict[str, Any]:
    state = {"plan": planned, **({"error": error} if error else {})}
    return finalize.handle({"state": state, "execution": {"name": run}}, ENV, now=CLOCK.time)


def _items() -> int:
    db = boto3.client("dynamodb", region_name=REGION)
    pages = db.get_paginator("scan").paginate(TableName="target", Select="COUNT")
    return sum(page["Count"] for page in pages)


def _check(aws: Any, answer: dict[str, Any]) -> dict[str, Any]:
    """The report counts every record once and reconciles; its rejects are the bad rows, each
    with its line in the file."""
    assert answer["status"] == "SUCCEEDED", answer.get("cause")
    report = answer["report"]
    records, lines = report["records"], report["lines"]
    assert records["read"] == ROWS
    assert records["written"] == ROWS - len(BAD) == _items()
    assert records["rejected"] == len(BAD)
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
    assert lines["total"] == lines["accepted"] + lines["rejected"] + lines["ignored"]
    assert lines["total"] == ROWS + sum(1 for i in range(ROWS) if i % 50 == 7)  # the quoted breaks
    bucket, key = report["rejects"]["location"].removeprefix("s3://").split("/", 1)
    body = aws.get_object(Bucket=bucket, Key=key)["Body"].read()
    rejected = [json.loads(line) for line in body.splitlines()]
    source = _csv().split(b"\n")
    assert [r["raw"] for r in rejected] == [f"AB{i} 1CD,x" for i in sorted(BAD)]
    for row in rejected:  # numbered by the file's lines, whatever segment rejected it
        assert source[row["line"] - 1] == row["raw"].encode()
    return report


def test_a_shard_stopped_before_its_deadline_resumes_and_counts_each_record_once(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv())
    planned = _plan("run-1")
    turns = list(_turns(_shard(aws, planned), records=70))
    assert len(turns) == 5 and [t["more"] for t in turns] == [True] * 4 + [False]
    assert sum(t["read"] for t in turns) == ROWS  # each record read by one segment
    assert sum(t["bytes"] for t in turns) == len(_csv()) - len(b"postcode,lat\n")
    _check(aws, _finalize(planned, "run-1"))


def test_two_invocations_from_one_checkpoint_count_once(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second invocation (a timeout retry while the first still runs) resumed from the checkpoint
    the first then advanced: its checkpoint is refused, its segment not counted."""
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv())
    planned = _plan("run-1")
    event = _shard(aws, planned)
    assert worker.handle(event, ENV, remaining=Deadline(60))["more"]
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 7)
    job = PlannedJob.parse(planned["job"])
    stale = ledger.checkpoint(job.job_id, job.plan, 0)
    assert stale is not None and stale["seq"] == 1
    assert worker.handle(event, ENV, remaining=Deadline(60))["more"]  # the first invocation goes on
    with monkeypatch.context() as racing:
        racing.setattr(Ledger, "checkpoint", lambda self, *args: stale)  # read before it advanced
        late = worker.handle(event, ENV, remaining=Deadline(90))
    assert late["more"] and late["read"] == 90
    now = ledger.checkpoint(job.job_id, job.plan, 0)
    assert now is not None and now["seq"] == 2 and now["counts"]["read"] == 120  # the late one's not
    list(_turns(event, records=1000))
    _check(aws, _finalize(planned, "run-1"))


def test_a_rerun_after_a_crash_mid_shard_resumes_from_the_checkpoint(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=_csv())
    planned = _plan("run-1")
    event = _shard(aws, planned)
    assert worker.handle(event, ENV, remaining=Deadline(100))["more"]
    from shards import service

    original = service.process

    def dying(lines: Any, *args: Any, **kwargs: Any) -> Any:
        def then_death() -> Iterator[Any]:
            for n, line in enumerate(lines):
                if n == 30:
                    raise RuntimeError("the Worker died")
                yield line

        return original(then_death(), *args, **kwargs)

    with monkeypatch.context() as crash:
        crash.setattr(service, "process", dying)
        with pytest.raises(RuntimeError):
            worker.handle(event, ENV, remaining=Deadline(1000))
    failed = _finalize(planned, "run-1", {"Error": "States.ExceedToleratedFailureThreshold", "Cause": "x"})
    assert failed["report"]["shards"]["failed"] == 1
    CLOCK.advance(int(ENV["WORKER_TIMEOUT_SECONDS"]) + 61)  # past the failed run's Workers

    again = _plan("run-2")
    turns = list(_turns(_shard(aws, again), records=1000))
    assert len(turns) == 1 and turns[0]["read"] == ROWS - 100  # from the checkpoint, not byte 0
    report = _check(aws, _finalize(again, "run-2"))
    assert report["shards"]["done"] == 1 and report["carried"]["shards"] == 0


def test_a_parquet_shard_stopped_mid_row_group_resumes_at_its_next_row(aws: Any) -> None:
    """A Parquet checkpoint holds the rows read: the next segment skips the row groups read
    whole and the rows read of the one it stopped in."""
    from test_parquet_pipeline import parquet_bytes, table

    aws.put_object(Bucket="src", Key="p.parquet", Body=parquet_bytes(table(0, 300), row_group_size=100))
    event = {
        "input": {
            "jobId": "pq",
            "format": "parquet",
            "source": "s3://src/p.parquet",
            "dynamodb": {
                "key": {"pk": "ID#{id}", "sk": "ROW"},
                "attributes": {"n": {"field": "n", "type": "N"}},
            },
            "shardSizeMiB": 1,
        },
        "execution": {"name": "run-1", "id": "arn:run-1"},
    }
    planned = plan.handle(event, ENV, now=CLOCK.time)
    turns = list(_turns(_shard(aws, planned), records=70))
    assert [t["read"] for t in turns] == [70, 70, 70, 70, 20]
    answer = _finalize(planned, "run-1")
    assert answer["status"] == "SUCCEEDED", answer.get("cause")
    records = answer["report"]["records"]
    assert records["read"] == records["written"] == _items() == 300
    assert answer["report"]["lines"]["total"] == 300
