"""The Worker's rejects and graph files stream to S3 as they are written (nothing in /tmp): an
object only when something was written, multipart past one part, aborted on an error."""

from __future__ import annotations

import gzip
from typing import Any

import pyoxigraph as ox
import pytest

from adapters.rdf import GraphStager
from adapters.s3 import S3Store

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
