"""One synthesized app per environment variant per session (jsii start-up is slow); no Docker."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.infra.support import (  # noqa: E402
    DATA_KEY_CREATED_CONTEXT,
    DATA_KEY_IMPORTED_CONTEXT,
    DEV_CONTEXT,
    VARIANT_CONTEXT,
    Synth,
    synthesize,
)


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(DEV_CONTEXT, tmp_path_factory.mktemp("dev"))


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize({"env": "prod"}, tmp_path_factory.mktemp("prod"))


@pytest.fixture(scope="session")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(VARIANT_CONTEXT, tmp_path_factory.mktemp("variant"))


@pytest.fixture(scope="session")
def data_key_created(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(DATA_KEY_CREATED_CONTEXT, tmp_path_factory.mktemp("data_key_created"))


@pytest.fixture(scope="session")
def data_key_imported(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(DATA_KEY_IMPORTED_CONTEXT, tmp_path_factory.mktemp("data_key_imported"))


@pytest.fixture(scope="session")
def cdk_json() -> dict[str, Any]:
    return dict(json.loads((ROOT / "cdk.json").read_text()))
