"""The shard service without the Worker handler: Plan's manifest entries processed one by one
against moto's S3 and DynamoDB, with settings that are not the handler's (any `ShardSettings`)."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from pipeline_support import ENV, REGION, scan

from adapters.ledger import Ledger
from adapters.s3 import S3Store
from handlers import plan
from logic.errors import SourceNotAllowedError
from shards.service import METRIC_FIELDS, process_shard

pytestmark = pytest.mark.runtime


@dataclass(frozen=True)
class Settings:
    """The Worker's settings as the service reads them (shards/settings.py `ShardSettings`)."""

    source_buckets: frozenset[str] = field(default_factory=lambda: frozenset({"src"}))
    staging_bucket: str = "stg"
    table_name: str = "target"
    ledger_ttl_days: int = 7
    write_concurrency: int = 2
    write_ceiling: int = 2


def planned(s3: Any, spec: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The planned job and its manifest, as Plan hands them to the Shards map."""
    done = plan.handle({"input": spec, "execution": {"name": "run-1", "id": "arn:run-1"}}, ENV)
    manifest = json.loads(s3.get_object(Bucket="stg", Key=done["manifestKey"])["Body"].read())
    return done["job"], manifest


def run_shards(job: dict[str, Any], manifest: list[dict[str, Any]]) -> tuple[Ledger, list[dict[str, Any]]]:
    db = boto3.client("dynamodb", region_name=REGION)
    ledger = Ledger(db, "ledger", 7)
    store = S3Store(boto3.client("s3", region_name=REGION))
    return ledger, [process_shard(shard, job, Settings(), store, ledger, db) for shard in manifest]


def recorded(ledger: Ledger, job: dict[str, Any], count: int = 64) -> list[dict[str, Any]]:
    return [counts for _, counts in sorted(ledger.shards(job["jobId"], job["planId"], count).items())]


def test_a_csv_file_in_shards_is_written_and_its_counts_reconcile(aws: Any) -> None:
    rows = [f"AB{i} 1CD,{i}.5" for i in range(200)] + ["BAD 1CD,north", "AB1 1CD,1.5"]
    aws.put_object(Bucket="src", Key="a.csv", Body=("postcode,lat\n" + "\n".join(rows) + "\n").encode())
    job, manifest = planned(
        aws,
        {
            "source": "s3://src/a.csv",
            "jobId": "csv",
            "format": "csv",
            "dynamodb": {
                "key": {"pk": "P#{postcode}", "sk": "LOC"},
                "attributes": {"lat": {"field": "lat", "type": "N"}},
            },
            "shardSizeMiB": 0.001,
        },
    )
    assert len(manifest) > 2

    ledger, results = run_shards(job, manifest)

    assert [r["index"] for r in results] == [s["index"] for s in manifest]
    assert all(set(r) == {"index", "more", *METRIC_FIELDS} and r["more"] is False for r in results)
    counts = recorded(ledger, job)
    assert len(counts) == len(manifest)
    total = {name: sum(c[name] for c in counts) for name in ("read", "written", "rejected", "duplicates")}
    assert total == {"read": 202, "written": 201, "rejected": 1, "duplicates": 0}
    assert sum(r["bytes"] for r in results) == sum(s["end"] - s["start"] for s in manifest)
    assert len(scan()) == 200  # AB1 1CD twice: one item
    (bad,) = [c for c in counts if c["rejected"]]
    body = aws.get_object(Bucket="stg", Key=bad["rejectsKey"])["Body"].read().decode()
    assert [json.loads(line)["raw"] for line in body.splitlines()] == ["BAD 1CD,north"]

    again = run_shards(job, manifest)[1]
    assert again == [{"index": s["index"], "skipped": True, "more": False} for s in manifest]


def test_an_nquads_shard_is_staged_not_written(aws: Any) -> None:
    quads = [f'<http://ex/s{i}> <http://ex/p> "{i}" <http://ex/g> .' for i in range(30)]
    data = "\n".join([*quads, "# a comment", "<http://ex/s> not a statement", ""]).encode()
    aws.put_object(Bucket="src", Key="g.nq", Body=data)
    job, manifest = planned(aws, {"source": "s3://src/g.nq", "jobId": "rdf", "format": "nquads", "graph": {}})

    ledger, results = run_shards(job, manifest)

    (counts,) = recorded(ledger, job)
    assert (counts["read"], counts["written"], counts["rejected"]) == (31, 30, 1)
    assert counts["graphStaged"] == results[0]["written"] == 30
    staged = aws.get_object(Bucket="stg", Key=counts["graphKey"])["Body"].read()
    text = gzip.decompress(staged) if counts["graphKey"].endswith(".gz") else staged
    assert len(text.decode().splitlines()) == 30
    assert scan() == {}


def test_a_shard_in_a_bucket_that_is_not_a_source_is_refused(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="a.csv", Body=b"postcode,lat\nAB1 1CD,1.5\n")
    job, manifest = planned(
        aws,
        {
            "source": "s3://src/a.csv",
            "format": "csv",
            "dynamodb": {"key": {"pk": "P#{postcode}", "sk": "LOC"}},
        },
    )
    with pytest.raises(SourceNotAllowedError, match="'elsewhere' is not an allowed source"):
        run_shards(job, [{**manifest[0], "bucket": "elsewhere"}])
