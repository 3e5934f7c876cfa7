"""The synth cache stays bounded: least recently used entries and abandoned scratch directories go,
anything a parallel run may be using stays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mapload.synth import IN_USE_SECONDS, prune

pytestmark = pytest.mark.runtime

NOW = 1_800_000_000.0


def entry(cache: Path, name: str, age_seconds: float) -> Path:
    path = cache / name
    (path / "sub").mkdir(parents=True)
    (path / "manifest.json").write_text("{}")
    os.utime(path, (NOW - age_seconds, NOW - age_seconds))
    return path


def test_old_entries_beyond_the_limit_and_abandoned_scratch_are_removed(tmp_path: Path) -> None:
    old = IN_USE_SECONDS + 10
    entries = [entry(tmp_path, f"e{i}", old + i) for i in range(6)]  # e0 newest
    scratch_old = entry(tmp_path, "synth-dead", old)
    scratch_live = entry(tmp_path, "synth-live", 5)
    removed = prune(tmp_path, keep=3, now=NOW)
    assert sorted(removed) == sorted([*entries[3:], scratch_old])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e0", "e1", "e2", "synth-live"]
    assert scratch_live.exists()


def test_an_entry_used_within_the_hour_is_kept_beyond_the_limit(tmp_path: Path) -> None:
    recent = [entry(tmp_path, f"r{i}", 60 * i) for i in range(5)]
    assert prune(tmp_path, keep=2, now=NOW) == []
    assert all(p.exists() for p in recent)


def test_the_cache_key_changes_with_the_cdk_libraries_and_the_cli_pin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mapload import synth

    before = synth._fingerprint({"env": "dev"})
    for library in ("aws-cdk-lib", "constructs", "cdk-nag"):
        with monkeypatch.context() as patched:
            patched.setattr(
                synth, "_installed", lambda name, bumped=library: "9.9.9" if name == bumped else "1"
            )
            changed = synth._fingerprint({"env": "dev"})
            patched.setattr(synth, "_installed", lambda name: "1")
            assert changed != synth._fingerprint({"env": "dev"}), library
    assert "package-lock.json" in synth._INPUTS  # pins the CDK CLI
    assert synth._fingerprint({"env": "dev"}) == before
