"""How an unexpected JSON value is named in an error message (the input's and the S3 URI's)."""

from __future__ import annotations

from collections.abc import Mapping


def kind(value: object) -> str:
    """How an unexpected JSON value is named in an error."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__
