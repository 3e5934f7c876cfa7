"""The graph target end to end: N-Quads, N-Triples and CSV-to-graph through the synthesized state
machine, the Neptune loader answered by the embedded pyoxigraph store; counts reconcile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pyoxigraph as ox
import pytest
from scripted_neptune import ScriptedNeptuneLoader
from virtual_clock import VirtualClock

from mapload import ROOT
from mapload.emulator.embedded import Deployment, Emulator
from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

EX = "http://example.org/"
REPORT_SCHEMA = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
# moto really waits, so the poll loop waits 1 s; tiny shards make several Workers stage files.
GRAPH = {"pollSeconds": 1, "timeoutMinutes": 5}


def run(
    tmp_path: Path, file: Path, spec: dict[str, Any], **kwargs: Any
) -> tuple[dict[str, Any], set[ox.Quad]]:
    seen: dict[str, Any] = {}

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        assert emu.graph_loader is not None
        seen["quads"] = set(emu.graph_loader.store)
        staging = deployment.output("StagingBucketName")
        listing = emu.client("s3").list_objects_v2(Bucket=staging, Prefix="jobs/")
        seen["staged"] = [o["Key"] for o in listing.get("Contents", []) if "/graph/" in o["Key"]]

    report_path = tmp_path / "report.json"
    report = run_local(file, spec, report_path=report_path, quiet=True, inspect=inspect, **kwargs)
    assert json.loads(report_path.read_text()) == report
    jsonschema.validate(report, REPORT_SCHEMA)
    records = report["records"]
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"]
    report["_stagedKeys"] = seen["staged"]
    return report, seen["quads"]


def nquads_file(path: Path) -> tuple[set[ox.Quad], list[int]]:
    """Valid statements (some repeated, some in named graphs), comments, blanks and bad lines."""
    lines: list[bytes] = [b"# a generated N-Quads file"]
    valid: set[ox.Quad] = set()
    bad_lines: list[int] = []
    for i in range(300):
        subject, obj = ox.NamedNode(f"{EX}s/{i % 120}"), ox.Literal(f'value "{i}"\n', language="en")
        graph = ox.NamedNode(f"{EX}g/{i % 3}") if i % 2 else ox.DefaultGraph()
        quad = ox.Quad(subject, ox.NamedNode(f"{EX}p/{i % 7}"), obj, graph)
        valid.add(quad)
        lines.append(ox.serialize([quad], format=ox.RdfFormat.N_QUADS).rstrip(b"\n"))
        if i % 50 == 7:
            lines.append(lines[-1])  # the same statement again: staged twice, loaded once
        if i % 97 == 5:
            lines.append(b"")
            lines.append(f'<{EX}s/{i}> <{EX}p> "no end .'.encode())
            bad_lines.append(len(lines))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return valid, bad_lines


def test_nquads_load_into_the_graph_with_every_count_reconciled(tmp_path: Path) -> None:
    source = tmp_path / "data.nq"
    valid, bad_lines = nquads_file(source)
    spec = {
        "format": "nquads",
        "graph": {**GRAPH, "gzip": True},
        "shardSizeMiB": 0.01,
        "maxRejectedPercent": 5,
    }
    report, quads = run(tmp_path, source, spec)
    assert report["status"] == "SUCCEEDED", report["error"]
    assert report["shards"]["total"] > 1
    graph = report["graph"]
    assert graph["status"] == "LOAD_COMPLETED"
    assert quads == valid
    # loaded = the distinct valid statements; staged counts each valid line, repeats included.
    assert graph["loaded"] == len(valid) == graph["store"]["statements"]
    assert graph["staged"] == report["records"]["written"] == graph["records"]
    assert graph["duplicates"] == graph["staged"] - len(valid) > 0
    assert report["rejects"]["count"] == len(bad_lines)
    assert [r["line"] for r in report["rejects"]["sample"]] == bad_lines
    assert {r["code"] for r in report["rejects"]["sample"]} == {"rdf_syntax"}
    # One gzip text file per shard that staged anything.
    assert report["_stagedKeys"] and all(k.endswith(".nq.gz") for k in report["_stagedKeys"])


def test_ntriples_load_and_a_graph_name_is_rejected(tmp_path: Path) -> None:
    source = tmp_path / "data.nt"
    source.write_bytes(
        f"<{EX}a> <{EX}p> <{EX}b> .\n"
        f'<{EX}a> <{EX}name> "A \\"quoted\\" name"@en .\n'
        f"<{EX}a> <{EX}p> <{EX}c> <{EX}g> .\n"
        f"<{EX}b> <{EX}p> _:x .\n".encode()
    )
    report, quads = run(tmp_path, source, {"format": "ntriples", "graph": GRAPH, "maxRejectedPercent": 50})
    assert report["status"] == "SUCCEEDED", report["error"]
    assert (report["records"]["written"], report["records"]["rejected"]) == (3, 1)
    assert report["rejects"]["sample"][0]["line"] == 3
    assert report["graph"]["loaded"] == len(quads) == 3


def test_csv_records_become_graph_statements_and_table_items(tmp_path: Path) -> None:
    source = tmp_path / "people.csv"
    rows = [("1", "Ada <Lovelace>", "36"), ("2", 'Alan "T"', "41"), ("3", "Grace", ""), ("4", "Bad", "x9")]
    source.write_text(
        "id,name,age\n" + "".join(f'{i},"{n.replace(chr(34), chr(34) * 2)}",{a}\n' for i, n, a in rows)
    )
    spec = {
        "format": "csv",
        "dynamodb": {"key": {"pk": "PERSON#{id}", "sk": "PROFILE"}, "attributes": {"name": "{name}"}},
        "graph": {
            **GRAPH,
            "statements": [
                {"subject": EX + "person/{id}", "predicate": EX + "name", "object": {"literal": "{name}"}},
                {
                    "subject": EX + "person/{id}",
                    "predicate": EX + "age",
                    "object": {"literal": "{age}", "datatype": "xsd:integer", "optional": True},
                },
                {"subject": EX + "person/{id}", "predicate": EX + "seeAlso", "object": EX + "name/{name}"},
            ],
        },
        "maxRejectedPercent": 50,
    }
    report, quads = run(tmp_path, source, spec)
    assert report["status"] == "SUCCEEDED", report["error"]
    # "x9" is no xsd:integer: the whole record is rejected (no item, no statements).
    assert (report["records"]["written"], report["records"]["rejected"]) == (3, 1)
    assert report["rejects"]["sample"][0]["code"] == "bad_literal"
    # 3 statements for rows 1 and 2, 2 for row 3 (its optional age is empty).
    assert report["graph"]["staged"] == report["graph"]["loaded"] == len(quads) == 8
    names = {q.object.value for q in quads if q.predicate.value == EX + "name"}
    assert names == {"Ada <Lovelace>", 'Alan "T"', "Grace"}
    see_also = {q.object.value for q in quads if q.predicate.value == EX + "seeAlso"}
    assert f"{EX}name/Ada%20%3CLovelace%3E" in see_also


def test_a_failed_graph_load_fails_the_execution_with_the_loaders_errors(tmp_path: Path) -> None:
    logs = [{"errorCode": "PARSING_ERROR", "errorMessage": "boom", "fileName": "s3://x/y.nq", "recordNum": 2}]

    def failing(store: Path | None) -> ScriptedNeptuneLoader:
        loader = ScriptedNeptuneLoader(store)
        loader.script = ["LOAD_IN_QUEUE", "LOAD_IN_PROGRESS"]
        loader.fail_with = ("LOAD_FAILED", logs)
        return loader

    source = tmp_path / "one.nq"
    source.write_bytes(f"<{EX}a> <{EX}p> <{EX}b> .\n".encode())
    report, _ = run(tmp_path, source, {"format": "nquads", "graph": GRAPH}, graph_loader=failing)
    assert report["status"] == "FAILED"
    assert report["execution"]["status"] == "FAILED"
    assert report["error"]["type"] == "GraphLoadFailedError" and report["error"]["where"] == "GraphLoad"
    assert report["graph"]["status"] == "LOAD_FAILED"
    assert report["graph"]["errors"]["first"] == logs


def test_a_load_queued_past_the_deadline_is_cancelled_and_fails_leaving_items_as_written(
    tmp_path: Path,
) -> None:
    """Neptune keeps the load LOAD_IN_QUEUE (behind other loads): at the input's deadline the
    poll loop cancels it and the execution fails naming the load; the table keeps exactly the
    items the Workers wrote - nothing undone, nothing written twice. The emulator's clock is
    virtual: the Wait states take no time, so the minute's deadline comes after four polls
    (at 0, 20, 40 and 60 s) however slow the machine is."""
    loaders: list[ScriptedNeptuneLoader] = []

    def holding(store: Path | None) -> ScriptedNeptuneLoader:
        loader = ScriptedNeptuneLoader(store)
        loader.hold = True
        loaders.append(loader)
        return loader

    clock = VirtualClock(start=1_800_000_000.0)
    source = tmp_path / "people.csv"
    source.write_text("id,name\n" + "".join(f"{i},name {i}\n" for i in range(40)))
    spec = {
        "format": "csv",
        "dynamodb": {"key": {"pk": "PERSON#{id}", "sk": "PROFILE"}, "attributes": {"name": "{name}"}},
        "graph": {
            "pollSeconds": 20,
            "timeoutMinutes": 1,
            "statements": [
                {"subject": EX + "person/{id}", "predicate": EX + "name", "object": {"literal": "{name}"}}
            ],
        },
        "shardSizeMiB": 0.0002,
    }
    items: list[dict[str, Any]] = []

    def inspect(emu: Emulator, deployment: Deployment) -> None:
        table = deployment.output("TableName")
        pages = emu.client("dynamodb").get_paginator("scan").paginate(TableName=table)
        items.extend(item for page in pages for item in page["Items"])

    report = run_local(
        source,
        spec,
        report_path=tmp_path / "report.json",
        quiet=True,
        inspect=inspect,
        clock=clock,
        graph_loader=holding,
    )
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["status"] == "FAILED"
    assert report["execution"]["status"] == "FAILED"
    error = report["error"]
    assert (error["type"], error["where"]) == ("GraphLoadTimeoutError", "GraphLoad")
    load_id = report["graph"]["loadId"]
    assert load_id in error["message"] and "LOAD_IN_QUEUE" in error["message"]
    assert "the load was cancelled" in error["message"]
    assert report["graph"]["status"] == "LOAD_IN_QUEUE"
    # The loader saw several polls, then the cancel; nothing reached the graph.
    (loader,) = loaders
    polls = [r for r in loader.requests if r["method"] == "GET" and load_id in r["path"]]
    cancels = [r for r in loader.requests if r["method"] == "DELETE"]
    assert len(polls) == 4 and len(cancels) == 1 and load_id in cancels[0]["path"]
    assert clock.time() == 1_800_000_000.0 + 60  # GraphWait 20 + 20 + 20 s, no real waiting
    assert loader.loads[load_id].status == "LOAD_CANCELLED_BY_USER"
    assert len(loader.store) == 0
    # DynamoDB: every record written once by the Workers, still there after the graph failed.
    records = report["records"]
    assert records == {**records, "read": 40, "written": 40, "rejected": 0}
    assert report["shards"]["total"] > 1
    keys = sorted((i["pk"]["S"], i["sk"]["S"]) for i in items)
    assert keys == sorted((f"PERSON#{i}", "PROFILE") for i in range(40))
    assert {i["pk"]["S"]: i["name"]["S"] for i in items} == {f"PERSON#{i}": f"name {i}" for i in range(40)}


def test_graph_store_on_disk_can_be_queried_after_the_run(tmp_path: Path) -> None:
    source = tmp_path / "two.nq"
    source.write_bytes(f"<{EX}a> <{EX}p> <{EX}b> .\n<{EX}a> <{EX}p> <{EX}c> .\n".encode())
    store_dir = tmp_path / "store"
    report, _ = run(tmp_path, source, {"format": "nquads", "graph": GRAPH}, graph_store=store_dir)
    assert report["graph"]["store"] == {"statements": 2, "path": str(store_dir)}
    store = ox.Store.read_only(str(store_dir))
    rows = list(store.query(f"SELECT ?o WHERE {{ <{EX}a> <{EX}p> ?o }}"))  # type: ignore[union-attr]
    assert {row[0].value for row in rows} == {f"{EX}b", f"{EX}c"}
