"""Plan's reads of a source's objects at the largest plan (issue 42 item 2): one ranged GET per
object, one after another, even for formats without a header, held ~15,000 objects in its 300 s
at ~20 ms a GET, while Plan accepts 100,000.

Two ways, as the per-key tests do: from the code's own constants and the requests a small plan
makes (GETs an object, GETs in flight) at a stated latency, for the most objects Plan accepts;
and a plan of a few thousand objects over an S3 that answers every request 20 ms late, in wall
time. Both against half of Plan's timeout (stacks/loader_settings.py `control_timeout_seconds`,
which Plan gets as PLAN_TIMEOUT_SECONDS)."""

from __future__ import annotations

import io
import math
import time
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pipeline_support import ENV, REGION
from slow_s3 import LIST_PAGE, SlowS3

from adapters.ledger import Ledger
from adapters.s3 import S3Store
from handlers.settings import PlanSettings
from logic.errors import InputValidationError
from logic.planning import DEFAULT_MAX_SHARDS
from plans import reads
from plans.service import plan
from stacks.loader_settings import LoaderConfig

pytestmark = pytest.mark.runtime

PLAN_SECONDS = int(LoaderConfig.model_fields["control_timeout_seconds"].default)
PLAN_MIB = int(LoaderConfig.model_fields["control_memory_mib"].default)
LARGEST_SECONDS = max(
    m.le for m in LoaderConfig.model_fields["control_timeout_seconds"].metadata if hasattr(m, "le")
)
KEY = {"pk": "P#{id}", "sk": "LOC"}
CSV = {"format": "csv", "dynamodb": {"key": KEY}}
HEADERLESS = {"format": "csv", "csv": {"header": False, "columns": ["id", "n"]}, "dynamodb": {"key": KEY}}
JSONL = {"format": "jsonl", "dynamodb": {"key": KEY, "attributes": "*"}}
DYNAMODB_JSON = {"format": "dynamodb-json"}
PARQUET = {"format": "parquet", "dynamodb": {"key": KEY}}


def _parquet() -> bytes:
    body = io.BytesIO()
    pq.write_table(pa.table({"id": ["a", "b"], "n": [1, 2]}), body)
    return body.getvalue()


BODIES = {
    "csv": b"id,n\na,1\nb,2\n",
    "headerless": b"a,1\nb,2\n",
    "jsonl": b'{"id": "a", "n": 1}\n{"id": "b", "n": 2}\n',
    "dynamodb-json": b'{"Item": {"pk": {"S": "a"}, "sk": {"S": "b"}}}\n',
    "parquet": _parquet(),
}


def _plan(client: SlowS3, spec: dict[str, Any], body: bytes, objects: int, **env: str) -> dict[str, Any]:
    for i in range(objects):
        client.objects[("src", f"many/part-{i:05d}")] = body
    settings = PlanSettings.from_env({**ENV, **env})
    ledger = Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 30)
    event = {"input": {**spec, "source": "s3://src/many/", "jobId": "j"}, "execution": {"name": "run-1"}}
    return plan(event, settings, S3Store(client), ledger)


@pytest.mark.parametrize(
    ("spec", "body"),
    [(HEADERLESS, "headerless"), (JSONL, "jsonl"), (DYNAMODB_JSON, "dynamodb-json")],
    ids=["headerless-csv", "jsonl", "dynamodb-json"],
)
def test_plan_reads_nothing_of_an_object_without_a_header(aws: Any, spec: dict[str, Any], body: str) -> None:
    client = SlowS3(latency=0)
    planned = _plan(client, spec, BODIES[body], 50)
    assert planned["shardCount"] == 50
    assert client.requests.get("GetObject", 0) == 0, client.requests
    assert (
        reads.most_objects(read=False, timeout_seconds=PLAN_SECONDS, memory_mib=PLAN_MIB) > DEFAULT_MAX_SHARDS
    )


@pytest.mark.parametrize(
    ("spec", "body", "what"), [(CSV, "csv", "header line"), (PARQUET, "parquet", "footer")]
)
def test_the_most_objects_plan_accepts_are_read_in_half_its_timeout(
    aws: Any, spec: dict[str, Any], body: str, what: str
) -> None:
    """Analytic: GETs an object as a 200-object plan makes them (its GETs overlapping, at most
    READS_IN_FLIGHT at once), then the most objects Plan accepts — at the default settings and
    at the largest timeout with a vCPU — at 20 ms a GET, READS_IN_FLIGHT at a time, and the
    stated CPU an object, in half of the timeout."""
    client = SlowS3(latency=0.02)
    _plan(client, spec, BODIES[body], 200)
    gets_per_object = client.requests["GetObject"] / 200
    assert gets_per_object == 1
    # The reads overlap (one at a time, once), bounded for Plan's memory.
    assert reads.READS_IN_FLIGHT // 2 <= client.most_in_flight <= reads.READS_IN_FLIGHT
    in_flight = reads.READS_IN_FLIGHT
    for timeout, memory in ((PLAN_SECONDS, PLAN_MIB), (LARGEST_SECONDS, reads.VCPU_MIB)):
        objects = min(
            DEFAULT_MAX_SHARDS, reads.most_objects(read=True, timeout_seconds=timeout, memory_mib=memory)
        )
        seconds = (
            math.ceil(objects / LIST_PAGE) * reads.LIST_PAGE_SECONDS
            + math.ceil(objects * gets_per_object / in_flight) * reads.GET_SECONDS
            + objects * reads.READ_CPU_SECONDS / min(1.0, memory / reads.VCPU_MIB)
        )
        print(
            f"\n{what}: {in_flight} in flight, {objects:,} objects, {timeout} s, {memory} MiB: {seconds:.0f}s"
        )
        assert seconds <= timeout / 2, (timeout, memory, objects, seconds)
    # With a vCPU and the largest timeout, a plan as large as Plan cuts fits.
    assert reads.most_objects(read=True, timeout_seconds=LARGEST_SECONDS, memory_mib=reads.VCPU_MIB) >= (
        DEFAULT_MAX_SHARDS
    )


def test_more_objects_than_fit_are_refused_in_one_line_naming_the_limit_and_the_settings(aws: Any) -> None:
    client = SlowS3(latency=0)
    limit = reads.most_objects(read=True, timeout_seconds=10, memory_mib=PLAN_MIB)
    with pytest.raises(InputValidationError) as refused:
        _plan(client, CSV, BODIES["csv"], limit + 1, PLAN_TIMEOUT_SECONDS="10")
    message = str(refused.value)
    assert "\n" not in message and f"{limit + 1:,} objects" in message and f"at most {limit:,}" in message
    assert "control_timeout_seconds" in message and "control_memory_mib" in message
    assert client.requests.get("GetObject", 0) == 0  # refused before reading any
    planned = _plan(SlowS3(latency=0), CSV, BODIES["csv"], limit, PLAN_TIMEOUT_SECONDS="10")
    assert planned["shardCount"] == limit


@pytest.mark.parametrize(("spec", "body"), [(CSV, "csv"), (JSONL, "jsonl")])
def test_a_few_thousand_objects_over_a_20_ms_s3_plan_in_half_the_scaled_timeout(
    aws: Any, spec: dict[str, Any], body: str
) -> None:
    """Wall time: 2,000 objects over an S3 answering each request 20 ms late, within half of
    Plan's timeout scaled to 2,000 of the most objects it accepts (one by one: 40 s)."""
    objects = 2_000
    client = SlowS3(latency=reads.GET_SECONDS)
    started = time.monotonic()
    planned = _plan(client, spec, BODIES[body], objects)
    took = time.monotonic() - started
    read = spec is CSV
    accepted = min(
        DEFAULT_MAX_SHARDS, reads.most_objects(read=read, timeout_seconds=PLAN_SECONDS, memory_mib=PLAN_MIB)
    )
    budget = PLAN_SECONDS / 2 * objects / accepted
    print(f"\n{objects:,} objects ({body}), {reads.GET_SECONDS * 1000:g} ms: {took:.1f} s of {budget:.1f} s")
    assert planned["shardCount"] == objects
    assert took <= budget


def test_the_docs_give_the_limits_the_code_computes() -> None:
    """docs/INPUT.md "How many objects" and the setting's description state the limits; they are
    the ones plans/reads.py computes from the defaults and the largest timeout."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    section = (root / "docs" / "INPUT.md").read_text(encoding="utf-8").split("## How many objects", 1)[1]
    section = section.split("\n## ", 1)[0]
    described = str(LoaderConfig.model_fields["control_timeout_seconds"].description)
    at_defaults = reads.most_objects(read=True, timeout_seconds=PLAN_SECONDS, memory_mib=PLAN_MIB)
    at_largest = reads.most_objects(read=True, timeout_seconds=LARGEST_SECONDS, memory_mib=PLAN_MIB)
    row = next(line for line in section.splitlines() if line.startswith("| `csv` with a header"))
    assert row.split(" | ")[1:3] == [f"{at_defaults:,}", f"{at_largest:,}"]
    assert f"{at_defaults:,} at {PLAN_SECONDS} s and {PLAN_MIB} MiB" in described
    headerless = next(line for line in section.splitlines() if line.startswith("| `csv` without"))
    unread = reads.most_objects(read=False, timeout_seconds=PLAN_SECONDS, memory_mib=PLAN_MIB)
    assert unread >= DEFAULT_MAX_SHARDS
    assert headerless.split(" | ")[1] == f"{DEFAULT_MAX_SHARDS:,}"
