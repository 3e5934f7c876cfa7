"""writeMode sync's pure rules: buckets, staged lines, dedupe and the diff (logic/sync.py)."""

from __future__ import annotations

from logic import sync

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
