"""The embedded run's graph poll Wait (issue 44 item 9): in real time it ends as soon as the local
graph loads are done, not after the poll's seconds (30 by default), so the summary's time is the
run's; with no load running it returns at once, and without a loader it sleeps as before."""

from __future__ import annotations

import threading
import time

import pytest

from mapload.emulator.embedded import Emulator, _LoadsWait
from mapload.emulator.neptune_local import Load, LocalNeptuneLoader

pytestmark = pytest.mark.runtime


def test_the_wait_ends_when_the_running_load_is_done() -> None:
    loader = LocalNeptuneLoader(s3_client=lambda: None)
    load = Load("l-1", {"source": "s3://b/k"}, status="LOAD_IN_PROGRESS")
    loader.loads[load.load_id] = load

    def finish() -> None:
        time.sleep(0.2)
        load.status = "LOAD_COMPLETED"
        load.done.set()

    threading.Thread(target=finish).start()
    began = time.monotonic()
    loader.wait_idle(30)
    assert 0.15 < time.monotonic() - began < 5
    began = time.monotonic()
    loader.wait_idle(30)  # nothing running: at once
    assert time.monotonic() - began < 0.1


def test_a_wait_state_waits_on_the_loads_and_sleeps_without_a_loader() -> None:
    emulator = Emulator("dev", "us-east-1")
    wait = _LoadsWait(emulator)
    began = time.monotonic()
    wait.advance(0.05)  # no graph loader: real seconds
    assert time.monotonic() - began >= 0.05
    emulator.graph_loader = LocalNeptuneLoader(s3_client=lambda: None)
    began = time.monotonic()
    wait.advance(30)  # a loader with no load running: at once
    assert time.monotonic() - began < 0.5
    assert abs(wait.time() - time.time()) < 1
