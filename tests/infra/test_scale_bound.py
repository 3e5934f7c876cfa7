"""Past what the emulator runs in reasonable time: at the largest plan the input allows
(100,000 shards) the Shards Map stays within the state payload limit, computed from the
synthesized definition."""

from __future__ import annotations

import json

import pytest

from logic.planning import DEFAULT_MAX_SHARDS
from mapload.emulator.limits import STATE_PAYLOAD_BYTES
from tests.infra.support import Synth
from tests.infra.test_state_machine import definition

pytestmark = pytest.mark.infra


def test_at_100000_shards_the_map_result_would_pass_256_kib_so_it_goes_to_s3(dev: Synth) -> None:
    states = definition(dev)["States"]
    shards = states["Shards"]
    worker = shards["ItemProcessor"]["States"]["Worker"]
    # Each child's output is its last Worker turn's ResultSelector applied to a result:
    # {"index": <n>, "more": false} (ShardDone's output).
    assert worker["ResultSelector"] == {"index.$": "$.Payload.index", "more.$": "$.Payload.more"}
    assert shards["ItemProcessor"]["States"]["ShardDone"]["OutputPath"] == "$.turn"
    collected = json.dumps([{"index": i, "more": False} for i in range(DEFAULT_MAX_SHARDS)])
    # Collected in state they would fail the Map (from about 17,000 shards: the scale test's plan
    # of 20,000 in tests/e2e/test_scale.py is past that).
    assert len(collected.encode()) > STATE_PAYLOAD_BYTES
    assert len(json.dumps([{"index": i} for i in range(20_000)]).encode()) > STATE_PAYLOAD_BYTES
    # So the Map writes them to S3 and its result in state is ResultWriter's small summary,
    # discarded: the Map's output is its input, whatever the number of shards.
    assert "ResultWriter" in shards
    assert shards["ResultPath"] is None
