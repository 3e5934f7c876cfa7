"""stacks/ never imports runtime code or boto3; runtime/ never imports the CDK (ast scan)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.infra.support import ROOT

pytestmark = pytest.mark.infra

RUNTIME_PACKAGES = {
    "runtime",
    "handlers",
    "shards",
    "archives",
    "plans",
    "reports",
    "graph_loads",
    "bulk_puts",
    "logic",
    "adapters",
    "mapload",
}
AWS_SDK = {"boto3", "botocore", "aioboto3", "s3transfer"}
CDK = {"aws_cdk", "constructs", "cdk_nag", "stacks", "jsii"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def python_files(directory: str) -> list[Path]:
    return sorted(p for p in (ROOT / directory).rglob("*.py") if "__pycache__" not in p.parts)


def test_stacks_import_neither_runtime_code_nor_the_aws_sdk() -> None:
    files = [*python_files("stacks"), ROOT / "app.py"]
    assert len(files) > 3
    for path in files:
        bad = imported_roots(path) & (RUNTIME_PACKAGES | AWS_SDK)
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_runtime_does_not_import_the_cdk() -> None:
    files = python_files("runtime")
    assert files, "runtime/ has no Python files"
    for path in files:
        bad = imported_roots(path) & CDK
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


# The runtime's layers import only downward: handlers → services → adapters → logic. The services
# (one per function: archives for Prepare, plans, shards for the Worker, reports, graph_loads,
# bulk_puts) do not import each other.
SERVICES = {"shards", "archives", "plans", "reports", "graph_loads", "bulk_puts"}
RUNTIME_LAYERS = {
    "logic": {"adapters", *SERVICES, "handlers", "mapload", "os", *AWS_SDK},
    "adapters": {*SERVICES, "handlers", "mapload"},
    **{service: {*(SERVICES - {service}), "handlers", "mapload", "os", *AWS_SDK} for service in SERVICES},
    "handlers": {"mapload"},
}


@pytest.mark.parametrize("layer", sorted(RUNTIME_LAYERS))
def test_runtime_layers_import_only_the_layers_below(layer: str) -> None:
    files = python_files(f"runtime/{layer}")
    assert files, f"runtime/{layer} has no Python files"
    for path in files:
        bad = imported_roots(path) & RUNTIME_LAYERS[layer]
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_every_handler_is_thin_over_its_service() -> None:
    """A function's handler module parses its settings and makes one service call (`handle`), under
    `lambda_handler`: the work lives in the services, where the next function's handler cannot
    copy it."""
    handlers = [
        p for p in python_files("runtime/handlers") if p.stem not in {"__init__", "settings", "observability"}
    ]
    assert {p.stem for p in handlers} == {
        "prepare",
        "plan",
        "worker",
        "finalize",
        "start_graph_load",
        "poll_graph_load",
        "start_bulk_put",
        "poll_bulk_put",
    }
    for path in handlers:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
        assert defined == {"handle", "lambda_handler"}, f"{path.relative_to(ROOT)} defines {sorted(defined)}"


def test_the_scan_sees_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import boto3.session\nfrom aws_cdk import aws_s3\nfrom . import local\n")
    assert imported_roots(sample) == {"boto3", "aws_cdk"}


def test_the_shipped_code_imports_no_test_module() -> None:
    """Test doubles and instruments (tests/scripted_neptune.py, virtual_clock.py, faults.py,
    iamcheck.py, keymeter.py, ...) stay under tests/:
    neither the mapload command nor the runtime imports one."""
    test_modules = {p.stem for p in python_files("tests")} | {"tests"}
    assert {"scripted_neptune", "virtual_clock", "faults", "emulated_stacks", "iamcheck", "keymeter"} <= (
        test_modules
    )
    files = [*python_files("mapload"), *python_files("runtime")]
    for path in files:
        bad = imported_roots(path) & test_modules
        assert not bad, f"{path.relative_to(ROOT)} imports test code {sorted(bad)}"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_command_reaches_the_emulator_through_its_one_doorway() -> None:
    """mapload/emulator/ is the embedded emulator; the command's modules import only the package
    itself (its __init__ exports what they need), never one of its modules."""
    emulator = ROOT / "mapload" / "emulator"
    command = [p for p in python_files("mapload") if emulator not in p.parents]
    assert any(p.name == "cli.py" for p in command) and (emulator / "__init__.py").exists()
    doorway = importlib.import_module("mapload.emulator").__all__
    for path in command:
        inner = {
            name
            for name in imported_modules(path)
            if name.startswith("mapload.emulator.") and name.removeprefix("mapload.emulator.") not in doorway
        }
        assert not inner, (
            f"{path.relative_to(ROOT)} imports {sorted(inner)}: use `from mapload.emulator import ...`"
        )


def test_a_units_settings_import_only_the_settings_they_share() -> None:
    """stacks/settings.py <- each unit's *_settings.py <- stacks/config.py (EnvironmentConfig):
    a unit's settings read no other unit's, nor the environment that composes them."""
    units = sorted((ROOT / "stacks").glob("*_settings.py"))
    assert len(units) == 5
    for path in units:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stacks")
        }
        assert imported <= {"stacks.settings"}, f"{path.relative_to(ROOT)} imports {sorted(imported)}"


def emulator_modules_reached(shipped: list[Path]) -> set[str]:
    """The modules of mapload/emulator/ the shipped files import, directly or through another
    emulator module (the package itself: its __init__)."""
    emulator = ROOT / "mapload" / "emulator"
    names = {p.stem for p in emulator.glob("*.py")}

    def imports(path: Path) -> set[str]:
        found = {
            name.removeprefix("mapload.emulator.").split(".")[0]
            for name in imported_modules(path)
            if name.startswith("mapload.emulator.")
        }
        if "mapload.emulator" in imported_modules(path):
            found.add("__init__")
        return found & names

    pending = {name for path in shipped if emulator not in path.parents for name in imports(path)}
    reached: set[str] = set()
    while pending:
        name = pending.pop()
        reached.add(name)
        pending |= imports(emulator / f"{name}.py") - reached
    return reached


def test_the_emulator_holds_no_module_only_tests_import() -> None:
    """Test instruments (the IAM check, the key meter, fault injection) live under tests/: every
    module of mapload/emulator/ is one the command (mapload/) or the runtime reaches."""
    emulator = ROOT / "mapload" / "emulator"
    modules = {p.stem for p in emulator.glob("*.py")}
    reached = emulator_modules_reached([*python_files("mapload"), *python_files("runtime")])
    assert {"__init__", "embedded", "server"} <= reached
    by_tests = {name for path in python_files("tests") for name in emulator_modules_reached([path])}
    unreached = sorted(modules - reached)
    assert not unreached, (
        f"mapload/emulator/ holds modules the shipped code never imports: {unreached} "
        f"(imported by tests: {sorted(set(unreached) & by_tests)}); move them under tests/"
    )


def test_the_reach_scan_follows_imports_through_the_package(tmp_path: Path) -> None:
    command = tmp_path / "command.py"
    command.write_text("from mapload.emulator import Emulator\n")
    reached = emulator_modules_reached([command])
    assert {"__init__", "embedded", "calls", "limits"} <= reached
    only = tmp_path / "only.py"
    only.write_text("import json\n")
    assert emulator_modules_reached([only]) == set()
