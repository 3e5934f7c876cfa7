"""writeMode sync (issue 47) through run-local against `mapload serve`: two syncs of one dataset,
the second file with changed, added and removed rows; the table follows the file, the second run
writes only the changes, an item the dataset did not write stays; a sync stopped between its two
Maps and run again converges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

ROWS = 600
SPEC: dict[str, Any] = {
    "format": "csv",
    "jobId": "postcodes-sync",
    "shardSizeMiB": 0.002,  # ~2 KB shards: several shards
    "dynamodb": {
        "writeMode": "sync",
        "dataset": "postcodes",
        "key": {"pk": "PC#{pc}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}, "name": "{name}"},
    },
}
KEYS = {"aws_access_key_id": "x", "aws_secret_access_key": "x"}


def _write(path: Path, rows: dict[str, tuple[str, str]]) -> Path:
    path.write_text("pc,lat,name\n" + "".join(f"{pc},{lat},{name}\n" for pc, (lat, name) in rows.items()))
    return path


def _table(db: Any) -> dict[str, dict[str, Any]]:
    (name,) = [t for t in db.list_tables()["TableNames"] if "edger" not in t]
    items = {}
    for page in db.get_paginator("scan").paginate(TableName=name):
        for item in page["Items"]:
            items[item["pk"]["S"]] = item
    return items


def _expected(rows: dict[str, tuple[str, str]]) -> dict[str, dict[str, Any]]:
    return {
        f"PC#{pc}": {"pk": {"S": f"PC#{pc}"}, "sk": {"S": "LOC"}, "lat": {"N": lat}, "name": {"S": name}}
        for pc, (lat, name) in rows.items()
    }


@pytest.fixture
def small_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several buckets at a test's size: one per ~4 KB of source."""
    monkeypatch.setattr("logic.sync.BUCKET_SOURCE_BYTES", 4096)


def test_two_syncs_write_only_the_changes_and_delete_what_disappeared(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    served: str,
    small_buckets: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", served)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", served)
    db = boto3.client("dynamodb", endpoint_url=served, region_name="us-east-1", **KEYS)
    first_rows = {f"P{i:04d}": (f"{50 + i / 1000:.3f}", f"place {i}") for i in range(ROWS)}
    first = run_local(_write(tmp_path / "v1.csv", first_rows), SPEC, report_path=tmp_path / "r1.json")
    captured = capsys.readouterr()
    printed = captured.out
    assert f"read {ROWS} = written {ROWS} + unchanged 0 + rejected 0 + duplicates 0 · deleted 0" in printed
    assert first["status"] == "SUCCEEDED", first.get("error")
    assert first["shards"]["total"] > 5
    # The progress line counts shards, not the Sync Map's buckets (the same Worker function runs both).
    shards = first["shards"]["total"]
    assert f"shards {shards}/{shards} · {ROWS:,} records" in captured.err.splitlines()[-1]
    assert first["sync"]["buckets"] > 2 and first["sync"]["firstSync"]
    assert first["records"]["written"] == ROWS and first["records"]["deleted"] == 0
    assert _table(db) == _expected(first_rows)

    # An item the dataset never wrote: a sync never deletes it.
    table = next(t for t in db.list_tables()["TableNames"] if "edger" not in t)
    foreign = {"pk": {"S": "PC#P0001X"}, "sk": {"S": "LOC"}, "by": {"S": "hand"}}
    db.put_item(TableName=table, Item=foreign)

    second_rows = dict(first_rows)
    changed = [f"P{i:04d}" for i in range(0, ROWS, 50)]  # 12
    removed = [f"P{i:04d}" for i in range(7, ROWS, 60)]  # 10
    for pc in changed:
        second_rows[pc] = (second_rows[pc][0], "renamed")
    for pc in removed:
        del second_rows[pc]
    added = {f"Q{i:03d}": ("1", f"new {i}") for i in range(9)}
    second_rows.update(added)
    second = run_local(
        _write(tmp_path / "v2.csv", second_rows), SPEC, report_path=tmp_path / "r2.json", quiet=True
    )
    assert second["status"] == "SUCCEEDED", second.get("error")
    records = second["records"]
    assert records["deleted"] == len(removed)
    assert records["written"] == len(changed) + len(added)
    assert records["unchanged"] == len(second_rows) - records["written"]
    assert records["read"] == records["written"] + records["unchanged"] + records["rejected"]
    assert not second["sync"]["firstSync"]
    # The first sync's baseline is superseded and deleted; the second's is kept, a bucket an object.
    s3 = boto3.client("s3", endpoint_url=served, region_name="us-east-1", **KEYS)
    staging = next(b["Name"] for b in s3.list_buckets()["Buckets"] if "staging" in b["Name"])
    kept = {o["Key"] for o in s3.list_objects_v2(Bucket=staging, Prefix="datasets/").get("Contents", [])}
    assert kept == {
        f"{second['sync']['baseline']}bucket-{b:05d}.jsonl.gz" for b in range(second["sync"]["buckets"])
    }
    assert _table(db) == {**_expected(second_rows), "PC#P0001X": foreign}

    # Another dataset in the same table: its first sync deletes nothing of postcodes', and the
    # next postcodes sync deletes nothing of its.
    other_spec = {**SPEC, "jobId": "other-sync", "dynamodb": {**SPEC["dynamodb"], "dataset": "other"}}
    other_rows = {f"O{i}": ("2", f"other {i}") for i in range(3)}
    other = run_local(
        _write(tmp_path / "o.csv", other_rows), other_spec, report_path=tmp_path / "o.json", quiet=True
    )
    assert other["status"] == "SUCCEEDED" and other["records"]["deleted"] == 0
    third_rows = {**second_rows, "P0001": ("9", "moved")}
    third = run_local(
        _write(tmp_path / "v3.csv", third_rows), SPEC, report_path=tmp_path / "r3.json", quiet=True
    )
    assert third["status"] == "SUCCEEDED", third.get("error")
    assert (third["records"]["written"], third["records"]["deleted"]) == (1, 0)
    assert _table(db) == {**_expected(third_rows), **_expected(other_rows), "PC#P0001X": foreign}


def test_a_sync_stopped_between_its_maps_and_run_again_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str, small_buckets: None
) -> None:
    """The second sync's bucket 1 fails (its Worker raises) after the Shards Map: the run fails, the
    baseline stays the first sync's; the same job run again redoes only what is missing, switches
    the baseline, and the table equals the second file."""
    import handlers.worker

    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", served)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", served)
    db = boto3.client("dynamodb", endpoint_url=served, region_name="us-east-1", **KEYS)
    first_rows = {f"P{i:04d}": (str(i), f"place {i}") for i in range(300)}
    first = run_local(
        _write(tmp_path / "v1.csv", first_rows), SPEC, report_path=tmp_path / "r1.json", quiet=True
    )
    assert first["status"] == "SUCCEEDED", first.get("error")
    second_rows = {
        pc: (lat, "renamed" if int(lat) % 7 == 0 else name) for pc, (lat, name) in first_rows.items()
    }
    for pc in [f"P{i:04d}" for i in range(5, 300, 30)]:
        del second_rows[pc]
    second_file = _write(tmp_path / "v2.csv", second_rows)

    real = handlers.worker.sync_bucket

    def failing(bucket: int, *args: Any) -> dict[str, Any]:
        if bucket == 1:
            raise RuntimeError("stopped between the two Maps")
        return real(bucket, *args)

    monkeypatch.setattr(handlers.worker, "sync_bucket", failing)
    stopped = run_local(second_file, SPEC, report_path=tmp_path / "r2.json", quiet=True)
    assert stopped["status"] == "FAILED"
    assert stopped["error"]["where"] == "Sync"
    assert "stopped between the two Maps" in stopped["error"]["message"]
    assert stopped["sync"]["baseline"] is None and stopped["sync"]["synced"] < stopped["sync"]["buckets"]
    assert _table(db) != _expected(second_rows)

    monkeypatch.setattr(handlers.worker, "sync_bucket", real)
    again = run_local(second_file, SPEC, report_path=tmp_path / "r3.json", quiet=True)
    assert again["status"] == "SUCCEEDED", again.get("error")
    assert again["shards"]["carried"] == again["shards"]["total"]
    assert again["records"]["deleted"] == 10
    assert again["records"]["read"] == len(second_rows)
    assert again["sync"]["synced"] == again["sync"]["buckets"] and again["sync"]["baseline"]
    assert _table(db) == _expected(second_rows)


def test_only_the_baseline_and_what_a_run_against_it_needs_stay_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str, small_buckets: None
) -> None:
    """Issue 47 item 2, "stagings other than the current baseline expire": a sync that fails after
    writing some merged buckets and another job's successful sync of the dataset: afterwards only
    the new baseline stays under datasets/<table>/<dataset>/; the failed job run again (its buckets
    deleted) compares with that baseline, redoes them, and converges."""
    import handlers.worker

    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", served)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", served)
    db = boto3.client("dynamodb", endpoint_url=served, region_name="us-east-1", **KEYS)
    s3 = boto3.client("s3", endpoint_url=served, region_name="us-east-1", **KEYS)
    rows = {f"P{i:04d}": (str(i), f"place {i}") for i in range(300)}
    first = run_local(_write(tmp_path / "v1.csv", rows), SPEC, report_path=tmp_path / "r1.json", quiet=True)
    assert first["status"] == "SUCCEEDED", first.get("error")
    table = next(t for t in db.list_tables()["TableNames"] if "edger" not in t)
    staging = next(b["Name"] for b in s3.list_buckets()["Buckets"] if "staging" in b["Name"])

    def staged() -> set[str]:
        listed = s3.list_objects_v2(Bucket=staging, Prefix=f"datasets/{table}/postcodes/")
        return {o["Key"] for o in listed.get("Contents", [])}

    def baseline_keys(report: dict[str, Any]) -> set[str]:
        prefix = report["sync"]["baseline"]
        return {f"{prefix}bucket-{b:05d}.jsonl.gz" for b in range(report["sync"]["buckets"])}

    real = handlers.worker.sync_bucket

    def failing(bucket: int, *args: Any) -> dict[str, Any]:
        done = real(bucket, *args)  # its merged bucket written and recorded, then the run fails
        if bucket == 1:
            raise RuntimeError("stopped after a merged bucket")
        return done

    failed_rows = {**rows, "P0002": ("2", "failed run")}
    failed_file = _write(tmp_path / "v2.csv", failed_rows)
    failed_spec = {**SPEC, "jobId": "postcodes-failed"}
    monkeypatch.setattr(handlers.worker, "sync_bucket", failing)
    failed = run_local(failed_file, failed_spec, report_path=tmp_path / "r2.json", quiet=True)
    assert failed["status"] == "FAILED" and failed["sync"]["synced"] > 0, (failed["error"], failed["sync"])
    assert len(staged() - baseline_keys(first)) == failed["sync"]["synced"]  # its merged buckets
    monkeypatch.setattr(handlers.worker, "sync_bucket", real)

    # It changes the row the failed run wrote (a sync compares with its baseline, not the table).
    later_rows = {**rows, "P0002": ("2", "later run")}
    later_spec = {**SPEC, "jobId": "postcodes-later"}
    later = run_local(
        _write(tmp_path / "v3.csv", later_rows), later_spec, report_path=tmp_path / "r3.json", quiet=True
    )
    assert later["status"] == "SUCCEEDED", later.get("error")
    assert staged() == baseline_keys(later)
    assert _table(db) == _expected(later_rows)

    # The failed job run again: its earlier buckets compared with a baseline that is no more, so
    # they are redone against the current one (nothing of the deleted prefix is needed).
    again = run_local(failed_file, failed_spec, report_path=tmp_path / "r4.json", quiet=True)
    assert again["status"] == "SUCCEEDED", again.get("error")
    assert again["sync"]["synced"] == again["sync"]["buckets"]
    assert (again["records"]["written"], again["records"]["deleted"]) == (1, 0)
    assert staged() == baseline_keys(again)
    assert _table(db) == _expected(failed_rows)
