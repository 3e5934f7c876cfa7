"""Finalize's reads of the shards' rejects files at the largest plan (issue 42 item 3): with
rejects in every one of 100,000 shards, one GET after another (~20 ms each) took 2,000 s against
Finalize's 900 s, and Finalize has no timeout retry (no report, the job held).

Two ways, as the per-key tests do: from the code's own constants and the requests a small merge
makes (GETs a shard, GETs in flight) at a stated latency, for 100,000 shards; and a merge of a few
thousand shards over an S3 that answers every request 20 ms late, in wall time. Both against half
of Finalize's timeout (stacks/loader_settings.py `finalize_timeout_seconds`)."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from slow_s3 import SlowS3

from adapters.s3 import S3Store
from logic import layout
from logic.planning import DEFAULT_MAX_SHARDS
from reports import rejects
from stacks.loader_settings import LoaderConfig

pytestmark = pytest.mark.runtime

GET_SECONDS = 0.020  # a GET's round trip within a Region, as stated (docs/PERFORMANCE.md)
FINALIZE_SECONDS = int(LoaderConfig.model_fields["finalize_timeout_seconds"].default)
SHARDS = DEFAULT_MAX_SHARDS  # the most Plan cuts
JOB, RUN = "job", "run-1"


def _shards(
    client: Any, shards: int, lines: int, pad: int = 40
) -> tuple[list[dict[str, Any]], dict[int, Any]]:
    """A manifest of `shards` shards of one object, each with `lines` rejects in its file."""
    manifest = [{"index": i, "bucket": "src", "key": "a.csv", "lineBase": 1} for i in range(shards)]
    recorded: dict[int, Any] = {}
    for i in range(shards):
        key = layout.shard_rejects_key(JOB, RUN, i)
        body = b"".join(
            json.dumps({"shardLine": n, "code": "bad_number", "raw": f"{i}:{n}," + "x" * pad}).encode()
            + b"\n"
            for n in range(1, lines + 1)
        )
        client.objects[("stg", key)] = body
        recorded[i] = {"lines": lines, "rejectsKey": key}
    return manifest, recorded


def _merged(client: Any) -> list[dict[str, Any]]:
    body = client.objects[("stg", layout.rejects_key(JOB, RUN))]
    return [json.loads(line) for line in body.splitlines()]


def test_finalize_reads_100000_shards_rejects_in_half_its_timeout() -> None:
    """Analytic: GETs a shard as a 256-shard merge makes them (overlapping, at most
    REJECTS_READS_IN_FLIGHT at once), then 100,000 shards at 20 ms a GET, that many at a time,
    must take at most half of Finalize's timeout."""
    client = SlowS3(latency=0.02)
    manifest, recorded = _shards(client, 256, lines=3)
    rejects.merge_rejects(S3Store(client), "stg", JOB, RUN, manifest, recorded)
    gets_per_shard = client.requests["GetObject"] / 256
    # The reads overlap (one at a time, once), bounded for Finalize's memory.
    assert rejects.REJECTS_READS_IN_FLIGHT // 2 <= client.most_in_flight <= rejects.REJECTS_READS_IN_FLIGHT
    in_flight = rejects.REJECTS_READS_IN_FLIGHT
    seconds = math.ceil(SHARDS * gets_per_shard / in_flight) * GET_SECONDS
    print(f"\n{gets_per_shard:g} GET a shard, {in_flight} in flight: {SHARDS:,} shards ~{seconds:.0f} s")
    assert gets_per_shard == 1  # a small file is read whole by its first (ranged) GET
    assert seconds <= FINALIZE_SECONDS / 2, (seconds, in_flight)


def test_a_few_thousand_shards_rejects_over_a_20_ms_s3_merge_in_half_the_scaled_timeout() -> None:
    """Wall time: 3,000 shards' rejects over an S3 answering each request 20 ms late, within half
    of Finalize's timeout scaled to 3,000 of 100,000 shards (13.5 s; one by one: 60 s)."""
    shards = 3_000
    client = SlowS3(latency=GET_SECONDS)
    manifest, recorded = _shards(client, shards, lines=2)
    started = time.monotonic()
    location, sample = rejects.merge_rejects(S3Store(client), "stg", JOB, RUN, manifest, recorded)
    seconds = time.monotonic() - started
    budget = FINALIZE_SECONDS / 2 * shards / SHARDS
    print(f"\n{shards:,} shards' rejects, {GET_SECONDS * 1000:g} ms a GET: {seconds:.1f} s of {budget:.1f} s")
    assert seconds <= budget
    merged = _merged(client)
    # In file order, each line numbered in the file: shard i's lines follow the 2 x i before it.
    assert [r["line"] for r in merged] == [1 + n for n in range(1, 2 * shards + 1)]
    assert [r["raw"].split(",")[0] for r in merged] == [f"{i}:{n}" for i in range(shards) for n in (1, 2)]
    assert location == f"s3://stg/{layout.rejects_key(JOB, RUN)}" and len(sample) > 0


def test_a_rejects_file_larger_than_what_is_read_ahead_is_streamed_whole_in_order(aws: Any) -> None:
    """A shard's file past REJECTS_HEAD_BYTES: its first bytes are read ahead, the rest streamed
    when the merge reaches it (moto's ranged GETs); lines cut at the boundary arrive whole."""
    client = SlowS3(latency=0)
    manifest, recorded = _shards(client, 5, lines=3)
    big = layout.shard_rejects_key(JOB, RUN, 2)
    lines = 2 * rejects.REJECTS_HEAD_BYTES // 1000 + 17
    body = b"".join(
        json.dumps({"shardLine": n, "code": "bad_number", "raw": f"2:{n}," + "y" * 950}).encode() + b"\n"
        for n in range(1, lines + 1)
    )
    client.objects[("stg", big)] = body
    recorded[2]["lines"] = lines
    for (bucket, key), data in client.objects.items():
        aws.put_object(Bucket=bucket, Key=key, Body=data)
    rejects.merge_rejects(S3Store(aws), "stg", JOB, RUN, manifest, recorded)
    body = aws.get_object(Bucket="stg", Key=layout.rejects_key(JOB, RUN))["Body"].read()
    merged = [json.loads(line) for line in body.splitlines()]
    expected = [(i, n) for i in range(5) for n in range(1, (lines if i == 2 else 3) + 1)]
    assert [tuple(map(int, r["raw"].split(",")[0].split(":"))) for r in merged] == expected
    assert [r["line"] for r in merged] == list(range(2, 2 + len(expected)))
