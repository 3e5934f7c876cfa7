"""writeMode sync's pure rules: buckets, staged lines, dedupe and the diff (logic/sync.py)."""

from __future__ import annotations

from logic import layout, sync

KEY = ("pk",)


def _item(pk: str, **attributes: dict[str, object]) -> dict[str, object]:
    return {"pk": {"S": pk}, **attributes}


def test_bucket_of_is_stable_and_spreads() -> None:
    keys = [sync.key_text(_item(f"k{i}"), KEY) for i in range(400)]
    buckets = [sync.bucket_of(key, 4) for key in keys]
    assert buckets == [sync.bucket_of(key, 4) for key in keys]
    assert set(buckets) == {0, 1, 2, 3}
    assert sync.bucket_of(keys[0], 1) == 0


def test_bucket_count_from_source_size() -> None:
    assert sync.bucket_count(0) == 1
    assert sync.bucket_count(sync.BUCKET_SOURCE_BYTES + 1) == 2
    assert sync.bucket_count(10**15) == sync.MAX_BUCKETS
    assert sync.bucket_count(1000, per_bucket=300) == 4


def test_key_text_keeps_types() -> None:
    assert sync.key_text({"pk": {"S": "1"}}, KEY) != sync.key_text({"pk": {"N": "1"}}, KEY)


def test_wire_round_trip_and_sets_in_order() -> None:
    wire = {"pk": {"B": b"\x00\x01"}, "s": {"SS": ["b", "a"]}, "m": {"M": {"x": {"BS": [b"z"]}}}}
    plain = sync.plain_item(wire)
    assert plain["s"] == {"SS": ["a", "b"]}
    assert sync.wire_item(plain) == {**wire, "s": {"SS": ["a", "b"]}}


def _line(key: str, item: dict[str, object]) -> tuple[bytes, bytes]:
    (found,) = sync.read_lines(sync.staged_line(key, sync.plain_item(item)))
    return found


def test_staged_lines_read_back_and_merged_lines_are_staged_lines() -> None:
    data = sync.staged_line('["a"]', _item("a")) + sync.staged_line('["b\\tc"]', _item("b"))
    lines = list(sync.read_lines(data))
    assert [key for key, _ in lines] == [b'["a"]', b'["b\\tc"]']
    assert sync.merged_lines(dict(lines)) == data


def test_merge_keeps_the_later_and_counts_duplicates() -> None:
    first = [_line("a", _item("a", v={"S": "1"})), _line("a", _item("a", v={"S": "2"}))]
    second = [_line("a", _item("a", v={"S": "3"})), _line("b", _item("b"))]
    items, duplicates = sync.merge([iter(first), iter(second)])
    assert items == dict([_line("a", _item("a", v={"S": "3"})), _line("b", _item("b"))])
    assert duplicates == 2


def test_diff_puts_changed_and_new_deletes_removed() -> None:
    old = dict(
        [_line("a", _item("a", v={"S": "1"})), _line("b", _item("b", v={"N": "1"})), _line("c", _item("c"))]
    )
    new = dict(
        [_line("a", _item("a", v={"S": "1"})), _line("b", _item("b", v={"S": "1"})), _line("d", _item("d"))]
    )
    result = sync.diff(new, old, KEY)
    assert result.unchanged == 1
    assert result.puts == [_item("b", v={"S": "1"}), _item("d")]  # b's type changed
    assert result.deletes == [{"pk": {"S": "c"}}]


def test_an_item_whose_set_is_given_in_another_order_is_unchanged() -> None:
    before = dict([_line("a", _item("a", s={"SS": ["x", "y"]}))])
    after = dict([_line("a", _item("a", s={"SS": ["y", "x"]}))])
    assert sync.diff(after, before, KEY).unchanged == 1


def test_first_sync_deletes_nothing() -> None:
    result = sync.diff(dict([_line("a", _item("a"))]), {}, KEY)
    assert (result.puts, result.deletes, result.unchanged) == ([_item("a")], [], 0)


def test_numbers_compare_by_value_as_dynamodb_stores_them() -> None:
    """DynamoDB trims a number's leading and trailing zeros (developer guide, Data types: Number):
    "50.0030" and "50.003" are one value, so an item that only writes it differently is
    unchanged; the put of a real change keeps the file's text (DynamoDB normalizes it)."""
    before = _item("a", v={"N": "50.003"}, s={"NS": ["1", "2.5"]}, m={"M": {"n": {"N": "5E1"}}})
    same = _item("a", v={"N": "50.0030"}, s={"NS": ["2.50", "01"]}, m={"M": {"n": {"N": "50"}}})
    assert sync.diff(dict([_line("a", same)]), dict([_line("a", before)]), KEY).unchanged == 1
    changed = _item("a", v={"N": "50.0040"}, s={"NS": ["2.50", "01"]}, m={"M": {"n": {"N": "50"}}})
    result = sync.diff(dict([_line("a", changed)]), dict([_line("a", before)]), KEY)
    assert (result.unchanged, result.puts) == (0, [sync.plain_item(changed)])
    typed = _item("a", v={"S": "50.003"}, s={"NS": ["1", "2.5"]}, m={"M": {"n": {"N": "5E1"}}})
    assert sync.diff(dict([_line("a", typed)]), dict([_line("a", before)]), KEY).unchanged == 0


def test_a_numeric_key_is_one_key_whatever_its_text() -> None:
    """7, 7.0, 007 and 7E0 are one DynamoDB key: one key text (so one bucket, merged as
    duplicates), never a put in one bucket and a delete of the same item in another."""
    texts = {sync.key_text({"pk": {"N": n}}, KEY) for n in ("7", "7.0", "007", "7E0", "0.7e1")}
    assert len(texts) == 1
    assert sync.key_text({"pk": {"N": "0"}}, KEY) == sync.key_text({"pk": {"N": "-0.00"}}, KEY)
    assert sync.key_text({"pk": {"N": "7"}}, KEY) != sync.key_text({"pk": {"N": "70"}}, KEY)
    old = sync.staged_line(sync.key_text({"pk": {"N": "007"}}, KEY), {"pk": {"N": "007"}})
    new = sync.staged_line(sync.key_text({"pk": {"N": "7"}}, KEY), {"pk": {"N": "7"}})
    result = sync.diff(dict(sync.read_lines(new)), dict(sync.read_lines(old)), KEY)
    assert (result.puts, result.deletes, result.unchanged) == ([], [], 1)


def test_a_baseline_staged_before_numbers_were_compared_by_value_never_loses_an_item() -> None:
    """A baseline line keyed by a number's raw text ('[{"N":"007"}]', as staged before keys were
    compared by value): the same item in this file is never deleted — neither in this bucket
    (its key by value is among the new ones) nor when its key by value now hashes to another
    bucket (that bucket owns it; the item is left, never raced by a delete)."""
    raw = '[{"N":"007"}]'
    old = dict(sync.read_lines(sync.staged_line(raw, {"pk": {"N": "007"}})))
    canonical = sync.key_text({"pk": {"N": "7"}}, KEY)
    assert canonical != raw
    new = dict(sync.read_lines(sync.staged_line(canonical, {"pk": {"N": "7"}})))
    result = sync.diff(new, old, KEY)
    assert result.deletes == [] and result.puts == [{"pk": {"N": "7"}}]  # put again, not deleted
    buckets = 64
    here = sync.bucket_of(raw, buckets)
    elsewhere = sync.bucket_of(canonical, buckets)
    assert here != elsewhere
    assert sync.diff({}, old, KEY, bucket=here, buckets=buckets).deletes == []
    # A key staged by value and gone from the file is deleted, as ever.
    gone = dict(sync.read_lines(sync.staged_line(canonical, {"pk": {"N": "7"}})))
    assert sync.diff({}, gone, KEY, bucket=elsewhere, buckets=buckets).deletes == [{"pk": {"N": "7"}}]


def test_stale_stagings_are_all_but_the_baseline_and_the_runs_that_compare_with_it() -> None:
    """After a switch to `new`, a sync that compared with another baseline (an older one, or none)
    can never switch, and its re-run writes under another prefix: its buckets go. The superseded
    baseline goes. The new baseline's stay, and so do those of a run planned after the switch,
    which compares with `new` and may still switch (its ledger records keep its buckets done)."""
    first = layout.sync_prefix("t", "d", "a", "p1", None)
    new = layout.sync_prefix("t", "d", "b", "p2", first)
    failed_before = layout.sync_prefix("t", "d", "c", "p3", first)  # compared with `first`
    failed_first = layout.sync_prefix("t", "d", "e", "p5", None)
    after = layout.sync_prefix("t", "d", "f", "p6", new)  # planned after the switch
    other = layout.sync_prefix("t", "d2", "c", "p3", first)
    assert after != layout.sync_prefix("t", "d", "f", "p6", first)  # a re-run against another baseline
    keys = [p + "bucket-00000.jsonl.gz" for p in (first, new, failed_before, failed_first, after, other)]
    listed = [k for k in keys if k.startswith(layout.sync_dataset_prefix("t", "d"))]
    assert layout.sync_stale(listed, "t", "d", new) == [keys[0], keys[2], keys[3]]
