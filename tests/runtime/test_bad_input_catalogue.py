"""Every kind of bad input in docs/BAD_INPUT.md's catalogue, through Plan → Workers → Finalize on moto.

In every case: read == written + skipped + rejected, each reject names its source, line, byte offset,
reason and raw line, and the status is what maxRejectedPercent says.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pipeline_support import rejects, run_pipeline, scan

pytestmark = pytest.mark.runtime

CSV_SPEC: dict[str, Any] = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "P#{postcode}", "sk": "LOC"},
        "attributes": {"lat": {"field": "lat", "type": "N"}},
    },
    "maxRejectedPercent": 100,
}
JSONL_SPEC: dict[str, Any] = {
    "format": "jsonl",
    "dynamodb": {"key": {"pk": "P#{id}", "sk": "LOC"}, "attributes": "*"},
    "maxRejectedPercent": 100,
}
DYNAMODB_JSON_SPEC: dict[str, Any] = {"format": "dynamodb-json", "maxRejectedPercent": 100}
HEADER = b"postcode,lat\n"


def _load(
    aws: Any, body: bytes, spec: dict[str, Any], key: str = "in.csv"
) -> tuple[dict[str, Any], list[Any]]:
    aws.put_object(Bucket="src", Key=key, Body=body)
    result = run_pipeline(aws, {**spec, "source": f"s3://src/{key}"})
    report = result["report"]
    records = report["records"]
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"], report
    found = rejects(aws, report)
    assert len(found) == records["rejected"]
    for reject in found:
        assert reject["source"] == f"s3://src/{key}"
        assert reject["reason"] and reject["code"]
        # line and offset point at the rejected line in the file
        assert body.count(b"\n", 0, reject["offset"]) + 1 == reject["line"]
        # the raw record: its lines from the offset on, up to a line end ("\r" stripped)
        shown = base64.b64decode(reject["rawBase64"]) if "rawBase64" in reject else reject["raw"].encode()
        assert body.startswith(shown, reject["offset"])
        rest = body[reject["offset"] + len(shown) :]
        assert rest[:1] in (b"", b"\n") or rest.startswith(b"\r\n")
    return report, found


@pytest.mark.parametrize(
    ("case", "bad_line", "code"),
    [
        ("wrong column count", b"AB1 1AA,51.5,extra", "column_count"),
        ("too few columns", b"AB1 1AB", "column_count"),
        ("text after a closing quote", b'"AB1 1AC"x,51.5', "bad_quote"),
        ("invalid UTF-8", b"AB1 \xff\xfe,51.5", "invalid_utf8"),
        ("empty key field", b",51.5", "empty_key"),
        ("non-numeric value for N", b"AB1 1AD,north", "bad_number"),
        ("number beyond DynamoDB's range", b"AB1 1AE,1e200", "bad_number"),
        ("empty value for N", b"AB1 1AF,", "empty_value"),
    ],
)
def test_a_bad_csv_row_is_rejected_with_its_reason_and_nothing_else_is_lost(
    aws: Any, case: str, bad_line: bytes, code: str
) -> None:
    body = HEADER + b"AB1 0AA,50.1\n" + bad_line + b"\nAB1 0AB,50.2\n"

    report, found = _load(aws, body, CSV_SPEC)

    assert report["status"] == "SUCCEEDED"
    assert report["records"] == {"read": 3, "written": 2, "skipped": 0, "rejected": 1, "duplicates": 0}, case
    assert [r["code"] for r in found] == [code]
    assert found[0]["line"] == 3
    assert set(scan()) == {("P#AB1 0AA", "LOC"), ("P#AB1 0AB", "LOC")}


def test_a_quoted_newline_is_one_record_as_csv_reader_reads_it(aws: Any) -> None:
    spec = {
        **CSV_SPEC,
        "dynamodb": {"key": {"pk": "P#{postcode}", "sk": "LOC"}, "attributes": {"lat": "{lat}"}},
    }
    body = HEADER + b'"AB1\r\n1AA",51.5\nAB1 0AB,"50\n.2"\n'

    report, _ = _load(aws, body, spec)

    assert report["records"] == {"read": 2, "written": 2, "skipped": 0, "rejected": 0, "duplicates": 0}
    items = scan()
    assert set(items) == {("P#AB1\r\n1AA", "LOC"), ("P#AB1 0AB", "LOC")}
    assert items[("P#AB1 0AB", "LOC")]["lat"] == {"S": "50\n.2"}


def test_an_unclosed_quote_is_rejected_at_the_end_or_past_max_record_bytes_then_reading_resumes(
    aws: Any,
) -> None:
    opened = b'"AB1 1AC,51.5\n' + b"AB1 0AB,50.2\n" * 4  # 66 bytes, the quote still open
    body = HEADER + b"AB1 0AA,50.1\n" + opened + b'AB1 0AC,50.3\n"AB1 0AD,50.4\n'

    report, found = _load(aws, body, {**CSV_SPEC, "csv": {"maxRecordBytes": 64}})

    # The first open quote runs past 64 bytes: cut; the next line is read afresh; the last quote
    # never closes.
    assert [(r["line"], r["code"]) for r in found] == [(3, "record_too_large"), (9, "unbalanced_quote")]
    assert report["records"] == {"read": 4, "written": 2, "skipped": 0, "rejected": 2, "duplicates": 0}
    assert found[0]["raw"] == opened[:-1].decode()
    # The cut record holds 5 lines: the reject and the report say so.
    assert [r["lines"] for r in found] == [5, 1]
    assert report["rejects"]["sample"][0]["lines"] == 5
    assert report["lines"] == {"total": 8, "accepted": 2, "rejected": 6, "ignored": 0}
    assert set(scan()) == {("P#AB1 0AA", "LOC"), ("P#AB1 0AC", "LOC")}


def test_a_stray_quote_inside_an_unquoted_field_is_data_and_swallows_no_row(aws: Any) -> None:
    """An inch mark in a naive export (`5" disk`) is data, as csv.reader reads it: all five rows load;
    text after a closing quote (`"5" disk`) is that one record's bad_quote."""
    spec = {
        **CSV_SPEC,
        "dynamodb": {"key": {"pk": "P#{postcode}", "sk": "LOC"}, "attributes": {"lat": "{lat}"}},
    }
    rows = [b'A1,5" disk', b"A2,x", b'A3,the "foo" option', b'A4,12"', b"A5,y"]
    report, found = _load(aws, HEADER + b"\n".join(rows) + b'\nA6,"5" disk\n', spec)

    assert report["records"] == {"read": 6, "written": 5, "skipped": 0, "rejected": 1, "duplicates": 0}
    assert [(r["line"], r["code"], r["lines"]) for r in found] == [(7, "bad_quote", 1)]
    assert report["lines"] == {"total": 6, "accepted": 5, "rejected": 1, "ignored": 0}
    items = scan()
    assert items[("P#A1", "LOC")]["lat"] == {"S": '5" disk'}
    assert items[("P#A3", "LOC")]["lat"] == {"S": 'the "foo" option'}


def test_a_bom_crlf_endings_and_a_last_line_without_newline_load_cleanly(aws: Any) -> None:
    body = b"\xef\xbb\xbfpostcode,lat\r\nAB1 0AA,50.1\r\nAB1 0AB,50.2"

    report, _ = _load(aws, body, CSV_SPEC)

    assert report["records"] == {"read": 2, "written": 2, "skipped": 0, "rejected": 0, "duplicates": 0}
    items = scan()
    assert set(items) == {("P#AB1 0AA", "LOC"), ("P#AB1 0AB", "LOC")}
    assert items[("P#AB1 0AB", "LOC")]["lat"] == {"N": "50.2"}


def test_an_item_over_400_kb_is_rejected(aws: Any) -> None:
    spec = {
        **CSV_SPEC,
        "dynamodb": {"key": {"pk": "P#{postcode}", "sk": "LOC"}, "attributes": {"blob": "{lat}"}},
    }
    body = HEADER + b"AB1 0AA," + b"x" * 410_000 + b"\nAB1 0AB,small\n"

    report, found = _load(aws, body, spec)

    assert [r["code"] for r in found] == ["item_too_large"], report["error"]
    assert len(found[0]["raw"]) == 410_008  # the rejects file keeps the whole line
    assert len(report["rejects"]["sample"][0]["raw"]) < 1_100  # the report's sample is clipped
    assert report["records"]["written"] == 1


def test_duplicate_keys_inside_a_shard_and_across_shards_leave_one_item_each(aws: Any) -> None:
    rows = [f"AB1 {i % 7}AA,{i}.5".encode() for i in range(300)]  # 7 keys, many times each
    body = HEADER + b"\n".join(rows) + b"\n"

    report, _ = _load(aws, body, {**CSV_SPEC, "shardSizeMiB": 0.001})

    assert report["shards"]["total"] > 2
    assert report["records"]["written"] == 300
    assert report["records"]["duplicates"] > 0
    assert len(scan()) == 7


def test_malformed_json_lines_are_rejected(aws: Any) -> None:
    body = b'{"id": "a"}\n{not json}\n[1, 2]\n"text"\n{"id": "b"}\n'

    report, found = _load(aws, body, JSONL_SPEC, key="in.jsonl")

    assert report["records"] == {"read": 5, "written": 2, "skipped": 0, "rejected": 3, "duplicates": 0}
    assert sorted(r["code"] for r in found) == ["invalid_json", "not_an_object", "not_an_object"]


def test_an_empty_file_and_a_header_only_file_load_nothing_and_succeed(aws: Any) -> None:
    for body in (b"", HEADER):
        report, _ = _load(aws, body, CSV_SPEC)
        assert report["status"] == "SUCCEEDED", report.get("error")
        assert report["records"]["read"] == 0
        assert report["shards"]["total"] == 0


def test_shards_that_own_no_line_are_accounted_for(aws: Any) -> None:
    body = HEADER + b"AB1 0AA," + b"1" * 3000 + b"\nAB1 0AB,2\n"  # one line longer than several shards
    spec = {
        **CSV_SPEC,
        "dynamodb": {"key": {"pk": "P#{postcode}", "sk": "LOC"}, "attributes": {"v": "{lat}"}},
    }

    report, _ = _load(aws, body, {**spec, "shardSizeMiB": 0.0005})

    assert report["shards"]["total"] >= 5
    assert report["shards"]["done"] == report["shards"]["total"]
    assert report["records"] == {"read": 2, "written": 2, "skipped": 0, "rejected": 0, "duplicates": 0}


def test_a_missing_source_fails_naming_bucket_and_key(aws: Any) -> None:
    result = run_pipeline(aws, {**CSV_SPEC, "source": "s3://src/absent.csv"})

    assert result["status"] == "FAILED"
    assert result["report"]["error"]["type"] == "SourceNotFoundError"
    assert "s3://src/absent.csv" in result["report"]["error"]["message"]
    assert result["report"]["error"]["where"] == "Plan"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"shardSize": 64}, "shardSize"),
        ({"format": "xml"}, "format"),
        ({"maxRejectedPercent": 120}, "maxRejectedPercent"),
        ({"dynamodb": {"key": {"pk": "{postcode}"}}}, "dynamodb.key"),
    ],
)
def test_an_input_with_an_unknown_or_wrong_field_fails_naming_it(
    aws: Any, change: dict[str, Any], field: str
) -> None:
    aws.put_object(Bucket="src", Key="in.csv", Body=HEADER + b"AB1 0AA,1\n")

    result = run_pipeline(aws, {**CSV_SPEC, "source": "s3://src/in.csv", **change})

    assert result["status"] == "FAILED"
    assert result["report"]["error"]["type"] == "InputValidationError"
    assert field in result["report"]["error"]["message"]
    assert scan() == {}


def test_an_input_without_a_required_field_fails_naming_it(aws: Any) -> None:
    spec = {k: v for k, v in CSV_SPEC.items() if k != "format"}

    result = run_pipeline(aws, {**spec, "source": "s3://src/in.csv"})

    assert result["report"]["error"]["type"] == "InputValidationError"
    assert "format" in result["report"]["error"]["message"]


@pytest.mark.parametrize(("limit", "status"), [(25, "SUCCEEDED"), (24.9, "FAILED")])
def test_the_status_follows_max_rejected_percent(aws: Any, limit: float, status: str) -> None:
    body = HEADER + b"AB1 0AA,1\nAB1 0AB,2\nAB1 0AC,3\nAB1 0AD,x\n"  # 1 of 4 rejected = 25 %

    report, _ = _load(aws, body, {**CSV_SPEC, "maxRejectedPercent": limit})

    assert report["status"] == status
    assert report["records"]["written"] == 3  # written either way: what was written stays written
    assert len(scan()) == 3


def _item(pk: str, **attributes: Any) -> bytes:
    return json.dumps({"Item": {"pk": {"S": pk}, "sk": {"S": "X"}, **attributes}}).encode()


@pytest.mark.parametrize(
    ("case", "bad_line", "code"),
    [
        ("not an Item", b'{"pk": {"S": "a"}, "sk": {"S": "X"}}', "not_an_item"),
        ("a value with two type keys", _item("b", n={"S": "1", "N": "1"}), "bad_type"),
        ("an N that is not a number", _item("c", n={"N": "1,5"}), "bad_number"),
        ("a B that is not base64", _item("d", b={"B": "AA"}), "bad_base64"),
        ("an empty set", _item("e", s={"SS": []}), "empty_set"),
        ("a set holding a value twice", _item("f", s={"NS": ["1", "1.0"]}), "duplicate_in_set"),
        ("a wrong JSON type for its type key", _item("g", t={"BOOL": "yes"}), "bad_value"),
        ("no key attribute", json.dumps({"Item": {"sk": {"S": "X"}}}).encode(), "key_schema"),
        (
            "a key attribute of another type",
            json.dumps({"Item": {"pk": {"N": "1"}, "sk": {"S": "X"}}}).encode(),
            "key_schema",
        ),
    ],
)
def test_a_bad_dynamodb_json_line_is_rejected_with_its_reason_and_nothing_else_is_lost(
    aws: Any, case: str, bad_line: bytes, code: str
) -> None:
    body = _item("ok1") + b"\n" + bad_line + b"\n" + _item("ok2") + b"\n"

    report, found = _load(aws, body, DYNAMODB_JSON_SPEC, key="data/part.json")

    assert report["status"] == "SUCCEEDED"
    assert report["records"] == {"read": 3, "written": 2, "skipped": 0, "rejected": 1, "duplicates": 0}, case
    assert [r["code"] for r in found] == [code]
    assert found[0]["line"] == 2
    assert set(scan()) == {("ok1", "X"), ("ok2", "X")}
