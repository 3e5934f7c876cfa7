"""Snapshot what a few embedded runs leave behind (manifests, ledger, items, reports); compare two.

A structural change of runtime/ or mapload/ must not change what a run writes. Run `snapshot`
before the change (from a checkout of the old commit, with its own .venv), `snapshot` after it,
then `compare`:

    .venv/bin/python scripts/run_snapshot.py snapshot /tmp/runs-before
    .venv/bin/python scripts/run_snapshot.py snapshot /tmp/runs-after
    .venv/bin/python scripts/run_snapshot.py compare /tmp/runs-before /tmp/runs-after

Each case runs `mapload run-local` as a user would, against one `mapload serve` that keeps the
data, with a fixed jobId; then every object of every bucket and every item of every table is
written out. Times, run ids and the server's random names are replaced by placeholders, so two
snapshots of the same behaviour are equal byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3

ROOT = Path(__file__).resolve().parent.parent
MAPLOAD = Path(sys.executable).parent / "mapload"

ROWS = "postcode,latitude,longitude\n" + "".join(f"AB{n} {n}CD,5{n % 10}.{n},-1.{n}\n" for n in range(300))
BAD_ROWS = "ZZ1 1ZZ,not-a-number,1\n,51.5,-0.1\nYY1 1YY,51.5\n"
CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "put": (
        "postcodes.csv",
        ROWS + BAD_ROWS,
        {
            "format": "csv",
            "jobId": "snapshot-put",
            "dynamodb": {
                "key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"},
                "attributes": {
                    "latitude": {"field": "latitude", "type": "N"},
                    "longitude": {"field": "longitude", "type": "N"},
                },
            },
            "shardSizeMiB": 0.002,
            "maxRejectedPercent": 5,
        },
    ),
    "update-add": (
        "counts.csv",
        "sku,n\n" + "".join(f"S{n % 40},{n}\n" for n in range(200)),
        {
            "format": "csv",
            "jobId": "snapshot-add",
            "dynamodb": {
                "key": {"pk": "SKU#{sku}", "sk": "COUNT"},
                "writeMode": "update",
                "attributes": {"total": {"field": "n", "type": "N", "update": "add"}},
            },
            "shardSizeMiB": 0.001,
        },
    ),
    "jsonl-newer": (
        "events.jsonl",
        "".join(json.dumps({"id": f"E{n % 50}", "v": n}) + "\n" for n in range(150)),
        {
            "format": "jsonl",
            "jobId": "snapshot-newer",
            "dynamodb": {
                "key": {"pk": "EVENT#{id}", "sk": "LATEST"},
                "writeMode": "newerWins",
                "version": "v",
                "attributes": {"v": {"field": "v", "type": "N"}},
            },
        },
    ),
    "nquads": (
        "graph.nq",
        "".join(f'<http://e.org/s{n}> <http://e.org/p> "{n}" <http://e.org/g> .\n' for n in range(120)),
        {"format": "nquads", "jobId": "snapshot-graph", "graph": {"pollSeconds": 1}},
    ),
}

# What differs between two runs of the same behaviour.
VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b1[6-9]\d{8}(?:\.\d+)?\b"), "<epoch>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\blocal-\d{8}T\d{6}-[0-9a-f]{6}\b"), "<execution>"),
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b"), "<duration>"),
]
SECONDS_KEYS = re.compile(r"(?i)(seconds|elapsed|duration|time|at|until|ttl|expires)")


def _scrub(text: str) -> str:
    for pattern, placeholder in VOLATILE:
        text = pattern.sub(placeholder, text)
    return text


def _scrub_json(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _scrub_json(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_scrub_json(v, key) for v in value]
    if isinstance(value, float) and SECONDS_KEYS.search(key):
        return "<measured>"
    if isinstance(value, str):
        return _scrub(value)
    return value


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen([str(MAPLOAD), "serve", "--port", str(port)], stdout=subprocess.DEVNULL)
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.1)
    server.kill()
    raise SystemExit("mapload serve did not listen within 30 s")


def _dump_store(endpoint: str, out: Path) -> None:
    session = boto3.Session(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    s3 = session.client("s3", endpoint_url=endpoint)
    for bucket in sorted(b["Name"] for b in s3.list_buckets()["Buckets"]):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
                name = _scrub(f"{_role(bucket)}/{obj['Key']}")
                (out / "s3" / name).parent.mkdir(parents=True, exist_ok=True)
                (out / "s3" / name).write_text(_normal_body(body))
    db = session.client("dynamodb", endpoint_url=endpoint)
    for table in sorted(db.list_tables()["TableNames"]):
        items = [
            _scrub_json(i) for p in db.get_paginator("scan").paginate(TableName=table) for i in p["Items"]
        ]
        items.sort(key=lambda i: json.dumps(i, sort_keys=True))
        (out / "dynamodb").mkdir(exist_ok=True)
        (out / "dynamodb" / f"{_role(table)}.json").write_text(
            json.dumps(items, indent=1, sort_keys=True) + "\n"
        )


def _role(name: str) -> str:
    """A bucket's or table's role in its name, without the generated suffix."""
    return re.sub(r"[-_]?[0-9a-z]{8,13}$", "", name, flags=re.I) or name


def _normal_body(body: bytes) -> str:
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return f"<{len(body)} bytes>\n"
    lines = []
    for line in text.splitlines():
        try:
            lines.append(json.dumps(_scrub_json(json.loads(line)), sort_keys=True))
        except ValueError:
            lines.append(_scrub(line))
    return "\n".join(lines) + "\n"


def snapshot(out: Path) -> None:
    out.mkdir(parents=True)
    work = out / "_inputs"
    work.mkdir()
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = _serve(port)
    env = {**os.environ, "AWS_ENDPOINT_URL_DYNAMODB": endpoint, "AWS_ENDPOINT_URL_S3": endpoint}
    try:
        for name, (file_name, content, spec) in CASES.items():
            (work / file_name).write_text(content)
            (work / f"{name}.spec.json").write_text(json.dumps(spec))
            report = out / "reports" / f"{name}.json"
            report.parent.mkdir(exist_ok=True)
            done = subprocess.run(
                [
                    str(MAPLOAD),
                    "run-local",
                    str(work / file_name),
                    "--spec",
                    str(work / f"{name}.spec.json"),
                    "--report",
                    str(report),
                    "--quiet",
                ],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            (out / "reports" / f"{name}.exit").write_text(
                f"{done.returncode}\n{_scrub(done.stdout + done.stderr)}"
            )
            if report.exists():
                text = report.read_text().replace(str(out), "<out>")
                report.write_text(json.dumps(_scrub_json(json.loads(text)), indent=1) + "\n")
            print(f"snapshot: {name} exit {done.returncode}")
        _dump_store(endpoint, out)
    finally:
        server.terminate()
        server.wait()


def compare(before: Path, after: Path) -> int:
    names = {p.relative_to(before) for p in before.rglob("*") if p.is_file() and "_inputs" not in p.parts}
    names |= {p.relative_to(after) for p in after.rglob("*") if p.is_file() and "_inputs" not in p.parts}
    differ = 0
    for name in sorted(names):
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"only in {'after' if b.exists() else 'before'}: {name}")
            differ += 1
        elif a.read_text() != b.read_text():
            print(f"differs: {name}")
            differ += 1
    print(f"{len(names)} files compared, {differ} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("snapshot").add_argument("out", type=Path)
    both = sub.add_parser("compare")
    both.add_argument("before", type=Path)
    both.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.verb == "snapshot":
        snapshot(args.out)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
