"""The report counts the source's lines by where they went, and Finalize fails the job when they do
not add up: every line is in exactly one record read (accepted or rejected) or is blank."""

from __future__ import annotations

from typing import Any

import pytest

from logic import report

pytestmark = pytest.mark.runtime


def build(*shards: dict[str, Any]) -> dict[str, Any]:
    return report.build(
        job_id="j",
        run_id="r",
        spec={"source": "s3://b/k", "format": "csv", "maxRejectedPercent": 100},
        manifest=[{"bucket": "b", "key": "k", "index": i} for i in range(len(shards))],
        shards=dict(enumerate(shards)),
        error=None,
        table="t",
        seconds=None,
        rejects_location=None,
        sample=[],
    )


def counts(
    lines: int, record_lines: int, rejected_lines: int, ignored: int, **records: int
) -> dict[str, Any]:
    base = {"read": 0, "written": 0, "skipped": 0, "rejected": 0, **records}
    return {
        **base,
        "lines": lines,
        "recordLines": record_lines,
        "rejectedLines": rejected_lines,
        "ignoredLines": ignored,
    }


def test_a_record_spanning_shards_is_counted_by_its_owner_and_the_lines_reconcile() -> None:
    # Shard 0's last record holds 4 lines, 3 of them shard 1's; it is rejected (cut).
    first = counts(2, 5, 4, 0, read=2, written=1, rejected=1)
    second = counts(5, 1, 0, 1, read=1, written=1)
    built = build(first, second)
    assert built["status"] == "SUCCEEDED", built["error"]
    assert built["lines"] == {"total": 7, "accepted": 2, "rejected": 4, "ignored": 1}


def test_a_line_in_no_record_fails_the_job() -> None:
    built = build(counts(3, 1, 0, 1, read=1, written=1))
    assert built["status"] == "FAILED"
    assert built["error"]["type"] == "ReconciliationError"
    assert "3 lines are not accepted 1 + rejected 0 + ignored 1" in built["error"]["message"]


def test_counts_recorded_without_line_counts_leave_the_section_null() -> None:
    built = build({"read": 1, "written": 1, "skipped": 0, "rejected": 0, "lines": 1})
    assert built["lines"] is None and built["status"] == "SUCCEEDED"
