"""The ledger table: one item per job and one per finished shard, written with conditions; and
the markers of records whose numeric ADD was applied (`Markers`).

Keys are laid out so that no partition key takes more than a partition's throughput (1,000 write
units, 3,000 read units a second) at the largest run Plan and the config accept (100,000 shards,
10,000 Workers): `tests/runtime/test_ledger_keys.py` computes each key's rate from the constants
here, and the embedded run meters requests per key (`tests/e2e/test_key_load.py`).

- The job item (`JOB#<jobId>`, `JOB`) and a run's graph load claim are read and written a few times
  a run: they stay under the job's key.
- A shard's record, its failure (why its last attempt failed) and CSV chain states live under
  the key of its *block*
  (`JOB#<jobId>#PLAN#<planId>#BLOCK#<index // BLOCK_SHARDS>`): blocks are contiguous, so the CSV
  walk-back reads its own block and the few before it, and Finalize reads the blocks in parallel.
  The Map starts neighbouring shards together, so the bound assumes all of a block's shards
  write their largest record and chain states within one second.
- Applied-record markers are spread over MARKER_BUCKETS keys per shard by a hash of the record's
  offset: a record's marker key is still a function of (job, plan, shard, offset), so a retry or a
  re-run meets the marker its first attempt wrote (exactly once), while one shard's transactions
  (up to `write_concurrency` in flight, at most MARKED_IN_FLIGHT) no longer sit on one key.
- The write budget (adapters/budget.py) counts the running Workers with heartbeat counters, not a
  Query of leases.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from logic.errors import JobAlreadyRunningError, JobTakenOverError

DAY = 86_400
# Shards per block key. Bound: BLOCK_SHARDS x (largest shard record + CSV states) in write units
# within one second stays under 1,000 (the record's samples: tests/runtime/test_ledger_keys.py).
BLOCK_SHARDS: Final = 8
# Marker keys per shard. Bound: MARKED_IN_FLIGHT transactions in flight, each 2 write units per
# item (transactional), at FASTEST_TRANSACTION_SECONDS, spread over this many keys. Fixed: a
# record's marker key must not change between a run and its resumption (exactly once).
MARKER_BUCKETS: Final = 64
# The quickest TransactWriteItems round trip assumed (DynamoDB's are ~10 ms, within a Region's
# network a few less).
FASTEST_TRANSACTION_SECONDS: Final = 0.005
# The most transactions a shard that adds numbers keeps in flight (below `write_concurrency`'s
# cap of 256: at 5 ms that would be ~1,600 write units a second on the busiest marker key).
MARKED_IN_FLIGHT: Final = 128
# Threads Finalize reads the blocks with.
READ_THREADS: Final = 16
# Items a CSV walk-back Query reads a page at a time.
CSV_PAGE_ITEMS: Final = 64


def _job_pk(job_id: str) -> dict[str, str]:
    return {"S": f"JOB#{job_id}"}


def block_of(index: int) -> int:
    return index // BLOCK_SHARDS


def block_pk(job_id: str, plan_id: str, block: int) -> dict[str, str]:
    return {"S": f"JOB#{job_id}#PLAN#{plan_id}#BLOCK#{block:05d}"}


def shard_key(job_id: str, plan_id: str, index: int) -> dict[str, dict[str, str]]:
    """The key of a shard's record."""
    return {"pk": block_pk(job_id, plan_id, block_of(index)), "sk": {"S": f"SHARD#{index:06d}"}}


def marker_bucket(offset: int) -> int:
    return zlib.crc32(str(offset).encode()) % MARKER_BUCKETS


@dataclass(frozen=True)
class Markers:
    """Where one shard's applied-record markers go (logic/writemodes.py `counted_update`): one
    ledger item per record, keyed by job, plan, shard and the record's byte offset, spread over
    MARKER_BUCKETS partition keys by the offset (see the module docstring). Each names the run
    that stored it (`run_id`), so that a record found applied is told apart: by an earlier run
    (skipped) or by this run's own crashed or unanswered attempt (written, by this run)."""

    table: str
    job_id: str
    plan_id: str
    index: int
    expires_at: int
    run_id: str = ""

    def item(self, offset: int) -> dict[str, dict[str, str]]:
        shard = f"MARK#{self.job_id}#PLAN#{self.plan_id}#SHARD#{self.index:06d}"
        return {
            "pk": {"S": f"{shard}#{marker_bucket(offset):02d}"},
            "sk": {"S": f"OFFSET#{offset}"},
            "expiresAt": {"N": str(self.expires_at)},
            **({"runId": {"S": self.run_id}} if self.run_id else {}),
        }


class Ledger:
    def __init__(
        self,
        client: Any,
        table: str,
        ttl_days: int,
        *,
        settle: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        """`settle(job item)`: called before a job held by an ended execution is taken over or
        released; it raises JobAlreadyRunningError to keep the job held (a bulk put items
        operation still running: adapters/bulk_puts.py BulkOperations.settle)."""
        self._db = client
        self._table = table
        self._ttl_days = ttl_days
        self._settle = settle

    @property
    def client(self) -> Any:
        return self._db

    @property
    def table(self) -> str:
        return self._table

    def _expires(self) -> dict[str, str]:
        return {"N": str(int(time.time()) + self._ttl_days * DAY)}

    def markers(self, job_id: str, plan_id: str, index: int, run_id: str = "") -> Markers:
        return Markers(self._table, job_id, plan_id, index, int(self._expires()["N"]), run_id)

    def start_job(
        self,
        job_id: str,
        run_id: str,
        execution_id: str,
        shard_count: int,
        *,
        counted_plan: str | None = None,
        ended: Callable[[str], bool] | None = None,
    ) -> None:
        """Record the job as RUNNING under this run; refuse when another run holds it, unless
        `ended` says that run's execution is over (stopped, timed out, failed past Finalize): the
        claim is then taken over. `counted_plan`: the plan of a job that adds numbers (Plan refuses
        a re-run under another). The countedPlanId an earlier run recorded is carried over by a
        run that adds none (a put run of the jobId must not erase it), and the claim is
        conditioned on it, so a changed add run cannot slip in between the read and the claim."""
        earlier = (self.get_job(job_id) or {}).get("countedPlanId")
        counted_id = counted_plan if counted_plan is not None else earlier
        item = {
            **({"countedPlanId": {"S": counted_id}} if counted_id is not None else {}),
            "pk": _job_pk(job_id),
            "sk": {"S": "JOB"},
            "status": {"S": "RUNNING"},
            "runId": {"S": run_id},
            "executionId": {"S": execution_id},
            "shardCount": {"N": str(shard_count)},
            "startedAt": {"N": str(int(time.time()))},
            "expiresAt": self._expires(),
        }
        # A Lambda retry of the same Plan is the same run, and may proceed.
        free = "attribute_not_exists(pk) OR #s <> :running OR runId = :run"
        if self._claim(item, free, run_id, earlier):
            return
        current = self.get_job(job_id) or {}
        held_by = str(current.get("executionId") or "")
        # The run that holds it is over without closing it: take it over, if still that run's.
        if ended is not None and held_by and ended(held_by):
            if self._settle is not None:
                self._settle(current)
            if self._claim(item, "#s = :running AND runId = :run", str(current.get("runId")), earlier):
                return
            current = self.get_job(job_id) or {}
        if current.get("countedPlanId") != earlier:
            raise JobAlreadyRunningError(
                f"jobId {job_id!r} changed while this run claimed it (another run added numbers); start again"
            )
        raise JobAlreadyRunningError(
            f"jobId {job_id!r} is already running as execution {current.get('runId', '?')}; "
            "wait for it to finish or choose another jobId"
        )

    def _claim(self, item: dict[str, Any], condition: str, run_id: str, counted: str | None) -> bool:
        """Put the job item if `condition` holds and its countedPlanId is still `counted`."""
        values = {":running": {"S": "RUNNING"}, ":run": {"S": run_id}}
        condition = f"({condition})" if " OR " in condition else condition  # no redundant parentheses
        if counted is None:
            condition += " AND attribute_not_exists(countedPlanId)"
        else:
            condition += " AND countedPlanId = :counted"
            values[":counted"] = {"S": counted}
        try:
            self._db.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def release_job(self, job_id: str, ended: Callable[[str], bool]) -> dict[str, Any]:
        """Mark a RUNNING job RELEASED when its execution is over (`mapload release`); the job
        item as it was. Refuses (JobAlreadyRunningError) while the execution runs; ValueError when
        there is no such job or it is not RUNNING."""
        current = self.get_job(job_id)
        if current is None:
            raise ValueError(f"no job {job_id!r} in the ledger (never run, or expired)")
        if current.get("status") != "RUNNING":
            raise ValueError(
                f"jobId {job_id!r} is not held: run {current.get('runId')} left it {current.get('status')}"
            )
        execution = str(current.get("executionId") or "")
        if not ended(execution):
            raise JobAlreadyRunningError(
                f"jobId {job_id!r} is held by execution {execution}, which is still RUNNING: "
                "stop it first (aws stepfunctions stop-execution --execution-arn ...)"
            )
        if self._settle is not None:
            self._settle(current)
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": _job_pk(job_id), "sk": {"S": "JOB"}},
                UpdateExpression="SET #s = :released, finishedAt = :now",
                ConditionExpression="#s = :running AND runId = :run",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":released": {"S": "RELEASED"},
                    ":running": {"S": "RUNNING"},
                    ":now": {"N": str(int(time.time()))},
                    ":run": {"S": str(current.get("runId"))},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            raise ValueError(
                f"jobId {job_id!r} changed while it was released (a new run took it); nothing done"
            ) from None
        return current

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        item = self._db.get_item(
            TableName=self._table, Key={"pk": _job_pk(job_id), "sk": {"S": "JOB"}}, ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        return {k: next(iter(v.values())) for k, v in item.items()}

    def finish_job(self, job_id: str, run_id: str, status: str, *, writers_until: int | None = None) -> None:
        """Close the run's claim with its status; `writers_until` (epoch seconds): a run whose shards
        did not all finish records until when its Workers may still write (Plan refuses a re-run
        before then: `writers_still_running`)."""
        values = {":status": {"S": status}, ":now": {"N": str(int(time.time()))}, ":run": {"S": run_id}}
        update = "SET #s = :status, finishedAt = :now"
        if writers_until is not None:
            update += ", writersUntil = :until"
            values[":until"] = {"N": str(writers_until)}
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": _job_pk(job_id), "sk": {"S": "JOB"}},
                UpdateExpression=update,
                ConditionExpression="runId = :run",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            # Plan failed before it recorded the job, or another run owns it: nothing of ours to close.
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def record_shard(self, job_id: str, plan_id: str, index: int, counts: dict[str, Any]) -> bool:
        """Store a finished shard's counts once; False when a previous attempt already did. The
        counts carry `runId`, the run (execution name) whose Worker wrote them: Finalize reports a
        shard another run finished apart from this run's (`carried`)."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    **shard_key(job_id, plan_id, index),
                    "index": {"N": str(index)},
                    "runId": {"S": str(counts.get("runId") or "")},
                    "recordedAt": {"N": str(int(time.time()))},
                    "counts": {"S": json.dumps(counts, separators=(",", ":"))},
                    "expiresAt": self._expires(),
                },
                ConditionExpression="attribute_not_exists(sk)",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def checkpoint(self, job_id: str, plan_id: str, index: int) -> dict[str, Any] | None:
        """The shard's checkpoint (how far its earlier invocations got: logic/checkpoints.py), or
        None when none stopped before its end."""
        item = self._db.get_item(
            TableName=self._table, Key=checkpoint_key(job_id, plan_id, index), ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        return {**json.loads(item["checkpoint"]["S"]), "seq": int(item["seq"]["N"])}

    def advance_checkpoint(
        self, job_id: str, plan_id: str, index: int, body: Mapping[str, Any], previous: int
    ) -> bool:
        """Store the shard's next checkpoint (sequence `previous` + 1) only while its checkpoint is
        still at `previous` (0: none yet): two invocations resumed from one checkpoint cannot both
        advance it. False when another did first (this invocation's segment is not counted)."""
        condition = "attribute_not_exists(sk)" if previous == 0 else "seq = :previous"
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    **checkpoint_key(job_id, plan_id, index),
                    "index": {"N": str(index)},
                    "seq": {"N": str(previous + 1)},
                    "runId": {"S": str(body.get("runId") or "")},
                    "recordedAt": {"N": str(int(time.time()))},
                    "checkpoint": {"S": json.dumps(body, separators=(",", ":"))},
                    "expiresAt": self._expires(),
                },
                ConditionExpression=condition,
                **({"ExpressionAttributeValues": {":previous": {"N": str(previous)}}} if previous else {}),
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def start_attempt(self, job_id: str, plan_id: str, index: int, run_id: str, seq: int) -> bool:
        """Mark that an invocation of this run starts the shard from checkpoint `seq` (0: its
        start); True when an earlier invocation of this run started from there too and did not
        advance it (it crashed or timed out): this one redoes that range, and a conditional write
        mode's "the key exists" may be that attempt's own write (adapters/dynamodb.py `replayed`)."""
        earlier = self._db.put_item(
            TableName=self._table,
            Item={
                "pk": block_pk(job_id, plan_id, block_of(index)),
                "sk": {"S": f"ATTEMPT#{index:06d}"},
                "index": {"N": str(index)},
                "runId": {"S": run_id},
                "seq": {"N": str(seq)},
                "expiresAt": self._expires(),
            },
            ReturnValues="ALL_OLD",
        ).get("Attributes")
        return bool(earlier) and earlier["runId"]["S"] == run_id and int(earlier["seq"]["N"]) == seq

    def record_shard_failure(self, job_id: str, plan_id: str, index: int, failure: Mapping[str, Any]) -> None:
        """Store why a shard's attempt failed (its error's name, message, the record's line when one
        record caused it: logic/report.py shard_failure), for Finalize to report; a later attempt's
        replaces it. Beside the shard's record, never it: a failed shard stays to be done."""
        self._db.put_item(
            TableName=self._table,
            Item={
                "pk": block_pk(job_id, plan_id, block_of(index)),
                "sk": {"S": f"FAILED#{index:06d}"},
                "index": {"N": str(index)},
                "failure": {"S": json.dumps(failure, separators=(",", ":"))},
                "expiresAt": self._expires(),
            },
        )

    def shard_failures(self, job_id: str, plan_id: str, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The failures recorded for the shards `indices` (the missing ones): their blocks read in
        parallel, nothing read when there are none."""
        wanted = set(indices)
        found: dict[int, dict[str, Any]] = {}
        blocks = sorted({block_of(index) for index in wanted})
        with ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="ledger") as pool:
            for items in pool.map(lambda block: self._block(job_id, plan_id, block, "FAILED#"), blocks):
                for item in items:
                    index = int(item["index"]["N"])
                    if index in wanted:
                        found[index] = json.loads(item["failure"]["S"])
        return found

    def shard_done(self, job_id: str, plan_id: str, index: int) -> bool:
        item = self._db.get_item(
            TableName=self._table,
            Key=shard_key(job_id, plan_id, index),
            ConsistentRead=True,
            ProjectionExpression="sk",
        ).get("Item")
        return item is not None

    def shards(self, job_id: str, plan_id: str, count: int) -> dict[int, dict[str, Any]]:
        """The recorded shards among the first `count`: their blocks read in parallel."""
        found: dict[int, dict[str, Any]] = {}
        blocks = range(block_of(count - 1) + 1) if count > 0 else range(0)
        with ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="ledger") as pool:
            for items in pool.map(lambda block: self._block(job_id, plan_id, block, "SHARD#"), blocks):
                for item in items:
                    found[int(item["index"]["N"])] = json.loads(item["counts"]["S"])
        return found

    def _block(self, job_id: str, plan_id: str, block: int, prefix: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in self._db.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": block_pk(job_id, plan_id, block), ":prefix": {"S": prefix}},
            ConsistentRead=True,
        ):
            items.extend(page.get("Items", []))
        return items

    # -- writeMode sync: a dataset's baseline and a sync's bucket counts ---------------------------

    def dataset(self, table: str, dataset: str) -> dict[str, Any] | None:
        """The dataset's baseline (`prefix`, `buckets`, `jobId`, `runId`), None before its first
        successful sync."""
        item = self._db.get_item(
            TableName=self._table, Key=dataset_key(table, dataset), ConsistentRead=True
        ).get("Item")
        return json.loads(item["baseline"]["S"]) if item else None

    def switch_baseline(
        self, table: str, dataset: str, previous: str | None, baseline: Mapping[str, Any]
    ) -> bool:
        """Make `baseline` the dataset's, in one conditional write: only while the baseline is still
        `previous` (the one this sync compared with; None: none yet), or already this one (a
        retried switch). False when another sync switched it first."""
        prefix = str(baseline["prefix"])
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    **dataset_key(table, dataset),
                    "prefix": {"S": prefix},
                    "baseline": {"S": json.dumps(dict(baseline), separators=(",", ":"))},
                },
                ConditionExpression="attribute_not_exists(pk) OR prefix IN (:previous, :mine)"
                if previous is not None
                else "attribute_not_exists(pk) OR prefix = :mine",
                ExpressionAttributeValues={
                    ":mine": {"S": prefix},
                    **({":previous": {"S": previous}} if previous is not None else {}),
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def record_sync_bucket(
        self, job_id: str, plan_id: str, bucket: int, baseline: str, counts: Mapping[str, Any]
    ) -> bool:
        """Store a synced bucket's counts once; False when an earlier attempt did."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    **sync_bucket_key(job_id, plan_id, bucket, baseline),
                    "counts": {"S": json.dumps({**counts, "bucket": bucket, "baseline": baseline})},
                    "expiresAt": self._expires(),
                },
                ConditionExpression="attribute_not_exists(sk)",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def sync_bucket_done(self, job_id: str, plan_id: str, bucket: int, baseline: str) -> bool:
        item = self._db.get_item(
            TableName=self._table,
            Key=sync_bucket_key(job_id, plan_id, bucket, baseline),
            ConsistentRead=True,
            ProjectionExpression="sk",
        ).get("Item")
        return item is not None

    def sync_buckets(self, job_id: str, plan_id: str, count: int, baseline: str) -> dict[int, dict[str, Any]]:
        """The recorded buckets among the first `count` that compared with `baseline`."""
        found: dict[int, dict[str, Any]] = {}
        blocks = range(block_of(count - 1) + 1) if count > 0 else range(0)
        with ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="ledger") as pool:
            for items in pool.map(lambda block: self._block(job_id, plan_id, block, "SYNC#"), blocks):
                for item in items:
                    counts = json.loads(item["counts"]["S"])
                    if counts.get("baseline") == baseline:
                        found[int(counts["bucket"])] = counts
        return found

    # -- a plan's record: whether it was loaded whole, and its reload generation ------------------

    def plan_record(self, job_id: str, plan_id: str) -> dict[str, Any]:
        """The job's record of a plan (`PLAN#<planId>` under the job's key): `generation` (how many
        times `"reload": true` started it afresh; 0 when never), `loaded` (JSON: the run that
        finished its last shard of that generation, when, and the job's counts) when every shard is
        recorded. Empty when the plan never ran."""
        item = self._db.get_item(
            TableName=self._table,
            Key={"pk": _job_pk(job_id), "sk": {"S": plan_sk(plan_id)}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return {}
        return {
            "generation": int(item.get("generation", {}).get("N", "0")),
            "loaded": json.loads(item["loaded"]["S"]) if "loaded" in item else None,
        }

    def reload_plan(self, job_id: str, plan_id: str, run_id: str) -> int:
        """Start the plan afresh for `run_id` (`"reload": true`): the next generation, whose shards
        are recorded under their own keys (logic/job.py PlannedJob.plan), and no `loaded`. A retry of
        the same Plan gets the generation its first attempt made."""
        try:
            answer = self._db.update_item(
                TableName=self._table,
                Key={"pk": _job_pk(job_id), "sk": {"S": plan_sk(plan_id)}},
                UpdateExpression="SET generation = if_not_exists(generation, :zero) + :one, "
                "reloadRunId = :run, expiresAt = :expires REMOVE loaded",
                ConditionExpression="attribute_not_exists(reloadRunId) OR reloadRunId <> :run",
                ExpressionAttributeValues={
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                    ":run": {"S": run_id},
                    ":expires": self._expires(),
                },
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return int(self.plan_record(job_id, plan_id)["generation"])
        return int(answer["Attributes"]["generation"]["N"])

    def record_loaded(self, job_id: str, plan_id: str, generation: int, loaded: Mapping[str, Any]) -> None:
        """Record that every shard of the plan's `generation` is done (`loaded`: the run, when, the
        counts): a re-run of the plan is refused (plans/service.py) unless it reloads. Only while
        the plan is still at that generation (a later reload started it afresh: nothing to say)."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": _job_pk(job_id), "sk": {"S": plan_sk(plan_id)}},
                UpdateExpression="SET loaded = :loaded, expiresAt = :expires",
                ConditionExpression=(
                    "generation = :generation" if generation else "attribute_not_exists(generation)"
                ),
                ExpressionAttributeValues={
                    ":loaded": {"S": json.dumps(loaded, separators=(",", ":"))},
                    ":expires": self._expires(),
                    **({":generation": {"N": str(generation)}} if generation else {}),
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    # -- the CSV start-state chain (adapters/csvchain.py) ----------------------------------------

    def put_csv_state(self, job_id: str, plan_id: str, index: int, kind: str, body: dict[str, Any]) -> None:
        """Store a CSV shard's START (its known start state) or SUMMARY (its transfer summary). A
        retry stores the same body again: the put is idempotent."""
        self._db.put_item(
            TableName=self._table,
            Item={
                "pk": block_pk(job_id, plan_id, block_of(index)),
                "sk": {"S": csv_state_sk(index, kind)},
                "csv": {"S": json.dumps(body, separators=(",", ":"))},
                "expiresAt": self._expires(),
            },
        )

    def csv_states_before(
        self, job_id: str, plan_id: str, index: int
    ) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """The CSV START and SUMMARY items of the shards before `index`, nearest first (per shard
        SUMMARY before START), read a page at a time as the caller consumes them: its own block
        first, then the blocks before it."""
        paginator = self._db.get_paginator("query")
        for block in range(block_of(index - 1), -1, -1) if index > 0 else ():
            for page in paginator.paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND sk BETWEEN :low AND :high",
                ExpressionAttributeValues={
                    ":pk": block_pk(job_id, plan_id, block),
                    ":low": {"S": "CSV#"},
                    ":high": {"S": csv_state_sk(index - 1, "~")},
                },
                ScanIndexForward=False,
                ConsistentRead=True,
                PaginationConfig={"PageSize": CSV_PAGE_ITEMS},
            ):
                for item in page.get("Items", []):
                    _, number, kind = item["sk"]["S"].split("#")
                    yield int(number), kind, json.loads(item["csv"]["S"])

    # -- a bulk put items operation (dynamodb.engine bulkPutItems: one per run) ---------------

    def record_bulk_operation(self, job_id: str, run_id: str, arn: str, objects: int) -> None:
        """Record the run's bulk put items operation on the job item (`bulkOperationArn`,
        `bulkRunId`, `bulkObjects`: the staged objects it reads): while it runs, a takeover or
        release of the job cancels it first (`settle`). Only while the job is still this run's
        (JobTakenOverError otherwise)."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": _job_pk(job_id), "sk": {"S": "JOB"}},
                UpdateExpression="SET bulkOperationArn = :arn, bulkRunId = :run, bulkObjects = :objects",
                ConditionExpression="runId = :run",
                ExpressionAttributeValues={
                    ":arn": {"S": arn},
                    ":run": {"S": run_id},
                    ":objects": {"N": str(objects)},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            raise JobTakenOverError(
                f"jobId {job_id!r} is no longer held by run {run_id}: its bulk put operation {arn} "
                "was started but not recorded"
            ) from None

    # -- the graph load (one per run: a retried StartGraphLoad finds it here) -----------------

    def graph_load(self, job_id: str, run_id: str) -> dict[str, Any] | None:
        item = self._db.get_item(
            TableName=self._table,
            Key={"pk": _job_pk(job_id), "sk": {"S": graph_load_sk(run_id)}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        return {k: next(iter(v.values())) for k, v in item.items()}

    def claim_graph_load(
        self, job_id: str, run_id: str, source: str, *, dangling: Mapping[str, Any] | None = None
    ) -> bool:
        """Record that this run is about to start its load (before the POST), with the edge
        endpoint check that let it start (a retry reports the same); False when an earlier
        attempt already claimed it, and so may have started a load."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    "pk": _job_pk(job_id),
                    "sk": {"S": graph_load_sk(run_id)},
                    "source": {"S": source},
                    "claimedAt": {"N": str(int(time.time()))},
                    "expiresAt": self._expires(),
                    **({"danglingEdges": {"S": json.dumps(dangling)}} if dangling is not None else {}),
                },
                ConditionExpression="attribute_not_exists(sk)",
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def record_graph_load(self, job_id: str, run_id: str, load_id: str) -> str:
        """Store the run's load id once; the id already stored when another attempt got there first."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": _job_pk(job_id), "sk": {"S": graph_load_sk(run_id)}},
                UpdateExpression="SET loadId = :id, startedAt = :now",
                ConditionExpression="attribute_not_exists(loadId)",
                ExpressionAttributeValues={":id": {"S": load_id}, ":now": {"N": str(int(time.time()))}},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            existing = self.graph_load(job_id, run_id) or {}
            return str(existing.get("loadId") or load_id)
        return load_id


def dataset_key(table: str, dataset: str) -> dict[str, dict[str, str]]:
    """writeMode sync: a dataset's baseline record (kept: no expiry)."""
    return {"pk": {"S": f"DATASET#{table}#{dataset}"}, "sk": {"S": "BASELINE"}}


def sync_bucket_key(job_id: str, plan_id: str, bucket: int, baseline: str) -> dict[str, dict[str, str]]:
    """writeMode sync: a bucket's recorded counts, under its block, for the baseline it compared
    with (a re-run after another sync of the dataset compares again)."""
    tag = format(zlib.crc32(baseline.encode()), "08x")
    return {"pk": block_pk(job_id, plan_id, block_of(bucket)), "sk": {"S": f"SYNC#{bucket:05d}#{tag}"}}


def checkpoint_key(job_id: str, plan_id: str, index: int) -> dict[str, dict[str, str]]:
    """The key of a shard's checkpoint: beside its record, in its block."""
    return {"pk": block_pk(job_id, plan_id, block_of(index)), "sk": {"S": f"CKPT#{index:06d}"}}


def csv_state_sk(index: int, kind: str) -> str:
    return f"CSV#{index:06d}#{kind}"


def plan_sk(plan_id: str) -> str:
    return f"PLAN#{plan_id}"


def graph_load_sk(run_id: str) -> str:
    return f"RUN#{run_id}#GRAPHLOAD"
