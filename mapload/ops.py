"""`mapload start`, `status` and `release`: run, watch and free a job on a deployed environment."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from botocore.exceptions import ClientError

from mapload.arguments import (
    DEPLOYED_ENV_HELP,
    DEPLOYED_REGION_HELP,
    add_env_argument,
    add_job_arguments,
    add_region_argument,
)
from mapload.environment import Clients, Environment, OpsError, describe_environment, target_key
from mapload.progress import ProgressBar, map_run_progress, progress_line, watch
from mapload.region import region_line
from mapload.reports import job_report, reconciliation_problems, summary

if TYPE_CHECKING:
    from logic.spec.inputs import JobSpec

DEFAULT_KEY_PREFIX = "uploads/"


def planned_uri(environment: Environment, source: str, key_prefix: str) -> str:
    """Where SOURCE is loaded from: itself when in S3, else where `upload_source` puts it (a folder
    is a prefix named as the folder)."""
    if source.startswith("s3://"):
        return source
    slash = "/" if Path(source).is_dir() else ""
    return f"s3://{environment.source_bucket}/{key_prefix}{Path(source).name}{slash}"


def upload_source(clients: Clients, environment: Environment, path: Path, key_prefix: str) -> str:
    """Put a local file in the environment's source bucket (boto3's managed multipart transfer), or
    a Parquet folder's data files under a prefix named as the folder."""
    if path.is_dir():
        return _upload_folder(clients, environment, path, key_prefix)
    if not path.is_file():
        raise OpsError(f"{path}: no such file (SOURCE is a local file or folder, or s3://bucket/key)")
    key = f"{key_prefix}{path.name}"  # as start() checks it
    clients.s3.upload_file(str(path), environment.source_bucket, key)
    return f"s3://{environment.source_bucket}/{key}"


def _upload_folder(clients: Clients, environment: Environment, folder: Path, key_prefix: str) -> str:
    """The folder's data files (Plan's rule: not `_SUCCESS`, `.crc`, `_temporary/`) under
    `key_prefix` + its name; refused when that prefix already holds data files the folder has not:
    Plan would load them with it."""
    from logic.parquet import is_data
    from mapload.measure import MeasureError, parquet_files

    bucket, prefix = environment.source_bucket, f"{key_prefix}{folder.name}/"
    try:
        keys = {f"{prefix}{file.relative_to(folder).as_posix()}": file for file in parquet_files(folder)}
    except MeasureError as error:
        raise OpsError(str(error)) from error
    pages = clients.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    listed = (o["Key"] for page in pages for o in page.get("Contents", []))
    stale = sorted(key for key in listed if key not in keys and is_data(key, prefix))
    if stale:
        more = f" and {len(stale) - 1:,} more data files" if len(stale) > 1 else ""
        raise OpsError(
            f"s3://{bucket}/{prefix} already holds {stale[0][len(prefix) :]}{more} that {folder} has not: "
            "Plan would load them with it (nothing uploaded); remove them or choose another --key-prefix"
        )
    for key, file in keys.items():
        clients.s3.upload_file(str(file), bucket, key)
    return f"s3://{bucket}/{prefix}"


def execution_name(spec: Mapping[str, Any]) -> str:
    """Unique, readable, and a valid jobId when the spec names none."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    base = str(spec.get("jobId") or "mapload")[:40]
    return f"{base}-{stamp}-{uuid.uuid4().hex[:6]}"


def check_spec(
    spec: Mapping[str, Any],
    source_uri: str,
    table_key: Mapping[str, str],
    name: str,
    local_file: Path | None = None,
    *,
    graph_enabled: bool = True,
) -> None:
    """The checks Plan makes of the execution input, here, naming the field: the spec itself
    and, for a local plain CSV file, its header against the fields the spec names (a compressed
    file's header is Plan's to read, after Prepare); for a local DynamoDB JSON file (plain or
    gzip, as an export writes it), its first item against the table's key; for a local Parquet
    file or folder, every data file's footer and the columns the spec names."""
    from logic.errors import InputValidationError
    from logic.payloads import check_input_size
    from logic.spec.checks import check_graph_database
    from logic.spec.parse import parse_spec, spec_to_json
    from logic.tables import named_table

    refused = "the spec is not valid (nothing uploaded or started)"
    # A table the spec names is Plan's to check (allowed, ACTIVE, its key): its key is not the
    # environment's TableKey output.
    key = table_key if named_table(spec) is None else None
    try:
        parsed = parse_spec({**spec, "source": source_uri}, table_key=key, execution_name=name)
        check_input_size({**spec, "source": source_uri}, spec_to_json(parsed))
        check_graph_database(parsed, spec, graph_enabled=graph_enabled)
    except InputValidationError as error:
        raise OpsError(f"{refused}: {error}") from error
    keyed = key is not None and local_file is not None and local_file.is_file()
    if keyed and local_file is not None and parsed.format == "dynamodb-json":
        problem = first_item_problem(parsed, local_file)
        if problem is not None:
            raise OpsError(f"{refused}: {problem} (first item of {local_file})")
    if local_file is not None and local_file.is_dir() and parsed.format != "parquet":
        raise OpsError(
            f"{local_file} is a folder: only a Parquet source (format parquet) is loaded from a local "
            "folder; give a file, or an s3:// prefix"
        )
    if local_file is not None and parsed.format == "parquet" and local_file.exists():
        from mapload.measure import MeasureError, checked_footers

        try:  # Plan's checks of each object: Parquet, and every column the mapping names
            checked_footers(local_file, parsed)
        except MeasureError as error:
            raise OpsError(f"{refused}: {error}") from error
    if local_file is None or parsed.csv is None or not local_file.is_file():
        return  # a missing file is the upload's to name
    _check_local_header(parsed, local_file, refused)


def _check_local_header(parsed: Any, local_file: Path, refused: str) -> None:
    """A local plain CSV file's header against the fields the spec names (a compressed file's
    header is Plan's to read, after Prepare)."""
    from logic.compression import detect
    from logic.errors import InputValidationError
    from logic.planning import probe_header
    from logic.spec.checks import check_fields

    with local_file.open("rb") as handle:

        def read_range(first: int, last: int) -> bytes:
            handle.seek(first)
            return handle.read(last - first + 1)

        if detect(read_range(0, 3)) is not None:
            return
        try:
            header, _, _ = probe_header(read_range, local_file.stat().st_size, parsed)
            if header is not None:
                check_fields(parsed, header)
        except InputValidationError as error:
            raise OpsError(f"{refused}: {error} (header of {local_file})") from error


# The rejects of a first item that mean the wrong file or the wrong table, not one bad value.
_SYSTEMATIC = frozenset(("invalid_json", "not_an_item", "key_schema"))


def first_item_problem(spec: JobSpec, path: Path) -> str | None:
    """Why the first line of a DynamoDB JSON file (plain or gzip) shows that every item would be
    rejected — not an item at all, or without the table's key — or None."""
    import gzip

    from logic.compression import detect
    from logic.mapping import make_mapper
    from logic.parsing import make_parser
    from logic.values import Line, Reject

    with path.open("rb") as handle:
        gzipped = detect(handle.read(4)) == "gzip"
    try:
        with gzip.open(path, "rb") if gzipped else path.open("rb") as handle:
            raw = handle.readline(1024 * 1024).rstrip(b"\r\n")
    except (OSError, EOFError):
        return None  # a corrupt gzip is Prepare's to name
    if not raw.strip():
        return None
    fields = make_parser(spec, None)(Line(1, 0, raw))
    result = fields if isinstance(fields, Reject) else make_mapper(spec)(fields)
    if isinstance(result, Reject) and result.code in _SYSTEMATIC:
        return f"{result.code}: {result.reason}"
    return None


def start(
    env: str,
    source: str,
    spec: Mapping[str, Any],
    *,
    region: str | None = None,
    key_prefix: str = DEFAULT_KEY_PREFIX,
    report_path: Path | None = None,
    show_progress: bool = True,
    interval: float = 2.0,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> tuple[dict[str, Any] | None, list[str]]:
    """Upload if needed, start an execution, watch it, return (report, problems)."""
    out = out or sys.stdout
    err = err or sys.stderr
    if "source" in spec:
        raise OpsError("the spec must not name 'source': give SOURCE on the command line")
    clients = Clients(region)
    print(region_line("start", clients.region, clients.region_source), file=err)
    environment = describe_environment(clients, env)
    name = execution_name(spec)
    # Refuse a bad spec before uploading a file of many GB for a job Plan would refuse.
    local = None if source.startswith("s3://") else Path(source)
    # An environment deployed before the GraphEnabled output: Plan alone decides.
    graph_enabled = environment.outputs.get("GraphEnabled", "true") == "true"
    uri = planned_uri(environment, source, key_prefix)
    check_spec(spec, uri, target_key(environment), name, local, graph_enabled=graph_enabled)
    if local is not None:
        uri = upload_source(clients, environment, local, key_prefix)
        print(f"uploaded {source} to {uri}", file=err)
    try:
        started = clients.sfn.start_execution(
            stateMachineArn=environment.state_machine_arn,
            name=name,
            input=json.dumps({**spec, "source": uri}),
        )
    except ClientError as error:
        raise OpsError(f"cannot start an execution of {environment.state_machine_arn}: {error}") from error
    print(f"started {started['executionArn']}", file=err)
    described = watch(clients, started["executionArn"], ProgressBar(err, show_progress), interval=interval)
    report = job_report(clients, environment, described)
    if report_path is not None and report is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(summary(report, described), file=out)
    problems = reconciliation_problems(report, str(described["status"]))
    for problem in problems:
        print(f"mapload: NOT OK: {problem}", file=err)
    return report, problems


def status(
    env: str,
    execution: str | None = None,
    *,
    region: str | None = None,
    limit: int = 10,
    watch_interval: float | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> str:
    """Show one execution (by name or ARN), or the latest ones; returns the shown status. With
    `watch_interval`, a RUNNING execution is watched (progress on `err`) until it ends."""
    out = out or sys.stdout
    err = err or sys.stderr
    clients = Clients(region)
    print(region_line("status", clients.region, clients.region_source), file=err)
    environment = describe_environment(clients, env)
    if execution is None:
        listed = clients.sfn.list_executions(stateMachineArn=environment.state_machine_arn, maxResults=limit)
        executions = listed.get("executions", [])
        if not executions:
            print(f"no executions of {environment.state_machine_arn} yet", file=out)
            return "NONE"
        for item in executions:
            print(f"{item['status']:<10} {item['startDate']:%Y-%m-%d %H:%M:%S} {item['name']}", file=out)
        execution = str(executions[0]["executionArn"])
        print("", file=out)
    arn = environment.execution_arn(execution)
    try:
        described: dict[str, Any] = clients.sfn.describe_execution(executionArn=arn)
    except ClientError as error:
        raise OpsError(f"no execution {execution} on {environment.state_machine_arn}: {error}") from error
    if described["status"] == "RUNNING" and watch_interval is not None:
        described = watch(clients, arn, ProgressBar(err, True), interval=watch_interval)
    if described["status"] == "RUNNING":
        seconds = (datetime.now(UTC) - described["startDate"]).total_seconds()
        print(progress_line("RUNNING", map_run_progress(clients, arn), seconds), file=out)
        return "RUNNING"
    print(summary(job_report(clients, environment, described), described), file=out)
    return str(described["status"])


def release(
    env: str, job_id: str, *, region: str | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> str:
    """Free a jobId whose run ended without closing it (stopped, timed out, failed past Finalize):
    its ledger job item goes from RUNNING to RELEASED. Refused while that execution runs. Returns
    the execution that held it. (Plan also takes such a jobId over by itself.)"""
    from adapters.bulk_puts import BulkOperations
    from adapters.executions import execution_ended
    from adapters.ledger import Ledger
    from logic.errors import JobAlreadyRunningError

    out = out or sys.stdout
    clients = Clients(region)
    print(region_line("release", clients.region, clients.region_source), file=err or sys.stderr)
    environment = describe_environment(clients, env)
    # A bulk put items operation the run started is cancelled first; the job stays held until it ended.
    ledger = Ledger(
        clients.dynamodb,
        environment.outputs["LedgerTableName"],
        ttl_days=1,
        settle=BulkOperations(clients.dynamodb).settle,
    )
    try:
        held = ledger.release_job(job_id, lambda arn: execution_ended(clients.sfn, arn))
    except (ValueError, JobAlreadyRunningError) as error:
        raise OpsError(str(error)) from None
    print(f"released jobId {job_id!r} (held by {held.get('executionId')}, now over)", file=out)
    return str(held.get("executionId"))


# -- command line ----------------------------------------------------------------------------


def _read_spec(path: str | None) -> dict[str, Any]:
    if path is None:
        raise OpsError("--spec SPEC.json is required: the execution input without 'source'")
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise OpsError(f"cannot read --spec {path}: {error}") from error
    if not isinstance(spec, dict):
        raise OpsError(f"--spec {path} must hold a JSON object (the execution input)")
    return spec


def _start_command(args: Any) -> int:
    try:
        _, problems = start(
            args.env,
            args.source,
            _read_spec(args.spec),
            region=args.region,
            key_prefix=args.key_prefix,
            report_path=Path(args.report) if args.report else None,
            show_progress=not args.no_progress,
            interval=args.interval,
        )
    except OpsError as error:
        print(f"mapload: {error}", file=sys.stderr)
        return 2
    return 1 if problems else 0


def _status_command(args: Any) -> int:
    try:
        shown = status(
            args.env, args.execution, region=args.region, watch_interval=args.interval if args.watch else None
        )
    except OpsError as error:
        print(f"mapload: {error}", file=sys.stderr)
        return 2
    return 0 if shown in {"SUCCEEDED", "RUNNING", "NONE"} else 1


def _release_command(args: Any) -> int:
    try:
        release(args.env, args.job_id, region=args.region)
    except OpsError as error:
        print(f"mapload: {error}", file=sys.stderr)
        return 2
    return 0


def add_commands(sub: Any) -> None:
    """Register `start`, `status` and `release` on the mapload command's subparsers."""
    run = sub.add_parser(
        "start",
        help="start a job on a deployed environment, show its progress and final report",
        description=(
            "Read the environment's names from its stack outputs, upload SOURCE when it is a local "
            "file, start an execution, show the Map run's progress and print the report. Exit 0 "
            "only when the execution SUCCEEDED and read = written + skipped + rejected over all shards."
        ),
    )
    run.add_argument(
        "source",
        help="a local file or Parquet folder (uploaded first) or s3://bucket/key (or prefix/)",
    )
    add_job_arguments(run, env_help=DEPLOYED_ENV_HELP, region_help=DEPLOYED_REGION_HELP)
    run.add_argument(
        "--key-prefix", default=DEFAULT_KEY_PREFIX, help="where a local file goes in the source bucket"
    )
    run.add_argument("--report", help="also write the report (JSON) here")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--interval", type=float, default=2.0, help="seconds between progress polls")
    run.set_defaults(func=_start_command)

    show = sub.add_parser(
        "status",
        help="show a running or finished job (default: the latest executions)",
        description="Show one execution's progress or report, or list the latest executions.",
    )
    show.add_argument("execution", nargs="?", help="execution name or ARN (default: the latest)")
    add_env_argument(show, DEPLOYED_ENV_HELP)
    add_region_argument(show, DEPLOYED_REGION_HELP)
    show.add_argument(
        "--watch",
        action="store_true",
        help="follow a running execution's progress until it ends, then report",
    )
    show.add_argument("--interval", type=float, default=2.0, help="seconds between progress polls (--watch)")
    show.set_defaults(func=_status_command)

    free = sub.add_parser(
        "release",
        help="free a jobId whose run ended without finishing it (stopped, timed out)",
        description=(
            "Mark a jobId's ledger job RELEASED when the execution holding it is no longer RUNNING, "
            "so a new run of the jobId may start (a numeric add resumes under the same jobId). "
            "Refused while that execution runs: stop it first."
        ),
    )
    free.add_argument("job_id", metavar="JOB_ID", help="the jobId to free")
    add_env_argument(free, DEPLOYED_ENV_HELP)
    add_region_argument(free, DEPLOYED_REGION_HELP)
    free.set_defaults(func=_release_command)
