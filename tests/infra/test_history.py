"""No accepted input can make an execution pass the 25,000-event history limit (which no Catch
sees): the worst case is computed from the synthesized definition for the largest inputs allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from logic import polling
from logic.errors import InputValidationError
from logic.spec.parse import parse_spec
from tests.infra.support import Synth
from tests.infra.test_state_machine import definition

pytestmark = pytest.mark.infra

# The graph poll loop: the states a pending load goes round.
POLL_LOOP = ("GraphWait", "PollGraphLoad", "GraphLoaded")
# The bulk put items hand-off (dynamodb.engine bulkPutItems): its start and its poll loop. A job
# takes either the graph load or the hand-off, never both: each path is counted without the other.
BULK_PUT_LOOP = ("BulkPutWait", "PollBulkPut", "BulkPutEnded?")
BULK_PUT_ONLY = ("StartBulkPut", *BULK_PUT_LOOP)
GRAPH_ONLY = ("StartGraphLoad", "GraphLoadError", *POLL_LOOP)
# The largest inputs the spec allows (schemas/input.schema.json's bounds).
_GRAPH = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "input.schema.json").read_text())[
    "$defs"
]["RdfGraph"]["properties"]
LARGEST_TIMEOUT_MINUTES = _GRAPH["timeoutMinutes"]["maximum"]
SMALLEST_POLL_SECONDS = _GRAPH["pollSeconds"]["minimum"]


def state_events(state: dict[str, Any]) -> int:
    """The most history events one visit of `state` adds (AWS's event types per state type):
    a Task: Entered, Scheduled, Started, Succeeded/Failed, Exited, and Scheduled/Started/Failed
    again per retry (each retrier's MaxAttempts, default 3); a Distributed Map in its parent:
    MapStateEntered, MapRunStarted, MapRunSucceeded/Failed, MapStateSucceeded/Failed, Exited
    (children have their own histories); Wait, Choice, Pass, Succeed: Entered and Exited; Fail: Entered."""
    kind = state["Type"]
    if kind == "Task":
        retries = sum(int(r.get("MaxAttempts", 3)) for r in state.get("Retry", []))
        return 5 + 3 * retries
    if kind == "Map":
        return 6
    if kind == "Fail":
        return 1
    return 2


def worst_case_events(
    states: dict[str, dict[str, Any]],
    polls: int,
    loop: tuple[str, ...] = POLL_LOOP,
    elsewhere: tuple[str, ...] = BULK_PUT_ONLY,
) -> tuple[int, int, int]:
    """(outside the loop, one loop round, total for `polls` rounds): every state outside the loop
    and not on the other path (`elsewhere`) at most once (each is reached once on any path),
    ExecutionStarted and the end event."""
    outside = 2 + sum(state_events(s) for name, s in states.items() if name not in (*loop, *elsewhere))
    round_events = sum(state_events(states[name]) for name in loop)
    return outside, round_events, outside + polls * round_events


def test_the_loop_is_the_only_cycle_and_has_the_states_counted(dev: Synth) -> None:
    states = definition(dev)["States"]
    assert set(POLL_LOOP) <= set(states)
    assert states["GraphWait"]["Next"] == "PollGraphLoad"
    assert states["PollGraphLoad"]["Next"] == "GraphLoaded"
    assert states["GraphWait"]["SecondsPath"] == "$.result.waitSeconds"
    assert any(c.get("Next") == "GraphWait" for c in states["GraphLoaded"]["Choices"])


def test_the_budget_the_input_rule_assumes_covers_the_deployed_definition(dev: Synth) -> None:
    outside, round_events, _ = worst_case_events(definition(dev)["States"], 0)
    assert round_events <= polling.POLL_ROUND_EVENTS, round_events
    assert outside <= polling.OUTSIDE_POLL_EVENTS, outside


def test_the_longest_bulk_put_deadline_stays_under_25000_events(dev: Synth) -> None:
    """The hand-off's poll loop at the longest bulk_put_timeout_minutes the settings accept."""
    from logic.bulk_put import POLL_SECONDS
    from stacks.loader_settings import BULK_PUT_TIMEOUT_MAX_MINUTES

    states = definition(dev)["States"]
    assert states["BulkPutWait"]["Next"] == "PollBulkPut" and states["PollBulkPut"]["Next"] == "BulkPutEnded?"
    polls = polling.poll_count(BULK_PUT_TIMEOUT_MAX_MINUTES, POLL_SECONDS)
    assert polls <= polling.MAX_POLLS
    outside, round_events, total = worst_case_events(states, polls, BULK_PUT_LOOP, GRAPH_ONLY)
    assert round_events <= polling.POLL_ROUND_EVENTS, round_events
    assert outside <= polling.OUTSIDE_POLL_EVENTS, outside
    assert total < polling.HISTORY_EVENTS, total


def test_the_largest_accepted_graph_input_stays_under_25000_events(dev: Synth) -> None:
    def graph(timeout: int) -> dict[str, Any]:
        return {
            "source": "s3://bucket/data.nq",
            "format": "nquads",
            "graph": {"pollSeconds": SMALLEST_POLL_SECONDS, "timeoutMinutes": timeout},
        }

    # The largest timeout at the smallest poll interval that the spec accepts ...
    with pytest.raises(InputValidationError, match=r"graph\.timeoutMinutes.*at most \d+ minutes"):
        parse_spec(graph(LARGEST_TIMEOUT_MINUTES), table_key={"pk": "S"}, execution_name="job")
    longest = polling.longest_timeout_minutes(SMALLEST_POLL_SECONDS, LARGEST_TIMEOUT_MINUTES)
    parse_spec(graph(longest), table_key={"pk": "S"}, execution_name="job")
    with pytest.raises(InputValidationError, match=r"graph\.timeoutMinutes"):
        parse_spec(graph(longest + 1), table_key={"pk": "S"}, execution_name="job")
    # ... polls at most this often, which the deployed definition turns into < 25,000 events.
    polls = polling.poll_count(longest, SMALLEST_POLL_SECONDS)
    _, _, total = worst_case_events(definition(dev)["States"], polls)
    assert total < polling.HISTORY_EVENTS, total
    # And any pollSeconds: the rule is the same count.
    for poll_seconds in (1, 30, 600, 3600):
        minutes = polling.longest_timeout_minutes(poll_seconds, LARGEST_TIMEOUT_MINUTES)
        assert polling.poll_count(minutes, poll_seconds) <= polling.MAX_POLLS


def test_the_default_graph_input_is_accepted() -> None:
    assert polling.poll_count(720, 30) <= polling.MAX_POLLS


def test_a_shard_s_child_loops_within_its_own_history(dev: Synth) -> None:
    """A Map child's history is its own (25,000 events): a Worker that stops at a checkpoint turns
    Worker → MoreOfShard → Worker (issue 42 item 1). A turn without retries adds 7 events (over
    3,000 turns); with every retrier of every turn spent, still over 64 turns: over 13 hours of one
    shard at the Worker's 900 s less its stop margin."""
    from logic.checkpoints import STOP_MARGIN_SECONDS

    processor = definition(dev)["States"]["Shards"]["ItemProcessor"]["States"]
    room = 25_000 - 2 - state_events(processor["ShardDone"])
    plain = 5 + state_events(processor["MoreOfShard"])
    worst = state_events(processor["Worker"]) + state_events(processor["MoreOfShard"])
    assert room // plain > 3_000
    assert room // worst >= 64, worst
    assert room // worst * (900 - STOP_MARGIN_SECONDS) > 13 * 3_600
