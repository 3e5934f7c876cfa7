"""writeMode sync's monthly refresh (issue 47), a benchmark row: a postcode file synced, then the
same file with some rows changed, added and removed synced again, against a plain put reload of
the same two files; each through run-local against one `mapload serve`, each into its own named
table. Prints the second run's write units (one per item written or deleted: the items are under
1 KB) and time for both, and whether each table equals the second file.

    python bench/sync.py [--rows 50000] [--changed 0.003] [--added 0.0015] [--removed 0.0014]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from upload import serving  # bench/upload.py: `mapload serve` in its own process

from mapload.local import run_local
from mapload.sample import postcodes


def _spec(table: str, mode: str, job: str) -> dict[str, Any]:
    sync = {"writeMode": "sync", "dataset": "postcodes"} if mode == "sync" else {"writeMode": mode}
    return {
        "format": "csv",
        "jobId": job,
        "dynamodb": {
            "table": table,
            **sync,
            "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
            "attributes": {
                "latitude": {"field": "latitude", "type": "N"},
                "longitude": {"field": "longitude", "type": "N"},
            },
        },
    }


def _write(path: Path, rows: dict[str, tuple[str, str]]) -> Path:
    path.write_text("postcode,latitude,longitude\n" + "".join(f"{p},{a},{o}\n" for p, (a, o) in rows.items()))
    return path


def _keys(db: Any, table: str) -> set[str]:
    keys: set[str] = set()
    for page in db.get_paginator("scan").paginate(TableName=table, ProjectionExpression="pk"):
        keys |= {item["pk"]["S"] for item in page["Items"]}
    return keys


def main() -> None:
    """The two files, the four runs and the table. Kept whole: one benchmark row's steps in order."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--changed", type=float, default=0.003)
    parser.add_argument("--added", type=float, default=0.0015)
    parser.add_argument("--removed", type=float, default=0.0014)
    options = parser.parse_args()
    rng = random.Random(7)
    first = {
        code: (lat, lon) for code, lat, lon in postcodes(options.rows + int(options.rows * options.added) + 1)
    }
    codes = list(first)
    added = codes[options.rows :]
    for code in added:
        del first[code]
    second = dict(first)
    kept = list(first)
    for code in rng.sample(kept, int(options.rows * options.removed)):
        del second[code]
    changed = rng.sample(list(second), int(options.rows * options.changed))
    for code in changed:
        second[code] = (f"{float(second[code][0]) + 0.0001:.6f}", second[code][1])
    second.update({code: ("51.500000", "-0.100000") for code in added})
    with serving() as (env, _s3), tempfile.TemporaryDirectory() as tmp:
        endpoint = env["AWS_ENDPOINT_URL"]
        os.environ.update(AWS_ENDPOINT_URL_DYNAMODB=endpoint, AWS_ENDPOINT_URL_S3=endpoint)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            os.environ[name] = env[name]
        import boto3

        db = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
        v1, v2 = _write(Path(tmp) / "v1.csv", first), _write(Path(tmp) / "v2.csv", second)
        expected = {f"POSTCODE#{code}" for code in second}
        results = {}
        for mode, table in (("sync", "bench-sync"), ("put", "bench-put")):
            for n, file in enumerate((v1, v2), 1):
                report = run_local(
                    file,
                    _spec(table, mode, f"{mode}-{n}"),
                    report_path=Path(tmp) / f"{mode}{n}.json",
                    quiet=True,
                )
                if report["status"] != "SUCCEEDED":
                    raise SystemExit(f"{mode} run {n}: {report['error']}")
            records = report["records"]
            units = records["written"] + records.get("deleted", 0)
            results[mode] = (
                units,
                report["seconds"],
                report["dynamodb"]["requests"],
                _keys(db, table) == expected,
            )
    removed = len(first) - (len(second) - len(added))
    print(
        f"\nmonthly refresh of {options.rows:,} postcodes: {len(changed):,} changed, {len(added):,} added, "
        f"{removed:,} removed (second run)\n"
    )
    print("| second run | write units | BatchWriteItem requests | seconds | table equals the second file |")
    print("|---|---|---|---|---|")
    for mode, (units, seconds, requests, equal) in results.items():
        print(f"| {mode} | {units:,} | {requests:,} | {seconds} | {'yes' if equal else 'no'} |")


if __name__ == "__main__":
    sys.exit(main())
