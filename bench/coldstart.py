"""`make bench-coldstart`: each function's cold start as far as its package decides it, in Lambda's
CPython 3.12: the package's unzipped and zipped size (what Lambda downloads and unpacks before the
runtime starts) and the import of the function's module, from its package as built (precompiled
unchecked-hash .pyc), from the same package without them (what Lambda ran before: /var/task is
read-only, so every cold start compiled every module), and from the package with pyarrow (the
layout where every function shares it; stacks/bundling.py PACKAGES). The last row is what a
Parquet job adds to Plan and the Worker: `import pyarrow.parquet`.

Each import runs in a fresh `python3.12 -I -S -B` with only the package on sys.path; the figure is
the minimum of N runs (the least disturbed), and the median beside it.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacks.bundling import MACHINES, PACKAGES, PARQUET, build_package, python312, tree_size  # noqa: E402
from stacks.loader import HANDLER_INDEX, handler_path  # noqa: E402
from stacks.loader_functions import package_of  # noqa: E402

TIMED = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); t = time.perf_counter(); import {module}; "
    "print(time.perf_counter() - t)"
)


def import_seconds(python: str, package: Path, module: str, runs: int) -> list[float]:
    return [
        float(
            subprocess.run(
                [python, "-I", "-S", "-B", "-c", TIMED.format(module=module), str(package)],
                capture_output=True,
                text=True,
                check=True,
                cwd="/",
            ).stdout
        )
        for _ in range(runs)
    ]


def zipped_size(package: Path, scratch: Path) -> int:
    """The package as CDK uploads it (a deflated zip)."""
    archive = scratch / f"{package.name}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted(package.rglob("*")):
            if path.is_file():
                zipped.write(path, path.relative_to(package))
    return archive.stat().st_size


def timing(seconds: list[float]) -> str:
    return f"{min(seconds) * 1e3:>9.0f} ({statistics.median(seconds) * 1e3:>4.0f}) ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    python = python312()
    if python is None:
        sys.exit("bench-coldstart: no CPython 3.12 found (set MAPLOAD_PYTHON312 or pyenv install 3.12)")
    architecture = next(a for a, m in MACHINES.items() if m == platform.machine() or a == platform.machine())
    built = {package: build_package(architecture, package) for package in PACKAGES}
    with tempfile.TemporaryDirectory() as scratch:
        print(f"{architecture} packages: {'package':<10}{'unzipped':>12}{'zipped':>12}")
        for package, path in built.items():
            unzipped, zipped = tree_size(path) / 2**20, zipped_size(path, Path(scratch)) / 2**20
            print(f"{'':<{len(architecture) + 11}}{package:<10}{unzipped:>8.1f} MiB{zipped:>8.1f} MiB")
        bare = {}
        for package, path in built.items():
            bare[package] = Path(scratch) / package
            shutil.copytree(path, bare[package], ignore=shutil.ignore_patterns("__pycache__"))
        print(f"cold import in {python} (-I -S -B), min (median) of {runs} runs")
        print(f"{'function':<16}{'package':<10}{'without .pyc':>18}{'precompiled':>18}{'with pyarrow':>18}")
        for name in HANDLER_INDEX:
            module, package = handler_path(name).rpartition(".")[0], package_of(name)
            without = import_seconds(python, bare[package], module, runs)
            with_pyc = import_seconds(python, built[package], module, runs)
            shared = with_pyc if package == PARQUET else import_seconds(python, built[PARQUET], module, runs)
            print(f"{name:<16}{package:<10}{timing(without)}{timing(with_pyc)}{timing(shared)}")
        parquet = import_seconds(python, built[PARQUET], "pyarrow.parquet", runs)
        unbuilt = import_seconds(python, bare[PARQUET], "pyarrow.parquet", runs)
        print(f"{'pyarrow.parquet':<16}{PARQUET:<10}{timing(unbuilt)}{timing(parquet)}{timing(parquet)}")
    print(f"command: python bench/coldstart.py --runs {runs}")


if __name__ == "__main__":
    main()
