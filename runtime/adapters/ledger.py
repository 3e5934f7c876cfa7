"""The ledger table: one item per job and one per finished shard, written with conditions; and
the markers of records whose numeric ADD was applied (`Markers`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from logic.errors import JobAlreadyRunningError

DAY = 86_400


def _job_pk(job_id: str) -> dict[str, str]:
    return {"S": f"JOB#{job_id}"}


def shard_sk(plan_id: str, index: int) -> str:
    return f"PLAN#{plan_id}#SHARD#{index:06d}"


@dataclass(frozen=True)
class Markers:
    """Where one shard's applied-record markers go (logic/writemodes.py `counted_update`): one
    ledger item per record, keyed by job, plan, shard and the record's byte offset. A partition
    per shard: one worker's writes stay far below a partition's 1,000 write units/s."""

    table: str
    job_id: str
    plan_id: str
    index: int
    expires_at: int

    def item(self, offset: int) -> dict[str, dict[str, str]]:
        return {
            "pk": {"S": f"MARK#{self.job_id}#PLAN#{self.plan_id}#SHARD#{self.index:06d}"},
            "sk": {"S": f"OFFSET#{offset}"},
            "expiresAt": {"N": str(self.expires_at)},
        }


class Ledger:
    def __init__(self, client: Any, table: str, ttl_days: int) -> None:
        self._db = client
        self._table = table
        self._ttl_days = ttl_days

    @property
    def client(self) -> Any:
        return self._db

    @property
    def table(self) -> str:
        return self._table

    def _expires(self) -> dict[str, str]:
        return {"N": str(int(time.time()) + self._ttl_days * DAY)}

    def markers(self, job_id: str, plan_id: str, index: int) -> Markers:
        return Markers(self._table, job_id, plan_id, index, int(self._expires()["N"]))

    def start_job(
        self,
        job_id: str,
        run_id: str,
        execution_id: str,
        shard_count: int,
        *,
        counted_plan: str | None = None,
    ) -> None:
        """Record the job as RUNNING under this run; refuse when another run holds it.
        `counted_plan`: the plan of a job that adds numbers (Plan refuses a re-run under another)."""
        counted = {"countedPlanId": {"S": counted_plan}} if counted_plan is not None else {}
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    **counted,
                    "pk": _job_pk(job_id),
                    "sk": {"S": "JOB"},
                    "status": {"S": "RUNNING"},
                    "runId": {"S": run_id},
                    "executionId": {"S": execution_id},
                    "shardCount": {"N": str(shard_count)},
                    "startedAt": {"N": str(int(time.time()))},
                    "expiresAt": self._expires(),
                },
                # A Lambda retry of the same Plan is the same run, and may proceed.
                ConditionExpression="attribute_not_exists(pk) OR #s <> :running OR runId = :run",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":running": {"S": "RUNNING"}, ":run": {"S": run_id}},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            current = self.get_job(job_id) or {}
            raise JobAlreadyRunningError(
                f"jobId {job_id!r} is already running as execution {current.get('runId', '?')}; "
                "wait for it to finish or choose another jobId"
            ) from error

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        item = self._db.get_item(
            TableName=self._table, Key={"pk": _job_pk(job_id), "sk": {"S": "JOB"}}, ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        return {k: next(iter(v.values())) for k, v in item.items()}

    def finish_job(self, job_id: str, run_id: str, status: str) -> None:
        try:
            self._db.update_item(
                TableName=self._table,
                Key={"pk": _job_pk(job_id), "sk": {"S": "JOB"}},
                UpdateExpression="SET #s = :status, finishedAt = :now",
                ConditionExpression="runId = :run",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":status": {"S": status},
                    ":now": {"N": str(int(time.time()))},
                    ":run": {"S": run_id},
                },
            )
        except ClientError as error:
            # Plan failed before it recorded the job, or another run owns it: nothing of ours to close.
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def record_shard(self, job_id: str, plan_id: str, index: int, counts: dict[str, Any]) -> bool:
        """Store a finished shard's counts once; False when a previous attempt already did."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    "pk": _job_pk(job_id),
                    "sk": {"S": shard_sk(plan_id, index)},
                    "index": {"N": str(index)},
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

    def shard_done(self, job_id: str, plan_id: str, index: int) -> bool:
        item = self._db.get_item(
            TableName=self._table,
            Key={"pk": _job_pk(job_id), "sk": {"S": shard_sk(plan_id, index)}},
            ConsistentRead=True,
            ProjectionExpression="sk",
        ).get("Item")
        return item is not None

    def shards(self, job_id: str, plan_id: str) -> dict[int, dict[str, Any]]:
        found: dict[int, dict[str, Any]] = {}
        paginator = self._db.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": _job_pk(job_id), ":prefix": {"S": f"PLAN#{plan_id}#SHARD#"}},
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                found[int(item["index"]["N"])] = json.loads(item["counts"]["S"])
        return found

    # -- the CSV start-state chain (adapters/csvchain.py) ----------------------------------------

    def put_csv_state(self, job_id: str, plan_id: str, index: int, kind: str, body: dict[str, Any]) -> None:
        """Store a CSV shard's START (its known start state) or SUMMARY (its transfer summary). A
        retry stores the same body again: the put is idempotent."""
        self._db.put_item(
            TableName=self._table,
            Item={
                "pk": _job_pk(job_id),
                "sk": {"S": csv_state_sk(plan_id, index, kind)},
                "csv": {"S": json.dumps(body, separators=(",", ":"))},
                "expiresAt": self._expires(),
            },
        )

    def csv_states_before(
        self, job_id: str, plan_id: str, index: int
    ) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """The CSV START and SUMMARY items of the shards before `index`, nearest first (per shard
        SUMMARY before START), read a page at a time as the caller consumes them."""
        paginator = self._db.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :low AND :high",
            ExpressionAttributeValues={
                ":pk": _job_pk(job_id),
                ":low": {"S": f"PLAN#{plan_id}#CSV#"},
                ":high": {"S": csv_state_sk(plan_id, index - 1, "~")},
            },
            ScanIndexForward=False,
            ConsistentRead=True,
            PaginationConfig={"PageSize": 64},
        ):
            for item in page.get("Items", []):
                _, _, _, number, kind = item["sk"]["S"].split("#")
                yield int(number), kind, json.loads(item["csv"]["S"])

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


def csv_state_sk(plan_id: str, index: int, kind: str) -> str:
    return f"PLAN#{plan_id}#CSV#{index:06d}#{kind}"


def graph_load_sk(run_id: str) -> str:
    return f"RUN#{run_id}#GRAPHLOAD"
