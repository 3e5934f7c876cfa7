"""Ragged rows (issue 44 item 3): a CSV row shorter than its columns loads with the missing trailing
fields absent when only optional attributes or optional graph elements read them; otherwise it is a
`column_count` reject naming the first missing column; a longer row stays a reject."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from logic.mapping import make_mapper
from logic.parsing import Reject, is_skipped, make_parser
from logic.records import Line
from logic.spec.inputs import JobSpec
from logic.spec.parse import parse_spec

pytestmark = pytest.mark.runtime

ZONE_COLUMNS = ["codes", "coordinates", "TZ", "comments"]

# As tzdata's zone1970.tab is written: tab-separated, '#' comments, the 4th column on some rows.
ZONE1970 = (
    "# tzdb timezone descriptions, for users who do not care about old timestamps\n"
    "#\n"
    "# This file is in the public domain.\n"
    "#\n"
    "#codes\tcoordinates\tTZ\tcomments\n"
    "AD\t+4230+00131\tEurope/Andorra\n"
    "AE,OM,RE,SC,TF\t+2518+05518\tAsia/Dubai\tCrozet\n"
    "AF\t+3431+06912\tAsia/Kabul\n"
    "AQ\t-6617+11031\tAntarctica/Casey\tCasey\n"
    "AR\t-3436-05827\tAmerica/Argentina/Buenos_Aires\tBuenos Aires (BA, CF)\n"
)


def _spec(attributes: Any, graph: Any = None) -> JobSpec:
    raw: dict[str, Any] = {
        "source": "s3://bucket/zone1970.tab",
        "format": "csv",
        "csv": {"header": False, "columns": ZONE_COLUMNS, "delimiter": "\t", "comment": "#"},
        "dynamodb": {"key": {"pk": "{TZ}"}, "attributes": attributes},
        "jobId": "j",
    }
    if graph is not None:
        raw["graph"] = graph
    return parse_spec(raw, table_key={"pk": "S"})


def _load(spec: JobSpec, text: str) -> list[Any]:
    parse, mapped = make_parser(spec, None), make_mapper(spec)
    out: list[Any] = []
    for number, raw in enumerate(text.encode().split(b"\n"), start=1):
        if is_skipped(raw, spec):
            continue
        fields = parse(Line(number, 0, raw))
        out.append(fields if isinstance(fields, Reject) else mapped(fields))
    return out


def test_a_zone_table_with_an_optional_last_column_loads_every_row_the_missing_one_absent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "zone1970.tab"
    path.write_text(ZONE1970, encoding="utf-8")
    spec = _spec(
        {
            "codes": "{codes}",
            "coordinates": "{coordinates}",
            "comments": {"field": "comments", "type": "S", "optional": True},
        }
    )
    results = _load(spec, path.read_text(encoding="utf-8"))
    assert not [r for r in results if isinstance(r, Reject)]
    by_zone = {r.attributes["pk"]["S"]: r.attributes for r in results}
    assert len(by_zone) == 5
    assert "comments" not in by_zone["Europe/Andorra"]  # absent, not ""
    assert by_zone["Asia/Dubai"]["comments"] == {"S": "Crozet"}
    assert by_zone["Asia/Kabul"]["codes"] == {"S": "AF"}


def test_a_short_row_is_parsed_with_the_missing_fields_left_out() -> None:
    spec = _spec({"comments": {"field": "comments", "type": "S", "optional": True}})
    fields = make_parser(spec, None)(Line(1, 0, b"AD\t+4230+00131\tEurope/Andorra"))
    assert fields == {"codes": "AD", "coordinates": "+4230+00131", "TZ": "Europe/Andorra"}


@pytest.mark.parametrize(
    ("attributes", "missing"),
    [
        ({"comments": "{comments}"}, "comments"),  # a template reads it
        ({"comments": {"field": "comments", "type": "S"}}, "comments"),  # not optional
        ("*", "comments"),  # every column is copied
    ],
)
def test_a_short_row_is_a_reject_naming_the_first_missing_column_a_required_reader_needs(
    attributes: Any, missing: str
) -> None:
    result = make_parser(_spec(attributes), None)(Line(1, 0, b"AD\t+4230+00131\tEurope/Andorra"))
    assert isinstance(result, Reject) and result.code == "column_count"
    assert result.reason == f"expected 4 columns, got 3: column {missing!r} is missing"


def test_the_first_missing_column_a_required_reader_needs_is_named() -> None:
    comments = {"field": "comments", "type": "S", "optional": True}
    spec = _spec({"coordinates": "{coordinates}", "comments": comments})
    result = make_parser(spec, None)(Line(1, 0, b"AD"))
    assert isinstance(result, Reject) and result.code == "column_count"
    assert result.reason == "expected 4 columns, got 1: column 'coordinates' is missing"
    unread = _spec({"comments": {"field": "comments", "type": "S", "optional": True}})
    result = make_parser(unread, None)(Line(1, 0, b"AD"))
    assert isinstance(result, Reject)  # coordinates is read by nothing: TZ, the key's, is named
    assert result.reason == "expected 4 columns, got 1: column 'TZ' is missing"


def test_a_longer_row_stays_a_reject() -> None:
    spec = _spec({"comments": {"field": "comments", "type": "S", "optional": True}})
    result = make_parser(spec, None)(Line(1, 0, b"AD\t+4230+00131\tEurope/Andorra\tx\ty"))
    assert isinstance(result, Reject) and result.code == "column_count"
    assert result.reason == "expected 4 columns, got 5"


def test_an_optional_graph_object_lets_a_row_leave_its_column_out() -> None:
    statements = [
        {
            "subject": "https://tz.example/{TZ}",
            "predicate": "https://tz.example/p/codes",
            "object": {"literal": "{codes}"},
        },
        {
            "subject": "https://tz.example/{TZ}",
            "predicate": "https://tz.example/p/comment",
            "object": {"literal": "{comments}", "optional": True},
        },
    ]
    spec = _spec({"c": {"field": "comments", "type": "S", "optional": True}}, {"statements": statements})
    assert make_parser(spec, None)(Line(1, 0, b"AD\t+4230+00131\tEurope/Andorra")) == {
        "codes": "AD",
        "coordinates": "+4230+00131",
        "TZ": "Europe/Andorra",
    }
    required = {**statements[1], "object": {"literal": "{comments}"}}
    strict = _spec({"c": {"field": "comments", "type": "S", "optional": True}}, {"statements": [required]})
    refused = make_parser(strict, None)(Line(1, 0, b"AD\t+4230+00131\tEurope/Andorra"))
    assert isinstance(refused, Reject) and "column 'comments' is missing" in refused.reason
