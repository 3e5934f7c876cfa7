"""The service limits AWS enforces and moto does not, checked where the embedded run crosses them.

Each limit is AWS's documented number; each check fails the way AWS reports it, so the state
machine's Retry/Catch see in the embedded run what they would see in an account.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

from moto.core.exceptions import JsonRESTError

# Step Functions: the largest state input/output, task result or Map result (UTF-8 bytes).
STATE_PAYLOAD_BYTES: Final[int] = 256 * 1024
# Step Functions: events in one (Standard) execution's history.
HISTORY_EVENTS: Final[int] = 25_000
# Lambda: synchronous request and response, and asynchronous (Event) request.
LAMBDA_SYNC_PAYLOAD_BYTES: Final[int] = 6 * 1024 * 1024
LAMBDA_ASYNC_PAYLOAD_BYTES: Final[int] = 256 * 1024


class LambdaFunctionError(Exception):
    """A failure Lambda itself reports for a function (its errorType is not a Python name)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def check_request(function: str, invocation_type: str, size: int) -> None:
    """Lambda refuses an oversized request before running anything (HTTP 413)."""
    limit = LAMBDA_ASYNC_PAYLOAD_BYTES if invocation_type == "Event" else LAMBDA_SYNC_PAYLOAD_BYTES
    if size > limit:
        error = JsonRESTError(
            "RequestEntityTooLargeException",
            f"{function}: {invocation_type} request payload of {size} bytes exceeds the "
            f"maximum allowed payload size ({limit} bytes)",
        )
        error.code = 413
        raise error


def marshal(result: Any) -> bytes:
    """The handler's result as JSON, at most 6 MB. Lambda's python3.12 runtime (awslambdaric)
    writes non-ASCII characters as they are (ensure_ascii=False); this escapes them, as the older
    runtimes do: never fewer bytes, so a result that fits here fits there."""
    try:
        payload = json.dumps(result).encode()
    except (TypeError, ValueError) as error:
        raise LambdaFunctionError("Runtime.MarshalError", f"Unable to marshal response: {error}") from error
    if len(payload) > LAMBDA_SYNC_PAYLOAD_BYTES:
        raise LambdaFunctionError(
            "Function.ResponseSizeTooLarge",
            f"Response payload size ({len(payload)} bytes) exceeded maximum allowed payload size "
            f"({LAMBDA_SYNC_PAYLOAD_BYTES} bytes).",
        )
    return payload


def run_with_timeout(function: str, timeout_seconds: float, call: Callable[[], Any]) -> Any:
    """`call()` as Lambda runs it: past the function's Timeout the invocation fails with
    Sandbox.Timedout (the thread cannot be killed; it ends on its own, its result discarded)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = call()
        except BaseException as error:  # handed to the caller as the invocation's error
            outcome["error"] = error

    thread = threading.Thread(target=target, name=f"lambda-{function}", daemon=True)
    thread.start()
    thread.join(timeout_seconds)
    if thread.is_alive():
        raise LambdaFunctionError(
            "Sandbox.Timedout", f"{function}: Task timed out after {timeout_seconds:.2f} seconds"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


# -- Step Functions: what moto's interpreter is patched to enforce (moto_patches.LIMITS) --------

HISTORY_LIMIT_CAUSE: Final[str] = (
    f"The execution reached the maximum number of history events ({HISTORY_EVENTS})."
)
# The errors States.ALL does not match (AWS: terminal, cannot be caught or retried).
UNCATCHABLE_ERRORS: Final[frozenset[str]] = frozenset({"States.DataLimitExceeded", "States.Runtime"})
# The error the execution fails with when its history is full (AWS reports the cause above).
HISTORY_LIMIT_ERROR: Final[str] = "States.Runtime"


# -- DynamoDB: expression parameters (moto_patches.DYNAMODB_EXPRESSIONS) ------------------------
# AWS's DynamoDB developer guide, "Constraints in Amazon DynamoDB", Expression parameters: any
# expression string is at most 4 KB ("the size of the ConditionExpression a=b is 3 bytes"), and an
# UpdateExpression holds at most 300 operators or functions ("SET a = :val1 + :val2 + :val3
# contains two '+' operators": the SET's `=` is not one).
EXPRESSION_BYTES: Final[int] = 4 * 1024
UPDATE_EXPRESSION_OPERATORS: Final[int] = 300
# The request parameters that hold an expression string (top level, or in a TransactItems entry).
EXPRESSION_PARAMETERS: Final[tuple[str, ...]] = (
    "UpdateExpression",
    "ConditionExpression",
    "FilterExpression",
    "KeyConditionExpression",
    "ProjectionExpression",
)
# A function call: a name followed by "(" (if_not_exists, list_append, attribute_exists, ...).
_FUNCTION = re.compile(r"(?<![#:\w])[A-Za-z_]\w*\s*\(")
# Outside placeholders: UpdateExpression's arithmetic operators (a SET's "=" is an assignment).
_ARITHMETIC = re.compile(r"[+-]")


def update_operators(expression: str) -> int:
    """Operators and functions in an UpdateExpression as AWS counts them: each function call and
    each "+" or "-" (placeholders and names are `#x`/`:x`/identifiers, which hold neither)."""
    return len(_FUNCTION.findall(expression)) + len(_ARITHMETIC.findall(expression))


def expression_error(parameter: str, expression: str) -> str | None:
    """Why DynamoDB refuses `expression` given as `parameter` (AWS's ValidationException
    message), or None when it is within the limits."""
    size = len(expression.encode())
    if size > EXPRESSION_BYTES:
        return (
            f"Invalid {parameter}: Expression size has exceeded the maximum allowed size; "
            f"expression size: {size}"
        )
    if parameter == "UpdateExpression":
        count = update_operators(expression)
        if count > UPDATE_EXPRESSION_OPERATORS:
            return f"Invalid {parameter}: The expression contains too many operators; operator count: {count}"
    return None


def request_expression_error(body: Mapping[str, Any]) -> str | None:
    """The first refusal among the expressions of a DynamoDB request `body` (the top level, each
    TransactItems entry's Put, Update, Delete, ConditionCheck or Get), or None."""
    parts: list[Mapping[str, Any]] = [body]
    for entry in body.get("TransactItems") or ():
        parts.extend(part for part in entry.values() if isinstance(part, Mapping))
    for part in parts:
        for parameter in EXPRESSION_PARAMETERS:
            expression = part.get(parameter)
            if isinstance(expression, str):
                error = expression_error(parameter, expression)
                if error is not None:
                    return error
    return None


# -- DynamoDB: item size (moto_patches.ITEM_SIZE) ------------------------------------------------
# An item is at most 400 KB (1 KB = 1,024 bytes), counted as AWS's developer guide, "Item sizes
# and formats", says: each attribute's name (UTF-8 bytes) and value; a string its UTF-8 bytes, a
# binary its bytes, a number about one byte per two significant digits plus one, a Boolean or
# null one byte, a set its elements, a list or map 3 bytes plus, per element, one byte (and, in a
# map, the member's name) and the element. runtime/logic/mapping.py estimates an item no smaller.
ITEM_BYTES: Final[int] = 400 * 1024


# A number as a request usually writes it: digits with at most one point, no exponent.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
# Decimal's default context: normalize() rounds a coefficient to this many digits.
_CONTEXT_DIGITS = 28


def _number_bytes(text: str) -> int:
    """The significant digits Decimal's normalize() keeps (leading and trailing zeros dropped, 1
    for zero), counted from the text when it is plain (the server measures every number a write
    holds; Decimal was a twentieth of its CPU a batch); anything else through Decimal."""
    if _PLAIN_NUMBER.fullmatch(text):
        significant = len(text.lstrip("+-").replace(".", "", 1).strip("0"))
        if significant <= _CONTEXT_DIGITS:
            return (max(1, significant) + 1) // 2 + 1
    digits = len(Decimal(text).normalize().as_tuple().digits)
    return (digits + 1) // 2 + 1


def _binary_bytes(value: bytes | str) -> int:
    return len(value) if isinstance(value, bytes | bytearray) else len(base64.b64decode(value))


def value_bytes(kind: str, value: Any) -> int:
    """The size DynamoDB counts for one value of type `kind` (`value` as moto holds it: a list's or
    map's elements as objects with `type` and `value`, a binary as bytes or base64 text)."""
    if kind == "S":
        return len(value.encode())
    if kind == "N":
        return _number_bytes(value)
    if kind == "B":
        return _binary_bytes(value)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode()) for v in value)
    if kind == "NS":
        return sum(_number_bytes(v) for v in value)
    if kind == "BS":
        return sum(_binary_bytes(v) for v in value)
    if kind == "L":
        return 3 + sum(1 + value_bytes(v.type, v.value) for v in value)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_bytes(v.type, v.value) for k, v in value.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_bytes(attributes: Mapping[str, Any]) -> int:
    """The size DynamoDB counts for an item: each attribute's name and value (`value_bytes`), the
    values as moto holds them (anything else, as moto's own measure does, by its text)."""
    return sum(
        len(name.encode())
        + (value_bytes(held.type, held.value) if hasattr(held, "type") else len(str(held).encode()))
        for name, held in attributes.items()
    )


# -- DynamoDB: a new table's status (moto_patches.TABLE_CREATING) --------------------------------
# DynamoDB keeps a new table CREATING for seconds (DescribeTable's TableStatus), and a request on
# its items meanwhile gets ResourceNotFoundException. The embedded run's moment is short: the
# point is that code which does not wait for ACTIVE fails, not that it waits as long.
CREATING_SECONDS: Final[float] = 0.05
