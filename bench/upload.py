"""`make bench-upload`: `mapload upload` with 1, 4 and 8 parts in flight against boto3's
upload_file (s3transfer, its defaults), on one local server, in one run; then how fast
Prepare decompresses (gzip, zip) into a multipart object. Prints tables; asserts nothing.
`make bench` prints one row of it (`table`): both commands as a user runs them, several runs each.

Each upload runs in its own process so its peak RSS (getrusage of that child) is its own. The
server is `mapload serve` (moto with the emulator's DynamoDB patches): a plain moto server applies
concurrent UpdateItems non-atomically, so it lost parts' counts and left the object uncompleted.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mapload.sample import postcodes

ROOT = Path(__file__).resolve().parent.parent
CHECKOUT = f"{ROOT}{os.pathsep}{ROOT / 'runtime'}"
MAPLOAD = ROOT / ".venv" / "bin" / "mapload"  # the command as `make setup` installs it
BOTO3_UPLOAD = (
    "import sys, boto3\n"
    "boto3.client('s3').upload_file(sys.argv[1], sys.argv[2], sys.argv[3])\n"  # TransferConfig defaults
)
PREPARE = (
    "import json, sys, time\n"
    "from mapload import RUNTIME_DIR\n"
    "from adapters import clients\n"
    "from adapters.s3 import S3Store\n"
    "from archives.service import prepare\n"
    "from handlers.settings import PrepareSettings\n"
    "settings = PrepareSettings(\n"
    "    source_buckets=frozenset(['bench-src']), staging_bucket='bench-stg',\n"
    "    table_key={'pk': 'S', 'sk': 'S'},\n"
    ")\n"
    "spec = {'format': 'csv', 'source': sys.argv[1], 'dynamodb': {'key': {'pk': '{a}', 'sk': 'x'}}}\n"
    "event = {'input': spec, 'execution': {'name': sys.argv[2]}}\n"
    "started = time.monotonic()\n"
    "result = prepare(event, settings, clients.s3(), S3Store(clients.s3()))\n"
    "print(json.dumps({'seconds': time.monotonic() - started, **result}))\n"
)


SERVED = "export AWS_ENDPOINT_URL_S3="


def _default_mib() -> int:
    """`mapload upload`'s default part size, MiB (importing mapload put runtime/ on sys.path)."""
    from logic.parts import DEFAULT_PART_BYTES, MIB

    return DEFAULT_PART_BYTES // MIB


@contextlib.contextmanager
def serving() -> Iterator[tuple[dict[str, str], Any]]:
    """`mapload serve --port 0` in its own process: the environment that points a child command
    at it, and an S3 client for this process."""
    server = subprocess.Popen(
        [sys.executable, "-m", "mapload.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": CHECKOUT},
    )
    try:
        assert server.stdout is not None
        endpoint = next(
            (line.strip()[len(SERVED) :] for line in server.stdout if line.startswith(SERVED)), ""
        )
        if not endpoint:
            raise SystemExit("mapload serve did not start")
        env = {
            **os.environ,
            "PYTHONPATH": CHECKOUT,  # the commands run this checkout's code
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        yield env, s3
    finally:
        server.terminate()
        server.wait(timeout=30)


def _mapload(source: Path, key: str, *options: str) -> list[str]:
    command = [str(MAPLOAD)] if MAPLOAD.exists() else [sys.executable, "-m", "mapload.cli"]
    return [*command, "upload", str(source), f"s3://bench/{key}", "--env", "local", "--quiet", *options]


def _source(path: Path, size: int) -> Path:
    """`size` bytes of postcode-like rows: 4 MiB of them, repeated (gzip's 32 KiB window sees no
    repetition, so it compresses, and decompresses, like real data)."""
    block = b"postcode,latitude,longitude\n" + b"".join(
        f"{code},{lat},{lon}\n".encode() for code, lat, lon in postcodes(120_000, 7)
    )
    with path.open("wb") as sink:
        while sink.tell() < size:
            sink.write(block[: size - sink.tell()])
    return path


def compare(size_mib: int = 512, runs: int = 5) -> dict[str, Any]:
    """`mapload upload FILE s3://... --env local` (its defaults) and boto3's upload_file of the same
    file to the same server, each as a command, alternating, `runs` times: the median seconds."""
    times: dict[str, list[float]] = {"mapload": [], "boto3": []}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mapload-bench-upload-") as work, serving() as (env, s3):
        s3.create_bucket(Bucket="bench")
        source = _source(Path(work) / "source.csv", size_mib * 2**20)
        commands = {
            "mapload": _mapload(source, "mapload"),
            "boto3": [sys.executable, "-c", BOTO3_UPLOAD, str(source), "bench", "boto3"],
        }
        for _ in range(runs):
            for name, command in commands.items():
                times[name].append(_run(command, env)[0])
                assert s3.head_object(Bucket="bench", Key=name)["ContentLength"] == size_mib * 2**20
                s3.delete_object(Bucket="bench", Key=name)  # keep the server's memory flat
    mapload, boto3 = statistics.median(times["mapload"]), statistics.median(times["boto3"])
    return {
        "size_mib": size_mib,
        "runs": runs,
        "seconds": {"mapload": mapload, "boto3": boto3},
        "all": times,
        "load": (load, os.getloadavg()[0]),
    }


def table(size_mib: int = int(os.environ.get("UPLOAD_MIB", "512")), runs: int = 9) -> str:
    """`make bench`'s upload row: MiB/s of each command (median of `runs`; single runs on this
    2-core machine vary by ±30 %, so the spread is printed beside it) and their ratio."""
    result = compare(size_mib, runs)
    mapload, boto3 = result["seconds"]["mapload"], result["seconds"]["boto3"]

    def spread(name: str) -> str:
        return f"{min(result['all'][name]):.2f}–{max(result['all'][name]):.2f}"

    return "\n".join(
        [
            f"Upload of one {size_mib:,} MiB file to `mapload serve` on 127.0.0.1, each as a command, "
            f"median of {runs} alternating runs (load average {result['load'][0]:.1f} before, "
            f"{result['load'][1]:.1f} after):",
            "",
            "| uploader | seconds | single runs, s | MiB/s | × upload_file |",
            "|---|---:|---:|---:|---:|",
            f"| `mapload upload --env local` (8 in flight, {_default_mib()} MiB parts, ledger) "
            f"| {mapload:.2f} | {spread('mapload')} | {size_mib / mapload:,.0f} | {boto3 / mapload:.2f} |",
            f"| boto3 `upload_file` (s3transfer defaults) | {boto3:.2f} | {spread('boto3')} "
            f"| {size_mib / boto3:,.0f} | 1.00 |",
        ]
    )


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    assert process.stdout is not None
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - started
    out = process.stdout.read().decode()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{out[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, out  # Linux: ru_maxrss in KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=int(os.environ.get("SIZE_MIB", "256")))
    parser.add_argument("--part-size-mib", type=int, default=_default_mib())
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mapload-bench-"))
    try:
        with serving() as (env, s3):
            _tables(args, work, env, s3)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _tables(args: argparse.Namespace, work: Path, env: dict[str, str], s3: Any) -> None:
    for bucket in ("bench", "bench-src", "bench-stg"):
        s3.create_bucket(Bucket=bucket)
    size = args.size_mib * 2**20
    source = _source(work / "source.csv", size)
    _upload_table(args, env, s3, source, size)
    _prepare_table(work, env, s3, source, size / 1e6)


def _upload_table(args: argparse.Namespace, env: dict[str, str], s3: Any, source: Path, size: int) -> None:
    """`mapload upload` at 1, 4 and 8 parts in flight beside boto3's upload_file."""
    mb = size / 1e6
    rows: list[tuple[str, str, float, float, float]] = []
    baseline = _run([sys.executable, "-c", "import boto3"], env)[1]
    for in_flight in (1, 4, 8):
        key = f"upload-{in_flight}"
        seconds, peak, _ = _run(
            _mapload(source, key, "--in-flight", str(in_flight), "--part-size-mib", str(args.part_size_mib)),
            env,
        )
        assert s3.head_object(Bucket="bench", Key=key)["ContentLength"] == size
        s3.delete_object(Bucket="bench", Key=key)  # keep the server's memory flat
        rows.append(("mapload upload", f"{in_flight}", seconds, mb / seconds, peak))
    seconds, peak, _ = _run([sys.executable, "-c", BOTO3_UPLOAD, str(source), "bench", "boto3"], env)
    assert s3.head_object(Bucket="bench", Key="boto3")["ContentLength"] == size
    s3.delete_object(Bucket="bench", Key="boto3")
    rows.append(("boto3 upload_file (s3transfer defaults)", "10 threads, 8 MiB", seconds, mb / seconds, peak))

    print(f"\nmapload upload vs boto3 upload_file: {mb:,.0f} MB file, `mapload serve` on 127.0.0.1")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"mapload part size {args.part_size_mib} MiB; peak RSS of `python -c 'import boto3'`: ", end="")
    print(f"{baseline:.0f} MiB\n")
    print(f"| {'uploader':<40} | {'parts in flight':<17} | {'seconds':>7} | {'MB/s':>6} ", end="")
    print(f"| {'peak RSS MiB':>12} |")
    print(f"|{'-' * 42}|{'-' * 19}|{'-' * 8}:|{'-' * 7}:|{'-' * 13}:|")
    for name, flight, secs, rate, peak_mib in rows:
        print(f"| {name:<40} | {flight:<17} | {secs:7.1f} | {rate:6.1f} | {peak_mib:12.0f} |")


def _prepare_table(work: Path, env: dict[str, str], s3: Any, source: Path, mb: float) -> None:
    """Prepare: decompress from the source bucket into a multipart object in staging."""
    gz = work / "source.csv.gz"
    with source.open("rb") as raw, gzip.open(gz, "wb", compresslevel=6) as packed:
        shutil.copyfileobj(raw, packed, 2**20)
    zipped = work / "source.zip"
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(source, "source.csv")
    prepared: list[tuple[str, int, float, float, float]] = []
    for path in (gz, zipped):
        s3.upload_file(str(path), "bench-src", path.name)
        _, peak, out = _run(
            [sys.executable, "-c", PREPARE, f"s3://bench-src/{path.name}", f"bench-{path.suffix[1:]}"],
            env,
        )
        inner = float(json.loads(out.strip().splitlines()[-1])["seconds"])
        prepared.append((path.name, path.stat().st_size, inner, mb / inner, peak))
    print(f"\nPrepare (archives.service.prepare): {mb:,.0f} MB plain, decompressed from S3 ", end="")
    print("into a multipart object in staging")
    print(f"| {'source':<16} | {'compressed MB':>13} | {'seconds':>7} | {'plain MB/s':>10} ", end="")
    print(f"| {'peak RSS MiB':>12} |")
    print(f"|{'-' * 18}|{'-' * 14}:|{'-' * 8}:|{'-' * 11}:|{'-' * 13}:|")
    for name, packed_size, secs, rate, peak_mib in prepared:
        print(f"| {name:<16} | {packed_size / 1e6:13.1f} | {secs:7.1f} | {rate:10.1f} | {peak_mib:12.0f} |")
    slowest = min(rate for *_, rate, _ in prepared)
    print(
        f"\nAt {slowest:,.0f} MB/s one Prepare writes about {slowest * 840 / 1000:,.0f} GB of plain data "
        "in a 15-minute Lambda (840 s of work)."
    )


if __name__ == "__main__":
    main()
