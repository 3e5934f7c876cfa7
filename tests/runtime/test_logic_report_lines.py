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


def test_a_failed_shard_s_cause_is_the_job_s_error_with_its_line_in_the_object() -> None:
    """Shard 1 failed at its 3rd line; shard 0 has counts (10 lines), so that is line 13 of the
    object; shard 2 has no recorded cause (a timeout) and is counted apart."""
    cause = {"type": "ShardWriteError", "message": "3 records were not written", "runId": "r"}
    built = report.build(
        job_id="j",
        run_id="r",
        spec={"source": "s3://b/k", "format": "csv"},
        manifest=[{"bucket": "b", "key": "k", "index": i} for i in range(3)],
        shards={0: counts(10, 10, 0, 0, read=10, written=10)},
        error={"type": "States.ExceededToleratedFailureThreshold", "message": "", "where": "Shards"},
        table="t",
        seconds=None,
        rejects_location=None,
        sample=[],
        failures={1: {**cause, "shardLine": 3, "offset": 120}},
    )
    assert built["shards"]["failures"] == [
        {"shard": 1, "source": "s3://b/k", "line": 13, "shardLine": 3, "offset": 120, **cause}
    ]
    assert built["error"] == {
        "type": "ShardWriteError",
        "message": "shard 1 failed at line 13 (byte offset 120) of s3://b/k: 3 records were not "
        "written; 2 of 3 shards failed (1 with no recorded cause: a Worker timed out, ran out of "
        "memory or was stopped)",
        "where": "Shards",
    }
    assert build(counts(1, 1, 0, 0, read=1, written=1))["shards"]["failures"] == []


def test_the_graph_line_says_what_the_local_store_holds_and_never_loaded_none() -> None:
    from mapload.reports import report_lines

    base = {"records": {}, "shards": {"done": 1, "total": 1}, "seconds": 1}
    blocked = {"staged": 4, "loaded": None, "status": "BLOCKED"}
    line = next(x for x in report_lines({**base, "graph": blocked}) if x.startswith("  graph"))
    assert "None" not in line and "not loaded · BLOCKED" in line
    store = {"statements": 0, "path": None, "vertices": 2, "edges": 1}
    loaded = {"staged": 3, "loaded": 3, "status": "LOAD_COMPLETED", "store": store}
    line = next(x for x in report_lines({**base, "graph": loaded}) if x.startswith("  graph"))
    assert "store 2 vertices, 1 edges" in line and "statements" not in line
    rdf = {**loaded, "store": {"statements": 5, "path": None}}
    assert any("store 5 statements" in x for x in report_lines({**base, "graph": rdf}))
