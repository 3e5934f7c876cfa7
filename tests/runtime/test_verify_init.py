"""mapload verify's comparison and BatchGetItem use, and mapload init's inference, without a server:
a table stand-in that answers BatchGetItem as DynamoDB may (part of a batch in UnprocessedKeys,
at most 100 keys a request, duplicates refused)."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from logic.spec.parse import parse_spec
from mapload import initspec, verify

pytestmark = pytest.mark.runtime

KEY = {"pk": "S", "sk": "S"}


class Table:
    """BatchGetItem over a dict of items; answers at most `per_call` keys, the rest unprocessed."""

    def __init__(self, items: list[dict[str, Any]], per_call: int = 100) -> None:
        self.items = {(i["pk"]["S"], i["sk"]["S"]): i for i in items}
        self.per_call = per_call
        self.requests: list[int] = []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        ((table, request),) = RequestItems.items()
        keys = request["Keys"]
        self.requests.append(len(keys))
        if len(keys) > 100:
            raise AssertionError("ValidationException: Too many items requested for the BatchGetItem call")
        shown = [(k["pk"]["S"], k["sk"]["S"]) for k in keys]
        if len(set(shown)) != len(shown):
            raise AssertionError("ValidationException: Provided list of item keys contains duplicates")
        done, left = keys[: self.per_call], keys[self.per_call :]
        found = [
            self.items[(k["pk"]["S"], k["sk"]["S"])]
            for k in done
            if (k["pk"]["S"], k["sk"]["S"]) in self.items
        ]
        answer: dict[str, Any] = {"Responses": {table: found}, "UnprocessedKeys": {}}
        if left:
            answer["UnprocessedKeys"] = {table: {"Keys": left, "ConsistentRead": True}}
        return answer


def _spec(dynamodb: dict[str, Any]) -> Any:
    raw = {"format": "jsonl", "source": "s3://bucket/k", "dynamodb": dynamodb}
    return parse_spec(raw, table_key=KEY, execution_name="t")


PUT = {"key": {"pk": "ID#{id}", "sk": "X"}, "attributes": {"n": {"field": "n", "type": "N"}}}


def _stored(i: int, n: str) -> dict[str, Any]:
    return {"pk": {"S": f"ID#{i}"}, "sk": {"S": "X"}, "n": {"N": n}}


def test_every_batch_holds_at_most_100_distinct_keys_and_unprocessed_keys_are_asked_again() -> None:
    table = Table([_stored(i, str(i)) for i in range(250)], per_call=30)
    records = [{"id": Decimal(i), "n": Decimal(i)} for i in range(250)]
    records.insert(1, {"id": Decimal(3), "n": Decimal(99)})  # the later record with key 3 wins
    outcome = verify.compare(table, "t", _spec(PUT), records, kept=verify.KeptKeys(), sleep=lambda _: None)
    assert outcome.ok and outcome.equal == 250 and outcome.items == 250
    assert max(table.requests) <= 100
    assert sum(n for n in table.requests if n) > 250  # the unprocessed keys were asked again


def test_an_answer_that_never_processes_every_key_is_an_error_not_a_miss() -> None:
    table = Table([_stored(1, "1")], per_call=0)
    with pytest.raises(verify.VerifyError, match="unprocessed"):
        verify.batch_get(table, "t", [{"pk": {"S": "ID#1"}, "sk": {"S": "X"}}], sleep=lambda _: None)


def test_missing_and_differing_items_are_counted_and_named() -> None:
    table = Table([_stored(1, "1.50"), _stored(2, "7")])
    records = [{"id": 1, "n": Decimal("1.5")}, {"id": 2, "n": 2}, {"id": 3, "n": 3}, {"id": 4, "n": "x"}]
    outcome = verify.compare(table, "t", _spec(PUT), records, kept=None)
    assert (outcome.equal, outcome.missing, outcome.differing, outcome.rejected) == (1, 1, 1, 1)
    assert outcome.missing_shown == ["pk=ID#3, sk=X"]
    assert outcome.differing_shown == ['pk=ID#2, sk=X: n: {"N": "2"} in the file, {"N": "7"} in the table']
    assert not outcome.ok


def test_update_compares_the_mapped_attributes_and_never_an_added_number() -> None:
    spec = _spec(
        {
            "writeMode": "update",
            "key": {"pk": "ID#{id}", "sk": "X"},
            "attributes": {
                "name": {"field": "name"},
                "count": {"field": "count", "type": "N", "update": "add"},
            },
        }
    )
    stored = {
        "pk": {"S": "ID#1"},
        "sk": {"S": "X"},
        "name": {"S": "a"},
        "count": {"N": "41"},
        "other": {"S": "o"},
    }
    table = Table([stored])
    outcome = verify.compare(table, "t", spec, [{"id": 1, "name": "a", "count": 1}], kept=None)
    assert outcome.ok and outcome.equal == 1  # count added to 41: present is all it can say
    changed = Table([{**stored, "name": {"S": "b"}}])
    outcome = verify.compare(changed, "t", spec, [{"id": 1, "name": "a", "count": 1}], kept=None)
    assert outcome.differing == 1 and "name" in outcome.differing_shown[0]
    without = Table([{k: v for k, v in stored.items() if k != "count"}])
    outcome = verify.compare(without, "t", spec, [{"id": 1, "name": "a", "count": 1}], kept=None)
    assert outcome.differing == 1 and "count" in outcome.differing_shown[0]


def test_put_compares_the_whole_item() -> None:
    table = Table([{**_stored(1, "1"), "stale": {"S": "left over"}}])
    outcome = verify.compare(table, "t", _spec(PUT), [{"id": 1, "n": 1}], kept=None)
    assert outcome.differing == 1 and "stale" in outcome.differing_shown[0]


def test_the_kept_keys_stop_at_their_limit() -> None:
    kept = verify.KeptKeys(limit=2)
    for key in ("a", "b", "a", "c"):
        kept.add(key)
    assert kept.overflow and len(kept) == 0


def test_the_default_table_key_is_the_settings_default() -> None:
    from stacks.data_settings import DataConfig

    partition, sort = (DataConfig.model_fields[f].default for f in ("table_partition_key", "table_sort_key"))
    settings = {
        "partition_key": {"name": partition.name, "type": partition.type},
        "sort_key": {"name": sort.name, "type": sort.type},
    }
    assert settings == initspec.DEFAULT_TABLE_KEY


def test_the_table_key_is_the_environment_s_in_cdk_json(tmp_path: Path) -> None:
    cdk = tmp_path / "cdk.json"
    environments = {"dev": {"partition_key": {"name": "id", "type": "N"}, "sort_key": None}, "prod": {}}
    cdk.write_text(json.dumps({"context": {"mapload": {"environments": environments}}}))
    assert initspec.table_key("dev", cdk) == {"id": "N"}
    assert initspec.table_key("prod", cdk) == {"pk": "S", "sk": "S"}
    with pytest.raises(initspec.InitError, match="staging"):
        initspec.table_key("staging", cdk)


def test_a_table_without_a_sort_key_takes_key_alone(tmp_path: Path) -> None:
    source = tmp_path / "a.csv"
    source.write_text("id,v\n1,x\n2,y\n")
    spec = initspec.infer(source, ["{id}"], {"id": "N"})
    assert spec["dynamodb"]["key"] == {"id": "{id}"}
    assert "id" not in spec["dynamodb"]["attributes"]  # the key attribute holds it
    with pytest.raises(initspec.InitError, match="alone"):
        initspec.infer(source, ["{id}", "x"], {"id": "N"})


@pytest.mark.parametrize(
    ("text", "kind"),
    [("0", "N"), ("-12.5", "N"), ("007", "S"), ("+1", "S"), ("1e5", "S"), (" 1", "S"), ("1" * 39, "S")],
)
def test_only_canonical_numbers_are_typed_n(tmp_path: Path, text: str, kind: str) -> None:
    source = tmp_path / "a.csv"
    source.write_text(f"id,v\nA,{text}\nB,1\n")
    spec = initspec.infer(source, ["{id}", "X"], KEY, header=True)
    assert spec["dynamodb"]["attributes"]["v"]["type"] == kind


def test_json_lines_fields_missing_or_null_in_a_record_are_optional(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text('{"id": "a", "n": 1, "tags": ["x"]}\n{"id": "b", "n": null, "m": {"k": true}}\n')
    spec = initspec.infer(source, ["{id}", "X"], KEY)
    assert spec == {
        "format": "jsonl",
        "dynamodb": {
            "key": {"pk": "{id}", "sk": "X"},
            "attributes": {
                "id": {"field": "id", "type": "S"},
                "n": {"field": "n", "type": "N", "optional": True},
                "tags": {"field": "tags", "type": "L", "optional": True},
                "m": {"field": "m", "type": "M", "optional": True},
            },
        },
    }


def test_dynamodb_json_attributes_keep_their_types(tmp_path: Path) -> None:
    source = tmp_path / "export.json"
    lines = [
        {"Item": {"id": {"S": "a"}, "n": {"N": "1"}, "ok": {"BOOL": True}}},
        {"Item": {"id": {"S": "b"}, "n": {"N": "2"}}},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    spec = initspec.infer(source, ["ITEM#{id}", "X"], KEY)
    assert spec["format"] == "dynamodb-json"
    assert spec["dynamodb"]["attributes"] == {
        "id": {"field": "id", "type": "S"},
        "n": {"field": "n", "type": "N"},
        "ok": {"field": "ok", "type": "BOOL", "optional": True},
    }


def test_verify_of_a_server_that_is_not_there_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from mapload import cli

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", f"http://127.0.0.1:{port}")
    source, spec = tmp_path / "a.csv", tmp_path / "spec.json"
    source.write_text("id\n1\n")
    spec.write_text(json.dumps({"format": "csv", "dynamodb": {"key": {"pk": "{id}", "sk": "X"}}}))
    code = cli.main(["verify", str(source), "--spec", str(spec), "--table", "t"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("mapload verify: cannot reach DynamoDB") and err.count("\n") == 1


def test_verify_probes_the_header_with_a_ranged_read_not_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "a.csv"
    with source.open("w") as handle:
        handle.write("id,v\n")
        for i in range(100_000):
            handle.write(f"{i},{i}\n")
    size = source.stat().st_size
    read = []
    chunks = verify._chunks

    def counted(open_file: Any, first: int) -> Any:
        for chunk in chunks(open_file, first):
            read.append(len(chunk))
            yield chunk

    monkeypatch.setattr(verify, "_chunks", counted)
    spec = parse_spec(
        {"format": "csv", "source": "s3://bucket/k", "dynamodb": {"key": {"pk": "{id}", "sk": "X"}}},
        table_key=KEY,
        execution_name="t",
    )
    rows = verify.records(source, spec)
    assert next(rows) == {"id": "0", "v": "0"}
    assert sum(1 for _ in rows) == 99_999
    assert sum(read) <= size + verify.CHUNK_BYTES  # the records once, and one chunk for the header


def test_batches_go_several_at_once_and_are_judged_in_the_file_s_order() -> None:
    import threading

    class Slow(Table):
        def __init__(self) -> None:
            super().__init__([])
            self.lock, self.now, self.most = threading.Lock(), 0, 0

        def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            time.sleep(0.05)
            with self.lock:
                self.now -= 1
            return super().batch_get_item(RequestItems)

    table = Slow()
    records = [{"id": i, "n": i} for i in range(1000)]
    outcome = verify.compare(table, "t", _spec(PUT), records, kept=None, in_flight=4)
    assert outcome.missing == 1000 and 1 < table.most <= 4
    assert outcome.missing_shown == [f"pk=ID#{i}, sk=X" for i in range(verify.SHOWN)]


class Described(Table):
    """A table stand-in with DescribeTable and a Scan that counts items whose pk starts with the
    filter's prefix."""

    def __init__(self, items: list[dict[str, Any]], item_count: int) -> None:
        super().__init__(items)
        self.item_count = item_count
        self.scans: list[dict[str, Any]] = []

    def describe_table(self, TableName: str) -> dict[str, Any]:
        return {
            "Table": {
                "KeySchema": [
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                    {"AttributeName": "pk", "KeyType": "HASH"},
                ],
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                "ItemCount": self.item_count,
            }
        }

    def get_paginator(self, name: str) -> Any:
        assert name == "scan"
        table = self

        class Pages:
            def paginate(self, **arguments: Any) -> list[dict[str, Any]]:
                table.scans.append(arguments)
                prefix = arguments["ExpressionAttributeValues"][":p"]["S"]
                return [{"Count": sum(1 for pk, _ in table.items if pk.startswith(prefix))}]

        return Pages()


@pytest.mark.parametrize(("item_count", "counted"), [(3, True), (verify.LOCAL_SCAN_ITEMS + 1, False)])
def test_extra_items_are_counted_by_the_key_s_prefix_on_a_small_local_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, item_count: int, counted: bool
) -> None:
    table = Described([_stored(1, "1"), _stored(2, "2"), _stored(9, "9")], item_count)
    monkeypatch.setattr(verify, "_client", lambda env, name, region: (table, "t"))
    source, spec = tmp_path / "a.jsonl", tmp_path / "spec.json"
    source.write_text('{"id": 1, "n": 1}\n{"id": 2, "n": 2}\n')
    spec.write_text(json.dumps({"format": "jsonl", "dynamodb": PUT}))
    outcome, _ = verify.verify(source, str(spec), env=None, table=None, region=None, extra=None)
    assert outcome.ok and outcome.equal == 2
    if counted:
        assert outcome.extra == 1 and "begins with 'ID#'" in outcome.extra_note
    else:
        assert outcome.extra is None and not table.scans
        assert f"about {item_count:,} items" in outcome.extra_note


def test_a_rejected_json_line_does_not_make_later_fields_optional(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text('{"id": broken\n{"id": "a", "n": 1}\n{"id": "b", "n": 2}\n')
    spec = initspec.infer(source, ["{id}", "X"], KEY)
    assert spec["dynamodb"]["attributes"]["n"] == {"field": "n", "type": "N"}


@pytest.mark.parametrize(("given", "expected"), [(None, "catalog-eu"), ("other", "other")])
def test_verify_compares_with_the_table_the_spec_names_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str | None, expected: str
) -> None:
    table = Described([_stored(1, "1")], 1)
    asked: list[str | None] = []

    def client(env: str | None, name: str | None, region: str | None) -> tuple[Any, str]:
        asked.append(name)
        return table, str(name)

    monkeypatch.setattr(verify, "_client", client)
    source, spec = tmp_path / "a.jsonl", tmp_path / "spec.json"
    source.write_text('{"id": 1, "n": 1}\n')
    spec.write_text(json.dumps({"format": "jsonl", "dynamodb": {**PUT, "table": "catalog-eu"}}))
    _, name = verify.verify(source, str(spec), env=None, table=given, region=None, extra=False)
    assert asked == [expected] and name == expected
