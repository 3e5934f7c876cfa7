"""Synthesize the CDK app (no Docker, no bundling) and cache the templates between runs."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mapload import ROOT

CACHE_DIR = ROOT / ".cache" / "synth"
# package-lock.json pins the CDK CLI; the installed libraries are hashed by version below.
_INPUTS = ("app.py", "cdk.json", "package-lock.json")
# The libraries that shape a template (pydantic parses the settings): a new version can
# synthesize a different one.
_SYNTH_LIBRARIES = ("aws-cdk-lib", "constructs", "cdk-nag", "jsii", "pydantic", "pydantic_core")
_TREES = ("stacks", "runtime")
# Cache entries kept (each a whole cloud assembly of a few MB: one per context and code version).
KEEP_ENTRIES = 16
# An entry or scratch directory touched this recently may be in use by a parallel run: kept.
IN_USE_SECONDS = 3600.0


@dataclass(frozen=True)
class StackTemplate:
    name: str  # the deployed stack name, e.g. "dev-Data"
    path: Path
    template: dict[str, Any]


def _fingerprint(context: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode())
    for library in _SYNTH_LIBRARIES:
        digest.update(f"{library}=={_installed(library)}".encode())
    files = [ROOT / name for name in _INPUTS]
    for tree in _TREES:
        files.extend(
            sorted(p for p in (ROOT / tree).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        )
    for path in files:
        if path.exists():
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _installed(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def synthesize(context: dict[str, Any]) -> list[StackTemplate]:
    """Templates of every stack the app synthesizes for `context`, from the cache when unchanged."""
    outdir = CACHE_DIR / _fingerprint(context)
    if not (outdir / "manifest.json").exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        # Synthesize beside the cache entry and rename it into place, so runs in parallel
        # (test workers, two terminals) never read a half-written assembly.
        scratch = Path(tempfile.mkdtemp(prefix="synth-", dir=CACHE_DIR))
        script = (
            "import json, sys; sys.path.insert(0, sys.argv[1]); import app; "
            "app.build_app(json.loads(sys.argv[2]), outdir=sys.argv[3]).synth()"
        )
        env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
        # A separate process keeps the jsii/node runtime out of the embedded run.
        done = subprocess.run(
            [sys.executable, "-c", script, str(ROOT), json.dumps(context), str(scratch)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            raise RuntimeError(_synth_failure(done.stdout, done.stderr))
        try:
            scratch.rename(outdir)
        except OSError:  # another process got there first with the same templates
            shutil.rmtree(scratch, ignore_errors=True)
        prune(CACHE_DIR)
    else:
        os.utime(outdir)  # recently used: the last to be pruned
    return load_assembly(outdir)


def _synth_failure(stdout: str, stderr: str) -> str:
    """One line: the error the app raised (its traceback's last line), the whole output in a log."""
    log = CACHE_DIR / "synth-failed.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"{stdout}\n{stderr}", encoding="utf-8")
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "no output")
    return f"cdk synth failed: {last} (whole output: {log})"


def prune(cache: Path, keep: int = KEEP_ENTRIES, now: float | None = None) -> list[Path]:
    """Remove the least recently used entries beyond `keep`, and scratch directories a killed
    synth left behind, unless touched within IN_USE_SECONDS. Returns what was removed."""
    cutoff = (time.time() if now is None else now) - IN_USE_SECONDS
    entries = sorted(
        (p for p in cache.iterdir() if p.is_dir() and not p.name.startswith("synth-")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    scratch = [p for p in cache.iterdir() if p.is_dir() and p.name.startswith("synth-")]
    removed = [p for p in entries[keep:] + scratch if p.stat().st_mtime < cutoff]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def load_assembly(outdir: Path) -> list[StackTemplate]:
    stacks: list[StackTemplate] = []
    manifest = json.loads((outdir / "manifest.json").read_text())
    for artifact in manifest.get("artifacts", {}).values():
        props = artifact.get("properties", {})
        if artifact.get("type") == "aws:cloudformation:stack":
            path = outdir / props["templateFile"]
            name = props.get("stackName") or artifact.get("displayName") or path.stem
            stacks.append(StackTemplate(name, path, json.loads(path.read_text())))
        elif artifact.get("type") == "cdk:cloud-assembly":  # a Stage's nested assembly
            stacks.extend(load_assembly(outdir / props["directoryName"]))
    return stacks
