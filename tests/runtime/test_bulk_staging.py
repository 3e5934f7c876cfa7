"""dynamodb.engine bulkPutItems' Worker: each shard's accepted items staged as gzip DynamoDB JSON Lines
with a sidecar of their source positions, nothing written, the counts reconciled
(runtime/shards/bulk_staging.py, logic/bulk_items.py)."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from typing import Any

import boto3
import pytest
from pipeline_support import REGION, scan
from test_shard_service import Settings, planned, recorded

from adapters.ledger import Ledger
from adapters.s3 import S3Store
from logic import bulk_items, bulk_sidecar, layout
from logic.bulk_sidecar import RowPosition, TextPosition
from logic.dynamodb_json import parse_item
from logic.report import balanced
from logic.values import Item, Line, ParquetRow
from shards.bulk_staging import BulkStager
from shards.service import process_shard

pytestmark = pytest.mark.runtime


def item(pk: str, value: str = "1") -> Item:
    attributes = {"pk": {"S": pk}, "sk": {"S": "X"}, "n": {"N": value}, "b": {"B": b"\x00\xff"}}
    return Item((pk, "X"), attributes, 40)


def line(number: int, offset: int, raw: bytes = b"a,b") -> Line:
    return Line(number, offset, raw)


def test_a_staged_line_is_the_item_as_dynamodb_json() -> None:
    attributes = {
        "pk": {"S": 'é\n"x'},
        "n": {"N": "1.50"},
        "b": {"B": b"\x00\x01"},
        "ss": {"SS": ["a", "b"]},
        "bs": {"BS": [b"\x02"]},
        "m": {"M": {"l": {"L": [{"NULL": True}, {"BOOL": False}]}}},
    }
    staged = bulk_items.staged_line(attributes)
    assert staged.endswith(b"\n") and staged.count(b"\n") == 1
    assert json.loads(staged)["Item"]["b"] == {"B": "AAE="}
    assert dict(parse_item(staged.decode())) == attributes  # the strict DynamoDB JSON reader's item
    # The encoder built once writes what json.dumps writes.
    dumped = json.dumps({"Item": attributes}, separators=(",", ":"), default=bulk_items._binary)
    assert staged == dumped.encode() + b"\n"


def test_parts_follow_the_shards_source_bytes_and_plan_counts_them() -> None:
    part = bulk_items.PART_SOURCE_BYTES
    assert [bulk_items.parts(n) for n in (0, 1, part, part + 1, 3 * part)] == [1, 1, 1, 2, 3]
    assert bulk_items.staged_objects([1, part + 1, 3 * part]) == 6


def test_cuts_are_of_nearly_equal_bytes_cover_every_record_and_repeat() -> None:
    sizes = [100 + (n * 37) % 250 for n in range(1000)]
    ranges = bulk_items.cut(sizes, 4)
    assert [r.start for r in ranges[1:]] == [r.stop for r in ranges[:-1]]
    assert ranges[0].start == 0 and ranges[-1].stop == len(sizes)
    weights = [sum(sizes[n] for n in r) for r in ranges]
    assert max(weights) - min(weights) <= 2 * max(sizes)
    assert bulk_items.cut(sizes, 4) == ranges
    assert [len(r) for r in bulk_items.cut([10, 10], 3)].count(0) >= 1  # fewer records than parts


def test_an_object_over_the_service_limit_is_cut_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk_items, "MAX_OBJECT_BYTES", 1000)
    assert len(bulk_items.cut([100] * 25, 1)) == 3


def test_the_later_record_of_a_key_is_staged_and_the_earlier_counted_a_duplicate() -> None:
    stager = BulkStager()
    stager.add(item("a", "1"), line(1, 0))
    stager.add(item("b"), line(2, 4))
    stager.add(item("a", "2"), line(3, 8, b"a,2"))
    assert (stager.staged, stager.duplicates) == (2, 1)
    (obj,) = stager.objects("job", "plan", 7, 100, "s3://src/a.csv", None)
    assert obj.key == layout.bulk_items_key("job", "plan", 7, 0) and obj.items == 2
    lines = gzip.decompress(obj.body).splitlines()
    sidecar = bulk_sidecar.decode(obj.sidecar)
    by_key = {
        parse_item(text.decode())["pk"]["S"]: (parse_item(text.decode())["n"]["N"], position)
        for text, position in zip(lines, sidecar.records, strict=True)
    }
    assert by_key == {"a": ("2", TextPosition(3, 1, 8, 3)), "b": ("1", TextPosition(2, 1, 4, 3))}
    assert sidecar.source == "s3://src/a.csv" and not sidecar.parquet


def test_staged_order_is_neither_key_nor_file_order_and_objects_are_similar_and_repeatable() -> None:
    def staged() -> list[Any]:
        stager = BulkStager()
        for n in range(3000):
            stager.add(item(f"k{n:05d}"), line(n + 1, n * 10))
        return stager.objects("job", "plan", 0, 3 * bulk_items.PART_SOURCE_BYTES, "s3://src/a", None)

    objects = staged()
    assert [o.key for o in objects] == [layout.bulk_items_key("job", "plan", 0, p) for p in range(3)]
    assert sum(o.items for o in objects) == 3000
    sizes = [len(gzip.decompress(o.body)) for o in objects]
    assert max(sizes) - min(sizes) < 100
    keys = [parse_item(t.decode())["pk"]["S"] for t in gzip.decompress(objects[0].body).splitlines()]
    assert keys != sorted(keys)
    # Each record's sidecar entry is its own line's position (offset n * 10 of key n).
    for obj in objects:
        texts = gzip.decompress(obj.body).splitlines()
        positions = bulk_sidecar.decode(obj.sidecar).records
        assert len(texts) == len(positions) == obj.items
        for text, position in zip(texts, positions, strict=True):
            assert isinstance(position, TextPosition)
            assert parse_item(text.decode())["pk"]["S"] == f"k{position.offset // 10:05d}"
    again = staged()
    assert [(o.key, o.body, o.sidecar) for o in again] == [(o.key, o.body, o.sidecar) for o in objects]


def test_parquet_rows_keep_their_row_group_and_row() -> None:
    stager = BulkStager()
    stager.add(item("a"), ParquetRow(1, 2, 40, {}))
    (obj,) = stager.objects("job", "plan", 0, 10, "s3://src/p.parquet", None)
    sidecar = bulk_sidecar.decode(obj.sidecar)
    assert sidecar.parquet and sidecar.records == [RowPosition(2, 40)]


def test_a_shard_that_stages_nothing_writes_no_object() -> None:
    assert BulkStager().objects("job", "plan", 0, 10, "s3://src/a", None) == []


def test_a_bulk_shard_balances_by_staged_duplicates_and_rejected() -> None:
    assert balanced({"read": 5, "written": 0, "staged": 3, "duplicates": 1, "rejected": 1}) == 5
    assert balanced({"read": 5, "written": 4, "duplicates": 1, "rejected": 1}) == 5  # lambda: in written


BULK_JOB: dict[str, Any] = {
    "source": "s3://src/a.csv",
    "jobId": "bulk",
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}},
        "engine": "bulkPutItems",
    },
    "shardSizeMiB": 0.001,
}


def test_bulk_shards_stage_their_items_write_nothing_and_reconcile(aws: Any) -> None:
    rows = [f"AB{i} 1CD,{i}.5" for i in range(200)] + ["BAD 1CD,north", "AB1 1CD,7.5"]
    aws.put_object(Bucket="src", Key="a.csv", Body=("postcode,lat\n" + "\n".join(rows) + "\n").encode())
    job, manifest = planned(aws, BULK_JOB)
    assert len(manifest) > 2
    db = boto3.client("dynamodb", region_name=REGION)
    ledger = Ledger(db, "ledger", 7)
    store = S3Store(boto3.client("s3", region_name=REGION))

    results = [process_shard(shard, job, Settings(), store, ledger, db) for shard in manifest]

    assert all(r["written"] == 0 and r["more"] is False for r in results)
    assert scan() == {}  # the Workers write nothing: the bulk put items operation does
    counts = recorded(ledger, job)
    assert len(counts) == len(manifest)
    for c in counts:
        assert c["read"] == c["staged"] + c["duplicates"] + c["rejected"] == balanced(c)
        assert len(c["bulkKeys"]) == len(c["bulkItems"]) == len(c["bulkBytes"])
        assert sum(c["bulkItems"]) == c["staged"]
    total = {name: sum(c[name] for c in counts) for name in ("read", "staged", "rejected", "duplicates")}
    # AB1 1CD twice, in different shards: each shard stages its own (the later-wins rule is a shard's).
    assert total == {"read": 202, "staged": 201, "rejected": 1, "duplicates": 0}
    staged: dict[str, Decimal] = {}
    for c in counts:
        for key, items, size in zip(c["bulkKeys"], c["bulkItems"], c["bulkBytes"], strict=True):
            assert key.startswith(layout.bulk_items_prefix("bulk", job["planId"]))
            body = aws.get_object(Bucket="stg", Key=key)["Body"].read()
            assert len(body) == size
            texts = gzip.decompress(body).splitlines()
            lines_key = layout.bulk_lines_key(key)
            sidecar = bulk_sidecar.decode(aws.get_object(Bucket="stg", Key=lines_key)["Body"].read())
            assert len(texts) == len(sidecar.records) == items
            for text, position in zip(texts, sidecar.records, strict=True):
                fields = parse_item(text.decode())
                assert set(fields) == {"pk", "sk", "lat"}
                assert isinstance(position, TextPosition)
                last = position.offset + position.length - 1
                source = aws.get_object(Bucket="src", Key="a.csv", Range=f"bytes={position.offset}-{last}")
                source = source["Body"].read()
                assert fields["pk"]["S"] == "P#" + source.decode().split(",")[0]
                staged[fields["pk"]["S"]] = Decimal(fields["lat"]["N"])
    assert len(staged) == 200 and staged["P#AB7 1CD"] == Decimal("7.5")
    listed = aws.list_objects_v2(Bucket="stg", Prefix=layout.bulk_items_prefix("bulk", job["planId"]))
    assert sorted(o["Key"] for o in listed["Contents"]) == sorted(k for c in counts for k in c["bulkKeys"])
