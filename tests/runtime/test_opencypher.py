"""Neptune's openCypher CSV format: headers, quoting, types, arrays and empty values, written and
read back by the csv module (logic/opencypher.py); no templates involved."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logic import opencypher
from logic.opencypher import FormatError, Header, Row

pytestmark = pytest.mark.runtime

PEOPLE = opencypher.node_header([("name", "String"), ("age", "Int"), ("born", "DateTime")])
KNOWS = opencypher.relationship_header([("since", "Long"), ("weight", "Double")])


def written(header: Header, rows: list[Row]) -> str:
    out = io.StringIO(newline="")
    writer = opencypher.Writer(out)
    writer.header(header)
    for row in rows:
        writer.row(header, row)
    return out.getvalue()


def read_back(text: str) -> list[Any]:
    return list(opencypher.read(io.StringIO(text, newline="")))


def test_headers_name_the_system_and_typed_columns() -> None:
    assert PEOPLE.cells == [":ID", ":LABEL", "name:String", "age:Int", "born:DateTime"]
    assert KNOWS.cells == [":ID", ":START_ID", ":END_ID", ":TYPE", "since:Long", "weight:Double"]


def test_quoting_follows_rfc_4180() -> None:
    row = Row("p1", ("Person",), properties={"name": 'Smith, "Jo"\nJr'})
    text = written(PEOPLE, [row])
    assert text == ':ID,:LABEL,name:String,age:Int,born:DateTime\r\np1,Person,"Smith, ""Jo""\nJr",,\r\n'
    assert read_back(text) == [PEOPLE, row]


def test_empty_cells_are_no_value_and_labels_split_on_semicolons() -> None:
    text = ":ID,:LABEL,name:String,age:Int,born:DateTime\r\np1,Person;Admin,,42,\r\n"
    assert read_back(text)[1] == Row("p1", ("Person", "Admin"), properties={"age": "42"})


def test_a_present_but_empty_property_cannot_be_written() -> None:
    with pytest.raises(FormatError, match="empty cell is no value"):
        written(PEOPLE, [Row("p1", ("Person",), properties={"name": ""})])


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        ("Int", ["0", "-2147483648", "2147483647", "+7"], ["2147483648", "1.0", "", "1e3", " 1"]),
        ("Long", ["9223372036854775807", "-9223372036854775808"], ["9223372036854775808", "x"]),
        ("Byte", ["127", "-128"], ["128"]),
        ("Short", ["32767"], ["32768"]),
        ("Double", ["1", "-1.5", ".5", "1e-3", "Infinity", "-Infinity", "NaN"], ["INF", "1,5", "one"]),
        ("Float", ["3.25"], ["nan"]),
        ("Bool", ["true", "FALSE"], ["1", "yes"]),
        (
            "DateTime",
            ["2026-12-01", "2026-12-01T04:05", "2026-12-01T04:05:06Z", "2026-12-01T04:05:06.123+01:00"],
            ["2026-13-01", "2026-02-30", "01/12/2026", "2026-12-01T24:00"],
        ),
        ("String", ["anything; at all", " spaced "], []),
    ],
)
def test_values_are_checked_by_type(kind: str, good: list[str], bad: list[str]) -> None:
    for text in good:
        assert opencypher.check_value(kind, text) == text
    for text in bad:
        with pytest.raises(FormatError):
            opencypher.check_value(kind, text)


def test_a_bad_value_is_refused_on_write_and_named_on_read() -> None:
    with pytest.raises(FormatError, match="not a Int"):
        written(PEOPLE, [Row("p1", ("Person",), properties={"age": "forty"})])
    text = ":ID,:LABEL,name:String,age:Int,born:DateTime\r\np1,Person,Jo,forty,\r\n"
    with pytest.raises(FormatError, match="row 2: column age:Int: 'forty' is not a Int"):
        read_back(text)


def test_arrays_separate_values_with_semicolons_and_escape_them() -> None:
    header = opencypher.node_header([])
    header = Header(header.kind, (*header.columns, opencypher.Column("tags", "String", array=True)))
    assert header.cells[-1] == "tags:String[]"
    row = Row("p1", ("Person",), properties={"tags": ("a;b", "c")})
    text = written(header, [row])
    assert "a\\;b;c" in text
    assert read_back(text) == [header, row]
    with pytest.raises(FormatError, match="array element"):
        written(header, [Row("p1", ("Person",), properties={"tags": ("ends\\",)})])


@pytest.mark.parametrize(
    ("cells", "words"),
    [
        (["name:String"], "needs a :ID column"),
        ([":ID", ":ID"], "appears twice"),
        ([":ID", ":START_ID", ":END_ID"], "needs a :TYPE column"),
        ([":ID", ":LABEL", ":START_ID", ":END_ID", ":TYPE"], ":LABEL is not a column of a relationship file"),
        ([":ID", ":START_ID", ":END_ID", ":TYPE", "w:Int[]"], "cannot be an array"),
        ([":ID", "age:Integer"], "unknown type 'Integer'"),
        ([":ID", "age"], "has no ':'"),
        ([":ID", "a:Int", "a:Long"], "two columns"),
    ],
)
def test_bad_headers_say_what_is_wrong(cells: list[str], words: str) -> None:
    with pytest.raises(FormatError, match=words):
        opencypher.parse_header(cells)


def test_headers_read_id_spaces_id_properties_escaped_colons_and_any_type_case() -> None:
    header = opencypher.parse_header(["name:ID(people)", ":LABEL", "a\\:b:int", "ok:BOOLEAN"])
    assert header.columns[0] == opencypher.Column("name", system=":ID", id_space="people")
    assert [(c.name, c.type) for c in header.properties] == [("a:b", "Int"), ("ok", "Bool")]
    assert header.cells == ["name:ID(people)", ":LABEL", "a\\:b:Int", "ok:Bool"]
    row = opencypher.parse_row(header, ["p1", "", "3", "true"])
    assert row.properties == {"name": "p1", "a:b": "3", "ok": "true"}


def test_rows_must_fill_the_header_and_name_their_endpoints() -> None:
    with pytest.raises(FormatError, match="2 cells, the header has 6"):
        opencypher.parse_row(KNOWS, ["e1", "p1"])
    with pytest.raises(FormatError, match=":END_ID is empty"):
        opencypher.parse_row(KNOWS, ["e1", "p1", "", "KNOWS", "", ""])


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
_VALUES = {
    "String": _TEXT,
    "Int": st.integers(-(2**31), 2**31 - 1).map(str),
    "Long": st.integers(-(2**63), 2**63 - 1).map(str),
    "Double": st.floats(allow_nan=False, allow_infinity=False).map(repr),
    "Bool": st.sampled_from(["true", "false"]),
    "DateTime": st.datetimes().map(lambda moment: moment.isoformat(timespec="seconds")),
}
_COLUMNS = st.lists(
    st.tuples(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), st.sampled_from(sorted(_VALUES))),
    max_size=5,
    unique_by=lambda column: column[0],
)


@st.composite
def _files(draw: st.DrawFn) -> tuple[Header, list[Row]]:
    columns = draw(_COLUMNS)
    relationship = draw(st.booleans())
    header = (opencypher.relationship_header if relationship else opencypher.node_header)(columns)
    rows = []
    for _ in range(draw(st.integers(0, 4))):
        properties = {
            name: draw(_VALUES[kind]) for name, kind in columns if draw(st.booleans())
        }  # a property left out is an empty cell
        ident = draw(_TEXT)
        if relationship:
            rows.append(
                Row(ident, start=draw(_TEXT), end=draw(_TEXT), type=draw(_TEXT), properties=properties)
            )
        else:
            labels = tuple(draw(st.lists(_TEXT.filter(lambda label: ";" not in label), max_size=3)))
            rows.append(Row(ident, labels=labels, properties=properties))
    return header, rows


@settings(max_examples=200, deadline=None)
@given(_files())
def test_what_is_written_reads_back_the_same(file: tuple[Header, list[Row]]) -> None:
    header, rows = file
    assert read_back(written(header, rows)) == [header, *rows]
