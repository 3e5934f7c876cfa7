"""`make bench-coldstart`: how long each function's module takes to import in Lambda's CPython 3.12,
from the package as built (precompiled unchecked-hash .pyc) and from the same package without them
(what Lambda ran before: /var/task is read-only, so every cold start compiled every module).

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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacks.bundling import MACHINES, build_package, python312  # noqa: E402
from stacks.loader import HANDLER_INDEX, handler_path  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    python = python312()
    if python is None:
        sys.exit("bench-coldstart: no CPython 3.12 found (set MAPLOAD_PYTHON312 or pyenv install 3.12)")
    architecture = next(a for a, m in MACHINES.items() if m == platform.machine() or a == platform.machine())
    built = build_package(architecture)
    with tempfile.TemporaryDirectory() as scratch:
        bare = Path(scratch) / "package"
        shutil.copytree(built, bare, ignore=shutil.ignore_patterns("__pycache__"))
        modules = sorted({handler_path(name).rpartition(".")[0] for name in HANDLER_INDEX})
        print(f"cold import in {python} (-I -S -B), {architecture} package, min (median) of {runs} runs")
        print(f"{'module':<34}{'without .pyc':>18}{'precompiled':>18}{'saved':>10}")
        for module in modules:
            without = import_seconds(python, bare, module, runs)
            with_pyc = import_seconds(python, built, module, runs)
            print(
                f"{module:<34}{min(without) * 1e3:>9.0f} ({statistics.median(without) * 1e3:>4.0f}) ms"
                f"{min(with_pyc) * 1e3:>9.0f} ({statistics.median(with_pyc) * 1e3:>4.0f}) ms"
                f"{(min(without) - min(with_pyc)) * 1e3:>7.0f} ms"
            )
    print(f"command: python bench/coldstart.py --runs {runs}")


if __name__ == "__main__":
    main()
