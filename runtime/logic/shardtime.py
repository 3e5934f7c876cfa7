"""How long a shard takes at a write budget (`writeUnitsPerSecond`), and the concurrency that keeps
it within half the Worker's timeout: the one rule Plan (plans/service.py) and `mapload estimate`
use.

Under a budget each running Worker writes at budget ÷ Workers running (adapters/budget.py; never
more than budget ÷ `workers`), so a shard of R records of U write units each takes R × U ÷
(budget ÷ workers) seconds. Fewer Workers give each a larger share: the job takes as long (the
budget bounds it), but each shard less. Plan lowers the Workers it runs until a shard takes at most
half the Worker's timeout, where one Worker can; a shard that takes longer even alone stops at a
checkpoint and goes on in the next invocation (logic/checkpoints.py), so it takes several.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from logic.writemodes import record_units

# What Plan reads of a text shard's start to measure its records' size (one ranged GET a job, and
# only under a budget): its complete lines' average length.
SAMPLE_BYTES: Final = 64 * 1024
# An EXPRESS execution (a Map child with map_execution_type EXPRESS) ends after 5 minutes, its
# retries and its Worker → MoreOfShard turns included (stacks/loader_settings.py
# EXPRESS_MAX_SECONDS; tests/contract/test_spec_limits.py checks they are equal).
EXPRESS_CHILD_SECONDS: Final = 300


def record_bytes(sample: bytes) -> float:
    """The average bytes a record of a text shard takes, from the shard's first bytes: its complete
    lines' (a line a record: a CSV record with line breaks in a quoted field counts as several, so
    more records and a longer time, never fewer); a sample without a line break is one record."""
    end = sample.rfind(b"\n") + 1
    lines = sample[:end].count(b"\n")
    return end / lines if lines else float(max(1, len(sample)))


@dataclass(frozen=True)
class ShardTime:
    """A shard's estimated time under a budget and the Workers that run at once."""

    records: float  # the largest shard's
    units_per_record: int
    budget: float  # write units/s, job-wide
    workers: int  # the Workers chosen to run at once (each writes at budget / workers)
    seconds: float  # the largest shard's estimated write time at that share
    limit: float  # half the Worker's timeout: the time Plan keeps a shard within, where it can

    @property
    def fits(self) -> bool:
        """Whether a shard finishes within half one invocation; else it goes on at checkpoints."""
        return self.seconds <= self.limit

    @property
    def invocations(self) -> int:
        """The Worker invocations the largest shard takes at least (each stops before its deadline)."""
        return max(1, math.ceil(self.seconds / (2 * self.limit)))

    def describe(self) -> str:
        """One line: the estimate and what follows from it."""
        text = (
            f"~{self.records:,.0f} records of {self.units_per_record} write unit(s) a shard at "
            f"{self.budget:,.0f} write units/s over {self.workers} Worker(s) "
            f"({self.budget / self.workers:,.0f}/s each): ~{self.seconds:,.0f} s a shard"
        )
        if self.fits:
            return f"{text}, within half the Worker's timeout ({self.limit:,.0f} s)"
        return (
            f"{text}, more than half the Worker's timeout ({self.limit:,.0f} s) even on one Worker: each "
            f"shard stops at checkpoints and takes ~{self.invocations} invocations"
        )


def shard_seconds(records: float, units_per_record: int, budget: float, workers: int) -> float:
    """Seconds a shard of `records` takes at its share of `budget` among `workers`."""
    return records * units_per_record * workers / budget


def budget_workers(
    records: float, units_per_record: int, budget: float, concurrency: int, limit: float
) -> int:
    """The most Workers, at most `concurrency` and at least 1, whose share of `budget` writes a
    shard of `records` within `limit` seconds (1 when none does)."""
    units = records * units_per_record
    fits = math.floor(budget * limit / units) if units > 0 else concurrency
    return max(1, min(concurrency, fits))


def shard_time(
    records: float,
    item_bytes: float,
    budget: float,
    concurrency: int,
    timeout_seconds: float,
    *,
    numeric_add: bool = False,
) -> ShardTime:
    """The largest shard's time at `budget` (write units/s) over the Workers chosen: at most
    `concurrency` (maxConcurrency, within the cap and the shards), fewer when that keeps a shard
    within half of `timeout_seconds` (the Worker's). `item_bytes`: a record's item size (a record's
    source bytes where nothing better is known), `numeric_add` a marked transaction a record."""
    units = record_units(max(1, math.ceil(item_bytes)), numeric_add)
    limit = timeout_seconds / 2
    workers = budget_workers(records, units, budget, max(1, concurrency), limit)
    return ShardTime(records, units, budget, workers, shard_seconds(records, units, budget, workers), limit)


def text_shard_records(shard_bytes: Sequence[int], sample: bytes) -> tuple[float, float]:
    """(records of the largest shard, bytes a record) of text shards, from a sample of one's start."""
    size = record_bytes(sample)
    return max(shard_bytes, default=0) / size, size
