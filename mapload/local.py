"""`mapload run-local`: one file, through the synthesized state machine, in the embedded emulator."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from logic.tables import key_schema, named_table
from mapload import region as regions
from mapload.emulator import (
    DATA_ENDPOINTS,
    Clock,
    Deployment,
    Emulator,
    LocalNeptuneLoader,
    long_lived,
    observing,
)
from mapload.reports import report_lines
from mapload.synth import synthesize
from mapload.tables import wait_until_active

# Step Functions' Retry intervals really elapse in the emulator; a short interval keeps a
# local run that retries a shard quick without changing the state machine's shape.
# The embedded run builds every graph path whatever cdk.json's `graph_enabled` says: locally
# the graph costs nothing (a test or caller may still pass `mapload:graph_enabled` to leave it out).
LOCAL_CONTEXT = {"mapload:retry_interval_seconds": 1, "mapload:graph_enabled": "true"}


class LocalRunError(Exception):
    """The embedded run could not start (bad arguments, synth failure)."""


def rejects_beside(report_path: Path) -> Path:
    """Where run-local copies a run's rejects: REPORT-stem.rejects.jsonl, beside the report."""
    return report_path.with_name(report_path.stem + ".rejects.jsonl")


def _copy_rejects(emu: Emulator, report: dict[str, Any], report_path: Path) -> None:
    """The file beside the report is this run's rejects, or there is none: an earlier run's is
    replaced, or removed when this run (clean, or failed before any reject) has none."""
    location = (report.get("rejects") or {}).get("location")
    local = rejects_beside(report_path)
    if not location or not str(location).startswith("s3://"):
        local.unlink(missing_ok=True)
        return
    bucket, key = str(location)[5:].split("/", 1)
    emu.client("s3").download_file(bucket, key, str(local))
    report["rejects"]["s3Location"] = location
    report["rejects"]["location"] = str(local)


def _fallback_report(described: dict[str, Any], job_id: str, run_id: str) -> dict[str, Any]:
    """Finalize never ran (it failed itself): say what the execution said."""
    return {
        "version": 1,
        "jobId": job_id,
        "runId": run_id,
        "status": "FAILED",
        "error": {
            "type": described.get("error") or "ExecutionFailed",
            "message": described.get("cause") or "the execution ended without a report",
            "where": "StateMachine",
        },
        "records": {"read": 0, "written": 0, "skipped": 0, "rejected": 0, "duplicates": 0},
        "shards": {"total": 0, "done": 0, "failed": 0, "missing": []},
        "seconds": None,
        "dynamodb": {"table": None},
        "rejects": {"count": 0, "byReason": {}, "sample": [], "location": None},
    }


class Progress:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def show(self, done: int, total: int | None, records: int, final: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if not final and now - self.last < (0.5 if self.tty else 5.0):
            return
        self.last = now
        elapsed = max(now - self.started, 1e-6)
        shown_total = total if total is not None else "?"
        text = f"shards {done}/{shown_total} · {records:,} records · {records / elapsed:,.0f} records/s"
        end = "\n" if final or not self.tty else ""
        print(("\r" if self.tty else "") + text, end=end, file=sys.stderr, flush=True)


def run_local(
    file: Path,
    spec: dict[str, Any],
    *,
    report_path: Path,
    env_name: str = "dev",
    quiet: bool = False,
    context: dict[str, Any] | None = None,
    inspect: Callable[[Emulator, Deployment], None] | None = None,
    prepare: Callable[[Emulator], None] | None = None,
    graph_store: Path | None = None,
    region: str | None = None,
    clock: Clock | None = None,
    graph_loader: Callable[[Path | None], LocalNeptuneLoader] = LocalNeptuneLoader,
) -> dict[str, Any]:
    """Run FILE (or every file of a folder, as a prefix) through the state machine; `inspect` sees
    the emulator before it is torn down, `prepare` once it is provisioned (a test's own tables).

    The emulator and every table and bucket it creates are in `region` (default: AWS_REGION,
    AWS_DEFAULT_REGION, the profile's, us-east-1), so a kept endpoint shows them where the
    user's own tools look. `clock` and `graph_loader` go to the Emulator (tests inject them).
    Kept whole: the run's steps in the order they happen, each line one step."""
    if not file.is_file() and not file.is_dir():
        raise LocalRunError(f"{file}: no such file or folder")
    if "source" in spec:
        raise LocalRunError("the spec must not name 'source': run-local uploads FILE and fills it in")
    try:
        stacks = synthesize({"env": env_name, **LOCAL_CONTEXT, **_named(spec), **(context or {})})
    except RuntimeError as error:
        raise LocalRunError(str(error)) from error
    kept = kept_endpoint()  # read before the emulator points the environment at itself
    run_id = datetime.now(UTC).strftime("local-%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
    job_id = str(spec.get("jobId") or run_id)
    emulator = Emulator(
        env_name, regions.resolve(region), graph_store=graph_store, clock=clock, graph_loader=graph_loader
    )
    with emulator as emu:
        deployment = emu.provision(stacks)
        for warning in deployment.warnings:  # said even with --quiet: the run goes on regardless
            print(f"mapload run-local: {warning}", file=sys.stderr)
        (prepare or _nothing)(emu)
        created = _create_named_table(emu, spec)
        with long_lived():  # the emulator's models stay out of the collector's full passes
            described, final = _execute(emu, deployment, file, spec, run_id, quiet)
        report = dict(final["report"]) if final else _fallback_report(described, job_id, run_id)
        _complete(report, described, run_id)
        _copy_rejects(emu, report, report_path)
        if isinstance(report.get("graph"), dict) and emu.graph_loader is not None:
            # What a SPARQL query over the local store sees now (the loader's counts are per load).
            report["graph"]["store"] = {
                "statements": len(emu.graph_loader.store),
                "path": str(graph_store) if graph_store is not None else None,
            }
            if emu.graph_loader.has_property_graph:  # an openCypher load: the property graph's size
                vertices, edges = emu.graph_loader.property_graph.counts()
                report["graph"]["store"] |= {"vertices": vertices, "edges": edges}
        if inspect is not None:
            inspect(emu, deployment)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    if not quiet:
        print(summary(report, report_path, kept=kept, created=created))
    return report


def _named(spec: Mapping[str, Any]) -> dict[str, str]:
    """Locally a job may name any table: the run's environment allows exactly the one its spec
    names (`tables`), so the roles grant that table and no other (the IAM check holds them to it);
    a named table that does not exist is created (`_create_named_table`)."""
    name = named_table(spec)
    return {"mapload:tables": name} if name is not None else {}


def _create_named_table(emu: Emulator, spec: Mapping[str, Any]) -> str | None:
    """Create the table the spec names (`dynamodb.table`) when it does not exist, keyed as its
    `dynamodb.key` names (in its order, the partition key first; strings), and wait until it is
    ACTIVE; what was created, for the summary (None: nothing named, or it exists)."""
    name = named_table(spec)
    if name is None:
        return None
    db = emu.client("dynamodb")
    try:
        db.describe_table(TableName=name)
        return None
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
    key = (spec.get("dynamodb") or {}).get("key")
    if not isinstance(key, Mapping) or not 1 <= len(key) <= 2:
        raise LocalRunError(
            f"dynamodb.table: table {name!r} does not exist, and dynamodb.key does not name the 1 or 2 "
            "key attributes to create it with"
        )
    table_key = {str(attribute): "S" for attribute in key}
    db.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **key_schema(table_key))
    wait_until_active(db, name, poll_seconds=emu.table_poll_seconds)
    return f"{name} (key {', '.join(f'{attribute} S' for attribute in table_key)})"


def kept_endpoint() -> bool:
    """Whether the run's data goes to a kept endpoint (`mapload serve`, named by the endpoint
    variables it prints) rather than the in-memory emulator the run tears down."""
    return any(os.environ.get(name) for name in ("AWS_ENDPOINT_URL", *DATA_ENDPOINTS))


GONE = (
    "  kept      nothing: the table and buckets were in memory and went with the run; to keep and "
    "query them, start `mapload serve` in another terminal, export what it prints, and run again"
)


def _nothing(_emu: Emulator) -> None:
    """No `prepare` step."""


def _execute(
    emu: Emulator, deployment: Deployment, file: Path, spec: dict[str, Any], run_id: str, quiet: bool
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Upload FILE, run the state machine on it; (the execution's description, the final result
    Finalize or PollGraphLoad returned, if any)."""
    bucket = deployment.output("SourceBucketName")
    if file.is_dir():  # a folder (a Spark or Athena output): every file under FILE's name, the prefix
        _mirror_folder(emu.client("s3"), file, bucket)
        source = f"s3://{bucket}/{file.name}/"
    else:
        emu.client("s3").upload_file(str(file), bucket, file.name)
        source = f"s3://{bucket}/{file.name}"
    payload = {**spec, "source": source}
    state_machine = next(iter(deployment.state_machines.values()))
    progress = Progress(quiet)
    with observing() as seen:
        execution = emu.start(state_machine, run_id, payload)
        described = emu.wait(
            execution,
            on_tick=lambda: progress.show(seen.shards_done, seen.shard_total, seen.records_read),
        )
        progress.show(seen.shards_done, seen.shard_total, seen.records_read, final=True)
        return described, seen.final


def _mirror_folder(s3: Any, folder: Path, bucket: str) -> None:
    """Make the prefix FOLDER-name/ hold exactly the folder's files, each under its path in the
    folder (the keys a plan is made from stay the same run to run): on a kept endpoint (`mapload
    serve`) an object whose file was deleted since an earlier run is deleted, else Plan loads it."""
    prefix = f"{folder.name}/"
    files = {f"{prefix}{p.relative_to(folder).as_posix()}": p for p in folder.rglob("*") if p.is_file()}
    stale = [
        obj["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for obj in page.get("Contents", [])
        if obj["Key"] not in files
    ]
    for start in range(0, len(stale), 1000):  # DeleteObjects takes at most 1,000 keys
        batch = [{"Key": key} for key in stale[start : start + 1000]]
        answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        if answer.get("Errors"):
            first = answer["Errors"][0]
            raise LocalRunError(
                f"cannot delete s3://{bucket}/{first['Key']}, which {folder} no longer holds: "
                f"{first.get('Code')}: {first.get('Message')}"
            )
    for key, path in sorted(files.items()):
        s3.upload_file(str(path), bucket, key)


def _complete(report: dict[str, Any], described: dict[str, Any], run_id: str) -> None:
    """The execution's name, status and duration in the report; its end decides the status."""
    if report.get("seconds") is None and described.get("stopDate"):
        report["seconds"] = round((described["stopDate"] - described["startDate"]).total_seconds(), 3)
    report["execution"] = {"name": run_id, "status": described["status"]}
    if report["status"] == "SUCCEEDED" and described["status"] != "SUCCEEDED":
        report["status"] = "FAILED"  # trust the execution's end over a report it could not finish


def summary(
    report: dict[str, Any], report_path: Path, *, kept: bool = True, created: str | None = None
) -> str:
    """The run's summary; `created`: the table the run created for the spec's `dynamodb.table`;
    without a kept endpoint (`kept` false) a last line says the data went with the run and how to
    keep it."""
    dry = " (DRY RUN: nothing written)" if report.get("dryRun") else ""
    lines = [f"mapload run {report.get('runId', '')}: {report['status']}{dry}", *report_lines(report)]
    if created is not None:
        lines.append(f"  created   table {created}: the spec named it and it did not exist")
    lines.append(f"  report    {report_path}")
    if not kept:
        lines.append(GONE)
    return "\n".join(lines)
