"""`mapload estimate`: the arithmetic of time and cost, checked by hand-computed cases."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from mapload import estimate as est
from mapload import measure
from mapload.cli import main

pytestmark = pytest.mark.runtime


def test_small_items_on_a_new_on_demand_table_are_bound_by_the_table() -> None:
    e = est.estimate(1_000_000, 100, concurrency=100, worker_items_per_second=1000.0, shard_mib=1)
    # 100 MB of rows in 1 MiB shards; 100 workers write 100,000/s, the table takes 4,000/s.
    assert e.write_units_per_item == 1 and e.write_units == 1_000_000
    assert e.shards == 96  # ceil(1e8 / 2**20)
    assert e.bound == "table" and e.items_per_second == 4000
    assert e.seconds == pytest.approx(250)
    assert e.dynamodb_on_demand_usd == pytest.approx(0.625)
    assert e.dynamodb_provisioned_usd is None
    assert e.workers_needed == 4
    # 96 workers x 250 s x 1 GB at the arm64 price, plus 98 invocations.
    assert e.lambda_usd == pytest.approx(96 * 250 * 0.0000133334 + 98 / 1e6 * 0.20)
    assert e.step_functions_usd == pytest.approx((6 + 3 * 96) * 0.000025)


def test_write_units_round_up_per_started_kilobyte() -> None:
    e = est.estimate(1000, 1025, wcu=3000, worker_items_per_second=10_000.0)
    assert e.write_units_per_item == 2 and e.write_units == 2000
    assert e.items_per_second == 1500  # 3,000 units/s / 2 units per item
    assert e.bound == "table"


def test_few_workers_are_the_bound_and_provisioned_capacity_bills_whole_hours() -> None:
    e = est.estimate(7_200_000, 200, wcu=40_000, concurrency=2, worker_items_per_second=1000.0, shard_mib=1)
    assert e.bound == "workers" and e.items_per_second == 2000
    assert e.seconds == pytest.approx(3600)
    assert e.dynamodb_provisioned_usd == pytest.approx(40_000 * 1 * 0.00065)
    assert e.total_usd == pytest.approx(e.dynamodb_provisioned_usd + e.lambda_usd + e.step_functions_usd)


def test_x86_costs_more_per_gb_second() -> None:
    arm = est.estimate(1_000_000, 100, architecture="arm64")
    x86 = est.estimate(1_000_000, 100, architecture="x86_64")
    assert x86.lambda_usd > arm.lambda_usd and x86.seconds == arm.seconds


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"rows": 0, "item_bytes": 10}, "--rows"),
        ({"rows": 1, "item_bytes": 500 * 1024}, "400 KB"),
        ({"rows": 1, "item_bytes": 10, "wcu": 0}, "--wcu"),
        ({"rows": 1, "item_bytes": 10, "concurrency": 0}, "--concurrency"),
        ({"rows": 1, "item_bytes": 10, "write_mode": "upsert"}, "--write-mode"),
        ({"rows": 1, "item_bytes": 10, "write_mode": "put", "numeric_add": True}, "--numeric-add"),
    ],
)
def test_bad_arguments_say_which(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        est.estimate(**kwargs)


def test_the_command_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--rows", "1770000", "--item-bytes", "100", "--wcu", "8000"]) == 0
    out = capsys.readouterr().out
    assert "1,770,000" in out and "DynamoDB provisioned" in out and "(table)" in out
    assert main(["estimate", "--rows", "0", "--item-bytes", "100"]) == 2
    assert "--rows" in capsys.readouterr().err


def test_a_worker_is_bound_by_round_trips_or_by_its_measured_loop() -> None:
    # Given a loop that is never the bound, When only round trips count, Then 25 items per
    # request for put, delete and putIfAbsent and 1 for the other modes: 16 requests per 20 ms.
    for mode in ("put", "putIfAbsent", "delete"):
        assert est.worker_rate(mode, in_flight=16, round_trip_ms=20, loop_items_per_second=1e9) == 20_000
    for mode in ("newerWins", "update"):
        assert est.worker_rate(mode, in_flight=16, round_trip_ms=20, loop_items_per_second=1e9) == 800
    assert est.worker_rate("update", in_flight=4, round_trip_ms=10, loop_items_per_second=1e9) == 400
    # By default put's loop rate (make bench's) binds before its round trips; a single-item
    # mode's round trips (16 per 20 ms) bind before its loop.
    assert est.worker_rate("put") == est.BENCH_WORKER_ITEMS_PER_SECOND
    assert est.worker_rate("update") == min(est.BENCH_SINGLE_ITEM_WORKER_ITEMS_PER_SECOND, 800)


def test_single_item_writes_cost_the_same_units_in_25_times_the_requests_and_more_worker_time() -> None:
    put = est.estimate(1_000_000, 100, concurrency=2, shard_mib=1)
    update = est.estimate(1_000_000, 100, concurrency=2, shard_mib=1, write_mode="update")
    assert update.write_units == put.write_units == 1_000_000
    assert update.dynamodb_on_demand_usd == put.dynamodb_on_demand_usd
    assert put.requests == 40_000 and update.requests == 1_000_000
    # put: 2 workers could write 8,400/s, the new table takes 4,000/s; update: 2 workers write
    # 2 x a single-item worker's rate (its loop's or its round trips'), below the table's.
    assert put.bound == "table" and put.seconds == pytest.approx(250)
    single = min(est.BENCH_SINGLE_ITEM_WORKER_ITEMS_PER_SECOND, 800)
    assert update.worker_items_per_second == single
    assert update.bound == "workers" and update.seconds == pytest.approx(1_000_000 / (2 * single))
    assert update.workers_needed == math.ceil(4000 / single)
    assert update.lambda_usd > put.lambda_usd


def test_a_numeric_add_costs_a_transaction_a_record_item_and_marker_twice() -> None:
    from adapters.ledger import MARKED_IN_FLIGHT
    from logic.spec.dynamodb import UpdateTarget
    from logic.writemodes import MARKER_UNITS, WritePlan

    assert est.MARKED_IN_FLIGHT == MARKED_IN_FLIGHT and MARKER_UNITS == 1
    plan = WritePlan(mode=UpdateTarget, key=("pk",), version=None, actions={"n": "add"}, counters=("n",))
    for size in (100, 1024, 1025, 5000):  # as the Worker books them
        assert est.units_per_record(size, numeric_add=True) == plan.units(size)
    assert est.units_per_record(100, numeric_add=True) == 4 and est.units_per_record(100) == 1
    add = est.estimate(
        1_000_000, 100, wcu=4000, concurrency=2, shard_mib=1, write_mode="update", numeric_add=True
    )
    assert add.write_units_per_item == 4 and add.write_units == 4_000_000
    assert add.requests == 1_000_000
    # Round trips allow 800 records/s a worker; the transactions' loop binds below that.
    per_worker = min(est.BENCH_ADD_WORKER_ITEMS_PER_SECOND, 800)
    assert add.worker_items_per_second == per_worker
    assert add.items_per_second == min(4000 / 4, 2 * per_worker)
    # A window past the marker keys (MARKED_IN_FLIGHT) is cut to them, as the ItemWriter cuts it.
    assert est.worker_rate("update", numeric_add=True, in_flight=200, loop_items_per_second=1e9) == 128 * 50
    # The hot-key caveat (issue 42 item 5): one key takes one transaction at a time, 1,000 units.
    notes = est.render(add)
    assert "Adds to one key from many shards" in notes and "at most 250 of these a second" in notes
    assert "hot counter" not in est.render(est.estimate(1_000_000, 100, wcu=4000, concurrency=2, shard_mib=1))


def test_the_command_says_when_a_write_mode_writes_single_items(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--rows", "1000", "--item-bytes", "100", "--write-mode", "newerWins"]) == 0
    out = capsys.readouterr().out
    assert "1 item per request (newerWins)" in out and "writeMode newerWins writes one item" in out
    assert main(["estimate", "--rows", "1000", "--item-bytes", "100", "--write-mode", "putIfAbsent"]) == 0
    out = capsys.readouterr().out
    assert "PartiQL INSERTs, 25 items per request (putIfAbsent)" in out and "writes one item" not in out
    assert main(["estimate", "--rows", "1000", "--item-bytes", "100", "--write-mode", "delete"]) == 0
    out = capsys.readouterr().out
    assert "DeleteRequests, 25 items per request (delete)" in out and "units of the item it deletes" in out
    assert main(["estimate", "--rows", "1000", "--item-bytes", "100"]) == 0
    out = capsys.readouterr().out
    assert "BatchWriteItem, 25 items per request (put)" in out and "writes one item" not in out
    assert (
        main(["estimate", "--rows", "1000", "--item-bytes", "100", "--write-mode", "update", "--numeric-add"])
        == 0
    )
    out = capsys.readouterr().out
    assert "TransactWriteItems" in out and "4 write units a record" in out and "4,000" in out


# -- from a file and its spec ------------------------------------------------------------------

PRODUCT_SPEC: dict[str, Any] = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "PRODUCT#{sku}", "sk": "DETAILS"},
        "attributes": {"price": {"field": "price", "type": "N"}, "stock": {"field": "stock", "type": "N"}},
    },
}


def _products(path: Path, rows: int) -> Path:
    lines = ["sku,price,stock\n"] + [f"S-{i:06d},{i % 100}.99,{i % 7}\n" for i in range(rows)]
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress("".join(lines).encode()))
    else:
        path.write_text("".join(lines))
    return path


def _spec_file(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def test_a_file_and_its_spec_give_the_rows_and_the_items_size(tmp_path: Path) -> None:
    measured = measure.measure(_products(tmp_path / "p.csv", 10), PRODUCT_SPEC)
    # pk "PRODUCT#S-000000" (2 + 16), sk "DETAILS" (2 + 7), price and stock (5 + 5 and their
    # numbers): about 50 bytes, never more than DynamoDB counts.
    assert (measured.rows, measured.sampled, measured.rejected, measured.exact) == (10, 10, 0, True)
    assert 40 <= measured.item_bytes <= 70
    assert measured.row_bytes == len("S-000000,0.99,0\n")


def test_a_file_larger_than_the_sample_is_scaled_plain_or_gzip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(measure, "SAMPLE_BYTES", 20_000)
    for name in ("p.csv", "p.csv.gz"):
        measured = measure.measure(_products(tmp_path / name, 20_000), PRODUCT_SPEC)
        assert not measured.exact and measured.sampled < 2_000
        assert measured.rows == pytest.approx(20_000, rel=0.05), name


def test_the_command_estimates_from_a_file_with_the_specs_write_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {**PRODUCT_SPEC, "dynamodb": {**PRODUCT_SPEC["dynamodb"], "writeMode": "putIfAbsent"}}
    source = _products(tmp_path / "p.csv", 10)

    assert main(["estimate", "--file", str(source), "--spec", str(_spec_file(tmp_path, spec))]) == 0

    out = capsys.readouterr().out
    assert f"{source}: 10 rows (sampled 10 records, 0 rejected)" in out
    assert "(putIfAbsent)" in out and "TransactWriteItems" not in out and "shard time" not in out
    # The spec's writeUnitsPerSecond is the budget: the shard time row, from Plan's rule.
    budgeted = {**spec, "writeUnitsPerSecond": 2}
    assert main(["estimate", "--file", str(source), "--spec", str(_spec_file(tmp_path, budgeted))]) == 0
    assert "shard time (--budget, writeUnitsPerSecond)" in capsys.readouterr().out
    # An update that adds to a number: a transaction a record, read from the spec.
    adds = {"field": "stock", "type": "N", "update": "add"}
    spec = {**PRODUCT_SPEC, "dynamodb": {**PRODUCT_SPEC["dynamodb"], "writeMode": "update"}}
    spec["dynamodb"]["attributes"] = {**PRODUCT_SPEC["dynamodb"]["attributes"], "stock": adds}
    assert main(["estimate", "--file", str(source), "--spec", str(_spec_file(tmp_path, spec))]) == 0
    assert "TransactWriteItems" in capsys.readouterr().out
    # ...unless another write mode is asked for: its own writes, no marker.
    assert (
        main(
            ["estimate", "--file", str(source), "--spec", str(tmp_path / "spec.json"), "--write-mode", "put"]
        )
        == 0
    )
    assert "TransactWriteItems" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"format": "nquads", "graph": {}}, "no dynamodb.key"),
        ({**PRODUCT_SPEC, "format": "xml"}, "the spec is not valid"),
    ],
)
def test_a_spec_estimate_cannot_measure_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any], words: str
) -> None:
    source = _products(tmp_path / "p.csv", 3)
    assert main(["estimate", "--file", str(source), "--spec", str(_spec_file(tmp_path, spec))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_the_command_needs_numbers_or_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--rows", "10"]) == 2
    assert "give --rows and --item-bytes, or --file and --spec" in capsys.readouterr().err


def test_a_gzip_of_many_members_is_scaled_by_its_ratio_not_its_last_members_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(measure, "SAMPLE_BYTES", 20_000)
    lines = _products(tmp_path / "p.csv", 20_000).read_bytes().splitlines(keepends=True)
    source = tmp_path / "blocks.csv.gz"  # as bgzip writes: a member per block
    source.write_bytes(
        b"".join(gzip.compress(b"".join(lines[i : i + 500])) for i in range(0, len(lines), 500))
    )
    measured = measure.measure(source, PRODUCT_SPEC)
    assert measured.rows == pytest.approx(20_000, rel=0.25)  # not the last member's 500


def test_an_on_demand_table_grows_from_its_warm_throughput_doubling_each_half_hour() -> None:
    # A billion 100-byte items, 1,000 workers: a fixed 4,000/s would take 250,000 s (69 h). On
    # demand the ceiling doubles each 30 min: 4,000, 8,000, 16,000, 32,000, then the 40,000 quota.
    e = est.estimate(1_000_000_000, 100, concurrency=1000, shard_mib=1, worker_items_per_second=10_000.0)
    done = 1800 * (4000 + 8000 + 16000 + 32000)
    assert e.seconds == pytest.approx(4 * 1800 + (1_000_000_000 - done) / 40_000)
    assert e.table_write_units_per_second == 40_000 and e.bound == "table"
    assert e.seconds < 1_000_000_000 / 4000 / 8
    assert "on demand: from 4,000 write units/s (a new table's warm throughput), doubling each 30 min" in (
        e.table_model
    )
    # A table pre-warmed (table_warm_write_units) starts there.
    warm = est.estimate(
        1_000_000_000, 100, concurrency=1000, shard_mib=1, worker_items_per_second=10_000.0, warm_wcu=40_000
    )
    assert warm.seconds == pytest.approx(1_000_000_000 / 40_000) and "--warm-wcu" in warm.table_model
    # A fixed ceiling stays fixed, and says so.
    fixed = est.estimate(1_000_000_000, 100, wcu=4000, concurrency=1000, worker_items_per_second=10_000.0)
    assert fixed.seconds == pytest.approx(250_000) and fixed.table_model.startswith("fixed at 4,000")


def test_the_command_says_which_table_model_it_used(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--rows", "1000000000", "--item-bytes", "100", "--concurrency", "1000"]) == 0
    out = capsys.readouterr().out
    assert "table model" in out and "on demand: from 4,000 write units/s" in out
    assert "40,000 write units/s (the ceiling reached)" in out
    assert main(["estimate", "--rows", "10", "--item-bytes", "100", "--wcu", "10", "--warm-wcu", "9"]) == 2
    assert "--warm-wcu is for on demand" in capsys.readouterr().err


def test_a_wrong_column_gets_plans_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {
        **PRODUCT_SPEC,
        "dynamodb": {**PRODUCT_SPEC["dynamodb"], "attributes": {"price": {"field": "prise", "type": "N"}}},
    }
    source = _products(tmp_path / "p.csv", 3)
    assert main(["estimate", "--file", str(source), "--spec", str(_spec_file(tmp_path, spec))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert (
        "dynamodb.attributes.price.field: names field 'prise', which is not a column "
        "(did you mean 'price'?)" in err
    )
    assert "maps to an item" not in err


# -- writeMode sync at a change rate, and the two engines side by side ---------------------------


def test_a_sync_at_a_change_rate_writes_the_changes_only_and_shuffles_every_item_through_s3() -> None:
    # 1.77 M postcodes of ~100 bytes (one unit each), 0.3 % of them new, changed or removed a month.
    e = est.estimate(1_770_000, 100, write_mode="sync", change_rate=0.003, concurrency=10, shard_mib=16)
    s = e.sync
    assert s is not None and s.change_rate == 0.003
    assert s.changes == math.ceil(1_770_000 * 0.003) == 5_310
    assert s.write_units == 5_310 and s.reload_write_units == 1_770_000 == e.write_units
    assert s.requests == math.ceil(5_310 / 25)
    assert s.dynamodb_usd == pytest.approx(5_310 / 1e6 * est.ON_DEMAND_USD_PER_MILLION_WRITE_UNITS)
    # 177 MB of source: 11 shards of 16 MiB, 11 buckets of 16 MiB (logic/sync.py bucket_count).
    assert (e.shards, s.buckets) == (11, 11)
    # One PUT a shard's staged object and one a merged bucket; a ranged GET a shard's section of a
    # bucket (every shard has one of each bucket at ~160,000 items a shard) and one a baseline.
    assert s.s3_puts == 11 + 11 and s.s3_gets == 11 * 11 + 11
    assert s.s3_usd == pytest.approx(
        22 / 1000 * est.S3_USD_PER_THOUSAND_PUTS + 132 / 1000 * est.S3_USD_PER_THOUSAND_GETS
    )
    assert s.staged_bytes is None  # not measured without a file
    out = est.render(e)
    assert "a later sync at --change-rate 0.3%" in out and "5,310 write units" in out
    assert "a put reload" in out and "1,770,000 write units" in out
    # Few items a shard leave most buckets without a section: far fewer GETs than shards × buckets
    # (200 MB of 10,000-byte items: 12 buckets; shards of ~1 item each have ~1 section).
    few = est.estimate(20_000, 10_000, write_mode="sync", shard_mib=0.01)
    assert few.sync is not None and few.sync.buckets == 12 and few.shards == 19_074
    assert few.shards + 12 < few.sync.s3_gets < few.shards * 1.1 + 12


def test_the_change_rate_goes_with_sync_and_is_a_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="--change-rate goes with --write-mode sync"):
        est.estimate(1000, 100, change_rate=0.1)
    with pytest.raises(ValueError, match=r"--change-rate must be 0\.\.1"):
        est.estimate(1000, 100, write_mode="sync", change_rate=1.5)
    assert main(["estimate", "--rows", "1000", "--item-bytes", "100", "--change-rate", "0.1"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    argv = ["estimate", "--rows", "1770000", "--item-bytes", "100", "--write-mode", "sync"]
    assert main(argv) == 0
    assert f"a later sync at --change-rate {est.DEFAULT_CHANGE_RATE:.1%}" in capsys.readouterr().out


def test_a_file_measures_what_a_sync_stages_and_what_bulk_put_items_reads(tmp_path: Path) -> None:
    source = _products(tmp_path / "p.csv", 2_000)
    measured = measure.measure(source, PRODUCT_SPEC)
    # An item's DynamoDB JSON, e.g. {"pk":{"S":"PRODUCT#S-000000"},"price":{"N":"0.99"},...}: more
    # than DynamoDB's size of it; its staged line gzip-compressed: less.
    assert measured.json_bytes > measured.item_bytes > measured.staged_bytes > 0
    e = est.estimate(
        measured.rows,
        measured.item_bytes,
        write_mode="sync",
        json_bytes=measured.json_bytes,
        staged_bytes=measured.staged_bytes,
    )
    assert e.sync is not None and e.sync.staged_bytes == measured.rows * measured.staged_bytes


def test_a_put_job_shows_both_engines_and_never_invents_the_bulk_price() -> None:
    e = est.estimate(1_770_000, 100, budget=2_000, concurrency=10, shard_mib=16)
    b = e.bulk
    assert b is not None and b.max_write_units == 2_000
    assert b.seconds == pytest.approx(1_770_000 / 2_000)  # no faster than MaxWriteRequestUnits
    assert b.price_usd is None
    # The staging Workers: the put loop's CPU a record (the staging path's bound), billed as Lambda.
    staging = 1_770_000 * est.BENCH_WORKER_CPU_MICROSECONDS_PER_ITEM / 1e6 / e.concurrency
    assert b.staging_seconds == pytest.approx(staging)
    assert b.lambda_usd == pytest.approx(est._lambda_usd(e.concurrency, staging, e.shards, 1024, "arm64"))
    out = est.render(e)
    assert "engine" in out and "lambda" in out and "bulkPutItems" in out
    assert "not published" in out and "--bulk-price-per-gib" in out
    # A budget under the service's least MaxWriteRequestUnits: Plan refuses bulkPutItems.
    low = est.estimate(1_000, 100, budget=500).bulk
    assert low is not None and low.seconds is None and "1,024" in (low.refused or "")
    # No budget: no cap is sent, and the service's own rate is not documented in numbers.
    free = est.estimate(1_000, 100).bulk
    assert free is not None and free.max_write_units is None and free.seconds is None
    # A price the user gives, by GiB of the items' DynamoDB JSON (at least their size unmeasured).
    priced = est.estimate(1_000_000, 100, budget=2_000, bulk_price_per_gib=0.5, json_bytes=300).bulk
    assert priced is not None and priced.price_usd == pytest.approx(1_000_000 * 300 / 2**30 * 0.5)
    # Not a put job: bulk put items only puts.
    update = est.estimate(1_000, 100, write_mode="update")
    assert update.bulk is None and "bulkPutItems: not for writeMode update" in est.render(update)


def test_every_estimate_example_in_the_docs_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """README and docs/*.md: each `mapload estimate` command line runs (a path the docs name as
    the user's own data is a generated postcode sample here)."""
    import shlex

    from mapload import sample

    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    commands = [
        line.split("#")[0].strip()
        for page in pages
        for line in page.read_text().splitlines()
        if "mapload estimate " in line and line.lstrip().startswith((".venv/bin/mapload", "mapload"))
    ]
    assert len(commands) >= 4, commands
    data = sample.write_csv(tmp_path / "postcodes.csv", 2_000, seed=1)
    monkeypatch.chdir(root)  # the docs' relative paths (examples/...) are the repository's
    for command in commands:
        argv = [str(data) if word.startswith("/data/") else word for word in shlex.split(command)[1:]]
        capsys.readouterr()
        assert main(argv) == 0, (command, capsys.readouterr().err)
        assert "total" in capsys.readouterr().out, command
