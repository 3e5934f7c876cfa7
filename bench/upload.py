"""`make bench-upload`: `mapload upload` with 1, 4 and 8 parts in flight against boto3's
upload_file (s3transfer, its defaults), on one local moto server, in one run; then how fast
Prepare decompresses (gzip, zip) into a multipart object. Prints tables; asserts nothing.

Each upload runs in its own process so its peak RSS (getrusage of that child) is its own.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from mapload.sample import postcodes

ROOT = Path(__file__).resolve().parent.parent
BOTO3_UPLOAD = (
    "import sys, boto3\n"
    "boto3.client('s3').upload_file(sys.argv[1], sys.argv[2], sys.argv[3])\n"  # TransferConfig defaults
)
PREPARE = (
    "import json, sys, time\n"
    "from mapload import RUNTIME_DIR\n"
    "from adapters import clients\n"
    "from adapters.s3 import S3Store\n"
    "from handlers import prepare\n"
    "from handlers.settings import PrepareSettings\n"
    "settings = PrepareSettings(\n"
    "    source_buckets=frozenset(['bench-src']), staging_bucket='bench-stg',\n"
    "    table_key={'pk': 'S', 'sk': 'S'},\n"
    ")\n"
    "spec = {'format': 'csv', 'source': sys.argv[1], 'dynamodb': {'key': {'pk': '{a}', 'sk': 'x'}}}\n"
    "event = {'input': spec, 'execution': {'name': sys.argv[2]}}\n"
    "started = time.monotonic()\n"
    "result = prepare.prepare(event, settings, clients.s3(), S3Store(clients.s3()))\n"
    "print(json.dumps({'seconds': time.monotonic() - started, **result}))\n"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
    parser.add_argument("--part-size-mib", type=int, default=16)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mapload-bench-"))
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    try:
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        for _ in range(100):
            try:
                s3.list_buckets()
                break
            except Exception:
                time.sleep(0.1)
        for bucket in ("bench", "bench-src", "bench-stg"):
            s3.create_bucket(Bucket=bucket)

        source = work / "source.csv"
        size = args.size_mib * 2**20
        # 4 MiB of postcode-like rows, repeated: gzip's 32 KiB window sees no repetition, so it
        # compresses (and decompresses) like real data.
        block = b"postcode,latitude,longitude\n" + b"".join(
            f"{code},{lat},{lon}\n".encode() for code, lat, lon in postcodes(120_000, 7)
        )
        with source.open("wb") as sink:
            while sink.tell() < size:
                sink.write(block[: size - sink.tell()])
        mb = size / 1e6

        rows: list[tuple[str, str, float, float, float]] = []
        baseline = _run([sys.executable, "-c", "import boto3"], env)[1]
        for in_flight in (1, 4, 8):
            key = f"upload-{in_flight}"
            seconds, peak, _ = _run(
                [
                    str(ROOT / ".venv" / "bin" / "mapload"),
                    "upload",
                    str(source),
                    f"s3://bench/{key}",
                    "--env",
                    "local",
                    "--quiet",
                    "--in-flight",
                    str(in_flight),
                    "--part-size-mib",
                    str(args.part_size_mib),
                ],
                env,
            )
            assert s3.head_object(Bucket="bench", Key=key)["ContentLength"] == size
            s3.delete_object(Bucket="bench", Key=key)  # keep the server's memory flat
            rows.append(("mapload upload", f"{in_flight}", seconds, mb / seconds, peak))
        seconds, peak, _ = _run([sys.executable, "-c", BOTO3_UPLOAD, str(source), "bench", "boto3"], env)
        assert s3.head_object(Bucket="bench", Key="boto3")["ContentLength"] == size
        s3.delete_object(Bucket="bench", Key="boto3")
        rows.append(
            ("boto3 upload_file (s3transfer defaults)", "10 threads, 8 MiB", seconds, mb / seconds, peak)
        )

        print(f"\nmapload upload vs boto3 upload_file: {mb:,.0f} MB file, one moto server on 127.0.0.1")
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"mapload part size {args.part_size_mib} MiB; peak RSS of `python -c 'import boto3'`: ", end="")
        print(f"{baseline:.0f} MiB\n")
        print(f"| {'uploader':<40} | {'parts in flight':<17} | {'seconds':>7} | {'MB/s':>6} ", end="")
        print(f"| {'peak RSS MiB':>12} |")
        print(f"|{'-' * 42}|{'-' * 19}|{'-' * 8}:|{'-' * 7}:|{'-' * 13}:|")
        for name, flight, secs, rate, peak_mib in rows:
            print(f"| {name:<40} | {flight:<17} | {secs:7.1f} | {rate:6.1f} | {peak_mib:12.0f} |")

        # Prepare: decompress from the source bucket into a multipart object in staging.
        gz = work / "source.csv.gz"
        with source.open("rb") as raw, gzip.open(gz, "wb", compresslevel=6) as packed:
            shutil.copyfileobj(raw, packed, 2**20)
        zipped = work / "source.zip"
        with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.write(source, "source.csv")
        prepared: list[tuple[str, int, float, float, float]] = []
        for path in (gz, zipped):
            s3.upload_file(str(path), "bench-src", path.name)
            seconds, peak, out = _run(
                [sys.executable, "-c", PREPARE, f"s3://bench-src/{path.name}", f"bench-{path.suffix[1:]}"],
                env,
            )
            inner = float(json.loads(out.strip().splitlines()[-1])["seconds"])
            prepared.append((path.name, path.stat().st_size, inner, mb / inner, peak))
        print(f"\nPrepare (handlers.prepare.prepare): {mb:,.0f} MB plain, decompressed from S3 ", end="")
        print("into a multipart object in staging")
        print(f"| {'source':<16} | {'compressed MB':>13} | {'seconds':>7} | {'plain MB/s':>10} ", end="")
        print(f"| {'peak RSS MiB':>12} |")
        print(f"|{'-' * 18}|{'-' * 14}:|{'-' * 8}:|{'-' * 11}:|{'-' * 13}:|")
        for name, packed_size, secs, rate, peak_mib in prepared:
            print(
                f"| {name:<16} | {packed_size / 1e6:13.1f} | {secs:7.1f} | {rate:10.1f} | {peak_mib:12.0f} |"
            )
        slowest = min(rate for *_, rate, _ in prepared)
        print(
            f"\nAt {slowest:,.0f} MB/s one Prepare writes about {slowest * 840 / 1000:,.0f} GB of plain data "
            "in a 15-minute Lambda (840 s of work)."
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
