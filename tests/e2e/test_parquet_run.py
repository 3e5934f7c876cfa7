"""Parquet end to end: a Spark-like output folder (part files, `_SUCCESS`, `.crc` checksums) through
the synthesized state machine in the embedded run, into DynamoDB, RDF statements and a property
graph, sharded by row group; and a bad folder refused at Plan."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mapload.emulator.embedded import Deployment, Emulator
from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

EX = "http://example.org/"
ROWS = 1200
GRAPH = {"pollSeconds": 1, "timeoutMinutes": 5}


def spark_folder(folder: Path) -> None:
    """Two part files by two writers (pyarrow and DuckDB), several row groups each, beside the
    files a Spark job leaves: `_SUCCESS` and a `.crc` checksum per part."""
    folder.mkdir()
    half = ROWS // 2
    first = pa.table(
        {
            "id": [f"p{i}" for i in range(half)],
            "name": [f"Person {i}" for i in range(half)],
            "age": [None if i % 10 == 0 else 20 + i % 50 for i in range(half)],
            "boss": [f"p{i // 2}" for i in range(half)],
        }
    )
    pq.write_table(first, folder / "part-00000-5f1e.snappy.parquet", row_group_size=100, compression="snappy")
    duckdb.sql(
        f"COPY (SELECT 'p' || i::VARCHAR AS id, 'Person ' || i::VARCHAR AS name, "
        f"CASE WHEN i % 10 = 0 THEN NULL ELSE 20 + i % 50 END::BIGINT AS age, "
        f"'p' || (i // 2)::VARCHAR AS boss FROM range({half}, {ROWS}) t(i)) "
        f"TO '{folder / 'part-00001-5f1e.zstd.parquet'}' "
        "(FORMAT parquet, ROW_GROUP_SIZE 150, COMPRESSION zstd)"
    )
    (folder / "_SUCCESS").write_bytes(b"")
    for part in ("part-00000-5f1e.snappy.parquet", "part-00001-5f1e.zstd.parquet"):
        (folder / f".{part}.crc").write_bytes(b"crc\x00\x01")


def test_a_spark_folder_loads_into_dynamodb_by_row_group(
    tmp_path: Path, run_file: Callable[..., Any]
) -> None:
    folder = tmp_path / "people"
    spark_folder(folder)
    spec = {
        "format": "parquet",
        "dynamodb": {
            "key": {"pk": "PERSON#{id}", "sk": "PROFILE"},
            "attributes": {"name": "{name}", "age": {"field": "age", "type": "N", "optional": True}},
        },
        "shardSizeMiB": 0.001,
        "maxConcurrency": 4,
    }

    run = run_file(folder, spec)

    report = run.report
    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["format"] == "parquet"
    assert report["records"]["read"] == report["records"]["written"] == ROWS
    assert report["lines"] == {"total": ROWS, "accepted": ROWS, "rejected": 0, "ignored": 0}
    assert report["shards"]["total"] >= 4  # row groups, not files
    assert len(run.items) == ROWS
    assert run.items[("PERSON#p7", "PROFILE")]["age"] == {"N": "27"}
    assert "age" not in run.items[("PERSON#p10", "PROFILE")]  # null: the attribute is absent
    assert run.items[("PERSON#p1001", "PROFILE")]["name"] == {"S": "Person 1001"}


def test_a_spark_folder_becomes_rdf_statements(tmp_path: Path) -> None:
    folder = tmp_path / "people"
    spark_folder(folder)
    spec = {
        "format": "parquet",
        "graph": {
            **GRAPH,
            "statements": [
                {"subject": EX + "person/{id}", "predicate": EX + "name", "object": {"literal": "{name}"}},
                {"subject": EX + "person/{id}", "predicate": EX + "boss", "object": EX + "person/{boss}"},
            ],
        },
        "shardSizeMiB": 0.002,
    }
    quads: set[Any] = set()

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        assert emu.graph_loader is not None
        quads.update(emu.graph_loader.store)

    report = run_local(folder, spec, report_path=tmp_path / "rdf.json", quiet=True, inspect=inspect)
    gc.collect()

    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["graph"]["staged"] == report["graph"]["loaded"] == 2 * ROWS == len(quads)
    assert any(q.subject.value == EX + "person/p900" and q.object.value == "Person 900" for q in quads)


def test_a_spark_folder_becomes_a_property_graph(tmp_path: Path) -> None:
    folder = tmp_path / "people"
    spark_folder(folder)
    spec = {
        "format": "parquet",
        "graph": {
            "model": "property",
            **GRAPH,
            "vertices": [{"id": "{id}", "label": "Person", "properties": {"name": "{name}"}}],
            "edges": [{"from": "{id}", "to": "{boss}", "label": "REPORTS_TO"}],
        },
        "shardSizeMiB": 0.01,  # weighed uncompressed: a property graph's ids are held as text
    }

    report = run_local(folder, spec, report_path=tmp_path / "pg.json", quiet=True, graph_store=tmp_path / "g")
    gc.collect()

    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["shards"]["total"] > 2
    assert (report["graph"]["vertices"], report["graph"]["edges"]) == (ROWS, ROWS)
    assert (report["graph"]["store"]["vertices"], report["graph"]["store"]["edges"]) == (ROWS, ROWS)


def test_a_delta_table_folder_is_refused_at_plan(tmp_path: Path, run_file: Callable[..., Any]) -> None:
    folder = tmp_path / "events"
    spark_folder(folder)
    (folder / "_delta_log").mkdir()
    (folder / "_delta_log" / "00000000000000000000.json").write_text("{}\n")

    run = run_file(folder, {"format": "parquet", "dynamodb": {"key": {"pk": "{id}", "sk": "X"}}})

    assert run.report["status"] == "FAILED"
    assert run.report["error"]["where"] == "Plan"
    assert "is a Delta Lake table (_delta_log/)" in run.report["error"]["message"]
