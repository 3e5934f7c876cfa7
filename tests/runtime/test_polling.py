"""The graph load's poll schedule (runtime/logic/polling.py): it backs off with the load's age,
and the spec refuses a timeout whose schedule would pass the execution history's limit."""

from __future__ import annotations

import pytest

from logic import polling
from logic.errors import InputValidationError
from logic.spec.parse import parse_spec

pytestmark = pytest.mark.runtime


def test_the_wait_is_poll_seconds_at_first_then_a_tenth_of_the_age_then_an_hour() -> None:
    assert polling.next_wait(0, 30, 10_000) == 30
    assert polling.next_wait(3_000, 30, 100_000) == 300
    assert polling.next_wait(10 * 86_400, 30, 10**9) == polling.MAX_WAIT_SECONDS
    # Never past the deadline (and at least a second).
    assert polling.next_wait(3_000, 30, 12.5) == 13
    assert polling.next_wait(3_000, 30, 0) == 1


def test_the_count_includes_the_first_poll_and_the_one_at_the_deadline() -> None:
    assert polling.poll_count(1, 30) == 3  # at 0, 30 and 60 s
    assert polling.poll_count(720, 30) < polling.poll_count(720, 1) < polling.MAX_POLLS


def spec(timeout: int, poll: int) -> dict[str, object]:
    return {
        "source": "s3://bucket/data.nq",
        "format": "nquads",
        "graph": {"pollSeconds": poll, "timeoutMinutes": timeout},
    }


def test_a_timeout_the_history_cannot_hold_is_refused_naming_the_field_and_the_limit() -> None:
    with pytest.raises(InputValidationError) as refused:
        parse_spec(spec(525_600, 30), table_key={"pk": "S"}, execution_name="job")
    assert refused.value.field == "graph.timeoutMinutes"
    longest = polling.longest_timeout_minutes(30, 525_600)
    assert f"at most {longest} minutes" in str(refused.value)
    assert "25,000 events" in str(refused.value)
    parse_spec(spec(longest, 30), table_key={"pk": "S"}, execution_name="job")
