"""Lines to fields: skipped lines, CSV and JSON Lines parsing and their rejects, and the CSV header."""

from __future__ import annotations

import csv
from decimal import Decimal
from typing import Any

import pytest

from logic import parsing
from logic.errors import InputValidationError
from logic.parsing import Reject, is_skipped, make_parser
from logic.planning import read_header
from logic.records import BOM, Line
from logic.spec.inputs import JobSpec
from logic.spec.parse import parse_spec

pytestmark = pytest.mark.runtime

TABLE_KEY = {"pk": "S", "sk": "S"}


def csv_spec(**csv: Any) -> JobSpec:
    raw = {
        "source": "s3://bucket/in.csv",
        "format": "csv",
        "csv": csv,
        "dynamodb": {"key": {"pk": "{a}", "sk": "X"}, "attributes": "*"},
        "jobId": "j",
    }
    return parse_spec(raw, table_key=TABLE_KEY)


JSONL = parse_spec(
    {
        "source": "s3://bucket/in.jsonl",
        "format": "jsonl",
        "dynamodb": {"key": {"pk": "{a}", "sk": "X"}, "attributes": "*"},
        "jobId": "j",
    },
    table_key=TABLE_KEY,
)


def line(raw: bytes, offset: int = 100) -> Line:
    return Line(1, offset, raw)


@pytest.mark.parametrize(
    ("raw", "skipped"),
    [
        (b"", True),
        (b"   ", True),
        (b"\t \t", True),
        (b"# note", True),
        (b" # indented", False),
        (b"a,b", False),
    ],
)
def test_blank_and_comment_lines_are_skipped(raw: bytes, skipped: bool) -> None:
    assert is_skipped(raw, csv_spec(comment="#")) is skipped


def test_without_a_comment_prefix_only_blank_lines_are_skipped() -> None:
    assert not is_skipped(b"# note", csv_spec())
    assert is_skipped(b"  ", JSONL)
    assert not is_skipped(b"{}", JSONL)


def test_csv_fields_are_named_by_the_header() -> None:
    parse = make_parser(csv_spec(), ["a", "b", "c"])
    assert parse(line(b"1,,three")) == {"a": "1", "b": "", "c": "three"}


def test_csv_columns_name_fields_without_a_header_line() -> None:
    parse = make_parser(csv_spec(header=False, columns=["a", "b"]), None)
    assert parse(line(b"x;y,z")) == {"a": "x;y", "b": "z"}


def test_a_header_is_required_for_csv_with_a_header_line() -> None:
    with pytest.raises(ValueError, match="header"):
        make_parser(csv_spec(), None)


def test_quoted_fields_follow_csv_rules() -> None:
    parse = make_parser(csv_spec(), ["a", "b", "c"])
    assert parse(line(b'"x, y","say ""hi""",\xc3\xa9')) == {"a": "x, y", "b": 'say "hi"', "c": "é"}


def test_a_quote_inside_an_unquoted_field_is_data_as_csv_reader_reads_it() -> None:
    parse = make_parser(csv_spec(), ["a", "b"])
    assert parse(line(b'5" disk,x')) == {"a": '5" disk', "b": "x"}
    assert parse(line(b'the "foo" option,x"')) == {"a": 'the "foo" option', "b": 'x"'}
    assert parse(line(b'5"" disk,x')) == {"a": '5"" disk', "b": "x"}
    assert parse(line(b'"5"" disk",x')) == {"a": '5" disk', "b": "x"}  # quoted, "" is one quote


def test_text_after_a_closing_quote_is_refused_as_csv_reader_strict_refuses_it() -> None:
    parse = make_parser(csv_spec(), ["a", "b"])
    assert parse(line(b'"5" disk,x')) == Reject("bad_quote", "malformed quoting: ',' expected after '\"'")
    assert parse(line(b'x,"open')) == Reject("unbalanced_quote", parsing._UNBALANCED)


def test_a_quoted_field_may_be_as_long_as_max_record_bytes() -> None:
    """csv's own limit is 131072 characters; a record may be csv.maxRecordBytes (1 MiB by default)."""
    big = "é" * 150_000  # 300 KB
    parse = make_parser(csv_spec(), ["a", "b"])
    assert parse(line(f'"{big}",x'.encode())) == {"a": big, "b": "x"}
    limit = csv.field_size_limit()  # at least 1 MiB now: it only grows, one per process
    assert limit >= 1 << 20
    assert parse(line(b'"' + b"y" * (limit + 1) + b'",x')) == Reject(
        "record_too_large", f"a quoted field is longer than {limit} characters"
    )


def test_a_record_of_several_lines_keeps_its_quoted_line_ends() -> None:
    parse = make_parser(csv_spec(), ["a", "b"])
    assert parse(line(b'"x\r\ny","p\nq\rr"')) == {"a": "x\r\ny", "b": "p\nq\rr"}
    # Never a grouped record (a line break outside quotes ends one), and refused all the same.
    refused = parse(line(b'"x"\ny,z'))
    assert isinstance(refused, Reject) and refused.code == "bad_quote"


def test_other_delimiters() -> None:
    parse = make_parser(csv_spec(delimiter="\t"), ["a", "b"])
    assert parse(line(b'x,y\t"q\tq"')) == {"a": "x,y", "b": "q\tq"}


@pytest.mark.parametrize(
    ("raw", "code", "reason"),
    [
        (b"1,2,3,4", "column_count", "expected 3 columns, got 4"),
        (b"1,2", "column_count", "expected 3 columns, got 2"),
        (b'1,"open,3', "unbalanced_quote", "a quoted field never closes"),
        (b'1,"x"y,3', "bad_quote", "malformed quoting"),
        (b"1,\xff,3", "invalid_utf8", "invalid UTF-8 at byte 102"),
    ],
)
def test_csv_rejects(raw: bytes, code: str, reason: str) -> None:
    result = make_parser(csv_spec(), ["a", "b", "c"])(line(raw))
    assert isinstance(result, Reject)
    assert result.code == code
    assert reason in result.reason


def test_jsonl_numbers_are_decimals_and_types_are_kept() -> None:
    parse = make_parser(JSONL, None)
    fields = parse(
        line(b'{"a": "x", "i": 12345678901234567890123, "f": 0.1, "t": true, "n": null, "o": {"l": [1]}}')
    )
    assert fields == {
        "a": "x",
        "i": Decimal("12345678901234567890123"),
        "f": Decimal("0.1"),
        "t": True,
        "n": None,
        "o": {"l": [Decimal(1)]},
    }
    assert isinstance(fields, dict)
    assert type(fields["i"]) is Decimal


@pytest.mark.parametrize(
    ("raw", "code", "reason"),
    [
        (b'{"a": 1', "invalid_json", "invalid JSON"),
        (b'{"a": NaN}', "invalid_json", "NaN"),
        (b'{"a": Infinity}', "invalid_json", "Infinity"),
        (b"[1, 2]", "not_an_object", "got a list"),
        (b'"text"', "not_an_object", "got a string"),
        (b"42", "not_an_object", "got a number"),
        (b'{"a": "\xe2\x82"}', "invalid_utf8", "invalid UTF-8 at byte 107"),
        (b"[" * 100_000, "invalid_json", "invalid JSON"),
    ],
)
def test_jsonl_rejects(raw: bytes, code: str, reason: str) -> None:
    result = make_parser(JSONL, None)(line(raw))
    assert isinstance(result, Reject)
    assert (result.code, reason in result.reason) == (code, True)


class TestReadHeader:
    def test_header_fields_and_data_start(self) -> None:
        data = b"postcode,latitude,longitude\nAB1,1,2\n"
        assert read_header(data, csv_spec(), len(data)) == (["postcode", "latitude", "longitude"], 28)

    def test_bom_and_crlf(self) -> None:
        data = BOM + b'id,"full name"\r\n1,x\r\n'
        assert read_header(data, csv_spec(), len(data)) == (["id", "full name"], len(BOM) + 16)

    def test_blank_and_comment_lines_before_the_header_are_skipped(self) -> None:
        data = b"# exported 2026-11\n\n  \nid,name\n1,x\n"
        fields, data_start = read_header(data, csv_spec(comment="#"), len(data))
        assert fields == ["id", "name"]
        assert data[data_start:] == b"1,x\n"

    def test_a_header_only_object_has_no_data(self) -> None:
        assert read_header(b"id,name\n", csv_spec(), 8) == (["id", "name"], 8)
        assert read_header(b"id,name", csv_spec(), 7) == (["id", "name"], 7)

    def test_an_object_without_a_header_line_has_no_data(self) -> None:
        assert read_header(b"", csv_spec(), 0) == ([], 0)
        assert read_header(b"\n\n", csv_spec(), 2) == ([], 2)

    def test_no_newline_within_a_partial_prefix_is_an_error(self) -> None:
        with pytest.raises(InputValidationError) as caught:
            read_header(b"a,b,c", csv_spec(), 1_000_000)
        assert caught.value.field == "csv.header"
        assert "first 5 bytes" in str(caught.value)

    @pytest.mark.parametrize(
        ("data", "words"),
        [
            (b"id,,name\n", "column 2 of the header line has no name"),
            (b"id,name,id\n", "names column 'id' twice"),
            (b'id,"name\n', "unbalanced quote"),
            (b"id,\xff\n", "not UTF-8"),
        ],
    )
    def test_bad_headers(self, data: bytes, words: str) -> None:
        with pytest.raises(InputValidationError) as caught:
            read_header(data, csv_spec(), len(data))
        assert caught.value.field == "csv.header"
        assert words in str(caught.value)

    def test_no_header_line_to_read(self) -> None:
        assert read_header(b"1,2\n", csv_spec(header=False, columns=["a", "b"]), 4) == (None, 0)
        assert read_header(b"{}\n", JSONL, 3) == (None, 0)
