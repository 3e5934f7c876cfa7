"""The mapload command: the embedded (no AWS account) run, sample data and helpers."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_DIR = ROOT / "runtime"

# The Lambda code root is importable as it is in Lambda: `handlers.plan`, `logic.spec`, ...
if str(RUNTIME_DIR) not in sys.path:
    sys.path.insert(0, str(RUNTIME_DIR))
