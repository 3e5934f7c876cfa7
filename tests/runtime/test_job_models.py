"""The planned job and manifest entry models (logic/job.py): Plan's JSON parses into them and comes
back out byte for byte, so the Map, the Workers and the graph load read what Plan wrote."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pipeline_support import ENV

from handlers import plan
from logic.job import ManifestEntry, PlannedJob

pytestmark = pytest.mark.runtime

SPEC = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}},
    },
    "shardSizeMiB": 0.001,
}


def planned(aws: Any, source: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    done = plan.handle({"input": {**SPEC, "source": source}, "execution": {"name": "r", "id": "arn:r"}}, ENV)
    raw = aws.get_object(Bucket="stg", Key=done["manifestKey"])["Body"].read()
    return done["job"], json.loads(raw)


def test_plans_job_and_manifest_entries_come_back_byte_for_byte(aws: Any) -> None:
    rows = "".join(f"AB{i} 1CD,{i}.5\n" for i in range(120))
    aws.put_object(Bucket="src", Key="a.csv", Body=f"postcode,lat\n{rows}".encode())
    job, manifest = planned(aws, "s3://src/a.csv")
    assert len(manifest) > 1
    assert json.dumps(PlannedJob.parse(job).to_json()) == json.dumps(job)
    for entry in manifest:
        assert json.dumps(ManifestEntry.parse(entry).to_json()) == json.dumps(entry)
    first, second = (ManifestEntry.parse(entry) for entry in manifest[:2])
    assert (first.line_base, second.line_base) == (1, None)
    assert first.header == ["postcode", "lat"] and first.source_uri == "s3://src/a.csv"


def test_a_prepared_or_parquet_entry_keeps_its_own_fields_in_their_order() -> None:
    prepared = {
        **{"index": 3, "bucket": "stg", "key": "prepared/r/0", "etag": '"e"', "start": 4, "end": 9},
        **{"objectSize": 9, "dataStart": 4, "header": ["a"], "firstLineNumber": None, "lineBase": 1},
        **{"source": "s3://src/a.zip", "member": "a.csv", "sourceEtag": '"z"'},
    }
    parquet = {
        **{"index": 0, "bucket": "src", "key": "a.parquet", "etag": '"p"', "start": 4, "end": 90},
        **{"objectSize": 99, "dataStart": 0, "header": None, "firstLineNumber": None},
        **{"rowGroups": [0, 2], "firstRow": 0, "rows": 1000},
    }
    for raw in (prepared, parquet):
        assert json.dumps(ManifestEntry.parse(raw).to_json()) == json.dumps(raw)
    assert ManifestEntry.parse(prepared).source_uri == "s3://src/a.zip"


def test_an_older_job_without_a_plan_id_is_recorded_under_its_run() -> None:
    job = PlannedJob.parse({"jobId": "j", "runId": "run-1", "spec": {"format": "nquads"}})
    assert (job.plan, job.source_format, job.graph) == ("run-1", "nquads", {})
    assert PlannedJob.parse(job) is job  # parsed once, passed on
