"""A job-wide write budget shared by the running shards, through leases in the ledger table.

Each worker of a job with `writeUnitsPerSecond` holds a lease item
(`pk=JOB#<jobId>`, `sk=LEASE#<runId>#SHARD#<index:06d>`, `until` epoch seconds) that it renews
every `interval` seconds; on each renewal it counts the leases of its run that have not expired
(one Query) and sets its writer to budget / that count. A finished worker ends its lease
(`until` = 0), so the others take over its share within one interval; a worker that crashes
stops renewing and its lease lapses after `lease_seconds`. Until then the survivors under-use
the budget — never over-use it. Limits: shards that start together may all see a smaller count
for up to one interval (each then briefly takes more than its share; DynamoDB throttling and the
AIMD window absorb it), and the split is equal, not by how much work each shard has left.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from logic.ratecontrol import budget_share, live_leases


class RateSetter(Protocol):
    def set_rate(self, rate: float | None) -> None: ...


def lease_prefix(run_id: str) -> str:
    return f"LEASE#{run_id}#SHARD#"


class LeaseBoard:
    """Lease items of one run in the ledger table."""

    def __init__(self, client: Any, table: str, job_id: str, run_id: str, ttl_seconds: int = 86_400) -> None:
        self._db = client
        self._table = table
        self._pk = {"S": f"JOB#{job_id}"}
        self._run_id = run_id
        self._ttl_seconds = ttl_seconds

    def hold(self, index: int, until: float) -> None:
        self._db.put_item(
            TableName=self._table,
            Item={
                "pk": self._pk,
                "sk": {"S": f"{lease_prefix(self._run_id)}{index:06d}"},
                "until": {"N": f"{until:.3f}"},
                "expiresAt": {"N": str(int(time.time()) + self._ttl_seconds)},
            },
        )

    def running(self, now: float) -> int:
        leases: list[dict[str, str]] = []
        paginator = self._db.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": self._pk, ":prefix": {"S": lease_prefix(self._run_id)}},
            ProjectionExpression="#u",
            ExpressionAttributeNames={"#u": "until"},
            ConsistentRead=True,
        ):
            leases.extend({"until": item["until"]["N"]} for item in page.get("Items", []))
        return live_leases(leases, now)


class SharedBudget:
    """Keeps one writer at budget / running shards while the shard runs (a daemon thread)."""

    def __init__(
        self,
        board: LeaseBoard,
        index: int,
        budget: float,
        writer: RateSetter,
        *,
        interval: float = 10.0,
        lease_seconds: float = 45.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._board = board
        self._index = index
        self._budget = budget
        self._writer = writer
        self._interval = interval
        self._lease_seconds = lease_seconds
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="write-budget", daemon=True)
        self.running = 1
        self.rate: float | None = None

    def __enter__(self) -> SharedBudget:
        self.refresh()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        # Hand the share back to the shards still running. If the ledger refuses even after its
        # client's retries, the lease lapses on its own: the shard's work is done, so no failure.
        with contextlib.suppress(Exception):
            self._board.hold(self._index, 0)

    def refresh(self) -> None:
        now = self._clock()
        self._board.hold(self._index, now + self._lease_seconds)
        self.running = max(1, self._board.running(now))
        self.rate = budget_share(self._budget, self.running)
        self._writer.set_rate(self.rate)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.refresh()
            except Exception:  # a missed renewal only keeps the old share
                continue
