"""Cell conventions (issue 44 item 4): csv.nullValues, csv.trueValues/falseValues (beside the
words read by default, y/n and t/f among them) and csv.skipInitialSpace."""

from __future__ import annotations

from typing import Any

import pytest

from logic.errors import InputValidationError
from logic.mapping import make_mapper
from logic.parsing import Reject, make_parser
from logic.planning import read_header
from logic.records import Line
from logic.spec.inputs import JobSpec
from logic.spec.parse import parse_spec, spec_to_json

pytestmark = pytest.mark.runtime

COLUMNS = ["id", "name", "score", "active"]
ATTRIBUTES = {
    "name": {"field": "name", "type": "S"},
    "score": {"field": "score", "type": "N", "optional": True},
    "active": {"field": "active", "type": "BOOL", "optional": True},
}


def _spec(attributes: Any = None, **csv: Any) -> JobSpec:
    raw = {
        "source": "s3://bucket/in.csv",
        "format": "csv",
        "csv": {"header": False, "columns": COLUMNS, **csv},
        "dynamodb": {"key": {"pk": "{id}"}, "attributes": ATTRIBUTES if attributes is None else attributes},
        "jobId": "j",
    }
    return parse_spec(raw, table_key={"pk": "S"})


def _item(spec: JobSpec, raw: bytes) -> Any:
    fields = make_parser(spec, None)(Line(1, 0, raw))
    return fields if isinstance(fields, Reject) else make_mapper(spec)(fields)


def test_null_markers_leave_an_optional_attribute_out_and_reject_a_required_one() -> None:
    spec = _spec(nullValues=["NA", "\\N"])
    item = _item(spec, b"1,Ann,NA,\\N")
    assert not isinstance(item, Reject)
    assert item.attributes == {"pk": {"S": "1"}, "name": {"S": "Ann"}}
    refused = _item(spec, b"2,NA,5,true")
    assert isinstance(refused, Reject) and refused.code == "missing_field"
    assert refused.reason == "field 'name' is null"
    # Without the option, "NA" is a value: a bad number.
    plain = _item(_spec(), b"1,Ann,NA,true")
    assert isinstance(plain, Reject) and plain.code == "bad_number"


def test_an_empty_cell_as_null_rejects_an_empty_required_string_which_otherwise_loads() -> None:
    assert _item(_spec(), b"1,,5,").attributes["name"] == {"S": ""}
    refused = _item(_spec(nullValues=[""]), b"1,,5,")
    assert isinstance(refused, Reject) and refused.reason == "field 'name' is null"


def test_a_null_cell_is_no_attribute_when_every_column_is_copied_and_null_in_a_template_rejects() -> None:
    item = _item(_spec("*", nullValues=["NA"]), b"1,NA,5,NA")
    assert item.attributes == {"pk": {"S": "1"}, "id": {"S": "1"}, "score": {"S": "5"}}
    keyed = _item(_spec(nullValues=["NA"]), b"NA,Ann,5,y")
    assert isinstance(keyed, Reject) and keyed.code == "missing_field"
    assert keyed.reason == "field 'id' is null"


@pytest.mark.parametrize(("cell", "value"), [(b"Y", True), (b"n", False), (b"t", True), (b"F", False)])
def test_bool_reads_y_n_and_t_f(cell: bytes, value: bool) -> None:
    assert _item(_spec(), b"1,Ann,5," + cell).attributes["active"] == {"BOOL": value}


def test_bool_reads_the_words_the_spec_names_and_still_refuses_others() -> None:
    spec = _spec(trueValues=["oui", "Ja"], falseValues=["non"])
    assert _item(spec, b"1,Ann,5,OUI").attributes["active"] == {"BOOL": True}
    assert _item(spec, b"1,Ann,5,ja").attributes["active"] == {"BOOL": True}
    assert _item(spec, b"1,Ann,5,Non").attributes["active"] == {"BOOL": False}
    refused = _item(spec, b"1,Ann,5,peut-etre")
    assert isinstance(refused, Reject) and refused.code == "bad_bool"


def test_the_specs_words_win_over_the_defaults_and_true_over_false() -> None:
    spec = _spec(trueValues=["no", "x"], falseValues=["1", "X"])
    assert _item(spec, b"1,Ann,5,NO").attributes["active"] == {"BOOL": True}
    assert _item(spec, b"1,Ann,5,1").attributes["active"] == {"BOOL": False}
    assert _item(spec, b"1,Ann,5,x").attributes["active"] == {"BOOL": True}


def test_a_null_marker_of_two_lines_is_refused() -> None:
    with pytest.raises(InputValidationError, match="must be one-line text"):
        _spec(nullValues=["a\nb"])


def test_skip_initial_space_drops_the_spaces_after_each_delimiter_quoted_fields_too() -> None:
    spec = _spec(skipInitialSpace=True)
    assert make_parser(spec, None)(Line(1, 0, b"1, Ann, 5,  yes")) == {
        "id": "1",
        "name": "Ann",
        "score": "5",
        "active": "yes",
    }
    assert make_parser(spec, None)(Line(1, 0, b'1, "Ann, B", 5, no'))["name"] == "Ann, B"
    assert make_parser(_spec(), None)(Line(1, 0, b"1, Ann, 5, yes"))["name"] == " Ann"


def test_skip_initial_space_applies_to_the_header_line() -> None:
    raw = {
        "source": "s3://bucket/in.csv",
        "format": "csv",
        "csv": {"skipInitialSpace": True},
        "dynamodb": {"key": {"pk": "{id}"}, "attributes": {"n": "{name}"}},
        "jobId": "j",
    }
    spec = parse_spec(raw, table_key={"pk": "S"})
    header, _ = read_header(b"id, name\n1, Ann\n", spec, 16)
    assert header == ["id", "name"]


def test_the_options_are_left_out_of_the_normalized_form_while_not_given() -> None:
    shown = {"header", "columns", "delimiter", "comment", "maxRecordBytes"}
    assert set(spec_to_json(_spec())["csv"]) == shown
    assert spec_to_json(_spec(nullValues=["NA"]))["csv"]["nullValues"] == ["NA"]
