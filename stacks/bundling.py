"""The Lambda packages: PyPI wheels for the Lambda platform plus runtime/'s code, built without Docker.

`pip install --platform manylinux… --only-binary=:all: --python-version 3.12 --target DIR`
resolves the package's requirement files (PACKAGES) under the repository's full pin list
(constraints.txt, botocore included) to wheels built for the function's architecture, whatever
machine runs the synth: no Docker, no QEMU. Docker (the Lambda build image running the same pip
command) is CDK's fallback only when this Python has no pip.

Two packages: "core" (runtime/requirements.txt) for every function, and "parquet" (core plus
runtime/requirements-parquet.txt: pyarrow) for the functions that read Parquet (Plan reads
footers, the Worker row groups). Parts of the wheels no function imports (TRIMMED) are removed
after pip, so that both architectures stay well inside Lambda's 250 MB unzipped.

Every module is precompiled by a CPython 3.12 (Lambda's interpreter: `python312()` finds one) into
unchecked-hash .pyc files whose paths read /var/task/…: Lambda's code directory is read-only, so
without them every cold start compiles every module it imports again.

Built packages are cached under `.cache/lambda-packages/<key>` (the key hashes the runtime code,
the requirement files, the trimmed list and the architecture), so a synth or a test session
builds each package once per architecture.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

ROOT: Final[Path] = Path(__file__).resolve().parent.parent
RUNTIME_ROOT: Final[Path] = ROOT / "runtime"
REQUIREMENTS: Final[Path] = RUNTIME_ROOT / "requirements.txt"
PARQUET_REQUIREMENTS: Final[Path] = RUNTIME_ROOT / "requirements-parquet.txt"
# Each package and the requirement files it is built from (all under constraints.txt).
CORE: Final[str] = "core"
PARQUET: Final[str] = "parquet"
PACKAGES: Final[Mapping[str, tuple[Path, ...]]] = {
    CORE: (REQUIREMENTS,),
    PARQUET: (REQUIREMENTS, PARQUET_REQUIREMENTS),
}
# What no function imports, removed from every package after pip (shell globs relative to the
# package, one directory level: the Docker fallback removes them with `rm -rf` too). The stamp
# records the bytes each pattern removed; tests/infra/test_package.py checks that every pattern
# removes something, that no kept library needs a removed one (ELF DT_NEEDED, both
# architectures) and that pyarrow.parquet reads every codec from the trimmed package.
TRIMMED: Final[tuple[str, ...]] = (
    # C++ headers and sources, Cython sources and declarations: for building against pyarrow.
    "pyarrow/include",
    "pyarrow/src",
    "pyarrow/includes",
    "pyarrow/*.pyx",
    "pyarrow/*.pxd",
    "pyarrow/*.pxi",
    # pyarrow's own test suite.
    "pyarrow/tests",
    "pyarrow/conftest.py",
    "pyarrow/_pyarrow_cpp_tests.*",
    # Arrow Flight (an RPC framework; libarrow_flight alone is ~30 MB): no reader here serves or calls it.
    "pyarrow/flight.py",
    "pyarrow/_flight.*",
    "pyarrow/libarrow_flight.so*",
    "pyarrow/libarrow_python_flight.so*",
    # Copies of libraries under their link-time names (a wheel holds no symlinks): the loader
    # opens each by its soname (libarrow_python.so.2500), which stays.
    "pyarrow/libarrow_python.so",
    "pyarrow/libarrow_python.so.*.*.*",
    "pyarrow/libarrow_python_parquet_encryption.so",
    "pyarrow/libarrow_python_parquet_encryption.so.*.*.*",
    # ORC files, and Azure, GCS and HDFS filesystems: sources here are Parquet objects on S3.
    "pyarrow/orc.py",
    "pyarrow/_orc.*",
    "pyarrow/_dataset_orc.*",
    "pyarrow/_azurefs.*",
    "pyarrow/_gcsfs.*",
    "pyarrow/_hdfs.*",
    # CUDA, JVM and benchmark helpers.
    "pyarrow/cuda.py",
    "pyarrow/jvm.py",
    "pyarrow/benchmark.py",
)
CONSTRAINTS: Final[Path] = ROOT / "constraints.txt"
CACHE_DIR: Final[Path] = ROOT / ".cache" / "lambda-packages"
# The runtime's code packages (the handlers import only these and the pinned distributions).
CODE_PACKAGES: Final[tuple[str, ...]] = (
    "adapters",
    "archives",
    "bulk_puts",
    "graph_loads",
    "handlers",
    "logic",
    "plans",
    "reports",
    "shards",
)
PYTHON_VERSION: Final[str] = "3.12"  # lambda_.Runtime.PYTHON_3_12
# Lambda's python3.12 runs on Amazon Linux 2023 (glibc 2.34): manylinux2014 and manylinux_2_28
# wheels both load there (pyoxigraph 0.5 ships only manylinux_2_28 ones).
PLATFORM_TAGS: Final[tuple[str, ...]] = ("manylinux2014", "manylinux_2_28")
MACHINES: Final[Mapping[str, str]] = {"arm64": "aarch64", "x86_64": "x86_64"}
# Written into every package: what it was built for, from what. Its absence marks an unbundled asset.
STAMP: Final[str] = "mapload-package.json"
# Where Lambda unpacks a function's code: the path tracebacks name.
TASK_ROOT: Final[str] = "/var/task"
# Lambda's limit for a function's unzipped code (and layers).
UNZIPPED_LIMIT_BYTES: Final[int] = 250 * 1024 * 1024


class PackageBuildError(RuntimeError):
    """pip could not assemble the package (the message ends with pip's own last lines)."""


def pip_arguments(architecture: str, target: str, requirements: Sequence[str], constraints: str) -> list[str]:
    """`pip install` arguments for the Lambda platform: binary wheels only, never the host's."""
    machine = MACHINES[architecture]
    platforms = [arg for tag in PLATFORM_TAGS for arg in ("--platform", f"{tag}_{machine}")]
    files = [arg for path in requirements for arg in ("-r", path)]
    return [
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",  # the synth's interpreter's .pyc would be useless: _precompile uses 3.12
        *platforms,
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        "--target",
        target,
        *files,
        "-c",
        constraints,
    ]


@functools.cache
def python312() -> str | None:
    """A CPython 3.12 (Lambda's python3.12): $MAPLOAD_PYTHON312, python3.12 on PATH, or pyenv's 3.12.x."""
    candidates = [os.environ.get("MAPLOAD_PYTHON312"), shutil.which("python3.12")]
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip()
        pyenv_root = root or pyenv_root
    candidates += [
        str(p) for p in sorted(Path(pyenv_root).glob("versions/3.12*/bin/python3.12"), reverse=True)
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            version = subprocess.run(
                [candidate, "-I", "-S", "-c", "import sys; print(sys.version_info[:2])"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            if version == "(3, 12)":  # a pyenv shim without 3.12 selected prints nothing
                return candidate
    return None


def compile_arguments(directory: str) -> list[str]:
    """`python3.12 -m compileall` arguments: every module of `directory`, named as under /var/task.

    Unchecked-hash pycs are used without looking at the source's mtime (unzipping may change it).
    """
    return [
        *("-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"),
        *("-s", directory, "-p", TASK_ROOT, directory),
    ]


def package_key(architecture: str, package: str = CORE) -> str:
    """Hash of everything the package is built from: runtime code, requirements, constraints, the
    trimmed list, and whether a CPython 3.12 precompiles it."""
    compiled = "pyc" if python312() else "no-pyc"
    recipe = f"{architecture}/{package}/{PYTHON_VERSION}/{PLATFORM_TAGS}/{compiled}/{TRIMMED}"
    digest = hashlib.sha256(recipe.encode())
    files = [*PACKAGES[package], CONSTRAINTS]
    for code in CODE_PACKAGES:
        files.extend(sorted(p for p in (RUNTIME_ROOT / code).rglob("*.py") if p.is_file()))
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def tree_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and not p.is_symlink())


def trim(directory: Path) -> dict[str, int]:
    """Remove TRIMMED from a package: the bytes each pattern removed."""
    removed: dict[str, int] = {}
    for pattern in TRIMMED:
        removed[pattern] = 0
        for path in sorted(directory.glob(pattern)):
            if path.is_dir() and not path.is_symlink():
                removed[pattern] += tree_size(path)
                shutil.rmtree(path)
            else:
                removed[pattern] += path.lstat().st_size
                path.unlink()
    return removed


def asset_name(architecture: str, package: str) -> str:
    """The package's cache entry and CDK asset hash: what it is for and the hash of its inputs."""
    suffix = "" if package == CORE else f"-{package}"
    return f"{architecture}{suffix}-{package_key(architecture, package)}"


def build_package(architecture: str, package: str = CORE, cache: Path = CACHE_DIR) -> Path:
    """The package directory for `architecture`, built once per key and then taken from `cache`."""
    key = asset_name(architecture, package)
    built = cache / key
    if (built / STAMP).exists():
        return built
    cache.mkdir(parents=True, exist_ok=True)
    # Build beside the entry and rename it into place: parallel test workers never see half a package.
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=cache))
    try:
        requirements = [str(path) for path in PACKAGES[package]]
        arguments = pip_arguments(architecture, str(scratch), requirements, str(CONSTRAINTS))
        done = subprocess.run(
            [sys.executable, "-m", "pip", *arguments], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            tail = "\n".join(line for line in done.stderr.splitlines() if "is ignored" not in line)[-2000:]
            raise PackageBuildError(f"pip could not build the {architecture} Lambda package:\n{tail}")
        shutil.rmtree(scratch / "bin", ignore_errors=True)  # console scripts: nothing Lambda runs
        trimmed = trim(scratch)
        for code in CODE_PACKAGES:
            shutil.copytree(
                RUNTIME_ROOT / code,
                scratch / code,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        _precompile(scratch)
        stamp = {
            "architecture": architecture,
            "package": package,
            "python": PYTHON_VERSION,
            "key": key,
            "trimmed": {pattern: size for pattern, size in trimmed.items() if size},
        }
        (scratch / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
        try:
            scratch.rename(built)
        except OSError:  # a parallel build got there first: same inputs, same package
            shutil.rmtree(scratch, ignore_errors=True)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return built


def _precompile(directory: Path) -> None:
    """Compile every module with CPython 3.12 when there is one (else Lambda compiles at cold start)."""
    interpreter = python312()
    if interpreter is None:
        return
    done = subprocess.run(
        [interpreter, *compile_arguments(str(directory))], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise PackageBuildError(f"python3.12 could not compile the package:\n{done.stdout[-2000:]}")


@jsii.implements(cdk.ILocalBundling)
class LocalPackage:
    """CDK local bundling: copy the (cached) package for the architecture into the asset directory."""

    def __init__(self, architecture: str, package: str = CORE) -> None:
        self.architecture = architecture
        self.package = package

    def try_bundle(self, output_dir: str, *_options: Any, **_kwargs: Any) -> bool:
        try:
            import pip  # noqa: F401  (only to know whether this Python can build the package)
        except ImportError:
            return False  # CDK then bundles with Docker (the same pip command in the build image)
        source = build_package(self.architecture, self.package)
        shutil.copytree(source, output_dir, dirs_exist_ok=True, symlinks=True)
        return True


@functools.cache
def local_package(architecture: str, package: str) -> LocalPackage:
    """One LocalPackage per package, held here for the app's life: jsii finds the Python object CDK
    calls back by reference, and with two packages a collected one's reference reached the other."""
    return LocalPackage(architecture, package)


def lambda_code(architecture: str, package: str = CORE) -> lambda_.Code:
    """One asset per package and architecture, shared by the functions that use it (all use
    runtime/ as their root).

    The asset hash is the package key, so CDK reuses a staged package while its inputs are unchanged.
    """
    requirements = [path.name for path in PACKAGES[package]]
    stamp = {"architecture": architecture, "package": package, "python": PYTHON_VERSION}
    docker_command = " && ".join(
        [
            "pip " + " ".join(pip_arguments(architecture, "/asset-output", requirements, "/constraints.txt")),
            "(cd /asset-output && rm -rf bin " + " ".join(TRIMMED) + ")",
            "cp -r " + " ".join(CODE_PACKAGES) + " /asset-output/",
            "python " + " ".join(compile_arguments("/asset-output")),
            f"echo '{json.dumps(stamp)}' > /asset-output/{STAMP}",
        ]
    )
    return lambda_.Code.from_asset(
        str(RUNTIME_ROOT),
        asset_hash=asset_name(architecture, package),
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        exclude=["**/__pycache__", "*.pyc", "tests"],
        bundling=cdk.BundlingOptions(
            image=lambda_.Runtime.PYTHON_3_12.bundling_image,
            local=local_package(architecture, package),
            command=["bash", "-c", docker_command],
            volumes=[cdk.DockerVolume(host_path=str(CONSTRAINTS), container_path="/constraints.txt")],
            environment={"PIP_CACHE_DIR": "/tmp/pip-cache"},
        ),
    )


def is_bundled(staged: str | os.PathLike[str]) -> bool:
    """Whether a staged asset directory is a built package (unbundled ones are runtime/ itself)."""
    return (Path(staged) / STAMP).exists()
