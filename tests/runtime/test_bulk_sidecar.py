"""The staged bulk object's sidecar and layout: one contract between the Worker that writes them
and Finalize that reads them back."""

import pytest

from logic import bulk_sidecar, layout


def test_text_positions_round_trip() -> None:
    car = bulk_sidecar.Sidecar("s3://b/k.csv")
    car.add(bulk_sidecar.TextPosition(3, 2, 120, 41))
    car.add(bulk_sidecar.TextPosition(1, 1, 10, 9))
    back = bulk_sidecar.decode(car.encode())
    assert back == car
    assert back.records[1] == bulk_sidecar.TextPosition(1, 1, 10, 9)


def test_parquet_rows_round_trip_and_kinds_do_not_mix() -> None:
    car = bulk_sidecar.Sidecar("s3://b/k.parquet", parquet=True)
    car.add(bulk_sidecar.RowPosition(0, 7))
    assert bulk_sidecar.decode(car.encode()).records == [bulk_sidecar.RowPosition(0, 7)]
    with pytest.raises(ValueError, match="not both"):
        car.add(bulk_sidecar.TextPosition(1, 1, 0, 1))


def test_sidecars_are_outside_the_prefix_the_service_reads() -> None:
    key = layout.bulk_items_key("job", "plan", 12, 3)
    prefix = layout.bulk_items_prefix("job", "plan")
    assert key.startswith(prefix)
    assert not layout.bulk_lines_key(key).startswith(prefix)
    assert layout.bulk_lines_key(key) == "jobs/job/plan/bulk/lines/000012-003.json.gz"
    with pytest.raises(ValueError):
        layout.bulk_lines_key("jobs/job/plan/sync/x")
