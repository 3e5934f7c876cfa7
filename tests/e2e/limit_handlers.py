"""Lambda handlers for tests/e2e/test_limits.py: each returns what its event asks for."""

from __future__ import annotations

import datetime
import decimal
import time
from collections.abc import Mapping
from typing import Any


def handle(event: Mapping[str, Any], env: Mapping[str, str]) -> Any:
    kind = event.get("return")
    if kind == "decimal":
        return {"value": decimal.Decimal("1.5")}
    if kind == "set":
        return {"value": {1, 2}}
    if kind == "datetime":
        return {"value": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}
    if kind == "bytes":
        return {"value": "x" * int(event["size"])}
    if kind == "sleep":
        time.sleep(float(event["seconds"]))
        return {"slept": event["seconds"]}
    return {"echo": event}
