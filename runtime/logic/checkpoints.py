"""A shard that cannot finish in one invocation: its segments, and the checkpoint between them.

A Worker that nears its deadline stops reading before its next record (`Stop`), drains its writers,
closes its rejects as a segment and stores a checkpoint under the shard's ledger key
(adapters/ledger.py `advance_checkpoint`): where the next segment starts (`offset`, the first byte
of a record for the line formats; `rows`, the rows read for Parquet), the counts of the segments so
far (`counts`, summed by `merged`), the segments' rejects files and the run. Any later invocation
(the state machine's loop, a timeout retry, a re-run of the jobId) resumes there; the last segment
records the shard with the summed counts, so Finalize reads one record per shard as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

from logic.report import SAMPLE_SIZE, SKIPPED_SAMPLE_SIZE

# The most a Worker keeps back of its remaining time to drain its writers, close its rejects and
# store its checkpoint; at most a quarter of what it had when it started (a short timeout).
STOP_MARGIN_SECONDS: Final[float] = 120.0
# Counts that are not summed over segments.
_NOT_SUMMED: Final = frozenset({"runId", "byReason", "sample", "skippedSample", "rejectsKey", "rejectsKeys"})


class Stop:
    """When a Worker stops before its deadline: `remaining()` is the invocation's time left in
    seconds (Lambda's context; the emulator's equivalent). At least one record is read per segment,
    so every invocation makes progress."""

    def __init__(self, remaining: Callable[[], float]) -> None:
        self._remaining = remaining
        self.margin = min(STOP_MARGIN_SECONDS, max(0.0, remaining()) / 4)
        self.at: int | None = None  # where the next segment starts, once stopped
        self._read = 0

    def due(self) -> bool:
        return self._read > 0 and self._remaining() <= self.margin

    def stopped_at(self, position: int) -> None:
        self.at = position

    def passed(self) -> None:
        self._read += 1


def merged(earlier: Mapping[str, Any] | None, segment: Mapping[str, Any]) -> dict[str, Any]:
    """The counts of the segments so far and one more: numbers summed, reasons added up, samples
    kept in file order up to their sizes, every segment's rejects file in order (`rejectsKeys`)."""
    if not earlier:
        keys = [segment["rejectsKey"]] if segment.get("rejectsKey") else []
        return {**segment, "rejectsKeys": keys}
    total: dict[str, Any] = {}
    for name, value in segment.items():
        if name in _NOT_SUMMED or isinstance(value, bool) or not isinstance(value, int):
            total[name] = value
        else:
            total[name] = int(earlier.get(name) or 0) + value
    reasons = Counter(earlier.get("byReason") or {})
    reasons.update(segment.get("byReason") or {})
    own = [segment["rejectsKey"]] if segment.get("rejectsKey") else []
    keys = [*(earlier.get("rejectsKeys") or []), *own]
    return {
        **total,
        "byReason": dict(reasons),
        "sample": [*(earlier.get("sample") or []), *(segment.get("sample") or [])][:SAMPLE_SIZE],
        "skippedSample": [*(earlier.get("skippedSample") or []), *(segment.get("skippedSample") or [])][
            :SKIPPED_SAMPLE_SIZE
        ],
        "rejectsKeys": keys,
        "rejectsKey": keys[0] if keys else None,
    }


def rejects_keys(counts: Mapping[str, Any]) -> list[str]:
    """A shard's rejects files in file order: one per segment that rejected something."""
    keys = counts.get("rejectsKeys")
    if keys is not None:
        return [str(key) for key in keys]
    return [str(counts["rejectsKey"])] if counts.get("rejectsKey") else []
