"""The graph load's poll schedule, and the bound that keeps its loop inside the execution history.

Each poll round costs events in the (Standard) execution's history, which AWS caps at 25,000 and
whose overflow no Catch sees. The wait between polls grows with the load's age (a tenth of it,
at most an hour), so a long load is polled a bounded number of times; the input is refused when
even that schedule would poll more often than the history allows.
"""

from __future__ import annotations

import math
from typing import Final

# Step Functions: events in one Standard execution's history.
HISTORY_EVENTS: Final[int] = 25_000
# One poll round at most: GraphWait (2) + PollGraphLoad (5, and 3 per retry) + GraphLoaded (2),
# which allows 13 retries in a round. tests/infra/test_history.py checks the deployed definition.
POLL_ROUND_EVENTS: Final[int] = 50
# Everything outside the poll loop at most: Prepare, Plan, Shards, Finalize, StartGraphLoad,
# GraphLoadError with all their retries, the start and end events (the same test checks it).
OUTSIDE_POLL_EVENTS: Final[int] = 1_000
MAX_POLLS: Final[int] = (HISTORY_EVENTS - OUTSIDE_POLL_EVENTS) // POLL_ROUND_EVENTS
# writeMode sync's Sync Map is an inline Map: its buckets' events are the execution's own. At the
# most buckets (logic/sync.py MAX_BUCKETS, 1,000) 7 a bucket (MapIterationStarted, the SyncWorker
# task's 5, MapIterationSucceeded) and room for one retried attempt (3 events) a bucket on average:
# logic/sync.py SYNC_MAP_EVENTS, which tests/infra/test_sync_limits.py checks against this and the
# definition. A sync that also loads a graph polls at most MAX_POLLS_WITH_SYNC times.
SYNC_MAP_EVENTS: Final[int] = 10_000
MAX_POLLS_WITH_SYNC: Final[int] = (
    HISTORY_EVENTS - OUTSIDE_POLL_EVENTS - SYNC_MAP_EVENTS
) // POLL_ROUND_EVENTS
# The wait grows to a tenth of the load's age, at most an hour (never below pollSeconds).
BACKOFF_DIVISOR: Final[int] = 10
MAX_WAIT_SECONDS: Final[int] = 3600


def next_wait(elapsed: float, poll_seconds: int, remaining: float) -> int:
    """Seconds to wait before the next poll of a load `elapsed` s old, `remaining` s before its deadline."""
    wait = max(poll_seconds, min(math.ceil(elapsed / BACKOFF_DIVISOR), MAX_WAIT_SECONDS))
    return max(1, min(wait, math.ceil(remaining)))


def poll_count(timeout_minutes: int, poll_seconds: int) -> int:
    """The most polls a load can get: the first right after the start, the last at the deadline
    (polls take no time here, which is the worst case)."""
    deadline = 60 * timeout_minutes
    elapsed, polls = 0, 1
    while elapsed < deadline:
        elapsed += next_wait(elapsed, poll_seconds, deadline - elapsed)
        polls += 1
    return polls


def longest_timeout_minutes(poll_seconds: int, limit: int, max_polls: int = MAX_POLLS) -> int:
    """The largest timeoutMinutes (≤ `limit`) whose schedule stays within `max_polls`."""
    low, high = 1, limit
    while low < high:
        middle = (low + high + 1) // 2
        if poll_count(middle, poll_seconds) <= max_polls:
            low = middle
        else:
            high = middle - 1
    return low
