"""The write modes at the handler level (Plan -> Workers -> Finalize on moto), as a property:
random files with repeated keys and versions, cut at random shard sizes, the shards run in a
random order and one of them run again (a Worker retried after it wrote its items but before
its counts were recorded) — the table equals a sequential model of the mode applied to the
records in the order they were written. For newerWins, any order gives each key the same
version (the file's highest); of equal versions, the first written stays. A numeric ADD is
applied exactly once per record, through a retried shard and a re-run of the job."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from pipeline_support import ENV, REGION

from adapters import clients
from adapters.ledger import shard_key
from mapload.emulator import moto_patches
from mapload.tables import create_pk_sk_table

pytestmark = pytest.mark.runtime

MODES = ("putIfAbsent", "newerWins", "update", "delete")
# A record: key number, version, tag.
RECORDS = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 4), st.sampled_from("abc")), min_size=1, max_size=30
)
SEED = {0: (2, "s"), 1: (0, "s")}  # stored before the load: keys 0 and 1


def _spec(mode: str, shard_bytes: int) -> dict[str, Any]:
    tags: dict[str, Any] = {"field": "tag", "type": "SS", **({"update": "add"} if mode == "update" else {})}
    dynamodb: dict[str, Any] = {"key": {"pk": "K#{id}", "sk": "S"}, "writeMode": mode}
    if mode != "delete":
        dynamodb["attributes"] = {"v": {"field": "v", "type": "N"}, "tags": tags}
    if mode == "newerWins":
        dynamodb["version"] = "v"
    return {
        "source": "s3://src/in.csv",
        "format": "csv",
        "dynamodb": dynamodb,
        "shardSizeMiB": shard_bytes / (1024 * 1024),
        "maxConcurrency": 10,
        "jobId": "prop",
    }


def model(mode: str, records: list[tuple[int, int, str]]) -> dict[int, tuple[Decimal, frozenset[str]]]:
    """The mode applied one record after another (the seed first, as plain puts)."""
    table = {key: (Decimal(v), frozenset({tag})) for key, (v, tag) in SEED.items()}
    for key, version, tag in records:
        stored = table.get(key)
        new = (Decimal(version), frozenset({tag}))
        if mode in ("putIfAbsent", "newerWins"):
            newer = mode == "newerWins" and stored is not None and stored[0] < version
            if stored is None or newer:
                table[key] = new
        elif mode == "update":
            table[key] = (new[0], (stored[1] if stored else frozenset()) | new[1])
        elif mode == "delete":
            table.pop(key, None)
    return table


def _stored(db: Any) -> dict[int, tuple[Decimal, frozenset[str]]]:
    return {
        int(row["pk"]["S"][2:]): (Decimal(row["v"]["N"]), frozenset(row["tags"]["SS"]))
        for row in db.scan(TableName="target")["Items"]
    }


def _aws() -> tuple[Any, Any]:
    """S3 (buckets src, stg) and DynamoDB (tables ledger, target) clients on the current moto."""
    s3 = boto3.client("s3", region_name=REGION)
    db = boto3.client("dynamodb", region_name=REGION)
    for bucket in ("src", "stg"):
        s3.create_bucket(Bucket=bucket)
    for table in ("ledger", "target"):
        create_pk_sk_table(db, table)
    return s3, db


def _lose_counts(db: Any, planned: dict[str, Any], shard: dict[str, Any]) -> None:
    """Delete a shard's counts from the ledger: its Worker ran, but as if it failed before it
    recorded them (a Lambda retry, or a job re-run, then sends its records again)."""
    job = planned["job"]
    db.delete_item(TableName="ledger", Key=shard_key(job["jobId"], job["planId"], int(shard["index"])))


def _run(mode: str, records: list[tuple[int, int, str]], shard_bytes: int, order: random.Random) -> Any:
    """Plan, the Workers in a shuffled order and one of them again, Finalize; the records in the
    order they were written, and the report."""
    from handlers import finalize, plan, worker

    s3, db = _aws()
    for key, (v, tag) in SEED.items():
        db.put_item(
            TableName="target",
            Item={"pk": {"S": f"K#{key}"}, "sk": {"S": "S"}, "v": {"N": str(v)}, "tags": {"SS": [tag]}},
        )
    lines = [f"{k},{v},{t}\n".encode() for k, v, t in records]
    header = b"id,v,tag\n"
    s3.put_object(Bucket="src", Key="in.csv", Body=header + b"".join(lines))
    execution = {"name": "run-1", "id": "arn:run-1"}
    spec = _spec(mode, shard_bytes)
    planned = plan.handle({"input": spec, "execution": execution}, ENV)
    manifest = json.loads(s3.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    starts, offset = [], len(header)
    for line in lines:
        starts.append(offset)
        offset += len(line)

    def owned(shard: dict[str, Any]) -> list[tuple[int, int, str]]:
        return [r for r, at in zip(records, starts, strict=True) if shard["start"] <= at < shard["end"]]

    shards = list(manifest)
    order.shuffle(shards)
    retried = order.choice(shards)
    again_after = order.randrange(shards.index(retried), len(shards))
    written: list[tuple[int, int, str]] = []
    for position, shard in enumerate(shards):
        worker.handle({"shard": shard, "job": planned["job"]}, ENV)
        written += owned(shard)
        if position == again_after:  # its counts lost: the retry writes every item again
            _lose_counts(db, planned, retried)
            worker.handle({"shard": retried, "job": planned["job"]}, ENV)
            written += owned(retried)
    report = finalize.handle({"state": {**spec, "plan": planned}, "execution": execution}, ENV)["report"]
    return written, report, _stored(db)


# No shrinking: each example runs a whole pipeline, and shrinking one failure outlasts the timeout.
PIPELINE_EXAMPLES = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate),
)


def _moto_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients go to moto's mock, whatever endpoint the environment names."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("mode", MODES)
@settings(PIPELINE_EXAMPLES, max_examples=15)
@given(records=RECORDS, shard_bytes=st.integers(4, 60), seed=st.integers(0, 2**16))
# Found by this test: key 2 twice at version 0 in two shards; the first written stays.
@example(records=[(0, 0, "a"), (2, 0, "b"), (0, 0, "a"), (2, 0, "a")], shard_bytes=4, seed=0)
def test_the_table_equals_the_sequential_model(
    monkeypatch: pytest.MonkeyPatch, mode: str, records: list[Any], shard_bytes: int, seed: int
) -> None:
    _moto_only(monkeypatch)
    with mock_aws():
        clients.reset()
        try:
            written, report, table = _run(mode, records, shard_bytes, random.Random(seed))
        finally:
            clients.reset()
    counts = report["records"]
    assert report["status"] == "SUCCEEDED", report["error"]
    assert counts["read"] == len(records) == counts["written"] + counts["skipped"]
    assert table == model(mode, written)
    if mode == "newerWins":  # whatever the order: the file's highest version of each key
        in_file_order = model(mode, records)
        assert {key: v for key, (v, _) in table.items()} == {key: v for key, (v, _) in in_file_order.items()}


def _run_adding(records: list[tuple[int, int]], shard_bytes: int, order: random.Random) -> Any:
    """Run 1: the Workers in a shuffled order, one of them again after its counts were lost, and
    some shards' counts lost at the end (the run failed); run 2 re-runs the job. Run 2's report
    and the table's sums."""
    from handlers import finalize, plan, worker

    s3, db = _aws()
    db.put_item(TableName="target", Item={"pk": {"S": "K#0"}, "sk": {"S": "S"}, "n": {"N": "100"}})
    s3.put_object(
        Bucket="src", Key="in.csv", Body=b"id,n\n" + b"".join(f"{k},{n}\n".encode() for k, n in records)
    )
    spec = {
        "source": "s3://src/in.csv",
        "format": "csv",
        "dynamodb": {
            "key": {"pk": "K#{id}", "sk": "S"},
            "writeMode": "update",
            "attributes": {"n": {"field": "n", "type": "N", "update": "add"}},
        },
        "shardSizeMiB": shard_bytes / (1024 * 1024),
        "maxConcurrency": 10,
        "jobId": "adding",
    }
    first = plan.handle({"input": spec, "execution": {"name": "run-1", "id": "arn:run-1"}}, ENV)
    shards = json.loads(s3.get_object(Bucket="stg", Key=first["manifestKey"])["Body"].read())
    order.shuffle(shards)
    retried = order.choice(shards)
    for shard in shards:
        worker.handle({"shard": shard, "job": first["job"]}, ENV)
    _lose_counts(db, first, retried)
    worker.handle({"shard": retried, "job": first["job"]}, ENV)
    for shard in order.sample(shards, order.randint(1, len(shards))):
        _lose_counts(db, first, shard)
    failed = {"state": {**spec, "plan": first}, "execution": {"name": "run-1", "id": "arn:run-1"}}
    assert finalize.handle(failed, ENV)["report"]["status"] == "FAILED"
    execution = {"name": "run-2", "id": "arn:run-2"}
    second = plan.handle({"input": spec, "execution": execution}, ENV)
    assert second["job"]["planId"] == first["job"]["planId"]
    for shard in shards:
        worker.handle({"shard": shard, "job": second["job"]}, ENV)
    report = finalize.handle({"state": {**spec, "plan": second}, "execution": execution}, ENV)["report"]
    sums = {int(row["pk"]["S"][2:]): int(row["n"]["N"]) for row in db.scan(TableName="target")["Items"]}
    return report, sums


@settings(PIPELINE_EXAMPLES, max_examples=10)
@given(
    records=st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 9)), min_size=1, max_size=30),
    shard_bytes=st.integers(4, 40),
    seed=st.integers(0, 2**16),
)
def test_a_numeric_add_counts_each_record_once_through_a_retried_shard_and_a_rerun(
    monkeypatch: pytest.MonkeyPatch, records: list[tuple[int, int]], shard_bytes: int, seed: int
) -> None:
    _moto_only(monkeypatch)
    with mock_aws():
        clients.reset()
        moto_patches.TRANSACTIONS.install()  # as the embedded run does: moto's transactions isolated
        try:
            report, sums = _run_adding(records, shard_bytes, random.Random(seed))
        finally:
            moto_patches.TRANSACTIONS.uninstall()
            clients.reset()
    expected = {0: 100}
    for key, amount in records:
        expected[key] = expected.get(key, 0) + amount
    assert sums == expected
    counts = report["records"]
    assert report["status"] == "SUCCEEDED", report["error"]
    # Run 2 counts the shards it did; those run 1 recorded are carried, each read once.
    carried = sum(run["records"]["read"] for run in report["carried"]["runs"])
    assert counts["read"] + carried == len(records)
    assert counts["read"] == counts["written"] + counts["skipped"]
