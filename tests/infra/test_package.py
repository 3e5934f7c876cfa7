"""The Lambda package as Lambda loads it: built the way `cdk deploy` builds it, opened in CPython 3.12.

The machine's own architecture goes through CDK's bundling (a bundled synth, as the CLI runs it)
and is imported in a clean CPython 3.12 (`-I -S`: no site-packages, no user site, no PYTHON*
variables) with only the package on sys.path, as Lambda's python3.12 runtime puts /var/task.
The other architecture cannot run here: every compiled module in it must be built for it
(ELF e_machine) and every pinned distribution must be there at its pinned version.
Packages are built once per session and cached by the hash of their inputs (stacks/bundling.py).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import app as app_module
from stacks import bundling
from stacks.bundling import CONSTRAINTS, MACHINES, REQUIREMENTS, RUNTIME_ROOT, STAMP, build_package, tree_size
from stacks.loader import HANDLER_INDEX, handler_path
from tests.infra.support import ROOT

# One worker builds and synthesizes (a session fixture runs once per xdist worker).
pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("package")]

HOST = {"x86_64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine()]
OTHER = "arm64" if HOST == "x86_64" else "x86_64"
# ELF e_machine of each Lambda architecture.
E_MACHINE = {"x86_64": 62, "arm64": 183}


def python312() -> str:
    """Lambda's interpreter, as the package build finds it (stacks/bundling.py)."""
    found = bundling.python312()
    if found is None:
        pytest.fail(
            "no CPython 3.12 (Lambda's python3.12) found: set MAPLOAD_PYTHON312, put python3.12 on PATH "
            "or `pyenv install 3.12`"
        )
    return found


IMPORT_ALL = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
found = {}
for module in json.loads(sys.argv[2]):
    try:
        found[module] = callable(getattr(importlib.import_module(module), "lambda_handler", None))
    except Exception as error:
        found[module] = f"{type(error).__name__}: {error}"
print(json.dumps(found))
"""


def import_handlers(package: Path) -> dict[str, Any]:
    """Import every function's handler module in a clean CPython 3.12 with only `package` added."""
    modules = sorted(handler_path(name).rpartition(".")[0] for name in HANDLER_INDEX)
    done = subprocess.run(
        [python312(), "-I", "-S", "-c", IMPORT_ALL, str(package), json.dumps(modules)],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
        env={"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "eu-west-2"},
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def pins() -> dict[str, str]:
    """Every `name==version` of constraints.txt, by normalized name."""
    found: dict[str, str] = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
        if match:
            found[_normalized(match[1])] = match[2]
    return found


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(package: Path) -> dict[str, str]:
    """name -> version of every *.dist-info in the package."""
    found: dict[str, str] = {}
    for info in package.glob("*.dist-info"):
        metadata = (info / "METADATA").read_text(encoding="utf-8")
        name = re.search(r"^Name: (.+)$", metadata, re.M)
        version = re.search(r"^Version: (.+)$", metadata, re.M)
        assert name and version, info
        found[_normalized(name[1].strip())] = version[1].strip()
    return found


def e_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")


@pytest.fixture(scope="session")
def bundled_host(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """A synth that bundles (as `cdk synth` does) for this machine's architecture."""
    built = app_module.build_app(
        {"env": "dev", "mapload:lambda_architecture": HOST},
        bundle=True,
        outdir=str(tmp_path_factory.mktemp("bundled")),
    )
    built.synth()
    sizes, refusals = app_module.lambda_packages(built, ["**"])
    assert not refusals
    assert len(sizes) == 1, sizes  # one package shared by the six functions
    return built, only_package(Path(built.outdir))


def only_package(outdir: Path) -> Path:
    """The one Lambda package staged in an assembly (CDK's own bucket-emptying handler is another asset)."""
    packages = [p for p in outdir.iterdir() if p.name.startswith("asset.") and (p / STAMP).exists()]
    assert len(packages) == 1, packages
    return packages[0]


@pytest.fixture(scope="session")
def other_package() -> Path:
    return build_package(OTHER)


def test_every_handler_imports_from_the_bundled_package_in_a_clean_python312(
    bundled_host: tuple[Any, Path],
) -> None:
    _, package = bundled_host
    assert json.loads((package / STAMP).read_text())["architecture"] == HOST
    found = import_handlers(package)
    assert found == {module: True for module in found}, found
    assert len(found) == len(HANDLER_INDEX)


def test_runtime_without_its_dependencies_does_not_import() -> None:
    # What an unbundled deploy would upload (runtime/ as is): the check above would catch it.
    found = import_handlers(RUNTIME_ROOT)
    assert any("ModuleNotFoundError" in str(result) for result in found.values()), found


def test_bundled_functions_use_the_package_for_the_configured_architecture(
    bundled_host: tuple[Any, Path],
) -> None:
    built, package = bundled_host
    template = json.loads(
        next((Path(built.outdir) / "assembly-Mapload-dev").glob("*Loader*.template.json")).read_text()
    )
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == len(HANDLER_INDEX)
    for function in functions:
        assert function["Properties"]["Architectures"] == [HOST]
        assert function["Properties"]["Runtime"] == "python3.12"
        # Every function points at the one staged package.
        assert function["Properties"]["Code"]["S3Key"] == package.name.removeprefix("asset.") + ".zip"


CHECK_PYCS = """
import importlib.util, json, marshal, sys
from pathlib import Path
package = Path(sys.argv[1])
missing, checked, named = [], [], {}
for source in sorted(package.rglob("*.py")):
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.is_file():
        missing.append(str(source.relative_to(package)))
        continue
    data = cached.read_bytes()
    # PEP 552: magic, then flags (bit 0 hash-based, bit 1 check the source).
    checked.append(data[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(data[4:8], "little") == 1)
    if source.parent.name == "handlers":
        named[source.name] = marshal.loads(data[16:]).co_filename
print(json.dumps({"missing": missing, "checked": checked, "named": named}))
"""


def test_every_module_ships_precompiled_for_lambdas_python(bundled_host: tuple[Any, Path]) -> None:
    # Lambda's /var/task is read-only: a module without its 3.12 .pyc is compiled at every cold start.
    package = bundled_host[1]
    done = subprocess.run(
        [python312(), "-I", "-S", "-c", CHECK_PYCS, str(package)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["missing"] == []
    assert len(found["checked"]) > 500 and all(found["checked"]), "unchecked-hash pycs for CPython 3.12"
    assert found["named"]["worker.py"] == "/var/task/handlers/worker.py"  # tracebacks name Lambda's path


@pytest.mark.parametrize("architecture", [HOST, OTHER])
def test_every_compiled_module_is_for_the_architecture(
    architecture: str, bundled_host: tuple[Any, Path]
) -> None:
    package = bundled_host[1] if architecture == HOST else build_package(architecture)
    compiled = [p for p in package.rglob("*.so*") if p.is_file()]
    assert compiled, "pyoxigraph at least is compiled"
    wrong = [str(p.relative_to(package)) for p in compiled if e_machine(p) != E_MACHINE[architecture]]
    assert not wrong
    assert all(MACHINES[architecture] in p.name for p in package.glob("pyoxigraph/*.so"))


@pytest.mark.parametrize("architecture", [HOST, OTHER])
def test_every_pinned_distribution_is_present_at_its_pinned_version(architecture: str) -> None:
    package = build_package(architecture)
    present = distributions(package)
    pinned = pins()
    required = [
        _normalized(re.split(r"[=<>~!; ]", line, maxsplit=1)[0])
        for line in REQUIREMENTS.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    # The runtime's requirements, and what they pull in (botocore: adapters/dynamodb_wire.py
    # relies on its internals), each exactly as constraints.txt pins it.
    assert {"botocore", "aws-lambda-powertools", "pyoxigraph", "boto3", "s3transfer"} <= set(present)
    assert set(required) <= set(present)
    assert {name: present[name] for name in present} == {name: pinned.get(name) for name in present}
    for code in ("adapters", "handlers", "logic", "shards"):
        assert (package / code / "__init__.py").is_file()
    stray = [p.name for p in package.rglob("*.pyc") if not p.name.endswith(".cpython-312.pyc")]
    assert not stray, "no .pyc of the build machine's Python"
    assert not (package / "bin").exists()


def test_packages_fit_lambdas_unzipped_limit(bundled_host: tuple[Any, Path], other_package: Path) -> None:
    for package in (bundled_host[1], other_package):
        assert tree_size(package) < 100 * 2**20  # 250 MiB is Lambda's limit; ~45 MiB today


def test_cli_synth_bundles_what_it_selects_and_prints_the_size(tmp_path: Path) -> None:
    # `npx cdk synth -c env=dev 'Mapload-dev/*'`, exactly as the README gives it (no variables),
    # for the architecture this machine cannot run.
    outdir = tmp_path / "cdk.out"
    done = subprocess.run(
        [
            str(ROOT / "node_modules" / ".bin" / "cdk"),
            "synth",
            "-c",
            "env=dev",
            "-c",
            f"mapload:lambda_architecture={OTHER}",
            "Mapload-dev/*",
            "-o",
            str(outdir),
            "--quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"Mapload-dev/Loader Lambda package asset\.\w+: \d+\.\d MiB unzipped", done.stderr)
    assert json.loads((only_package(outdir) / STAMP).read_text())["architecture"] == OTHER
