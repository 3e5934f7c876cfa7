"""`mapload` command line: run-local (the embedded run) and sample (demo data)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mapload import sample


def _run_local(args: argparse.Namespace) -> int:
    from mapload.local import LocalRunError, run_local

    try:
        spec = json.loads(Path(args.spec).read_text())
    except (OSError, json.JSONDecodeError) as error:
        print(f"mapload: cannot read --spec {args.spec}: {error}", file=sys.stderr)
        return 2
    if not isinstance(spec, dict):
        print(f"mapload: --spec {args.spec} must hold a JSON object (the execution input)", file=sys.stderr)
        return 2
    try:
        report = run_local(
            Path(args.file),
            spec,
            report_path=Path(args.report),
            env_name=args.env,
            quiet=args.quiet,
        )
    except LocalRunError as error:
        print(f"mapload: {error}", file=sys.stderr)
        return 2
    return 0 if report["status"] == "SUCCEEDED" else 1


def _sample(args: argparse.Namespace) -> int:
    path = sample.write_csv(Path(args.output), args.rows, seed=args.seed)
    print(f"wrote {args.rows} rows to {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mapload", description="Load huge files from S3 into DynamoDB.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run-local",
        help="load FILE through the real state machine in the embedded AWS emulator",
        description=(
            "Synthesize the CDK app, create its buckets and tables in an in-process AWS emulator, "
            "upload FILE and run the synthesized state machine on it. AWS_ENDPOINT_URL_DYNAMODB / "
            "AWS_ENDPOINT_URL_S3 send the data to another S3/DynamoDB-compatible server instead."
        ),
    )
    run.add_argument("file", help="the file to load (CSV or JSON Lines)")
    run.add_argument("--spec", required=True, help="execution input as JSON, without 'source'")
    run.add_argument("--report", required=True, help="where to write the run report (JSON)")
    run.add_argument("--env", default="dev", help="which environment's settings to use (default: dev)")
    run.add_argument("--quiet", action="store_true", help="no progress line")
    run.set_defaults(func=_run_local)

    gen = sub.add_parser("sample", help="write a deterministic UK-postcode-like CSV")
    gen.add_argument("output")
    gen.add_argument("--rows", type=int, default=200_000)
    gen.add_argument("--seed", type=int, default=1)
    gen.set_defaults(func=_sample)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
