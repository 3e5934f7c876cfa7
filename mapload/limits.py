"""The service limits AWS enforces and moto does not, checked where the embedded run crosses them.

Each limit is AWS's documented number; each check fails the way AWS reports it, so the state
machine's Retry/Catch see in the embedded run what they would see in an account.
"""

from __future__ import annotations

import json
import threading
import weakref
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


# -- Step Functions: moto's interpreter, patched in one place -------------------------------
# moto 5.2.5 checks each state's output and each task's result against 256 KiB, but not a
# Map's collected results; lets States.ALL catch States.DataLimitExceeded (AWS does not);
# counts no history; and its ResultWriter selects its parameters from the children's outputs and
# writes an empty manifest. install() mends exactly that.

HISTORY_LIMIT_CAUSE: Final[str] = (
    f"The execution reached the maximum number of history events ({HISTORY_EVENTS})."
)
# The errors States.ALL does not match (AWS: terminal, cannot be caught or retried).
UNCATCHABLE_ERRORS: Final[frozenset[str]] = frozenset({"States.DataLimitExceeded", "States.Runtime"})
# The error the execution fails with when its history is full (AWS reports the cause above).
HISTORY_LIMIT_ERROR: Final[str] = "States.Runtime"

_SAVED: dict[tuple[type, str], Any] = {}


def install() -> None:
    """Patch moto's Step Functions interpreter (idempotent; uninstall() restores it)."""
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer import result_writer_decl
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval import (
        resource_eval_s3,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap
    from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

    if _SAVED:
        return
    _SAVED[(CommonStateField, "_eval_body")] = CommonStateField._eval_body
    _SAVED[(StateMap, "_eval_execution")] = StateMap._eval_execution
    _SAVED[(ErrorEqualsDecl, "_eval_body")] = ErrorEqualsDecl._eval_body
    _SAVED[(resource_eval_s3.ResourceEvalS3, "_handle_put_object")] = (
        resource_eval_s3.ResourceEvalS3.__dict__["_handle_put_object"]
    )
    writer = result_writer_decl.ResultWriter
    _SAVED[(writer, "_eval_body")] = writer._eval_body
    writer._eval_body = _result_writer  # type: ignore[method-assign]
    CommonStateField._eval_body = _state_within_history  # type: ignore[method-assign]
    StateMap._eval_execution = _map_within_payload_limit  # type: ignore[method-assign]
    ErrorEqualsDecl._eval_body = _error_equals  # type: ignore[method-assign]
    resource_eval_s3.ResourceEvalS3._handle_put_object = staticmethod(_write_map_results)  # type: ignore[method-assign]


def uninstall() -> None:
    for (owner, name), original in _SAVED.items():
        setattr(owner, name, original)
    _SAVED.clear()


def history_length(env: Any) -> int:
    """Events so far in the history of the execution `env` runs (a Map child has its own)."""
    return len(env.event_manager._history_event_list)


# The event managers of executions' own histories. moto gives all the children of one
# Distributed Map run a single shared event manager; on AWS each child is an execution with its
# own history, and one Worker child never nears the limit, so only these are counted.
_EXECUTION_HISTORIES: weakref.WeakSet[Any] = weakref.WeakSet()


def _history_full(env: Any) -> bool:
    """AWS logs event 25,000 only if it is ExecutionSucceeded; anything else fails the execution."""
    if not env.is_frame():
        _EXECUTION_HISTORIES.add(env.event_manager)
    if env.event_manager not in _EXECUTION_HISTORIES:
        return False
    if env.is_running() and history_length(env) >= HISTORY_EVENTS - 1:
        from moto.stepfunctions.parser.api import ExecutionFailedEventDetails

        env.set_error(ExecutionFailedEventDetails(error=HISTORY_LIMIT_ERROR, cause=HISTORY_LIMIT_CAUSE))
        return True
    return False


def _state_within_history(self: Any, env: Any) -> None:
    if _history_full(env):
        return
    _SAVED[(_common_state(), "_eval_body")](self, env)
    _history_full(env)


def _common_state() -> type:
    from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

    return CommonStateField


def _map_within_payload_limit(self: Any, env: Any) -> None:
    """A Map without a ResultWriter collects every child's output into its result: at most 256 KiB."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap

    _SAVED[(StateMap, "_eval_execution")](self, env)
    if self.result_writer is None and env.stack:
        self._verify_size_quota(env=env, value=env.stack[-1])


def _error_equals(self: Any, env: Any) -> None:
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl

    error_name = env.stack[-1]
    if ErrorEqualsDecl._STATE_ALL_ERROR in self.error_names and getattr(error_name, "error_name", None) in (
        UNCATCHABLE_ERRORS
    ):
        env.stack.pop()
        env.stack.append(False)
        return
    _SAVED[(ErrorEqualsDecl, "_eval_body")](self, env)


def _result_writer(self: Any, env: Any) -> None:
    """Parameters (Prefix.$, Bucket.$) select from the state's input, as on AWS; moto evaluated
    them against the children's outputs."""
    env.stack.append(env.states.get_input())
    self.parargs.eval(env=env)
    parameters = env.stack.pop()
    env.stack.pop()
    env.stack.append(parameters)
    self.resource_eval.eval_resource(env=env)


def _write_map_results(env: Any, resource_runtime_part: Any, state_credentials: Any) -> None:
    """ResultWriter as AWS writes it: <Prefix>/<map run id>/manifest.json and one file per status
    (SUCCEEDED_0.json, FAILED_0.json; PENDING when a run stops early), each a JSON array of the
    child executions; the Map's result is then the small summary, not the outputs."""
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    parameters = env.stack.pop()
    outputs: list[Any] = env.stack.pop()
    s3 = boto_client_for(
        service="s3", region=resource_runtime_part.region, state_credentials=state_credentials
    )
    record = env.map_run_record_pool_manager.get_all()[-1]
    map_run_arn = record.map_run_arn
    map_run_id = map_run_arn.split(":")[-1]
    bucket = parameters["Bucket"]
    prefix = str(parameters.get("Prefix") or "")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    execution_base = map_run_arn.replace(":mapRun:", ":execution:", 1)
    by_status: dict[str, list[dict[str, Any]]] = {"SUCCEEDED": [], "FAILED": [], "PENDING": []}
    for index, output in enumerate(outputs):
        status = "FAILED" if output is None else "SUCCEEDED"
        entry: dict[str, Any] = {
            "ExecutionArn": f"{execution_base}:{index}",
            "Name": str(index),
            "StateMachineArn": env.states.context_object.context_object_data["StateMachine"]["Id"],
            "Status": status,
        }
        if output is not None:
            entry["Output"] = json.dumps(output)
            entry["OutputDetails"] = {"Included": True}
        by_status[status].append(entry)
    files: dict[str, list[dict[str, Any]]] = {status: [] for status in by_status}
    for status, entries in by_status.items():
        if not entries:
            continue
        key = f"{prefix}{map_run_id}/{status}_0.json"
        body = json.dumps(entries).encode()
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        files[status].append({"Key": key, "Size": len(body)})
    manifest_key = f"{prefix}{map_run_id}/manifest.json"
    manifest = {"DestinationBucket": bucket, "MapRunArn": map_run_arn, "ResultFiles": files}
    s3.put_object(Bucket=bucket, Key=manifest_key, Body=json.dumps(manifest).encode())
    env.stack.append(
        {"MapRunArn": map_run_arn, "ResultWriterDetails": {"Bucket": bucket, "Key": manifest_key}}
    )
