"""The reader of a bulk put items operation's output (logic/bulk_output.py): the manifest found
among the listed keys, every report it lists read back into ReportedItems, and a short, foreign or
missing output refused rather than read as "nothing failed"."""

from __future__ import annotations

import gzip

import pytest

from logic import bulk_output, layout
from logic.bulk_output import CONDITION_CHECK_FAILURE, ERROR, Manifest, OutputError, Report, ReportedItem

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/bulk-operation/0f1e2d3c-aaaa-bbbb-cccc-000000000001"
PREFIX = layout.bulk_output_prefix("job", "run")
ITEM = {"pk": {"S": "a"}, "n": {"N": "1"}}


def output(
    reports: dict[str, list[ReportedItem]], *, counts: dict[str, int] | None = None
) -> dict[str, bytes]:
    """The objects an operation leaves under PREFIX: its reports and their manifest."""
    objects: dict[str, bytes] = {}
    listed = []
    for kind, entries in reports.items():
        key = bulk_output.report_key(PREFIX, ARN, kind)  # type: ignore[arg-type]
        objects[key] = bulk_output.encode_report(entries)
        listed.append(Report(kind, key, (counts or {}).get(kind, len(entries))))  # type: ignore[arg-type]
    manifest = Manifest(ARN, "COMPLETED_WITH_ERRORS", tuple(listed))
    objects[bulk_output.manifest_key(PREFIX, ARN)] = bulk_output.encode_manifest(manifest)
    return objects


def read(objects: dict[str, bytes], arn: str = ARN) -> list[ReportedItem]:
    return bulk_output.read_output(objects, objects.__getitem__, arn)


def test_entries_of_both_reports_come_back_with_every_field() -> None:
    one, two = layout.bulk_items_key("j", "p", 1), layout.bulk_items_key("j", "p", 2)
    error_record = ReportedItem(ERROR, "missing key", one, 3, ITEM, code="V")
    bad_line = ReportedItem(ERROR, "not JSON", one, 4, code="M")
    whole = ReportedItem(ERROR, "not gzip", two, code="U", whole_object=True)
    existing = {"pk": {"S": "a"}, "n": {"N": "2"}}
    failed = ReportedItem(CONDITION_CHECK_FAILURE, "condition", "k", 0, ITEM, existing)
    found = read(output({ERROR: [error_record, bad_line, whole], CONDITION_CHECK_FAILURE: [failed]}))
    assert found == [error_record, bad_line, whole, failed]
    assert [e.whole_object for e in found] == [False, False, True, False]


def test_an_operation_with_nothing_to_report_reads_as_no_entries() -> None:
    assert read(output({})) == []


def test_a_missing_manifest_is_refused_not_read_as_no_failures() -> None:
    objects = output({ERROR: [ReportedItem(ERROR, "x", "k", 0)]})
    del objects[bulk_output.manifest_key(PREFIX, ARN)]
    with pytest.raises(OutputError, match="no manifest"):
        read(objects)


def test_another_operation_s_output_is_not_read_as_this_one_s() -> None:
    other = ARN[:-1] + "2"
    with pytest.raises(OutputError, match="no manifest"):
        read(output({}), other)


def test_a_report_shorter_than_the_manifest_counts_is_refused() -> None:
    objects = output({ERROR: [ReportedItem(ERROR, "x", "k", 0)]}, counts={ERROR: 2})
    with pytest.raises(OutputError, match="holds 1 entries, the manifest counts 2"):
        read(objects)


def test_a_report_the_manifest_lists_but_the_prefix_lacks_is_refused() -> None:
    objects = output({ERROR: [ReportedItem(ERROR, "x", "k", 0)]})
    del objects[bulk_output.report_key(PREFIX, ARN, ERROR)]
    with pytest.raises(OutputError, match="not under the output prefix"):
        read(objects)


@pytest.mark.parametrize(
    "line",
    [
        b"{not json}\n",
        b'{"code": "x"}\n',
        b'{"message": "m", "record": -1}\n',
        b'{"message": "m", "item": 3}\n',
    ],
)
def test_a_malformed_entry_is_refused_with_its_line(line: bytes) -> None:
    objects = output({ERROR: [ReportedItem(ERROR, "x", "k", 0)]})
    objects[bulk_output.report_key(PREFIX, ARN, ERROR)] = gzip.compress(line)
    with pytest.raises(OutputError, match="ERROR report line 1 is malformed"):
        read(objects)


def test_a_plain_report_reads_like_a_gzip_one_and_a_bad_manifest_is_refused() -> None:
    entries = [ReportedItem(ERROR, "x", "k", 0)]
    objects = output({ERROR: entries})
    key = bulk_output.report_key(PREFIX, ARN, ERROR)
    objects[key] = gzip.decompress(objects[key])
    assert read(objects) == entries
    objects[bulk_output.manifest_key(PREFIX, ARN)] = b'{"version": 1}'
    with pytest.raises(OutputError, match="manifest is malformed"):
        read(objects)


def test_the_layout_is_per_operation_under_the_prefix() -> None:
    op = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"
    assert bulk_output.manifest_key(PREFIX, ARN) == f"{PREFIX}{op}/manifest.json"
    assert bulk_output.operation_folder("out", ARN) == f"out/{op}/"
    assert bulk_output.operation_folder("", ARN) == f"{op}/"
