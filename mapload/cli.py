"""`mapload` command line: run-local (the embedded run) and sample (demo data)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError

from logic import parts
from mapload import sample
from mapload.arguments import add_job_arguments, add_region_argument, environment_or_local
from mapload.environment import credentials_problem
from mapload.region import explain, region_line


def _run_local(args: argparse.Namespace) -> int:
    from mapload.local import LocalRunError, run_local
    from mapload.reports import failure_line

    try:
        spec = json.loads(Path(args.spec).read_text())
    except (OSError, json.JSONDecodeError) as error:
        print(f"mapload: cannot read --spec {args.spec}: {error}", file=sys.stderr)
        return 2
    if not isinstance(spec, dict):
        print(f"mapload: --spec {args.spec} must hold a JSON object (the execution input)", file=sys.stderr)
        return 2
    region, source = explain(args.region)
    if not args.quiet:
        print(region_line("run-local", region, source), file=sys.stderr)
    try:
        report = run_local(
            Path(args.file),
            spec,
            report_path=Path(args.report),
            env_name=args.env,
            quiet=args.quiet,
            graph_store=Path(args.graph_store) if args.graph_store else None,
            region=region,
        )
    except LocalRunError as error:
        print(f"mapload: {error}", file=sys.stderr)
        return 2
    if report["status"] == "SUCCEEDED":
        return 0
    if args.quiet:  # no summary, but a failure is never silent
        print(failure_line(report, args.report), file=sys.stderr)
    return 1


def _serve(args: argparse.Namespace) -> int:
    import time

    from mapload.emulator import serving
    from mapload.serve import exports

    try:
        with serving(args.port) as endpoint:
            print(f"mapload serve: DynamoDB and S3 on {endpoint}, kept in memory until Ctrl-C")
            print("point run-local, upload --env local and your tools at it:", *exports(endpoint), sep="\n")
            sys.stdout.flush()
            while True:
                time.sleep(3600)
    except OSError as error:
        print(f"mapload serve: cannot listen on 127.0.0.1:{args.port}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


def _upload(args: argparse.Namespace) -> int:
    from logic.errors import MaploadError
    from mapload import upload

    try:
        if args.abort:
            if args.source_or_uri is None or args.destination is not None:
                print("mapload: --abort takes only s3://BUCKET/KEY", file=sys.stderr)
                return 2
            aborted, cleared = upload.abort(
                args.source_or_uri, env=args.env, ledger_table=args.ledger_table, region=args.region
            )
            ids = f" ({', '.join(aborted)})" if aborted else ""
            print(
                f"{args.source_or_uri}: aborted {len(aborted)} multipart upload(s){ids}, "
                f"removed {cleared} coordination record(s)"
            )
            return 0
        if args.destination is None:
            print("mapload: upload needs SOURCE and s3://BUCKET/KEY", file=sys.stderr)
            return 2
        if not args.quiet:
            print(region_line("upload", *explain(args.region)), file=sys.stderr)
        result, seconds, size = upload.upload(
            Path(args.source_or_uri),
            args.destination,
            env=args.env,
            in_flight=args.in_flight,
            part_size=int(args.part_size_mib * 2**20),
            partial=args.partial,
            quiet=args.quiet,
            ledger_table=args.ledger_table,
            region=args.region,
        )
    except (upload.UploadError, MaploadError) as error:
        print(f"mapload: {error}", file=sys.stderr)
        return 1
    print(upload.final_line(result, seconds, size))
    return 0


def _sample(args: argparse.Namespace) -> int:
    try:
        path = sample.write_csv(Path(args.output), args.rows, seed=args.seed)
    except OSError as error:
        print(f"mapload sample: cannot write {args.output}: {error.strerror or error}", file=sys.stderr)
        return 2
    print(f"wrote {args.rows} rows to {path}")
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from mapload import estimate, measure

    rows, item_bytes, row_bytes = args.rows, args.item_bytes, None
    json_bytes = staged_bytes = None  # an item's DynamoDB JSON and staged sync line: measured
    from_spec: dict[str, Any] = {}  # the spec's write mode, shard size and concurrency
    try:
        if (args.file is None) != (args.spec is None):
            raise ValueError("--file and --spec go together: the file to sample and its spec")
        if args.file is not None:
            measured = measure.measure(Path(args.file), _read_json(args.spec, "--spec"))
            print(measure.describe(measured, args.file))
            rows = rows if rows is not None else measured.rows
            item_bytes = item_bytes if item_bytes is not None else measured.item_bytes
            row_bytes = measured.row_bytes
            json_bytes, staged_bytes = measured.json_bytes, measured.staged_bytes
            from_spec = measure.job_settings(measured)
        if rows is None or item_bytes is None:
            raise ValueError("give --rows and --item-bytes, or --file and --spec to measure them")
        write_mode = _first(args.write_mode, from_spec.get("write_mode"), "put")
        # The spec's numeric add goes with its mode (update), when the estimate is of that mode.
        spec_adds = bool(from_spec.get("numeric_add")) and estimate.counts(write_mode)
        result = estimate.estimate(
            rows,
            item_bytes,
            row_bytes=row_bytes,
            wcu=args.wcu,
            budget=_first(args.budget, from_spec.get("budget")),
            warm_wcu=args.warm_wcu,
            concurrency=_first(args.concurrency, from_spec.get("concurrency"), estimate.DEFAULT_CONCURRENCY),
            shard_mib=_first(args.shard_mib, from_spec.get("shard_mib"), None),
            memory_mib=args.memory_mib,
            architecture=args.architecture,
            write_mode=write_mode,
            numeric_add=args.numeric_add or spec_adds,
            change_rate=args.change_rate,
            json_bytes=json_bytes,
            staged_bytes=staged_bytes,
            bulk_price_per_gib=args.bulk_price_per_gib,
        )
    except (ValueError, measure.MeasureError) as error:
        print(f"mapload estimate: {error}", file=sys.stderr)
        return 2
    print(estimate.render(result))
    return 0


def _first(*values: Any) -> Any:
    """The first value given (the command line's, then the spec's, then the default)."""
    return next((value for value in values if value is not None), None)


def _read_json(path: str, option: str) -> dict[str, Any]:
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read {option} {path}: {error}") from error
    if not isinstance(spec, dict):
        raise ValueError(f"{option} {path} must hold a JSON object (the execution input)")
    return spec


def _add_run_local(sub: Any) -> None:
    run = sub.add_parser(
        "run-local",
        help="load FILE through the real state machine in the embedded AWS emulator",
        description=(
            "Synthesize the CDK app, create its buckets and tables in an in-process AWS emulator, "
            "upload FILE and run the synthesized state machine on it. AWS_ENDPOINT_URL_DYNAMODB / "
            "AWS_ENDPOINT_URL_S3 send the data to another S3/DynamoDB-compatible server instead."
        ),
    )
    run.add_argument(
        "file",
        help="the file to load (CSV, JSON Lines, N-Quads, N-Triples, Parquet), or a folder of them "
        "(uploaded under its name, loaded as a prefix)",
    )
    add_job_arguments(run, env_help="which environment's settings to use (default: dev)", env_default="dev")
    run.add_argument("--report", required=True, help="where to write the run report (JSON)")
    run.add_argument(
        "--quiet",
        action="store_true",
        help="no progress line and no summary; a failure still prints one line",
    )
    run.add_argument(
        "--graph-store",
        metavar="DIR",
        help="keep the embedded graph stores in DIR, to query after the run: RDF statements "
        "(pyoxigraph, SPARQL) and the property graph of openCypher loads (property-graph.lbug, openCypher)",
    )
    run.set_defaults(func=_run_local)


def _add_serve(sub: Any) -> None:
    from mapload.serve import DEFAULT_PORT

    serve = sub.add_parser(
        "serve",
        help="serve the embedded emulator's DynamoDB and S3 on 127.0.0.1, to keep the data between runs "
        "(in memory: about 2 KB per small item)",
        description=(
            "Run the embedded emulator's DynamoDB and S3 (moto, with the emulator's fixes: every write "
            "mode, numeric adds included, applies atomically as DynamoDB does) as a server on 127.0.0.1 "
            "until Ctrl-C, and print the AWS_ENDPOINT_URL_* settings that send run-local's data to it. "
            "Everything is held in memory: about 2 KB per small item (1 million items take about 2 GB), "
            "so a load of many millions needs that much free memory (docs/OPERATIONS.md)."
        ),
    )
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any)"
    )
    serve.set_defaults(func=_serve)


def _add_upload(sub: Any) -> None:
    up = sub.add_parser(
        "upload",
        help="upload a file, or a folder of part files, into one S3 object (multipart, multi-host)",
        description=(
            "Upload SOURCE (a file, cut into parts; or a folder of part files named <name>_<i>_<N>, one "
            "file one part) to s3://BUCKET/KEY with several parts in flight. Any number of processes on "
            "any number of hosts may run it on their own parts of the same object at once: they "
            "coordinate through the ledger table, and the one that uploads the last part completes the "
            "object. A re-run resumes. --env local uses the AWS_ENDPOINT_URL* settings and creates "
            "the bucket and ledger table if missing; --env dev (etc.) uses the deployed stack's ledger."
        ),
    )
    up.add_argument(
        "source_or_uri", metavar="SOURCE", help="file or folder of part files (with --abort: s3://BUCKET/KEY)"
    )
    up.add_argument("destination", nargs="?", metavar="s3://BUCKET/KEY", help="the object to build")
    up.add_argument(
        "--env",
        required=True,
        type=environment_or_local,
        help="local, or a deployed environment (dev, staging, prod)",
    )
    up.add_argument("--in-flight", type=int, default=8, help="parts uploaded at once (default: 8)")
    default_mib = parts.DEFAULT_PART_BYTES // parts.MIB
    up.add_argument(
        "--part-size-mib",
        type=float,
        default=default_mib,
        help=f"part size for a file (default: {default_mib}, grown to stay within S3's 10,000 parts)",
    )
    up.add_argument(
        "--partial",
        action="store_true",
        help="the folder holds only some of the parts; other processes or hosts upload the rest",
    )
    up.add_argument("--abort", action="store_true", help="abort the object's upload and remove its records")
    up.add_argument(
        "--ledger-table", help="ledger table name (default: the stack's, or mapload-local-ledger)"
    )
    up.add_argument("--quiet", action="store_true", help="no progress bar")
    add_region_argument(up)
    up.set_defaults(func=_upload)


def _add_sample(sub: Any) -> None:
    gen = sub.add_parser(
        "sample",
        help="write a deterministic UK-postcode-like CSV",
        description="Write postcode, latitude, longitude rows (examples/postcodes.spec.json loads them).",
    )
    gen.add_argument("output", help="the CSV file to write")
    gen.add_argument("--rows", type=int, default=200_000, help="data rows to write (default: 200000)")
    gen.add_argument(
        "--seed", type=int, default=1, help="random seed: the same seed writes the same file (default: 1)"
    )
    gen.set_defaults(func=_sample)


def _add_sample_and_estimate(sub: Any) -> None:
    """`mapload sample` and `mapload estimate`. Kept whole: the two commands' argparse declarations,
    one option after another."""
    from logic.spec.dynamodb import WRITE_MODES
    from mapload import estimate

    _add_sample(sub)
    est = sub.add_parser(
        "estimate",
        help="time and cost of a load on AWS (documented limits, list prices, benchmarked worker rate)",
        description=(
            "Estimate a load from typed numbers (--rows, --item-bytes) or from a file and its spec "
            "(--file, --spec): its start is parsed and mapped with the spec to count rows and measure "
            "the items' sizes; the spec's writeMode, shardSizeMiB and maxConcurrency apply unless given."
        ),
    )
    est.add_argument("--rows", type=int, help="items to write (default with --file: measured)")
    est.add_argument(
        "--item-bytes", type=int, help="average DynamoDB item size (default with --file: measured)"
    )
    est.add_argument("--file", help="a local file to sample (plain or gzip), with --spec")
    est.add_argument("--spec", help="the file's execution input as JSON, without 'source'")
    est.add_argument(
        "--wcu",
        type=int,
        help="the table's provisioned write capacity (units/s), a fixed ceiling (default: an "
        "on-demand table that grows, see --warm-wcu)",
    )
    est.add_argument(
        "--budget",
        type=int,
        help="the job's writeUnitsPerSecond (default: the spec's, else none): the load writes no "
        "faster, and Plan runs only the Workers that keep a shard within half the Worker's timeout",
    )
    est.add_argument(
        "--warm-wcu",
        type=int,
        help="on demand: the table's warm write throughput (table_warm_write_units, or the peak it "
        "reached) it starts at, doubling each 30 min of load up to the 40,000 quota (default: a new "
        "table's 4000)",
    )
    est.add_argument(
        "--concurrency",
        type=int,
        help=f"maxConcurrency: workers in flight (default: the spec's, else {estimate.DEFAULT_CONCURRENCY})",
    )
    est.add_argument(
        "--shard-mib",
        type=float,
        help="shardSizeMiB (default: the spec's, else the one Plan chooses: a shard per worker, 1 to "
        f"{estimate.DEFAULT_SHARD_MIB:g} MiB)",
    )
    est.add_argument("--memory-mib", type=int, default=estimate.DEFAULT_MEMORY_MIB, help="worker_memory_mib")
    est.add_argument(
        "--architecture",
        default=estimate.DEFAULT_ARCHITECTURE,
        choices=estimate.ARCHITECTURES,
        help="worker_architecture (default: %(default)s)",
    )
    est.add_argument(
        "--write-mode",
        choices=WRITE_MODES,
        help="dynamodb.writeMode (default: the spec's, else put): put writes batches of 25, others 1 item",
    )
    est.add_argument(
        "--numeric-add",
        action="store_true",
        help="with --write-mode update: it adds numbers (a transaction with a ledger marker a record; "
        "implied by a spec whose update adds to an N attribute)",
    )
    est.add_argument(
        "--change-rate",
        type=float,
        help="with --write-mode sync: the fraction of records new, changed or removed a run (default "
        f"{estimate.DEFAULT_CHANGE_RATE:g}): a later sync's writes against a put reload's",
    )
    est.add_argument(
        "--bulk-price-per-gib",
        type=float,
        help="a put job's bulkPutItems engine: a price in USD per GiB of DynamoDB JSON (not published "
        "in the sources found: without it the price is shown as unknown)",
    )
    est.set_defaults(func=_estimate)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line (the subcommands' parsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (--help: usage)\n")


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line: run-local, upload, sample, estimate, start and status. `only="upload"`:
    that subcommand alone, the same arguments and help, without importing what the others need
    (the emulator, moto, the estimate model): `mapload upload` starts its first part sooner."""
    command = _Parser(prog="mapload", description="Load huge files from S3 into DynamoDB.")
    command.add_argument("--version", action="version", version=f"mapload {_version()}")
    sub = command.add_subparsers(dest="command", required=True)
    if only == "upload":
        _add_upload(sub)
        return command
    from mapload import initspec, ops, verify  # start / status on a deployed environment; init, verify

    _add_run_local(sub)
    _add_serve(sub)
    _add_upload(sub)
    _add_sample_and_estimate(sub)
    ops.add_commands(sub)
    initspec.add_command(sub)
    verify.add_command(sub)
    return command


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("mapload")
    except importlib.metadata.PackageNotFoundError:  # a checkout run without `pip install -e .`
        return "(not installed)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser(argv[0] if argv[:1] == ["upload"] else None).parse_args(argv)
    try:
        return int(args.func(args))
    except (ClientError, BotoCoreError, Boto3Error) as error:
        # An AWS error ends the command with one line naming what failed, not a traceback.
        problem = credentials_problem(error)
        print(f"mapload {args.command}: {problem or 'AWS error: ' + _one_line(error)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`mapload ... | head`): stop quietly, as `cat` does. Python flushes
        # stdout again at exit; pointing it at /dev/null keeps that flush from failing too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
