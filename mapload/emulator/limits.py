"""The service limits AWS enforces and moto does not, checked where the embedded run crosses them.

Each limit is AWS's documented number; each check fails the way AWS reports it, so the state
machine's Retry/Catch see in the embedded run what they would see in an account.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
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
