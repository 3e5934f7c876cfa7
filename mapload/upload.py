"""`mapload upload`: a file (cut into parts) or a folder of part files into one S3 object, with
several parts in flight, coordinated through the ledger table with any other process doing the same."""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from adapters.buckets import create_bucket
from adapters.multipart import (
    HASH_AHEAD_BYTES,
    CoordinatedUpload,
    PartHasher,
    S3Multipart,
    UploadLedger,
    UploadResult,
)
from logic import parts as partlib
from logic.s3uri import s3_parts
from mapload import region as regions
from mapload.tables import LEDGER_TTL_ATTRIBUTE, create_pk_sk_table, enable_ttl, wait_until_active

LOCAL_LEDGER_TABLE = "mapload-local-ledger"
# Only for --env local: S3-compatible servers configured to accept smaller parts (moto's
# S3_UPLOAD_PART_MIN_SIZE) let tests use small files. AWS always enforces 5 MiB.
MIN_PART_ENV = "MAPLOAD_MIN_PART_BYTES"
DEFAULT_TTL_DAYS = 7


class UploadError(Exception):
    """The upload cannot start (bad arguments, missing stack, unreadable source)."""


@dataclass(frozen=True)
class Target:
    bucket: str
    key: str
    ledger_table: str
    session: Any
    s3: Any  # the clients of the whole upload, each made once (one costs ~50 ms of start-up)
    db: Any


def _session(env: str, region: str | None = None) -> Any:
    name, source = regions.explain(region)
    if env != "local" and source == regions.DEFAULTED:  # a deployed environment: never a guess
        raise UploadError("no AWS region: pass --region or set AWS_REGION / AWS_DEFAULT_REGION")
    session = boto3.Session(region_name=name)
    if env == "local" and session.get_credentials() is None:
        # Local S3/DynamoDB-compatible servers accept any credentials.
        return boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name=name)
    return session


def _clients(session: Any, in_flight: int) -> tuple[Any, Any]:
    s3 = session.client(
        "s3",
        config=Config(
            retries={"mode": "standard", "max_attempts": 5},
            max_pool_connections=in_flight + 4,
            tcp_keepalive=True,
            # Each part carries its CRC32 (x-amz-checksum-crc32, a signed header) and S3 checks
            # the bytes against it, so the SDK need not hash the part again to sign the payload:
            # its default over https, and over http (local servers) it would read every part twice.
            s3={"payload_signing_enabled": False},
        ),
    )
    db = session.client("dynamodb", config=Config(retries={"mode": "standard", "max_attempts": 8}))
    return s3, db


def _create_local(s3: Any, db: Any, region: str, bucket: str, table: str) -> None:
    """Create the bucket and ledger table if missing; safe when several processes race to do it."""
    create_bucket(s3, bucket, region)
    try:
        if db.describe_table(TableName=table)["Table"]["TableStatus"] == "ACTIVE":
            return  # one round trip when the table is there (CreateTable, then a waiter: two)
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
    try:
        create_pk_sk_table(db, table)  # returns once it is ACTIVE
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceInUseException":
            raise
        wait_until_active(db, table)  # another process created it: it may still be CREATING
    problem = enable_ttl(db, table, LEDGER_TTL_ATTRIBUTE)  # as the stacks' ledger: records expire
    if problem is not None:  # said, and the upload goes on (TTL decides only how long records stay)
        print(f"mapload upload: {problem}", file=sys.stderr)


def _stack_output(session: Any, env: str, name: str) -> str:
    stack = f"Mapload-{env}-Data"
    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        raise UploadError(
            f"cannot read stack {stack} ({error.response['Error'].get('Message', error)}): "
            f"deploy it (make deploy ENV={env}) or use --env local"
        ) from error
    for output in stacks[0].get("Outputs", []):
        if output["OutputKey"] == name:
            return str(output["OutputValue"])
    raise UploadError(f"stack {stack} has no output {name}")


def destination(uri: str) -> tuple[str, str]:
    """The bucket and key of `s3://BUCKET/KEY`, or an UploadError naming what is wrong."""
    try:
        bucket, key = s3_parts(uri)
    except ValueError as error:
        raise UploadError(f"destination: {error}") from error
    if not key or key.endswith("/"):
        raise UploadError(f"{uri}: name the object, s3://BUCKET/KEY (not a prefix)")
    return bucket, key


def min_part_bytes(env: str) -> int:
    """S3's minimum part size; --env local may lower it (MIN_PART_ENV)."""
    return (
        int(os.environ.get(MIN_PART_ENV) or partlib.MIN_PART_BYTES)
        if env == "local"
        else partlib.MIN_PART_BYTES
    )


def target(
    uri: str, env: str, ledger_table: str | None = None, region: str | None = None, in_flight: int = 4
) -> Target:
    bucket, key = destination(uri)
    session = _session(env, region)
    s3, db = _clients(session, in_flight)
    if env == "local":
        table = ledger_table or LOCAL_LEDGER_TABLE
        _create_local(s3, db, session.region_name, bucket, table)
    else:
        table = ledger_table or _stack_output(session, env, "LedgerTableName")
    return Target(bucket, key, table, session, s3, db)


def plan_source(source: Path, *, part_size: int, partial: bool, min_part: int) -> partlib.PartPlan:
    if source.is_dir():
        files = [(str(p), p.stat().st_size) for p in sorted(source.iterdir()) if p.is_file()]
        return partlib.plan_part_files(files, require_all=not partial, min_part=min_part)
    if source.is_file():
        if partial:
            raise UploadError("--partial is for a folder of part files, not a single file")
        return partlib.plan_file(str(source), source.stat().st_size, part_size=part_size, min_part=min_part)
    raise UploadError(f"{source}: no such file or folder")


class ProgressBar:
    """Bytes sent and MB/s on stderr: redrawn in place on a terminal, a line every 5 s otherwise."""

    def __init__(self, total: int, parts: int, quiet: bool) -> None:
        self.total = max(total, 1)
        self.parts = parts
        self.quiet = quiet
        self.sent = 0
        self.started = time.monotonic()
        self.last = 0.0
        self.lock = threading.Lock()
        self.tty = sys.stderr.isatty()

    def __call__(self, amount: int) -> None:
        with self.lock:
            self.sent = max(0, min(self.total, self.sent + amount))
            self._draw(final=False)

    def _draw(self, final: bool) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if not final and now - self.last < (0.25 if self.tty else 5.0):
            return
        self.last = now
        rate = self.sent / max(now - self.started, 1e-6) / 1e6
        width = 30
        filled = int(width * self.sent / self.total)
        text = (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.sent / 1e6:,.1f}/{self.total / 1e6:,.1f} MB"
            f"  {rate:,.1f} MB/s  {self.parts} parts"
        )
        end = "\n" if final or not self.tty else ""
        print(("\r" if self.tty else "") + text, end=end, file=sys.stderr, flush=True)

    def close(self) -> None:
        with self.lock:
            self._draw(final=True)


def upload(
    source: Path,
    uri: str,
    *,
    env: str,
    in_flight: int = 4,
    part_size: int = partlib.DEFAULT_PART_BYTES,
    partial: bool = False,
    quiet: bool = False,
    ledger_table: str | None = None,
    region: str | None = None,
) -> tuple[UploadResult, float, int]:
    """Upload this process's parts; returns the result, seconds taken and bytes of its part set.
    The parts are hashed from the start, while the clients are made and the upload is found or
    created (PartHasher)."""
    destination(uri)
    plan = plan_source(source, part_size=part_size, partial=partial, min_part=min_part_bytes(env))
    with PartHasher(plan.parts, HASH_AHEAD_BYTES) as hasher:
        place = target(uri, env, ledger_table, region, in_flight)
        coordinated = CoordinatedUpload(
            S3Multipart(place.s3, place.bucket, place.key),
            UploadLedger(place.db, place.ledger_table, place.bucket, place.key, DEFAULT_TTL_DAYS),
            in_flight=in_flight,
        )
        bar = ProgressBar(plan.size, len(plan.parts), quiet)
        started = time.monotonic()
        try:
            result = coordinated.run(plan, progress=bar, hasher=hasher)
        finally:
            bar.close()
    return result, time.monotonic() - started, plan.size


def abort(
    uri: str, *, env: str, ledger_table: str | None = None, region: str | None = None
) -> tuple[list[str], int]:
    place = target(uri, env, ledger_table, region)
    coordinated = CoordinatedUpload(
        S3Multipart(place.s3, place.bucket, place.key),
        UploadLedger(place.db, place.ledger_table, place.bucket, place.key),
    )
    return coordinated.abort()


def final_line(result: UploadResult, seconds: float, size: int) -> str:
    rate = size / max(seconds, 1e-6) / 1e6
    head = (
        f"{result.uri}: {size / 1e6:,.1f} MB ({size:,} bytes), {result.uploaded + result.skipped} parts "
        f"({result.uploaded} uploaded, {result.skipped} already there), {seconds:.1f} s, {rate:,.1f} MB/s"
    )
    if result.completed:
        return f"{head} — completed the object ({result.total} parts)"
    if not result.missing:
        return f"{head} — the object is complete ({result.total} parts; completed by another process)"
    return (
        f"{head} — {result.recorded} of {result.total} parts recorded; waiting for parts "
        f"{result.missing} from other processes"
    )
