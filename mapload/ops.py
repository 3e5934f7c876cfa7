"""`mapload start` and `mapload status`: run and watch a job on a deployed environment.

Names come from the environment's stack outputs (CloudFormation DescribeStacks on
`Mapload-<env>-Data` and `Mapload-<env>-Loader`), so neither command needs the console. Every
client is a plain boto3 client: AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL(_<SERVICE>) and the
other standard settings decide which account or emulator is used.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import boto3
from botocore.exceptions import BotoCoreError, ClientError

# The stage's stack names (stacks/stage.py stage_id + stack ids; tests/infra checks they agree).
# Not imported from stacks/: that would start the CDK's jsii runtime for a status query.
STACK_IDS = ("Data", "Loader")
REQUIRED_OUTPUTS = ("StateMachineArn", "SourceBucketName", "StagingBucketName", "TableKey")
DEFAULT_KEY_PREFIX = "uploads/"
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE"})


class OpsError(Exception):
    """The command cannot do what was asked; the message says what was wrong."""


def stack_name(env: str, stack_id: str) -> str:
    return f"Mapload-{env}-{stack_id}"


@dataclass(frozen=True)
class Environment:
    """A deployed environment, as its stack outputs describe it."""

    name: str
    outputs: Mapping[str, str]

    @property
    def state_machine_arn(self) -> str:
        return self.outputs["StateMachineArn"]

    @property
    def source_bucket(self) -> str:
        return self.outputs["SourceBucketName"]

    @property
    def staging_bucket(self) -> str:
        return self.outputs["StagingBucketName"]

    def execution_arn(self, execution: str) -> str:
        """An execution's ARN from its name (or the ARN itself)."""
        if execution.startswith("arn:"):
            return execution
        prefix, machine = self.state_machine_arn.split(":stateMachine:", 1)
        return f"{prefix}:execution:{machine}:{execution}"


class Clients:
    """The boto3 clients the commands use, made once from the standard AWS settings."""

    def __init__(self, region: str | None = None) -> None:
        # botocore reads AWS_DEFAULT_REGION; AWS_REGION (what Lambda and most SDKs set) too.
        region = region or os.environ.get("AWS_REGION") or None
        session = boto3.session.Session(region_name=region) if region else boto3.session.Session()
        if session.region_name is None:
            raise OpsError("no AWS region: pass --region or set AWS_REGION / AWS_DEFAULT_REGION")
        self.region = session.region_name
        self.cloudformation = session.client("cloudformation")
        self.s3 = session.client("s3")
        self.sfn = session.client("stepfunctions")


def describe_environment(clients: Clients, env: str) -> Environment:
    outputs: dict[str, str] = {}
    for stack_id in STACK_IDS:
        name = stack_name(env, stack_id)
        try:
            stacks = clients.cloudformation.describe_stacks(StackName=name)["Stacks"]
        except (ClientError, BotoCoreError) as error:
            # ClientError: the stack is missing or access is denied; BotoCoreError: no
            # credentials, or the endpoint cannot be reached.
            message = (
                error.response.get("Error", {}).get("Message", str(error))
                if isinstance(error, ClientError)
                else str(error)
            )
            raise OpsError(
                f"cannot read stack {name} in {clients.region} ({message}); deploy the environment "
                f"first (cdk deploy -c env={env} 'Mapload-{env}/*') or check --env / --region"
            ) from error
        outputs.update({o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])})
    missing = [name for name in REQUIRED_OUTPUTS if not outputs.get(name)]
    if missing:
        raise OpsError(f"the stacks of {env!r} have no output {', '.join(missing)}: redeploy them")
    return Environment(env, outputs)


# -- progress --------------------------------------------------------------------------------


@dataclass
class Progress:
    """Shard counts of the execution's Map run (DescribeMapRun itemCounts)."""

    total: int = 0
    succeeded: int = 0
    failed: int = 0
    running: int = 0

    @property
    def done(self) -> int:
        return self.succeeded + self.failed


def map_run_progress(clients: Clients, execution_arn: str) -> Progress | None:
    """The Map run's item counts, or None before the Map state has started."""
    try:
        runs = clients.sfn.list_map_runs(executionArn=execution_arn).get("mapRuns", [])
        if not runs:
            return None
        counts = clients.sfn.describe_map_run(mapRunArn=runs[-1]["mapRunArn"]).get("itemCounts", {})
    except (ClientError, AttributeError):
        # Progress is advisory (the execution's status decides): a refused or failed poll shows
        # none this time. AttributeError is moto's in-process ListMapRuns on a just-started run.
        return None
    return Progress(
        total=int(counts.get("total", 0)),
        succeeded=int(counts.get("succeeded", 0)),
        failed=int(counts.get("failed", 0)) + int(counts.get("timedOut", 0)) + int(counts.get("aborted", 0)),
        running=int(counts.get("running", 0)),
    )


def progress_line(status: str, progress: Progress | None, seconds: float, width: int = 30) -> str:
    if progress is None or progress.total == 0:
        return f"{status:<9} planning… {seconds:,.0f} s"
    filled = int(width * progress.done / progress.total)
    bar = "#" * filled + "." * (width - filled)
    failed = f" · {progress.failed} failed" if progress.failed else ""
    return (
        f"{status:<9} [{bar}] shards {progress.done}/{progress.total} "
        f"({100 * progress.done / progress.total:.0f}%){failed} · {seconds:,.0f} s"
    )


class ProgressBar:
    """One line redrawn in place on a terminal; a line every few seconds in a log."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = stream.isatty()
        self.last = 0.0

    def show(self, text: str, *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and not self.tty and now - self.last < 5.0:
            return
        self.last = now
        if self.tty:
            self.stream.write("\r" + text.ljust(80) + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


# -- reports ---------------------------------------------------------------------------------


def job_report(
    clients: Clients, environment: Environment, described: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The job report: the execution's output when it succeeded, else Finalize's report.json."""
    if described.get("output"):
        output = json.loads(described["output"])
        if isinstance(output, dict) and isinstance(output.get("report"), dict):
            return dict(output["report"])
    run_id = str(described.get("name") or described["executionArn"].rsplit(":", 1)[-1])
    try:
        payload = json.loads(described.get("input") or "{}")
    except json.JSONDecodeError:
        payload = {}
    job_id = str(payload.get("jobId") or run_id) if isinstance(payload, dict) else run_id
    key = f"jobs/{job_id}/{run_id}/report.json"  # docs/CONTRACTS.md "Staging bucket layout"
    try:
        body = clients.s3.get_object(Bucket=environment.staging_bucket, Key=key)["Body"].read()
    except ClientError:
        return None  # Finalize never ran (the execution was aborted or Finalize itself failed)
    report = json.loads(body)
    return dict(report) if isinstance(report, dict) else None


def reconciliation_problems(report: Mapping[str, Any] | None, status: str) -> list[str]:
    """Why this job does not count as a clean load (empty when it does)."""
    if report is None:
        return [f"execution {status} without a report"]
    problems = []
    if status != "SUCCEEDED":
        problems.append(f"execution {status}")
    if report.get("status") != "SUCCEEDED":
        problems.append(f"report status {report.get('status')}")
    records = report.get("records") or {}
    read, written, rejected = (int(records.get(k) or 0) for k in ("read", "written", "rejected"))
    if read != written + rejected:
        problems.append(f"records read {read} != written {written} + rejected {rejected}")
    shards = report.get("shards") or {}
    if shards.get("done") != shards.get("total") or shards.get("missing"):
        problems.append(f"shards done {shards.get('done')} of {shards.get('total')}")
    return problems


def summary(report: Mapping[str, Any] | None, described: Mapping[str, Any]) -> str:
    lines = [f"execution {described.get('name')}: {described['status']}"]
    if described.get("error"):
        lines.append(f"  error     {described.get('error')}: {described.get('cause', '')[:500]}")
    if report is None:
        return "\n".join(lines)
    lines.append(f"  job       {report.get('jobId')} (report status {report.get('status')})")
    return "\n".join(lines + report_lines(report))


def _table(dynamodb: Mapping[str, Any]) -> str:
    """The table's name, with its region and account from its ARN when the report has it."""
    arn = str(dynamodb.get("tableArn") or "")
    parts = arn.split(":")
    where = f" ({parts[3]}, account {parts[4]})" if len(parts) > 5 else ""
    return f"{dynamodb.get('table')}{where}"


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """A report's counts, shards, time, table, graph load, rejects and error, a line each
    (`mapload status` and `mapload run-local` print them the same way)."""
    rec = report.get("records") or {}
    shards = report.get("shards") or {}
    lines = [
        f"  records   read {rec.get('read', 0):,} = written {rec.get('written', 0):,} + rejected "
        f"{rec.get('rejected', 0):,}  (duplicates in a batch: {rec.get('duplicates', 0):,})",
        f"  shards    {shards.get('done')}/{shards.get('total')} done",
        f"  seconds   {report.get('seconds')}",
        f"  table     {_table(report.get('dynamodb') or {})}",
    ]
    graph = report.get("graph")
    if isinstance(graph, dict):
        lines.append(
            f"  graph     staged {graph.get('staged')} · loaded {graph.get('loaded')} · {graph.get('status')}"
            + (f" · store {graph['store']['statements']} statements" if graph.get("store") else "")
        )
    rejects = report.get("rejects") or {}
    if rejects.get("count"):
        lines.append(
            f"  rejects   {rejects['count']:,} {rejects.get('byReason')} -> {rejects.get('location')}"
        )
    if report.get("error"):
        err = report["error"]
        lines.append(f"  error     {err.get('type')} in {err.get('where')}: {err.get('message')}")
    return lines


# -- commands --------------------------------------------------------------------------------


def upload_source(clients: Clients, environment: Environment, path: Path, key_prefix: str) -> str:
    """Put a local file in the environment's source bucket (boto3's managed multipart transfer)."""
    if not path.is_file():
        raise OpsError(f"{path}: no such file (SOURCE is a local file or s3://bucket/key)")
    key = f"{key_prefix}{path.name}"  # as start() checks it
    clients.s3.upload_file(str(path), environment.source_bucket, key)
    return f"s3://{environment.source_bucket}/{key}"


def execution_name(spec: Mapping[str, Any]) -> str:
    """Unique, readable, and a valid jobId when the spec names none."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    base = str(spec.get("jobId") or "mapload")[:40]
    return f"{base}-{stamp}-{uuid.uuid4().hex[:6]}"


def watch(
    clients: Clients,
    execution_arn: str,
    bar: ProgressBar,
    *,
    interval: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    started = time.monotonic()
    while True:
        described: dict[str, Any] = clients.sfn.describe_execution(executionArn=execution_arn)
        progress = map_run_progress(clients, execution_arn)
        status = str(described["status"])
        bar.show(progress_line(status, progress, time.monotonic() - started), final=status in TERMINAL)
        if status in TERMINAL:
            return described
        sleep(interval)


def target_key(environment: Environment) -> dict[str, str]:
    """The target table's key attributes and types, partition key first: the Loader stack's
    TableKey output, the very TABLE_KEY the Plan function validates against."""
    key = json.loads(environment.outputs["TableKey"])
    assert isinstance(key, dict)
    return {str(name): str(kind) for name, kind in key.items()}


def check_spec(spec: Mapping[str, Any], source_uri: str, table_key: Mapping[str, str], name: str) -> None:
    """The checks Plan makes of the execution input, here, naming the field."""
    from logic.errors import InputValidationError
    from logic.spec import parse_spec

    try:
        parse_spec({**spec, "source": source_uri}, table_key=table_key, execution_name=name)
    except InputValidationError as error:
        raise OpsError(f"the spec is not valid (nothing uploaded or started): {error}") from error


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
    environment = describe_environment(clients, env)
    name = execution_name(spec)
    # Refuse a bad spec before uploading a file of many GB for a job Plan would refuse.
    planned_uri = (
        source
        if source.startswith("s3://")
        else f"s3://{environment.source_bucket}/{key_prefix}{Path(source).name}"
    )
    check_spec(spec, planned_uri, target_key(environment), name)
    if source.startswith("s3://"):
        uri = source
    else:
        uri = upload_source(clients, environment, Path(source), key_prefix)
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
    out: TextIO | None = None,
) -> str:
    """Show one execution (by name or ARN), or the latest ones; returns the shown status."""
    out = out or sys.stdout
    clients = Clients(region)
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
    if described["status"] == "RUNNING":
        seconds = (datetime.now(UTC) - described["startDate"]).total_seconds()
        print(progress_line("RUNNING", map_run_progress(clients, arn), seconds), file=out)
        return "RUNNING"
    print(summary(job_report(clients, environment, described), described), file=out)
    return str(described["status"])


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
        shown = status(args.env, args.execution, region=args.region)
    except OpsError as error:
        print(f"mapload: {error}", file=sys.stderr)
        return 2
    return 0 if shown in {"SUCCEEDED", "RUNNING", "NONE"} else 1


def add_commands(sub: Any) -> None:
    """Register `start` and `status` on the mapload command's subparsers."""
    run = sub.add_parser(
        "start",
        help="start a job on a deployed environment, show its progress and final report",
        description=(
            "Read the environment's names from its stack outputs, upload SOURCE when it is a local "
            "file, start an execution, show the Map run's progress and print the report. Exit 0 "
            "only when the execution SUCCEEDED and read = written + rejected over all shards."
        ),
    )
    run.add_argument("source", help="a local file (uploaded first) or s3://bucket/key (or prefix/)")
    run.add_argument("--env", required=True, help="the deployed environment (stacks Mapload-<env>-*)")
    run.add_argument("--spec", required=True, help="execution input as JSON, without 'source'")
    run.add_argument("--region", help="AWS region (default: the standard AWS settings)")
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
    show.add_argument("--env", required=True, help="the deployed environment (stacks Mapload-<env>-*)")
    show.add_argument("--region", help="AWS region (default: the standard AWS settings)")
    show.set_defaults(func=_status_command)
