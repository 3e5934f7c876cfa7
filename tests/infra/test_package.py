"""The Lambda packages as Lambda loads them: built the way `cdk deploy` builds them, opened in CPython 3.12.

The machine's own architecture goes through CDK's bundling (a bundled synth, as the CLI runs it)
and is imported in a clean CPython 3.12 (`-I -S`: no site-packages, no user site, no PYTHON*
variables) with only the package on sys.path, as Lambda's python3.12 runtime puts /var/task:
every handler from its function's package, and pyarrow.parquet writing and reading every codec
from the package with pyarrow, trimmed as deployed.
The other architecture cannot run here: every compiled module in it must be built for it
(ELF e_machine), find every library it links (ELF DT_NEEDED: nothing trimmed that a kept one
needs), and every pinned distribution must be there at its pinned version.
Packages are built once per session and cached by the hash of their inputs (stacks/bundling.py).
"""

from __future__ import annotations

import json
import os
import platform
import re
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

import app as app_module
from stacks import assembly_checks, bundling
from stacks.bundling import (
    CONSTRAINTS,
    CORE,
    MACHINES,
    PACKAGES,
    PARQUET,
    RUNTIME_ROOT,
    STAMP,
    TRIMMED,
    UNZIPPED_LIMIT_BYTES,
    build_package,
    package_key,
    tree_size,
)
from stacks.loader import HANDLER_INDEX, handler_path
from stacks.loader_functions import package_of
from tests.infra.support import ROOT

# One worker builds and synthesizes (a session fixture runs once per xdist worker).
pytestmark = [pytest.mark.infra, pytest.mark.xdist_group("package")]

HOST = {"x86_64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine()]
OTHER = "arm64" if HOST == "x86_64" else "x86_64"
# ELF e_machine of each Lambda architecture.
E_MACHINE = {"x86_64": 62, "arm64": 183}
# The system libraries a manylinux wheel may link without shipping them (PEP 600's policy), which
# Lambda's Amazon Linux 2023 has; every other library a compiled module needs is in the package.
SYSTEM_LIBRARIES = {
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}


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


def import_handlers(package: Path, names: list[str] | None = None) -> dict[str, Any]:
    """Import handler modules (every function's by default) in a clean CPython 3.12 with only `package`."""
    modules = sorted(handler_path(name).rpartition(".")[0] for name in names or HANDLER_INDEX)
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


def needed_libraries(path: Path) -> list[str]:
    """The DT_NEEDED entries of an ELF64 little-endian shared object (both Lambda architectures)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, path
    (start,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    # (name, type, flags, address, offset, size, link, info, alignment, entry size)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, start + i * entry_size) for i in range(count)]
    found = []
    for section in sections:
        if section[1] != 6:  # SHT_DYNAMIC; its link is the string table its entries point into
            continue
        strings = sections[section[6]][4]
        for offset in range(section[4], section[4] + section[5], 16):
            tag, value = struct.unpack_from("<qQ", data, offset)
            if tag == 1:  # DT_NEEDED
                name = strings + value
                found.append(data[name : data.index(b"\0", name)].decode())
    return found


@pytest.fixture(scope="session")
def bundled_host(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Path]]:
    """A synth that bundles (as `cdk synth` does) for this machine's architecture."""
    built = app_module.build_app(
        {"env": "dev", "mapload:lambda_architecture": HOST, "mapload:graph_enabled": "true"},
        bundle=True,
        outdir=str(tmp_path_factory.mktemp("bundled")),
    )
    built.synth()
    sizes, refusals = assembly_checks.lambda_packages(built, ["**"])
    assert not refusals
    assert len(sizes) == len(PACKAGES), sizes  # each package shared by the functions using it
    return built, staged_packages(Path(built.outdir))


def staged_packages(outdir: Path) -> dict[str, Path]:
    """The Lambda packages staged in an assembly, by name (CDK's bucket-emptying handler is another asset)."""
    packages = [p for p in outdir.iterdir() if p.name.startswith("asset.") and (p / STAMP).exists()]
    found = {json.loads((p / STAMP).read_text())["package"]: p for p in packages}
    assert sorted(found) == sorted(PACKAGES) and len(packages) == len(PACKAGES), packages
    return found


@pytest.fixture(scope="session")
def other_packages() -> dict[str, Path]:
    return {package: build_package(OTHER, package) for package in PACKAGES}


def test_every_handler_imports_from_its_bundled_package_in_a_clean_python312(
    bundled_host: tuple[Any, dict[str, Path]],
) -> None:
    _, packages = bundled_host
    found: dict[str, Any] = {}
    for package, path in packages.items():
        assert json.loads((path / STAMP).read_text())["architecture"] == HOST
        found.update(import_handlers(path, [name for name in HANDLER_INDEX if package_of(name) == package]))
    assert found == {module: True for module in found}, found
    assert len(found) == len(HANDLER_INDEX)
    assert {package_of(name) for name in HANDLER_INDEX} == set(PACKAGES)


READ_EVERY_CODEC = """
import datetime, decimal, io, json, sys
sys.path.insert(0, sys.argv[1])
import pyarrow as pa, pyarrow.parquet as pq
import pyarrow.compute, pyarrow.dataset, pyarrow.fs  # kept: a reader may use them
table = pa.table({
    "id": pa.array([1, 2, None, 4], pa.int64()),
    "name": ["a", None, "c", "d"],
    "price": pa.array([decimal.Decimal("1.10"), None, decimal.Decimal("-3.00"), decimal.Decimal("0.01")],
                      pa.decimal128(10, 2)),
    "at": pa.array([datetime.datetime(2024, 1, 1, 12), None, datetime.datetime(1970, 1, 1),
                    datetime.datetime(2030, 6, 30)], pa.timestamp("us", tz="UTC")),
    "tags": [["x"], [], None, ["y", "z"]],
    "point": [{"x": 1.5, "y": None}, None, {"x": 0.0, "y": 2.0}, {"x": -1.0, "y": 1.0}],
    "blob": [b"\\x00\\x01", None, b"", b"ok"],
})
read = {}
for codec in ("snappy", "gzip", "zstd", "lz4", "brotli", "none"):
    written = io.BytesIO()
    pq.write_table(table, written, compression=codec, row_group_size=2)
    parquet = pq.ParquetFile(io.BytesIO(written.getvalue()))
    groups = [parquet.read_row_group(i, columns=table.column_names) for i in range(parquet.num_row_groups)]
    again = pa.Table.from_batches(list(parquet.iter_batches(batch_size=1)), schema=parquet.schema_arrow)
    read[codec] = {
        "compression": parquet.metadata.row_group(0).column(0).compression,
        "row_groups": parquet.num_row_groups,
        "equal": pa.concat_tables(groups).equals(table) and again.equals(table),
    }
print(json.dumps(read))
"""


def test_pyarrow_parquet_reads_every_codec_from_the_bundled_parquet_package(
    bundled_host: tuple[Any, dict[str, Path]],
) -> None:
    # The package as deployed (trimmed): written and read back, row group by row group and in
    # batches, with every codec a source may use.
    package = bundled_host[1][PARQUET]
    done = subprocess.run(
        [python312(), "-I", "-S", "-c", READ_EVERY_CODEC, str(package)],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout)
    assert {codec: (r["compression"], r["row_groups"], r["equal"]) for codec, r in read.items()} == {
        "snappy": ("SNAPPY", 2, True),
        "gzip": ("GZIP", 2, True),
        "zstd": ("ZSTD", 2, True),
        "lz4": ("LZ4", 2, True),
        "brotli": ("BROTLI", 2, True),
        "none": ("UNCOMPRESSED", 2, True),
    }


def test_the_core_package_has_no_pyarrow(bundled_host: tuple[Any, dict[str, Path]]) -> None:
    # Prepare, Finalize and the graph functions never read Parquet: their package stays small.
    assert not (bundled_host[1][CORE] / "pyarrow").exists()
    assert (bundled_host[1][PARQUET] / "pyarrow" / "parquet" / "__init__.py").is_file()


@pytest.mark.parametrize("architecture", [HOST, OTHER])
def test_every_library_a_compiled_module_needs_is_in_the_package(architecture: str) -> None:
    # What the trimmed list removed is needed by nothing kept (for the architecture that cannot
    # run here too): each DT_NEEDED is beside it in the package or a system library.
    package = build_package(architecture, PARQUET)
    compiled = [p for p in package.rglob("*.so*") if p.is_file()]
    names = {p.name for p in compiled}
    missing = {
        f"{p.relative_to(package)} needs {library}"
        for p in compiled
        for library in needed_libraries(p)
        if library not in names and library not in SYSTEM_LIBRARIES
    }
    assert not missing
    assert "libparquet.so.2500" in needed_libraries(package / "pyarrow" / "libarrow_python.so.2500")


@pytest.mark.parametrize("architecture", [HOST, OTHER])
def test_every_trimmed_pattern_removes_something_and_nothing_of_them_is_left(architecture: str) -> None:
    # A pattern that matches nothing (pyarrow renamed a file) would keep what it meant to remove.
    package = build_package(architecture, PARQUET)
    removed = json.loads((package / STAMP).read_text())["trimmed"]
    assert sorted(removed) == sorted(TRIMMED)
    assert all(size > 0 for size in removed.values())
    assert sum(removed.values()) > 40 * 2**20  # Flight alone is ~30 MB
    assert not [str(p) for pattern in TRIMMED for p in package.glob(pattern)]


def test_the_package_key_changes_with_the_trimmed_list(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {package: package_key(HOST, package) for package in PACKAGES}
    assert before[CORE] != before[PARQUET]
    monkeypatch.setattr(bundling, "TRIMMED", (*TRIMMED[:-1],))
    assert all(package_key(HOST, package) != key for package, key in before.items())


def test_runtime_without_its_dependencies_does_not_import() -> None:
    # What an unbundled deploy would upload (runtime/ as is): the check above would catch it.
    found = import_handlers(RUNTIME_ROOT)
    assert any("ModuleNotFoundError" in str(result) for result in found.values()), found


def test_bundled_functions_use_their_package_for_the_configured_architecture(
    bundled_host: tuple[Any, dict[str, Path]],
) -> None:
    built, packages = bundled_host
    template = json.loads(
        next((Path(built.outdir) / "assembly-Mapload-dev").glob("*Loader*.template.json")).read_text()
    )
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == len(HANDLER_INDEX)
    for function in functions:
        assert function["Properties"]["Architectures"] == [HOST]
        assert function["Properties"]["Runtime"] == "python3.12"
        # Plan and the Worker point at the staged package with pyarrow, the others at the core one.
        name = next(name for name in HANDLER_INDEX if function["Properties"]["Handler"] == handler_path(name))
        package = packages[package_of(name)]
        assert function["Properties"]["Code"]["S3Key"] == package.name.removeprefix("asset.") + ".zip"
    assert {package_of(name) for name in ("Plan", "Worker")} == {PARQUET}


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


@pytest.mark.parametrize("package_name", list(PACKAGES))
def test_every_module_ships_precompiled_for_lambdas_python(
    package_name: str, bundled_host: tuple[Any, dict[str, Path]]
) -> None:
    # Lambda's /var/task is read-only: a module without its 3.12 .pyc is compiled at every cold start.
    package = bundled_host[1][package_name]
    done = subprocess.run(
        [python312(), "-I", "-S", "-c", CHECK_PYCS, str(package)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["missing"] == []
    assert len(found["checked"]) > 500 and all(found["checked"]), "unchecked-hash pycs for CPython 3.12"
    assert found["named"]["worker.py"] == "/var/task/handlers/worker.py"  # tracebacks name Lambda's path


@pytest.mark.parametrize("package_name", list(PACKAGES))
@pytest.mark.parametrize("architecture", [HOST, OTHER])
def test_every_compiled_module_is_for_the_architecture(
    architecture: str, package_name: str, bundled_host: tuple[Any, dict[str, Path]]
) -> None:
    package = build_package(architecture, package_name)
    if architecture == HOST:
        package = bundled_host[1][package_name]  # as CDK staged it
    compiled = [p for p in package.rglob("*.so*") if p.is_file()]
    assert compiled, "pyoxigraph at least is compiled"
    wrong = [str(p.relative_to(package)) for p in compiled if e_machine(p) != E_MACHINE[architecture]]
    assert not wrong
    assert all(MACHINES[architecture] in p.name for p in package.glob("pyoxigraph/*.so"))
    if package_name == PARQUET:
        assert all(MACHINES[architecture] in p.name for p in package.glob("pyarrow/*.cpython-312-*.so"))


@pytest.mark.parametrize("package_name", list(PACKAGES))
@pytest.mark.parametrize("architecture", [HOST, OTHER])
def test_every_pinned_distribution_is_present_at_its_pinned_version(
    architecture: str, package_name: str
) -> None:
    package = build_package(architecture, package_name)
    stamp = json.loads((package / STAMP).read_text())
    assert (stamp["architecture"], stamp["package"]) == (architecture, package_name)
    present = distributions(package)
    pinned = pins()
    required = [
        _normalized(re.split(r"[=<>~!; ]", line, maxsplit=1)[0])
        for requirements in PACKAGES[package_name]
        for line in requirements.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    # The runtime's requirements, and what they pull in (botocore: adapters/dynamodb_wire.py
    # relies on its internals), each exactly as constraints.txt pins it.
    assert {"botocore", "aws-lambda-powertools", "pyoxigraph", "boto3", "s3transfer"} <= set(present)
    assert set(required) <= set(present)
    assert ("pyarrow" in present) == (package_name == PARQUET)
    assert {name: present[name] for name in present} == {name: pinned.get(name) for name in present}
    for code in bundling.CODE_PACKAGES:
        assert (package / code / "__init__.py").is_file()
    stray = [p.name for p in package.rglob("*.pyc") if not p.name.endswith(".cpython-312.pyc")]
    assert not stray, "no .pyc of the build machine's Python"
    assert not (package / "bin").exists()


def test_packages_fit_lambdas_unzipped_limit_with_room_to_spare(
    bundled_host: tuple[Any, dict[str, Path]], other_packages: dict[str, Path]
) -> None:
    # Lambda's limit (function code plus layers, unzipped) is 250 MB = 262,144,000 bytes.
    assert UNZIPPED_LIMIT_BYTES == 262_144_000
    for packages in (bundled_host[1], other_packages):
        assert tree_size(packages[CORE]) < 100 * 2**20  # ~59 MiB arm64, ~62 MiB x86_64
        # ~153 MiB arm64, ~167 MiB x86_64 trimmed (~199 and ~215 MiB as the wheels come).
        assert tree_size(packages[PARQUET]) < UNZIPPED_LIMIT_BYTES - 60 * 2**20


def test_a_package_over_lambdas_limit_is_refused_by_name(
    bundled_host: tuple[Any, dict[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if the limit were 100 MiB: the package with pyarrow is over it, the core one is not.
    built, packages = bundled_host
    monkeypatch.setattr(assembly_checks, "UNZIPPED_LIMIT_BYTES", 100 * 2**20)
    sizes, refusals = assembly_checks.lambda_packages(built, ["**"])
    assert len(sizes) == len(PACKAGES)
    name = packages[PARQUET].name
    expected = f"mapload: Mapload-dev/Loader's Lambda package {name} is over Lambda's unzipped limit"
    assert refusals == [expected]


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
    sizes = re.findall(r"Mapload-dev/Loader Lambda package asset\.\w+: \d+\.\d MiB unzipped", done.stderr)
    assert len(sizes) == len(PACKAGES), done.stderr[-3000:]
    for package in staged_packages(outdir).values():
        assert json.loads((package / STAMP).read_text())["architecture"] == OTHER
