"""The single-item writer's lanes: a record waits only behind an earlier record of its own key,
never behind another key's slow request; per-key order and the memory bound hold."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from adapters.dynamodb import ItemWriter, RetryPolicy
from logic.spec.dynamodb import PutIfAbsentTarget
from logic.writemodes import WritePlan

pytestmark = pytest.mark.runtime

PLAN = WritePlan(PutIfAbsentTarget, ("pk", "sk"))
FAST = RetryPolicy(max_attempts=3, base_seconds=0.0, cap_seconds=0.0)


class Gated:
    """Records each PutItem's key in call order; the calls for `slow` wait for `release`."""

    def __init__(self, slow: str) -> None:
        self.slow = slow
        self.release = threading.Event()
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.active = 0
        self.most_active = 0

    def put_item(self, **arguments: Any) -> dict[str, Any]:
        pk = arguments["Item"]["pk"]["S"]
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        if pk == self.slow:
            assert self.release.wait(10)
        else:
            time.sleep(0.001)
        with self.lock:
            self.calls.append(pk)
            self.active -= 1
        return {}


def record(pk: str, n: int) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "I"}, "n": {"N": str(n)}}


def test_a_slow_key_holds_back_only_its_own_records() -> None:
    client = Gated(slow="K#slow")
    writer = ItemWriter(client, "t", PLAN, in_flight=4, policy=FAST)
    writer.submit(("K#slow", "I"), record("K#slow", 0))
    writer.submit(("K#slow", "I"), record("K#slow", 1))
    others = [f"K#{k}" for k in range(200)]
    done = threading.Event()

    def submit_others() -> None:
        for n, pk in enumerate(others):
            writer.submit((pk, "I"), record(pk, n))
        done.set()

    threading.Thread(target=submit_others, daemon=True).start()
    # Every other key goes through the 3 free lanes while the slow key's request hangs.
    deadline = time.monotonic() + 10
    while len(client.calls) < len(others) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done.is_set() and sorted(client.calls) == sorted(others)
    client.release.set()
    writer.close()
    assert client.calls[-2:] == ["K#slow", "K#slow"]
    assert client.most_active <= 4


def test_records_of_one_key_are_written_one_at_a_time_in_submission_order() -> None:
    seen: dict[str, list[int]] = {}
    active: set[str] = set()
    lock = threading.Lock()

    class Client:
        def put_item(self, **arguments: Any) -> dict[str, Any]:
            pk, n = arguments["Item"]["pk"]["S"], int(arguments["Item"]["n"]["N"])
            with lock:
                assert pk not in active, "two requests of one key in flight"
                active.add(pk)
            time.sleep(0.0005)
            with lock:
                active.discard(pk)
                seen.setdefault(pk, []).append(n)
            return {}

    writer = ItemWriter(Client(), "t", PLAN, in_flight=8, policy=FAST)
    for n in range(600):
        pk = f"K#{n % 7}" if n % 3 else f"K#{n % 50}"
        writer.submit((pk, "I"), record(pk, n))
    writer.close()
    assert sum(len(v) for v in seen.values()) == 600
    assert all(v == sorted(v) for v in seen.values())


def test_the_lanes_follow_the_window_ceiling_and_memory_stays_bounded() -> None:
    client = Gated(slow="none")
    writer = ItemWriter(client, "t", PLAN, in_flight=2, max_in_flight=6, policy=FAST)
    assert len(writer._lanes) == 6 and writer.window.allowed == 2
    for n in range(50):
        writer.submit((f"K#{n}", "I"), record(f"K#{n}", n))
        assert writer._queued <= 12
    writer.close()
    assert len(client.calls) == 50
