"""The Lambda package: PyPI wheels for the Lambda platform plus runtime/'s code, built without Docker.

`pip install --platform manylinux… --only-binary=:all: --python-version 3.12 --target DIR`
resolves `runtime/requirements.txt` under the repository's full pin list (constraints.txt,
botocore included) to wheels built for the function's architecture, whatever machine runs the
synth: no Docker, no QEMU. Docker (the Lambda build image running the same pip command) is
CDK's fallback only when this Python has no pip.

Every module is precompiled by a CPython 3.12 (Lambda's interpreter: `python312()` finds one) into
unchecked-hash .pyc files whose paths read /var/task/…: Lambda's code directory is read-only, so
without them every cold start compiles every module it imports again.

Built packages are cached under `.cache/lambda-packages/<key>` (the key hashes the runtime code,
both requirement files and the architecture), so a synth or a test session builds each
architecture once.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

ROOT: Final[Path] = Path(__file__).resolve().parent.parent
RUNTIME_ROOT: Final[Path] = ROOT / "runtime"
REQUIREMENTS: Final[Path] = RUNTIME_ROOT / "requirements.txt"
CONSTRAINTS: Final[Path] = ROOT / "constraints.txt"
CACHE_DIR: Final[Path] = ROOT / ".cache" / "lambda-packages"
# The runtime's code packages (the handlers import only these and the pinned distributions).
CODE_PACKAGES: Final[tuple[str, ...]] = ("adapters", "handlers", "logic", "shards")
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


def pip_arguments(architecture: str, target: str, requirements: str, constraints: str) -> list[str]:
    """`pip install` arguments for the Lambda platform: binary wheels only, never the host's."""
    machine = MACHINES[architecture]
    platforms = [arg for tag in PLATFORM_TAGS for arg in ("--platform", f"{tag}_{machine}")]
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
        "-r",
        requirements,
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


def package_key(architecture: str) -> str:
    """Hash of everything the package is built from: runtime code, requirements, constraints, and
    whether a CPython 3.12 precompiles it."""
    compiled = "pyc" if python312() else "no-pyc"
    digest = hashlib.sha256(f"{architecture}/{PYTHON_VERSION}/{PLATFORM_TAGS}/{compiled}".encode())
    files = [REQUIREMENTS, CONSTRAINTS]
    for package in CODE_PACKAGES:
        files.extend(sorted(p for p in (RUNTIME_ROOT / package).rglob("*.py") if p.is_file()))
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def tree_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and not p.is_symlink())


def build_package(architecture: str, cache: Path = CACHE_DIR) -> Path:
    """The package directory for `architecture`, built once per key and then taken from `cache`."""
    key = f"{architecture}-{package_key(architecture)}"
    built = cache / key
    if (built / STAMP).exists():
        return built
    cache.mkdir(parents=True, exist_ok=True)
    # Build beside the entry and rename it into place: parallel test workers never see half a package.
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=cache))
    try:
        arguments = pip_arguments(architecture, str(scratch), str(REQUIREMENTS), str(CONSTRAINTS))
        done = subprocess.run(
            [sys.executable, "-m", "pip", *arguments], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            tail = "\n".join(line for line in done.stderr.splitlines() if "is ignored" not in line)[-2000:]
            raise PackageBuildError(f"pip could not build the {architecture} Lambda package:\n{tail}")
        shutil.rmtree(scratch / "bin", ignore_errors=True)  # console scripts: nothing Lambda runs
        for package in CODE_PACKAGES:
            shutil.copytree(
                RUNTIME_ROOT / package,
                scratch / package,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        _precompile(scratch)
        stamp = {"architecture": architecture, "python": PYTHON_VERSION, "key": key}
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

    def __init__(self, architecture: str) -> None:
        self.architecture = architecture

    def try_bundle(self, output_dir: str, *_options: Any, **_kwargs: Any) -> bool:
        try:
            import pip  # noqa: F401  (only to know whether this Python can build the package)
        except ImportError:
            return False  # CDK then bundles with Docker (the same pip command in the build image)
        source = build_package(self.architecture)
        shutil.copytree(source, output_dir, dirs_exist_ok=True, symlinks=True)
        return True


def lambda_code(architecture: str) -> lambda_.Code:
    """One asset per architecture, shared by every function (they all use runtime/ as their root).

    The asset hash is the package key, so CDK reuses a staged package while its inputs are unchanged.
    """
    docker_command = " && ".join(
        [
            "pip "
            + " ".join(pip_arguments(architecture, "/asset-output", "requirements.txt", "/constraints.txt")),
            "cp -r " + " ".join(CODE_PACKAGES) + " /asset-output/",
            "python " + " ".join(compile_arguments("/asset-output")),
            f"echo '{json.dumps({'architecture': architecture, 'python': PYTHON_VERSION})}' "
            f"> /asset-output/{STAMP}",
        ]
    )
    return lambda_.Code.from_asset(
        str(RUNTIME_ROOT),
        asset_hash=f"{architecture}-{package_key(architecture)}",
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        exclude=["**/__pycache__", "*.pyc", "tests"],
        bundling=cdk.BundlingOptions(
            image=lambda_.Runtime.PYTHON_3_12.bundling_image,
            local=LocalPackage(architecture),
            command=["bash", "-c", docker_command],
            volumes=[cdk.DockerVolume(host_path=str(CONSTRAINTS), container_path="/constraints.txt")],
            environment={"PIP_CACHE_DIR": "/tmp/pip-cache"},
        ),
    )


def is_bundled(staged: str | os.PathLike[str]) -> bool:
    """Whether a staged asset directory is a built package (unbundled ones are runtime/ itself)."""
    return (Path(staged) / STAMP).exists()
