"""What a run reports it wrote is what it wrote (issue 41, "so that the class cannot come back"):
for every write mode, across a random sequence of runs of one jobId — finished, failed (shards
not run, the Map failed), crashed (a Worker dies mid-shard after some of its writes), refused
(every shard already recorded), reloaded — each report's `records.written` equals the writes
DynamoDB (moto) applied to the table during that run by the shards the report counts as its
own, each shard counted by one run of its generation; a refused run applies nothing; each report
reconciles (records, lines, shards: done + carried + failed = total).

A write is counted where moto applies it: a put or delete of an item, an UpdateItem, an update of
a TransactWriteItems (the numeric add's), each once, on the target table (the ledger's markers
and records are not the user's writes). The Workers run one after another, so the writes applied
while one runs are its shard's. Not checked here: the writes a crashed shard made before it died
(the next run sends them again and counts them as its mode can tell: put and update write them
again, putIfAbsent finds them there and counts them skipped): at most the records it read, no
more. A Worker that dies and is retried within its run (`retry`) leaves none: the retry redoes
its range knowing it (the ledger's attempt marker), and a conditional mode counts a key it finds
stored with the item it sends as written, this run's write."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from pipeline_support import ENV, REGION
from virtual_clock import VirtualClock

from adapters import clients
from logic.errors import InputValidationError, JobAlreadyLoadedError
from mapload.emulator import moto_patches
from mapload.tables import create_pk_sk_table

pytestmark = pytest.mark.runtime

MODES = ("put", "putIfAbsent", "newerWins", "update", "add", "delete")
STEPS = ("finish", "fail", "crash", "retry", "reload")
ROWS = 40
HEADER = b"id,v\n"
MAP_FAILED = {"Error": "States.ExceedToleratedFailureThreshold", "Cause": "a child failed"}


class Applied:
    """Counts the writes moto applies to the target table, outermost calls only (moto's UpdateItem
    puts the item it built, a transaction updates through the backend)."""

    def __init__(self) -> None:
        self.count = 0
        self._depth = threading.local()
        self._lock = threading.Lock()  # the ItemWriter's lanes apply writes from several threads

    @contextmanager
    def _outer(self) -> Iterator[bool]:
        depth = getattr(self._depth, "n", 0)
        self._depth.n = depth + 1
        try:
            yield depth == 0
        finally:
            self._depth.n = depth

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def wrap(cls: Any, name: str, writes: Any) -> None:
            original = getattr(cls, name)

            def counted(this: Any, *args: Any, **kwargs: Any) -> Any:
                with self._outer() as outer:
                    result = original(this, *args, **kwargs)
                    if outer:
                        applied = writes(this, args, kwargs)
                        with self._lock:
                            self.count += applied
                    return result

            monkeypatch.setattr(cls, name, counted)

        def target(name: Any) -> int:
            return 1 if name == "target" else 0

        wrap(Table, "put_item", lambda t, a, k: target(t.name))
        wrap(Table, "delete_item", lambda t, a, k: target(t.name))
        wrap(DynamoDBBackend, "update_item", lambda b, a, k: target(k.get("table_name", a[0] if a else None)))
        wrap(
            DynamoDBBackend,
            "transact_write_items",
            lambda b, a, k: sum(
                target(op.get("TableName"))
                for item in (k.get("transact_items") or a[0])
                for op in item.values()
                if isinstance(op, dict)
            ),
        )


def _spec(mode: str) -> dict[str, Any]:
    dynamodb: dict[str, Any] = {"key": {"pk": "K#{id}", "sk": "S"}}
    dynamodb["writeMode"] = "update" if mode == "add" else mode
    if mode != "delete":
        dynamodb["attributes"] = {
            "v": {"field": "v", "type": "N", **({"update": "add"} if mode == "add" else {})}
        }
    if mode == "newerWins":
        dynamodb["version"] = "v"
    return {
        "source": "s3://src/in.csv",
        "format": "csv",
        "dynamodb": dynamodb,
        "shardSizeMiB": 40 / (1024 * 1024),
        "maxConcurrency": 10,
        "jobId": "again",
    }


def _crash_after(monkeypatch: pytest.MonkeyPatch, shards: int, lines: int) -> None:
    """The Worker of the shard read after `shards` others dies after `lines` lines (its writes so
    far flushed)."""
    from shards import service

    original = service.process
    before = [shards]

    def dying(lines_in: Iterator[Any], *args: Any, **kwargs: Any) -> dict[str, int]:
        before[0] -= 1
        if before[0] != -1:
            return original(lines_in, *args, **kwargs)

        def lines_then_death() -> Iterator[Any]:
            for n, line in enumerate(lines_in):
                if n == lines:
                    raise RuntimeError("the Worker died")
                yield line

        return original(lines_then_death(), *args, **kwargs)

    monkeypatch.setattr(service, "process", dying)


def _sequence(mode: str, steps: list[str], monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    from handlers import finalize, plan, worker

    s3 = boto3.client("s3", region_name=REGION)
    db = boto3.client("dynamodb", region_name=REGION)
    for bucket in ("src", "stg"):
        s3.create_bucket(Bucket=bucket)
    for table in ("ledger", "target"):
        create_pk_sk_table(db, table)
    s3.put_object(
        Bucket="src", Key="in.csv", Body=HEADER + b"".join(f"{i},{i}\n".encode() for i in range(ROWS))
    )
    applied = Applied()
    applied.install(monkeypatch)
    clock = VirtualClock()
    done: set[int] = set()  # the shards the current generation recorded
    loaded = False
    seen = []
    for number, step in enumerate(steps, start=1):
        run = f"run-{number}"
        execution = {"name": run, "id": f"arn:{run}"}
        spec = {**_spec(mode), **({"reload": True} if step == "reload" else {})}
        before = applied.count
        try:
            planned = plan.handle({"input": spec, "execution": execution}, ENV, now=clock.time)
        except JobAlreadyLoadedError:
            assert loaded and step != "reload", "refused a plan whose shards are not all recorded"
            assert applied.count == before  # refused: nothing written
            seen.append({"step": "refused"})
            continue
        except InputValidationError as refused:
            assert (mode, step, refused.field) == ("add", "reload", "reload")
            seen.append({"step": "refused"})
            continue
        assert not (loaded and step != "reload"), "a plan whose shards are all recorded ran again"
        if step == "reload":
            done, loaded = set(), False
        manifest = json.loads(s3.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
        to_run = manifest[: len(manifest) // 2] if step == "fail" else manifest
        if step in ("crash", "retry"):  # mid-run: the shards before it are done
            _crash_after(monkeypatch, (len(manifest) - len(done)) // 2, 2)
        own: dict[int, int] = {}  # shard -> writes applied while its Worker ran, for the shards it recorded
        crashed = False
        replayed = 0  # writes applied twice in this run (a retried Worker's idempotent modes)
        for shard in to_run:
            index, start = int(shard["index"]), applied.count
            try:
                result = worker.handle({"shard": shard, "job": planned["job"]}, ENV)
            except RuntimeError:
                if step == "crash":
                    crashed = True  # the Map fails: the other shards are not started
                    break
                # The Map retries the Worker (Sandbox.Timedout) in this run: the crashed attempt's
                # writes are this run's, and the retry counts them once (a conditional mode's
                # too); put, update and delete apply them again, counted once.
                if mode in ("put", "update", "delete"):
                    replayed += applied.count - start
                result = worker.handle({"shard": shard, "job": planned["job"]}, ENV)
            if result.get("skipped"):
                assert index in done and applied.count == start  # done before: nothing sent
            else:
                own[index] = applied.count - start
        failed = crashed or step == "fail"
        state = {**spec, "plan": planned, **({"error": MAP_FAILED} if failed else {})}
        report = finalize.handle({"state": state, "execution": execution}, ENV, now=clock.time)["report"]
        records, shards = report["records"], report["shards"]
        # What the report says this run wrote is what the table took from the shards it counts.
        assert sorted(own) == sorted(set(range(len(manifest))) - done - set(shards["missing"]))
        assert records["written"] == sum(own.values()) - replayed, (step, records, own)
        assert shards["done"] == len(own) and shards["carried"] == len(done)
        assert shards["total"] == shards["done"] + shards["carried"] + shards["failed"]
        assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
        assert (
            sum(run["shards"] for run in report["carried"]["runs"])
            == report["carried"]["shards"]
            == len(done)
        )
        if report["lines"] is not None:
            lines = report["lines"]
            assert lines["total"] == lines["accepted"] + lines["rejected"] + lines["ignored"]
        done |= set(own)
        loaded = len(done) == len(manifest)
        uncounted = applied.count - before - sum(own.values())
        assert "uncertain" not in records  # unique keys: a redone range always tells
        # Only a crashed run leaves writes no report counts: its dead Worker's, at most the two
        # records it read (the next run's report counts what it applies itself).
        assert 0 <= uncounted <= (2 if step == "crash" else 0), (step, uncounted)
        seen.append({"step": step, "uncounted": uncounted})
        clock.advance(int(ENV["WORKER_TIMEOUT_SECONDS"]) + 61)  # past any failed run's Workers
    return seen


@pytest.mark.parametrize("mode", MODES)
@settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.generate),
    max_examples=3,
)
@given(steps=st.lists(st.sampled_from(STEPS), min_size=1, max_size=4))
@example(steps=["fail", "finish", "finish", "reload", "crash", "finish"])
@example(steps=["retry", "reload", "crash", "retry"])
def test_each_report_says_what_its_run_wrote(
    monkeypatch: pytest.MonkeyPatch, mode: str, steps: list[str]
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        clients.reset()
        moto_patches.TRANSACTIONS.install()  # as the embedded run does
        try:
            # The test's own wrappers undone before the patch they wrap (else moto's class keeps
            # this example's patched transaction, and the next example's holds its items twice).
            with monkeypatch.context() as patches:
                seen = _sequence(mode, steps, patches)
        finally:
            moto_patches.TRANSACTIONS.uninstall()
            clients.reset()
    assert len(seen) == len(steps)
