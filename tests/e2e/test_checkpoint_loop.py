"""A shard that cannot finish in one invocation, through the synthesized state machine (issue 42
item 1): the Worker's deadline (the emulator's `remaining`) runs out every few records, the Worker
stops at a checkpoint, the Map child's loop (Worker → MoreOfShard → Worker) invokes it again, and
the run ends with every record counted once, the rejects numbered by their lines in the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from logic.checkpoints import STOP_MARGIN_SECONDS
from mapload.emulator import embedded
from tests.e2e.test_embedded_run import BAD_CSV_ROWS, POSTCODE_SPEC, _csv_with_bad_rows

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

RECORDS_PER_TURN = 150


def _short_deadline(_timeout_seconds: float) -> Callable[[], float]:
    """Time left that runs out after RECORDS_PER_TURN records of an invocation."""
    calls = [0]

    def remaining() -> float:
        calls[0] += 1
        return 10 * STOP_MARGIN_SECONDS if calls[0] <= RECORDS_PER_TURN else 0.0

    return remaining


def test_workers_stopped_before_their_deadline_loop_until_their_shards_are_done(
    tmp_path: Path, run_file: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "postcodes.csv"
    good, bad_lines = _csv_with_bad_rows(source, 2_000)
    monkeypatch.setattr(embedded, "_remaining", _short_deadline)
    invoked: list[dict[str, Any]] = []
    saw = embedded.Invocations.saw

    def counting(self: Any, fn: Any, result: Any) -> None:
        if fn.role == "worker":
            invoked.append(result)
        saw(self, fn, result)

    monkeypatch.setattr(embedded.Invocations, "saw", counting)
    # Two shards of ~1,000 rows: each needs 7 turns.
    run = run_file(source, {**POSTCODE_SPEC, "shardSizeMiB": 0.03})

    report = run.report
    assert report["status"] == "SUCCEEDED", report["error"]
    shards = report["shards"]["total"]
    assert sum(1 for r in invoked if r.get("more")) >= 2 * shards  # several turns a shard
    assert sum(1 for r in invoked if not r.get("more")) == shards
    records = report["records"]
    assert records["read"] == len(good) + len(BAD_CSV_ROWS) == sum(r["read"] for r in invoked)
    assert records["written"] == len(good) == len(run.items)
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
    assert sorted(r["line"] for r in run.rejects()) == sorted(bad_lines)
