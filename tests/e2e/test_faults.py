"""Faults in the embedded run: a worker that dies mid-shard, a job re-run after a failure."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from faults import Fault, fault_proxy

from mapload.emulator.limits import LambdaFunctionError
from mapload.local import run_local
from mapload.sample import postcodes, write_csv

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

SPEC: dict[str, Any] = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
        "attributes": {"latitude": {"field": "latitude", "type": "N"}},
    },
    "shardSizeMiB": 0.01,
    "maxConcurrency": 3,
}


class LambdaTimeout(LambdaFunctionError):
    """Stands in for Lambda killing a function at its timeout."""

    def __init__(self, message: str) -> None:
        super().__init__("Sandbox.Timedout", message)


class Bug(Exception):
    """An error nobody retries."""


def _crash_one_shard_midway(
    monkeypatch: pytest.MonkeyPatch, error: Exception, after_lines: int = 60
) -> list[int]:
    """The second shard to start fails after `after_lines` lines, once; later calls work."""
    from shards import service

    original = service.process
    calls: list[int] = []
    lock = threading.Lock()

    def flaky(lines: Iterator[Any], *args: Any, **kwargs: Any) -> dict[str, int]:
        with lock:
            calls.append(len(calls))
            crash = len(calls) == 2

        def dying() -> Iterator[Any]:
            for n, line in enumerate(lines):
                if n == after_lines:
                    raise error
                yield line

        return original(dying() if crash else lines, *args, **kwargs)

    monkeypatch.setattr(service, "process", flaky)
    return calls


def _dynamodb(endpoint: str) -> Any:
    """A DynamoDB client of the moto server (or the fault proxy in front of it)."""
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def _table_count(endpoint: str, table: str) -> int:
    db = _dynamodb(endpoint)
    return int(db.scan(TableName=table, Select="COUNT")["Count"])


def _table_items(endpoint: str, table: str) -> dict[str, str]:
    db = _dynamodb(endpoint)
    items: dict[str, str] = {}
    for page in db.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            items[item["pk"]["S"]] = item["latitude"]["N"]
    return items


def test_a_worker_killed_mid_shard_is_retried_and_its_shard_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server)
    source = write_csv(tmp_path / "p.csv", 2_000)
    calls = _crash_one_shard_midway(monkeypatch, LambdaTimeout("Task timed out after 900.00 seconds"))

    report = run_local(source, SPEC, report_path=tmp_path / "r.json", quiet=True)

    assert report["status"] == "SUCCEEDED", report["error"]
    assert len(calls) == report["shards"]["total"] + 1  # one shard ran twice
    assert report["records"] == {
        "read": 2_000,
        "written": 2_000,
        "skipped": 0,
        "rejected": 0,
        "duplicates": 0,
    }
    assert _table_count(moto_server, report["dynamodb"]["table"]) == 2_000


def test_a_failed_job_rerun_skips_the_shards_done_and_finishes_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str
) -> None:
    # The ledger, the staging files and the table must outlive one run: keep them on a server.
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server)
    source = write_csv(tmp_path / "p.csv", 2_000)
    spec = {**SPEC, "jobId": "postcodes-rerun"}
    _crash_one_shard_midway(monkeypatch, Bug("a bug, not retried"))

    failed = run_local(source, spec, report_path=tmp_path / "r1.json", quiet=True)

    assert failed["status"] == "FAILED"
    assert failed["shards"]["failed"] == 1
    assert failed["error"]["type"] in ("ReconciliationError", "Bug")
    assert (
        failed["records"]["read"]
        == failed["records"]["written"] + failed["records"]["skipped"] + failed["records"]["rejected"]
    )
    assert failed["records"]["read"] < 2_000
    monkeypatch.undo()
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server)

    second = run_local(source, spec, report_path=tmp_path / "r2.json", quiet=True)

    assert second["status"] == "SUCCEEDED", second["error"]
    assert second["shards"]["carried"] == second["shards"]["total"] - 1 and second["shards"]["done"] == 1
    assert [run["runId"] for run in second["carried"]["runs"]] == [failed["runId"]]
    carried = second["carried"]["runs"][0]["records"]
    # This run's records are its own shard's; the earlier run's are carried, and both add up.
    assert second["records"]["read"] + carried["read"] == 2_000
    assert second["records"]["written"] + carried["written"] == 2_000
    assert second["records"]["read"] == second["records"]["written"] > 0
    assert _table_count(moto_server, second["dynamodb"]["table"]) == 2_000


DYNAMODB_FAULTS = [
    Fault("throttle", every=5, service="dynamodb", operation="BatchWriteItem"),
    Fault("throttling", every=7, service="dynamodb", operation="BatchWriteItem"),
    Fault("server_error", every=11, service="dynamodb", operation="BatchWriteItem"),
    Fault("unprocessed", every=3, service="dynamodb"),
    Fault("drop", every=13, service="dynamodb", operation="BatchWriteItem"),
    Fault("latency", every=2, service="dynamodb", seconds=0.02),
]
# Source reads (ranged GETs): the Step Functions ItemReader's own manifest read is left alone.
S3_FAULTS = [
    Fault("slow_down", every=3, service="s3", operation="GET", ranged=True),
    Fault("server_error", every=4, service="s3", operation="GET", ranged=True),
    Fault("drop", every=5, service="s3", operation="GET", ranged=True),
]


@pytest.mark.parametrize("faults", [DYNAMODB_FAULTS, S3_FAULTS], ids=["dynamodb", "s3"])
def test_under_injected_faults_every_record_is_written_as_in_a_clean_run_and_retries_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str, faults: list[Fault]
) -> None:
    rows = 1_000
    source = write_csv(tmp_path / "p.csv", rows)
    with fault_proxy(moto_server, faults) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)

        report = run_local(
            source, {**SPEC, "shardSizeMiB": 0.005}, report_path=tmp_path / "r.json", quiet=True
        )

    for fault in faults:
        assert fault.injected > 0, f"{fault.kind} never fired"
    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["records"] == {"read": rows, "written": rows, "skipped": 0, "rejected": 0, "duplicates": 0}
    items = _table_items(moto_server, report["dynamodb"]["table"])
    assert items == {f"POSTCODE#{code}": lat for code, lat, _ in postcodes(rows)}
    if faults is S3_FAULTS:
        assert report["s3"]["retries"] >= sum(f.injected for f in faults)
    else:
        assert report["dynamodb"]["throttles"] > 0
        assert report["dynamodb"]["retries"] >= sum(f.injected for f in faults if f.kind != "latency")


def test_an_unprocessed_fault_counts_only_when_it_hands_items_back(moto_server: str) -> None:
    # The test above counts every injected fault as a retry: a batch of one item has nothing to
    # hand back, so the fault is not counted (else the count depends on how batches fell).
    db = _dynamodb(moto_server)
    db.create_table(
        TableName="unprocessed",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    fault = Fault("unprocessed", every=1, service="dynamodb")
    with fault_proxy(moto_server, [fault]) as proxy:
        client = _dynamodb(proxy.url)

        def put(*keys: str) -> dict[str, Any]:
            requests = [{"PutRequest": {"Item": {"pk": {"S": k}}}} for k in keys]
            return dict(client.batch_write_item(RequestItems={"unprocessed": requests}))

        assert put("a").get("UnprocessedItems") in (None, {}) and fault.injected == 0
        assert len(put("b", "c")["UnprocessedItems"]["unprocessed"]) == 1 and fault.injected == 1


# putIfAbsent's INSERT batches and delete's DeleteRequests refused, throttled or dropped on the way.
BATCHED_MODE_FAULTS = [
    Fault("throttle", every=5, service="dynamodb", operation="BatchExecuteStatement"),
    Fault("server_error", every=7, service="dynamodb", operation="BatchExecuteStatement"),
    Fault("drop", every=11, service="dynamodb", operation="BatchExecuteStatement"),
    Fault("throttling", every=5, service="dynamodb", operation="BatchWriteItem"),
    Fault("server_error", every=7, service="dynamodb", operation="BatchWriteItem"),
    Fault("unprocessed", every=3, service="dynamodb"),
]


def test_putifabsent_and_delete_batches_under_injected_faults_end_as_in_a_clean_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str
) -> None:
    """Through `mapload serve` (its BatchExecuteStatement answers as AWS documents): putIfAbsent
    writes every record, again skips or (a retried answer finding its own item) counts written
    every record and changes nothing, and delete empties the table, whatever the faults."""
    rows = 600
    source = write_csv(tmp_path / "p.csv", rows)
    expected = {f"POSTCODE#{code}": lat for code, lat, _ in postcodes(rows)}
    spec = {**SPEC, "shardSizeMiB": 0.005, "dynamodb": {**SPEC["dynamodb"], "writeMode": "putIfAbsent"}}
    deleting = {**spec, "dynamodb": {"key": SPEC["dynamodb"]["key"], "writeMode": "delete"}}
    reports = []
    with fault_proxy(served, BATCHED_MODE_FAULTS) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", served)
        for n, job in enumerate((spec, spec, deleting)):
            report = run_local(
                source, {**job, "jobId": f"job-{n}"}, report_path=tmp_path / f"{n}.json", quiet=True
            )
            assert report["status"] == "SUCCEEDED", report["error"]
            reports.append(report)
            table = report["dynamodb"]["table"]
            if n < 2:
                assert _table_items(served, table) == expected
    for fault in BATCHED_MODE_FAULTS:
        assert fault.injected > 0, f"{fault.kind} on {fault.operation} never fired"
    first, again, deleted = (r["records"] for r in reports)
    assert first == {"read": rows, "written": rows, "skipped": 0, "rejected": 0, "duplicates": 0}
    assert again["read"] == again["written"] + again["skipped"] == rows and again["skipped"] > 0
    assert deleted == {"read": rows, "written": rows, "skipped": 0, "rejected": 0, "duplicates": 0}
    assert _table_count(served, table) == 0


def test_putifabsent_counts_an_insert_answered_conditional_check_failed_as_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str
) -> None:
    """An INSERT whose key is stored may answer ConditionalCheckFailed instead of DuplicateItem
    (both documented BatchStatementError codes): the second run of the same rows skips them all
    and succeeds, rather than failing its shards."""
    rows = 120
    source = write_csv(tmp_path / "p.csv", rows)
    spec = {**SPEC, "dynamodb": {**SPEC["dynamodb"], "writeMode": "putIfAbsent"}}
    fault = Fault("condition_failed", every=2, service="dynamodb", operation="BatchExecuteStatement")
    reports = []
    with fault_proxy(served, [fault]) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", served)
        for n in range(2):
            report = run_local(
                source, {**spec, "jobId": f"cond-{n}"}, report_path=tmp_path / f"{n}.json", quiet=True
            )
            assert report["status"] == "SUCCEEDED", report["error"]
            reports.append(report["records"])
    assert fault.injected > 0
    assert reports[1] == {"read": rows, "written": 0, "skipped": rows, "rejected": 0, "duplicates": 0}


def test_a_failed_shard_s_cause_reaches_the_report_and_the_summary_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Worker failing on one record (here a bug in the mapping, not retried): the report's error
    and the console's line name the error, its message and the record's line, and
    `shards.failures` holds it; before, every failure read 'shards have no recorded counts'."""
    from mapload.reports import failure_line
    from shards import records

    rows = 200
    source = write_csv(tmp_path / "p.csv", rows)
    failing = [code for code, _, _ in postcodes(rows)][49]  # the file's line 51: the header is line 1
    original = records.make_mapper

    def make_mapper(spec: Any) -> Any:
        mapper = original(spec)

        def mapped(fields: Any) -> Any:
            if fields.get("postcode") == failing:
                raise Bug(f"cannot map {failing}")
            return mapper(fields)

        return mapped

    monkeypatch.setattr(records, "make_mapper", make_mapper)
    report = run_local(source, {**SPEC, "shardSizeMiB": 1}, report_path=tmp_path / "r.json", quiet=True)

    assert report["status"] == "FAILED"
    assert report["shards"]["missing"] == [0]
    (failure,) = report["shards"]["failures"]
    assert failure["type"] == "Bug" and failure["message"] == f"cannot map {failing}"
    assert (failure["shard"], failure["line"], failure["shardLine"]) == (0, 51, 50)
    assert failure["source"].endswith("p.csv") and failure["offset"] > 0
    error = report["error"]
    assert (error["type"], error["where"]) == ("Bug", "Shards")
    assert "line 51" in error["message"] and f"cannot map {failing}" in error["message"]
    line = failure_line(report, tmp_path / "r.json")
    assert "Bug in Shards: shard 0 failed at line 51" in line and f"cannot map {failing}" in line


def test_a_rerun_of_a_finished_job_is_refused_in_one_line_and_a_reload_repairs_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str
) -> None:
    """Issue 41 item 1, as a user meets it: a fixed jobId (the README's console input), an item
    deleted and one changed by hand, the same file and spec again. Before: SUCCEEDED, 'written
    181', both items still broken. Now the run is refused in one line, and "reload" repairs."""
    from mapload.local import summary
    from mapload.reports import failure_line

    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server)
    source = write_csv(tmp_path / "p.csv", 181)
    spec = {**SPEC, "jobId": "postcodes-fixed"}
    first = run_local(source, spec, report_path=tmp_path / "r1.json", quiet=True)
    assert first["status"] == "SUCCEEDED", first["error"]
    table = first["dynamodb"]["table"]
    db = _dynamodb(moto_server)
    deleted, changed = sorted(_table_items(moto_server, table))[:2]
    db.delete_item(TableName=table, Key={"pk": {"S": deleted}, "sk": {"S": "LOCATION"}})
    db.put_item(
        TableName=table, Item={"pk": {"S": changed}, "sk": {"S": "LOCATION"}, "latitude": {"N": "-1"}}
    )

    again = run_local(source, spec, report_path=tmp_path / "r2.json", quiet=True)

    error = again["error"]
    assert (again["status"], error["type"], error["where"]) == ("FAILED", "JobAlreadyLoadedError", "Plan")
    assert error["message"].startswith(f"jobId postcodes-fixed loaded this plan in run {first['runId']} at ")
    assert error["message"].endswith(
        '(written 181, skipped 0, rejected 0): use a new jobId or "reload": true'
    )
    line = failure_line(again, tmp_path / "r2.json")
    assert f"JobAlreadyLoadedError in Plan: {error['message']}" in line and "\n" not in line
    assert error["message"] in summary(again, tmp_path / "r2.json")
    assert deleted not in _table_items(moto_server, table)  # nothing was done

    reloaded = run_local(source, {**spec, "reload": True}, report_path=tmp_path / "r3.json", quiet=True)

    assert reloaded["status"] == "SUCCEEDED", reloaded["error"]
    assert reloaded["records"]["written"] == 181 and reloaded["shards"]["carried"] == 0
    items = _table_items(moto_server, table)
    assert len(items) == 181 and items[changed] != "-1"  # repaired
