"""Prepare: compression found by content, streamed decompression into staging, and Plan/Worker/
Finalize on the prepared objects naming the original source and member."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
import zlib
from typing import Any

import pytest
from pipeline_support import ENV, rejects, scan

from archives import service as archives_service
from handlers import finalize, plan, prepare, worker
from logic import compression
from logic.errors import CorruptSourceError

pytestmark = pytest.mark.runtime

SPEC = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}},
    },
    "shardSizeMiB": 0.001,
    "maxConcurrency": 50,
}


def _csv(rows: int, start: int = 0, bad: bool = False) -> bytes:
    body = b"".join(f"AB{i} 1CD,{i}.5\n".encode() for i in range(start, start + rows))
    return b"postcode,lat\n" + body + (b"ZZ1 1ZZ,north\n" if bad else b"")


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _pipeline(s3: Any, source: str, run: str = "run-1") -> dict[str, Any]:
    """Prepare, Plan, every Worker, Finalize, as the state machine hands their results over."""
    state: dict[str, Any] = {**SPEC, "source": source}
    execution = {"name": run, "id": f"arn:{run}"}
    try:
        state["prepare"] = prepare.handle({"input": dict(state), "execution": execution}, ENV)
    except Exception as error:
        state["prepareError"] = {"Error": type(error).__name__, "Cause": str(error)}
        return finalize.handle({"state": state, "execution": execution}, ENV)
    planned = plan.handle({"input": dict(state), "execution": execution}, ENV)
    state["plan"] = planned
    manifest = json.loads(s3.get_object(Bucket="stg", Key=planned["manifestKey"])["Body"].read())
    for shard in manifest:
        worker.handle({"shard": shard, "job": planned["job"]}, ENV)
    return finalize.handle({"state": state, "execution": execution}, ENV)


# -- pure ------------------------------------------------------------------------------------


def test_compression_is_found_by_content_not_by_name() -> None:
    assert compression.detect(gzip.compress(b"x")[:4]) == "gzip"
    assert compression.detect(_zip({"a.csv": b"x"})[:4]) == "zip"
    assert compression.detect(b"post") is None
    assert compression.detect(b"") is None


def _gunzip(data: bytes, chunk: int = 7) -> bytes:
    return b"".join(compression.gunzip((data[i : i + chunk] for i in range(0, len(data), chunk)), "s3://b/k"))


def test_gunzip_streams_concatenated_members() -> None:
    assert _gunzip(gzip.compress(b"a,b\n1,2\n") + gzip.compress(b"3,4\n")) == b"a,b\n1,2\n3,4\n"


def test_gunzip_refuses_truncated_and_corrupt_streams() -> None:
    data = gzip.compress(bytes(range(256)) * 100)
    with pytest.raises(CorruptSourceError, match="truncated gzip stream"):
        _gunzip(data[:-10])
    corrupt = bytearray(data)
    corrupt[len(corrupt) // 2] ^= 0xFF
    with pytest.raises(CorruptSourceError, match=r"s3://b/k: (not a valid gzip stream|truncated)"):
        _gunzip(bytes(corrupt))
    bad_crc = data[:-8] + (zlib.crc32(b"other") & 0xFFFFFFFF).to_bytes(4, "little") + data[-4:]
    with pytest.raises(CorruptSourceError, match="not a valid gzip stream"):
        _gunzip(bad_crc)


def test_prepared_names() -> None:
    assert compression.plain_name("in/data.csv.gz", "gzip") == "data.csv"
    assert compression.plain_name("in/data.gz", "zip") == "data.gz"
    assert compression.member_name("../../etc/x.csv") == "etc/x.csv"
    assert compression.skip_member("__MACOSX/._a.csv", False) and compression.skip_member("d/", True)


# -- handlers against moto -----------------------------------------------------------------


def _prepared_keys(s3: Any) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket="stg", Prefix="prepared/").get("Contents", [])]


def test_a_plain_source_passes_through_without_a_copy(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="plain.csv.gz", Body=_csv(50))  # named .gz, but plain

    report = _pipeline(aws, "s3://src/plain.csv.gz")

    assert report["status"] == "SUCCEEDED", report["report"]["error"]
    assert report["report"]["records"]["written"] == 50
    assert _prepared_keys(aws) == []


def test_a_gzip_source_loads_like_the_plain_file_and_rejects_name_it(aws: Any) -> None:
    plain = _csv(200, bad=True)
    aws.put_object(Bucket="src", Key="p.csv", Body=plain)
    aws.put_object(Bucket="src", Key="in/p.data", Body=gzip.compress(plain))  # no .gz in the name

    expected = _pipeline(aws, "s3://src/p.csv", run="plain")["report"]["records"]
    result = _pipeline(aws, "s3://src/in/p.data", run="gz")

    assert result["report"]["records"] == expected
    assert result["report"]["shards"]["total"] > 1
    [reject] = rejects(aws, result["report"])
    assert reject["source"] == "s3://src/in/p.data" and "member" not in reject
    assert reject["line"] == 202 and reject["raw"] == "ZZ1 1ZZ,north"
    assert _prepared_keys(aws) == ["prepared/gz/gz/00000/p.data", "prepared/gz/gz/objects.json"]


def test_a_zip_with_several_members_becomes_one_object_per_member(aws: Any) -> None:
    archive = _zip(
        {
            "dir/": b"",
            "a.csv": _csv(100),
            "sub/b.csv": _csv(150, start=1000, bad=True),
            "__MACOSX/._a.csv": b"\x00\x05\x16\x07junk",
        }
    )
    aws.put_object(Bucket="src", Key="postcodes.zip", Body=archive)

    result = _pipeline(aws, "s3://src/postcodes.zip")

    assert result["status"] == "SUCCEEDED", result["report"]["error"]
    assert result["report"]["records"] == {
        "read": 251,
        "written": 250,
        "skipped": 0,
        "rejected": 1,
        "duplicates": 0,
    }
    assert len(scan()) == 250
    prepared = sorted(k for k in _prepared_keys(aws) if not k.endswith("objects.json"))
    assert [k.split("/", 4)[-1] for k in prepared] == ["a.csv", "sub/b.csv"]
    [reject] = rejects(aws, result["report"])
    assert (reject["source"], reject["member"], reject["line"]) == (
        "s3://src/postcodes.zip",
        "sub/b.csv",
        152,
    )


def test_a_large_gzip_is_written_as_several_parts_in_flight(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archives_service, "PART_BYTES", 5 * 1024 * 1024)  # S3's (and moto's) minimum
    plain = _csv(700_000)  # ~13 MB: three parts
    aws.put_object(Bucket="src", Key="big.csv.gz", Body=gzip.compress(plain, compresslevel=1))

    result = prepare.handle(
        {"input": {**SPEC, "source": "s3://src/big.csv.gz"}, "execution": {"name": "r"}}, ENV
    )

    [entry] = json.loads(aws.get_object(Bucket="stg", Key=result["preparedKey"])["Body"].read())
    assert entry["key"] == "prepared/r/r/00000/big.csv" and entry["source"] == "s3://src/big.csv.gz"
    head = aws.head_object(Bucket="stg", Key=entry["key"])
    assert head["ContentLength"] == len(plain) == entry["size"]
    assert head["ETag"].endswith('-3"')  # a multipart object of three parts
    assert aws.get_object(Bucket="stg", Key=entry["key"])["Body"].read() == plain
    assert aws.list_multipart_uploads(Bucket="stg").get("Uploads", []) == []


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda z: z[: len(z) // 2], "not a readable zip archive"),
        (lambda z: z.replace(b"AB1 1CD", b"XX1 1CD", 1), "member a.csv: corrupt or truncated"),
    ],
)
def test_a_corrupt_zip_fails_in_prepare_with_a_clear_error(aws: Any, damage: Any, message: str) -> None:
    archive = _zip({"a.csv": _csv(300)}, method=zipfile.ZIP_STORED)
    aws.put_object(Bucket="src", Key="bad.zip", Body=damage(archive))

    result = _pipeline(aws, "s3://src/bad.zip")

    assert result["status"] == "FAILED"
    error = result["report"]["error"]
    assert error["type"] == "CorruptSourceError" and error["where"] == "Prepare"
    assert "s3://src/bad.zip" in error["message"] and message in error["message"]
    assert aws.list_multipart_uploads(Bucket="stg").get("Uploads", []) == []


def test_a_prefix_of_plain_and_compressed_objects_plans_each_once(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="in/a.csv", Body=_csv(40))
    aws.put_object(Bucket="src", Key="in/b.csv.gz", Body=gzip.compress(_csv(60, start=100)))
    aws.put_object(
        Bucket="src",
        Key="in/c.zip",
        Body=_zip({"c1.csv": _csv(30, start=200), "c2.csv": _csv(20, start=300)}),
    )

    result = _pipeline(aws, "s3://src/in/")

    assert result["status"] == "SUCCEEDED", result["report"]["error"]
    assert result["report"]["records"]["written"] == 150 == len(scan())
    listed = json.loads(aws.get_object(Bucket="stg", Key="prepared/run-1/run-1/objects.json")["Body"].read())
    assert [(e["source"], e["member"]) for e in listed] == [
        ("s3://src/in/a.csv", None),
        ("s3://src/in/b.csv.gz", None),
        ("s3://src/in/c.zip", "c1.csv"),
        ("s3://src/in/c.zip", "c2.csv"),
    ]
    assert listed[0]["bucket"] == "src" and listed[0]["key"] == "in/a.csv"  # plain: planned in place


def test_a_rerun_of_a_compressed_source_plans_the_same_shards_and_skips_the_done_ones(aws: Any) -> None:
    aws.put_object(Bucket="src", Key="in.csv.gz", Body=gzip.compress(_csv(200)))
    spec = {**SPEC, "source": "s3://src/in.csv.gz", "jobId": "gz-rerun"}

    def planned(run: str) -> dict[str, Any]:
        execution = {"name": run, "id": f"arn:{run}"}
        state = {**spec, "prepare": prepare.handle({"input": dict(spec), "execution": execution}, ENV)}
        result = plan.handle({"input": state, "execution": execution}, ENV)
        finalize.handle({"state": {**spec, "plan": result}, "execution": execution}, ENV)
        return result

    first, second = planned("run-1"), planned("run-2")

    # Each run decompresses to a new copy, but the archive is unchanged: the same plan.
    assert first["job"]["planId"] == second["job"]["planId"]
