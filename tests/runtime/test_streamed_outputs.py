"""The Worker's rejects and graph files stream to S3 as they are written (nothing in /tmp): an
object only when something was written, multipart past one part, aborted on an error."""

from __future__ import annotations

import gzip
from typing import Any

import pyoxigraph as ox
import pytest

from adapters.rdf import GraphStager
from adapters.s3 import S3Store, StreamingUpload
from logic import parts as partlib

pytestmark = pytest.mark.runtime

PART = 8 * 1024 * 1024


def test_nothing_written_makes_no_object(aws: Any) -> None:
    store = S3Store(aws)
    with store.upload_if_written("stg", "jobs/j/r/rejects/000001.jsonl", "application/x-ndjson"):
        pass
    with store.upload_if_written("stg", "jobs/j/r/graph/000001.nq.gz", "application/n-quads") as out:
        GraphStager(compress=True, out=out).finish()  # no statements: not even a gzip header
    assert aws.list_objects_v2(Bucket="stg").get("KeyCount", 0) == 0


def test_output_larger_than_a_part_streams_in_parts_and_arrives_whole(aws: Any) -> None:
    store = S3Store(aws)
    line = b'{"code": "bad_number", "raw": "' + b"x" * 1000 + b'"}\n'
    lines = PART * 2 // len(line) + 7  # more than two parts
    with store.upload_if_written("stg", "jobs/j/r/rejects/000002.jsonl", "application/x-ndjson") as out:
        for _ in range(lines):
            out.write(line)
    head = aws.head_object(Bucket="stg", Key="jobs/j/r/rejects/000002.jsonl")
    assert head["ContentLength"] == lines * len(line)
    assert head["ETag"].strip('"').endswith("-3")  # three parts: memory held one at a time
    body = aws.get_object(Bucket="stg", Key="jobs/j/r/rejects/000002.jsonl")["Body"].read()
    assert body == line * lines


def test_an_error_aborts_the_upload_and_leaves_no_object(aws: Any) -> None:
    store = S3Store(aws)
    with (
        pytest.raises(RuntimeError, match="shard failed"),
        store.upload_if_written("stg", "jobs/j/r/graph/000003.nq", "application/n-quads") as out,
    ):
        stager = GraphStager(compress=False, out=out)
        quad = ox.Quad(ox.NamedNode("http://a/s"), ox.NamedNode("http://a/p"), ox.Literal("x" * 1000))
        for _ in range(PART // 1000 + 100):
            stager.add([quad])
        raise RuntimeError("shard failed")
    assert aws.list_objects_v2(Bucket="stg").get("KeyCount", 0) == 0
    assert aws.list_multipart_uploads(Bucket="stg").get("Uploads", []) == []


def test_a_gzip_graph_file_is_one_whole_gzip_stream(aws: Any) -> None:
    store = S3Store(aws)
    quad = ox.Quad(ox.NamedNode("http://a/s"), ox.NamedNode("http://a/p"), ox.Literal("x"))
    with store.upload_if_written("stg", "jobs/j/r/graph/000004.nq.gz", "application/n-quads") as out:
        stager = GraphStager(compress=True, out=out)
        for _ in range(2500):
            stager.add([quad])
        stager.finish()
    text = gzip.decompress(aws.get_object(Bucket="stg", Key="jobs/j/r/graph/000004.nq.gz")["Body"].read())
    assert text.count(b"\n") == 2500


class _PartSizes:
    """An S3 client that keeps only each part's size (the bytes are dropped)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def create_multipart_upload(self, **_: Any) -> dict[str, str]:
        return {"UploadId": "u"}

    def upload_part(self, *, Body: bytes, **_: Any) -> dict[str, str]:
        self.sizes.append(len(Body))
        return {"ETag": f'"{len(self.sizes)}"'}

    def complete_multipart_upload(self, **_: Any) -> None:
        pass


def test_a_streams_parts_grow_with_what_was_sent_as_a_files_do() -> None:
    """Issue 42 item 4: fixed parts stopped the merged rejects at 10,000 x 8 MiB = 78 GiB. Parts
    start at the given size and follow `stream_part_size` (the file rule, `part_size_for`, for
    STREAM_SIZE_FACTOR x what was sent); 1 KiB parts here grow to 1 MiB after ~1.25 MB."""
    client = _PartSizes()
    start = 1024
    with StreamingUpload(client, "stg", "k", "application/x-ndjson", part_bytes=start) as out:
        chunk = b"x" * 4096
        for _ in range(3 * partlib.MIB // len(chunk)):
            out.write(chunk)
    sent = 0
    for size in client.sizes[:-1]:
        assert size == partlib.stream_part_size(sent, start)
        sent += size
    assert client.sizes[0] == start and max(client.sizes) == partlib.MIB
    assert sum(client.sizes) == 3 * partlib.MIB


def test_10000_growing_parts_hold_s3s_largest_object_within_memory() -> None:
    """From 8 MiB: the largest object (5 TiB) fits in 10,000 parts, no part is over S3's 5 GiB,
    and the part held in memory stays a small share of what was sent (Finalize: 1,024 MiB)."""
    sent, parts, held_at_100_gib = 0, 0, 0
    while sent < 5 * 1024**4:
        size = partlib.stream_part_size(sent)
        assert partlib.MIN_PART_BYTES <= size <= partlib.MAX_PART_BYTES
        if sent <= 100 * 1024**3:
            held_at_100_gib = size
        sent += size
        parts += 1
    assert parts <= partlib.MAX_PARTS, parts
    assert partlib.stream_part_size(0) == partlib.DEFAULT_PART_BYTES
    assert held_at_100_gib <= 100 * partlib.MIB
