"""Typed attributes of every kind the spec has beyond S, N and BOOL (spec and mapping tests share them)."""

from __future__ import annotations

from typing import Any

TYPED_ATTRIBUTES: dict[str, dict[str, Any]] = {
    "tags": {"field": "tags", "type": "SS", "separator": ";"},
    "codes": {"field": "codes", "type": "NS"},
    "blobs": {"field": "blobs", "type": "BS"},
    "data": {"field": "data", "type": "B"},
    "nothing": {"field": "nothing", "type": "NULL"},
    "list": {"field": "list", "type": "L"},
    "map": {"field": "map", "type": "M"},
    "expires": {"field": "expires", "type": "N", "from": "iso8601"},
}
