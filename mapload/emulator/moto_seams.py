"""The seams the embedded run needs in moto: where a Lambda invocation lands (the runtime handler
runs in-process instead), where a Wait state waits (an injected clock advances instead) and
DynamoDB's bulk put items operations, which moto lacks (answered by the local model, bulk_put.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from mapload.emulator.clock import Clock
from mapload.emulator.moto_patch import SFN_ASL, Patch

# -- Lambda ----------------------------------------------------------------------------------

# (function name, request body, request headers, response headers) -> the response payload, or
# None for a function the seam does not run (moto's own invoke answers it).
Invoke = Callable[[str, Any, Mapping[str, Any], dict[str, Any]], bytes | None]


class LambdaInvoke(Patch):
    """moto's simple Lambda backend (config `lambda: use_docker False`) answers every invocation
    with the request body or a canned "Simple Lambda happy path OK": its one place where an
    invocation lands, `LambdaSimpleBackend.invoke`, is routed to `invoke` (the embedded run's
    seam: the runtime handler, in-process, within Lambda's limits)."""

    def __init__(self) -> None:
        super().__init__("lambda-invoke", ("moto.awslambda_simple.models:LambdaSimpleBackend.invoke",))

    def install(self, invoke: Invoke | None = None) -> None:
        assert invoke is not None, "LAMBDA_INVOKE.install(invoke): the seam to route invocations to"

        def seam(
            backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
        ) -> Any:
            answer = invoke(function_name, body, headers or {}, response_headers)
            if answer is not None:
                return answer
            return self.original()(backend, function_name, qualifier, body, headers, response_headers)

        self._swap(self.targets[0], seam)


# -- Step Functions: the clock ---------------------------------------------------------------


class WaitClock(Patch):
    """moto's Wait states (Seconds, SecondsPath, Timestamp, TimestampPath) all wait in
    `WaitFunction._wait_interval`, in real time: given a clock, they advance it and return at once
    (a later install() replaces the clock)."""

    def __init__(self) -> None:
        super().__init__(
            "wait-clock",
            (f"{SFN_ASL}.component.state.wait.wait_function.wait_function:WaitFunction._wait_interval",),
        )

    def install(self, clock: Clock | None = None) -> None:
        assert clock is not None, "WAIT_CLOCK.install(clock): the clock the Wait states advance"

        def wait_interval(self: Any, env: Any, wait_seconds: int) -> None:
            clock.advance(wait_seconds)

        self._swap(self.targets[0], wait_interval)


LAMBDA_INVOKE: Final = LambdaInvoke()
WAIT_CLOCK: Final = WaitClock()


# -- DynamoDB: bulk put items ------------------------------------------------------------------


class BulkPutItems(Patch):
    """moto 5.2.5's DynamoHandler has no StartBulkPutItems, DescribeBulkOperation,
    ListBulkOperations or CancelBulkOperation (moto answers "not yet implemented"): it gains the
    four, answered by the local model (bulk_put.MODEL). Uninstalling cancels and forgets its
    operations (moto's backends are reset with the mock too)."""

    def __init__(self) -> None:
        super().__init__(
            "bulk-put-items",
            tuple(
                f"moto.dynamodb.responses:DynamoHandler.{name}"
                for name in (
                    "start_bulk_put_items",
                    "describe_bulk_operation",
                    "list_bulk_operations",
                    "cancel_bulk_operation",
                )
            ),
        )

    def install(self) -> None:
        if self.installed:
            return
        from mapload.emulator import bulk_put, moto_speed

        for target in self.targets:
            self._swap(target, bulk_put.HANDLERS[target.rsplit(".", 1)[1]])
        moto_speed.forget_method_names()  # moto dispatches only to the methods it lists

    def uninstall(self) -> None:
        if not self.installed:
            return
        from mapload.emulator import bulk_put, moto_speed

        bulk_put.MODEL.close()
        super().uninstall()
        moto_speed.forget_method_names()


BULK_PUT: Final = BulkPutItems()
