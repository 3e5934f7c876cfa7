"""Shard cutting, batching of distinct keys, and backoff delays."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logic.batching import Batcher
from logic.errors import InputValidationError
from logic.mapping import Item
from logic.planning import SourceObject, cut_shards
from logic.retry import backoff_delays

pytestmark = pytest.mark.runtime


def obj(key: str, size: int, data_start: int = 0, header: list[str] | None = None) -> SourceObject:
    return SourceObject("bucket", key, size, f'"{key}-etag"', header, data_start)


def test_shard_items_follow_the_contract() -> None:
    shards = cut_shards([obj("a.csv", 250, 50, ["x", "y"])], 100)
    assert shards == [
        {
            "index": 0,
            "bucket": "bucket",
            "key": "a.csv",
            "etag": '"a.csv-etag"',
            "start": 50,
            "end": 150,
            "objectSize": 250,
            "dataStart": 50,
            "header": ["x", "y"],
            "firstLineNumber": None,
        },
        {
            "index": 1,
            "bucket": "bucket",
            "key": "a.csv",
            "etag": '"a.csv-etag"',
            "start": 150,
            "end": 250,
            "objectSize": 250,
            "dataStart": 50,
            "header": ["x", "y"],
            "firstLineNumber": None,
        },
    ]


def test_mappings_are_accepted_as_objects() -> None:
    shards = cut_shards(
        [{"bucket": "b", "key": "k", "size": 10, "etag": "e", "header": None, "data_start": 0}], 4
    )
    assert [(s["start"], s["end"]) for s in shards] == [(0, 3), (3, 6), (6, 10)]


def test_empty_and_header_only_objects_have_no_shards() -> None:
    shards = cut_shards([obj("empty", 0), obj("header-only", 20, 20, ["a"]), obj("data", 5)], 100)
    assert [(s["index"], s["key"]) for s in shards] == [(0, "data")]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 5000)), max_size=6),
    st.integers(min_value=1, max_value=3000),
)
def test_shards_cover_each_objects_data_without_gaps_or_overlaps(
    sizes: list[tuple[int, int]], shard_size: int
) -> None:
    objects = [obj(f"k{i}", max(a, b), min(a, b)) for i, (a, b) in enumerate(sizes)]
    shards = cut_shards(objects, shard_size)
    assert [s["index"] for s in shards] == list(range(len(shards)))
    for o in objects:
        mine = [s for s in shards if s["key"] == o.key]
        assert all(0 < s["end"] - s["start"] <= shard_size for s in mine)
        covered = [(s["start"], s["end"]) for s in mine]
        expected_start = o.data_start
        for start, end in covered:
            assert start == expected_start
            expected_start = end
        assert expected_start == (o.size if mine else o.data_start)
        if o.size > o.data_start:
            assert len(mine) == -(-(o.size - o.data_start) // shard_size)


def test_a_100_gb_object_is_planned_quickly() -> None:
    # Sizes only: planning never reads data, so the cost is per shard, not per byte.
    shards = cut_shards([obj("big", 100 * 1024**3)], 64 * 1024 * 1024)
    assert len(shards) == 1600
    assert (shards[0]["start"], shards[-1]["end"]) == (0, 100 * 1024**3)


def test_too_many_shards_is_an_input_error() -> None:
    with pytest.raises(InputValidationError) as caught:
        cut_shards([obj("big", 10**9)], 1)
    assert caught.value.field == "shardSizeMiB"
    assert len(cut_shards([obj("k", 10)], 1, max_shards=10)) == 10


def item(key: str, value: str = "") -> Item:
    return Item((key, "S"), {"pk": {"S": key}, "v": {"S": value}}, 10)


def test_batches_hold_size_distinct_keys() -> None:
    batcher = Batcher(3)
    assert batcher.add(item("a")) is None
    assert batcher.add(item("b")) is None
    batch = batcher.add(item("c"))
    assert batch is not None
    assert [i.key[0] for i in batch] == ["a", "b", "c"]
    assert batcher.flush() == []


def test_a_later_duplicate_replaces_the_earlier_one_in_the_open_batch() -> None:
    batcher = Batcher(2)
    batcher.add(item("a", "first"))
    assert batcher.add(item("a", "second")) is None
    assert batcher.duplicates == 1
    batch = batcher.add(item("b"))
    assert batch is not None
    assert [(i.key[0], i.attributes["v"]["S"]) for i in batch] == [("a", "second"), ("b", "")]


def test_equal_keys_in_different_batches_are_not_duplicates() -> None:
    batcher = Batcher(1)
    assert batcher.add(item("a")) == [item("a")]
    assert batcher.add(item("a")) == [item("a")]
    assert batcher.duplicates == 0


def test_flush_returns_the_partial_batch_once() -> None:
    batcher = Batcher()
    for key in "abc":
        batcher.add(item(key))
    assert len(batcher) == 3
    assert [i.key[0] for i in batcher.flush()] == ["a", "b", "c"]
    assert batcher.flush() == []


def test_backoff_is_full_jitter_under_a_doubling_capped_ceiling() -> None:
    class Highest:
        def random(self) -> float:
            return 1.0

    ceilings = list(itertools.islice(backoff_delays(0.1, 1.0, Highest()), 6))
    assert ceilings == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    delays = list(itertools.islice(backoff_delays(0.1, 1.0, random.Random(7)), 2000))
    assert all(0 <= d <= 1.0 for d in delays)
    assert len(set(delays)) > 1900


def test_backoff_never_overflows() -> None:
    assert list(itertools.islice(backoff_delays(1.0, 5.0, random.Random(1)), 5000))[-1] <= 5.0


def test_loader_only_graph_options_leave_the_plan_id_alone_what_is_staged_changes_it() -> None:
    from logic.planning import LOAD_ONLY_GRAPH_FIELDS, plan_id
    from logic.spec.parse import parse_spec, spec_to_json

    def spec(**graph: object) -> dict[str, object]:
        raw = {
            "source": "s3://src/people.csv",
            "format": "csv",
            "graph": {"model": "property", "vertices": [{"id": "{id}", "label": "Person"}], **graph},
        }
        return spec_to_json(parse_spec(raw, table_key={"pk": "S"}, execution_name="run"))

    shards = [{"bucket": "src", "key": "people.csv", "etag": "e", "start": 0, "end": 10}]
    base = plan_id(shards, spec())
    # A job held back by its endpoint check re-runs with a tolerance on the shards it staged.
    for changed in (
        {"maxDanglingPercent": 5, "failOnError": False},
        {"parallelism": "MEDIUM"},
        {"pollSeconds": 5},
    ):
        assert plan_id(shards, spec(**changed)) == base, changed
    assert plan_id(shards, spec(gzip=True)) != base
    assert plan_id(shards, spec(vertices=[{"id": "v{id}", "label": "Person"}])) != base
    # Every loader option but gzip is a load-only field: a new option must be placed on one side.
    options = set(spec()["graph"]) - {"model", "vertices", "edges"}  # type: ignore[arg-type]
    assert options - LOAD_ONLY_GRAPH_FIELDS == {"gzip"}


def test_the_plan_id_carries_the_plan_format_so_an_upgraded_reader_never_trusts_old_shards() -> None:
    """Shards recorded by a reader that read CSV differently (plan format 1: quotes counted by
    parity) must not be skipped, nor their CSV start states trusted, by a re-run after the upgrade."""
    import hashlib
    import json

    from logic.planning import PLAN_FORMAT, plan_id

    shards = [{"bucket": "src", "key": "in.csv", "etag": "e", "start": 0, "end": 10}]
    spec = {"source": "s3://src/in.csv", "format": "csv", "csv": {"header": True}}
    assert PLAN_FORMAT >= 2
    assert plan_id(shards, spec) == plan_id(shards, spec, plan_format=PLAN_FORMAT)
    assert plan_id(shards, spec, plan_format=1) != plan_id(shards, spec)
    # Nor is it the id format 1 gave (before the version was part of it).
    cuts = [("src", "in.csv", "e", 0, 10)]
    before = hashlib.sha256(json.dumps([spec, cuts], sort_keys=True, default=str).encode()).hexdigest()[:20]
    assert plan_id(shards, spec) != before


def test_a_write_budget_is_no_part_of_the_plan_so_raising_it_keeps_the_finished_shards() -> None:
    """Raising `writeUnitsPerSecond` to rescue a slow job (issue 42 item 1) must not start the plan
    afresh: a budget paces the writes, it changes nothing a shard writes or counts."""
    from logic.planning import plan_id

    shards = [{"bucket": "src", "key": "in.csv", "etag": "e", "start": 0, "end": 10}]
    spec = {"source": "s3://src/in.csv", "format": "csv", "csv": {"header": True}}
    slow = plan_id(shards, {**spec, "writeUnitsPerSecond": 10_000})
    # The normalized spec always names it (null without a budget): a budget's id is that one's,
    # so a plan without a budget keeps the id it had before (test_chosen_shard_size pins one).
    unpaced = plan_id(shards, {**spec, "writeUnitsPerSecond": None})
    assert plan_id(shards, {**spec, "writeUnitsPerSecond": 40_000}) == slow == unpaced
