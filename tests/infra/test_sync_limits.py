"""writeMode sync's Sync Map against Step Functions' limits at the most buckets a dataset may have
(logic/sync.py MAX_BUCKETS), computed from the synthesized definition as tests/infra/test_history.py
and tests/infra/test_state_payloads.py do for the rest of the execution.

The Sync Map is INLINE: its iterations' events are the execution's own (25,000 at most, an
overflow no Catch sees), and its input, each iteration's input and request, the Lambda result and
the collected results are payloads of at most 256 KiB (States.DataLimitExceeded, no Catch)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from logic import layout, planning, polling, sync
from logic.errors import InputValidationError
from logic.spec.parse import parse_spec, spec_to_json
from tests.infra.support import Synth
from tests.infra.test_history import POLL_LOOP, state_events, worst_case_events
from tests.infra.test_state_machine import definition
from tests.infra.test_state_payloads import (
    BIG,
    JOB_ID,
    LOOP_BUDGET_BYTES,
    RUN_ID,
    TABLE_KEY,
    Run,
    resolve,
    written,
)

pytestmark = pytest.mark.infra

# The longest names the Sync Map's payloads carry: a table name (255), a dataset name (100).
TABLE = "t" * 255
DATASET = "d" * 100
PK, SK = list(TABLE_KEY)
INPUT = {
    "source": "s3://" + "s" * 63 + "/" + "k" * 900 + "/",
    "format": "csv",
    "jobId": JOB_ID,
    "dynamodb": {
        "writeMode": "sync",
        "dataset": DATASET,
        "key": {PK: "P#{id}", SK: "X"},
        "attributes": {f"a{i:03d}": f"{{f{i:03d}}}" for i in range(100)},
    },
}


def iteration_events(processor: dict[str, Any], retries: int = 0) -> int:
    """One bucket's events in the execution's history: MapIterationStarted, the SyncWorker task's
    (TaskStateEntered, TaskScheduled, TaskStarted, TaskSucceeded, TaskStateExited), each retried
    attempt three more (TaskFailed, TaskScheduled, TaskStarted), MapIterationSucceeded."""
    (name,) = processor["States"]
    assert processor["States"][name]["Type"] == "Task"
    return 2 + state_events({**processor["States"][name], "Retry": []}) + 3 * retries


def test_the_sync_map_s_events_at_the_most_buckets_fit_the_history(dev: Synth) -> None:
    states = definition(dev)["States"]
    sync_map = states["Sync"]
    assert sync_map["Type"] == "Map" and "ItemReader" not in sync_map  # inline: events are ours
    per_bucket = iteration_events(sync_map["ItemProcessor"])
    assert per_bucket == sync.BUCKET_EVENTS == 7
    # Every state outside the graph loop (and the bulk put items hand-off, which a sync never
    # takes) once with all its retries spent (test_history's model), and the Sync Map's buckets
    # without a retry.
    outside, _, _ = worst_case_events(states, 0)
    assert outside <= polling.OUTSIDE_POLL_EVENTS, outside
    buckets = sync.MAX_BUCKETS * per_bucket
    room = polling.HISTORY_EVENTS - outside - buckets
    print(f"\nSync Map at {sync.MAX_BUCKETS} buckets: {buckets:,} events; others {outside:,}; room {room:,}")
    # Room for the retried SyncWorker attempts the history keeps for a sync (SYNC_MAP_EVENTS) ...
    assert sync.SYNC_MAP_EVENTS == buckets + sync.SYNC_RETRIES * 3 <= polling.HISTORY_EVENTS - outside
    # ... which is one retry per bucket on average, over 5,000 retries in all without a graph load.
    assert sync.SYNC_RETRIES >= sync.MAX_BUCKETS and room // 3 > 5_000
    # Every retrier of every bucket spent could not fit: a SyncWorker's own retriers allow more
    # attempts than the history has room for at 1,000 buckets (what the room above is for).
    worker = next(iter(sync_map["ItemProcessor"]["States"].values()))
    attempts = sum(int(r.get("MaxAttempts", 3)) for r in worker["Retry"])
    assert sync.MAX_BUCKETS * (per_bucket + 3 * attempts) > polling.HISTORY_EVENTS


def test_a_sync_with_a_graph_load_polls_within_what_the_sync_map_leaves(dev: Synth) -> None:
    """A sync job may also load a graph: its poll loop gets the history the Sync Map leaves, and a
    timeout that would poll more often is refused in one line (a plain load may have it)."""
    states = definition(dev)["States"]
    round_events = sum(state_events(states[name]) for name in POLL_LOOP)
    assert round_events <= polling.POLL_ROUND_EVENTS
    assert polling.SYNC_MAP_EVENTS == sync.SYNC_MAP_EVENTS
    polls = polling.MAX_POLLS_WITH_SYNC
    used = polling.OUTSIDE_POLL_EVENTS + sync.SYNC_MAP_EVENTS + polls * polling.POLL_ROUND_EVENTS
    assert used <= polling.HISTORY_EVENTS, used
    longest = polling.longest_timeout_minutes(1, 10**6, polls)
    assert polling.poll_count(720, 30) <= polls  # the default timeout fits beside a sync

    def spec(mode: str, timeout: int) -> dict[str, Any]:
        graph = {"model": "property", "vertices": [{"id": "p-{id}", "label": "P"}]}
        given = {**INPUT, "graph": {**graph, "pollSeconds": 1, "timeoutMinutes": timeout}}
        if mode != "sync":
            given["dynamodb"] = {k: v for k, v in INPUT["dynamodb"].items() if k != "dataset"}
        given["dynamodb"] = {**given["dynamodb"], "writeMode": mode}
        return given

    parse_spec(spec("sync", longest), table_key=TABLE_KEY, execution_name="job")
    parse_spec(spec("put", longest + 1), table_key=TABLE_KEY, execution_name="job")
    with pytest.raises(InputValidationError) as refused:
        parse_spec(spec("sync", longest + 1), table_key=TABLE_KEY, execution_name="job")
    message = str(refused.value)
    assert "graph.timeoutMinutes" in message and "writeMode sync" in message and "\n" not in message
    assert f"at most {longest} minutes" in message


def test_the_sync_map_s_payloads_at_the_most_buckets_stay_within_the_limit(dev: Synth) -> None:
    states = definition(dev)["States"]
    sync_map = states["Sync"]
    spec_json = spec_to_json(parse_spec(INPUT, table_key=TABLE_KEY, execution_name=RUN_ID))
    plan_id = planning.plan_id([], spec_json)
    job = {
        "jobId": JOB_ID,
        "runId": RUN_ID,
        "planId": plan_id,
        "generation": BIG,
        "spec": spec_json,
        "tableKey": TABLE_KEY,
        "table": TABLE,
        "objects": BIG,
        "bytes": BIG,
        "workers": 10_000,
        "shardSeconds": float(BIG),
        "sync": {
            "dataset": DATASET,
            "buckets": sync.MAX_BUCKETS,
            "baseline": layout.sync_prefix(TABLE, DATASET, JOB_ID, f"{plan_id}.{BIG}", JOB_ID),
            "prefix": layout.sync_prefix(
                TABLE,
                DATASET,
                JOB_ID,
                f"{plan_id}.{BIG}",
                layout.sync_prefix(TABLE, DATASET, JOB_ID, "p", None),
            ),
            "shards": planning.DEFAULT_MAX_SHARDS,
            "workers": sync.MAX_CONCURRENCY,
        },
    }
    run = Run(states)
    plan = {
        "job": job,
        "manifestKey": layout.manifest_key(JOB_ID, RUN_ID),
        "mapResultsPrefix": layout.map_results_prefix(JOB_ID, RUN_ID),
        "maxConcurrency": 10_000,
        "shardCount": planning.DEFAULT_MAX_SHARDS,
        "syncBuckets": list(range(sync.MAX_BUCKETS)),
        "syncConcurrency": sync.MAX_CONCURRENCY,
        "bulkPut": False,  # a sync: no bulk put items hand-off
    }
    # The execution's input names the table (Plan reads it: plans/target.py).
    state = run.task("Plan", {**json.loads(json.dumps(INPUT)), "table": TABLE}, lambda _: plan)
    # The Sync Map's input is the state after Shards (whose ResultPath discards its result).
    assert states["Shards"]["ResultPath"] is None and sync_map["ItemsPath"] == "$.plan.syncBuckets"
    sizes = {"Sync input": written(state)}
    inner = Run(sync_map["ItemProcessor"]["States"])
    collected = []
    for bucket in (0, sync.MAX_BUCKETS - 1):  # every iteration's payload is one of these sizes or less
        context = {**run.context, "Map": {"Item": {"Index": bucket, "Value": bucket}}}
        item = resolve(sync_map["ItemSelector"], state, context)
        counts = {k: BIG for k in ("written", "unchanged", "deleted", "duplicates", "requests", "retries")}
        answer = {"bucket": bucket, **counts, "throttles": BIG, "runId": RUN_ID}
        output = inner.task("SyncWorker", item, lambda _, answer=answer: answer)
        collected.append(output)
        sizes["iteration input"] = max(sizes.get("iteration input", (0, 0)), written(item), key=max)
    # The collected results before ResultPath (null) drops them: one per bucket, the largest each.
    results = [collected[-1]] * sync.MAX_BUCKETS
    sizes["collected results"] = written(results)
    sizes.update(inner.sizes)
    assert sync_map["ResultPath"] is None  # the Map's output is its input: measured above
    for name, (raw, escaped) in sorted(sizes.items(), key=lambda kv: -max(kv[1])):
        print(f"{name}: {raw:,} / {escaped:,} bytes")
    name = max(sizes, key=lambda key: max(sizes[key]))
    assert max(sizes[name]) < LOOP_BUDGET_BYTES, (name, sizes[name])
    # The bucket numbers the Map iterates are a small part of its input.
    assert len(json.dumps(plan["syncBuckets"])) < 5_000
