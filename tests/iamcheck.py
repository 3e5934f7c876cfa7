"""The IAM check of the tests: every AWS call a deployed function or the state machine makes in
the embedded run (passed by the emulator's observer hook, mapload/emulator/calls.py), evaluated
against the principal's own synthesized role policies with moto's IAM policy evaluator (moto does
not enforce IAM itself). tests/e2e/conftest.py attaches RECORDER to every end-to-end test.

An operation the hook maps to no action is reported as unmapped rather than guessed.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moto.iam.access_control import IAMPolicyStatement, PermissionResult
from moto.iam.policy_conditions import TrustRelationShipConditions

from mapload.emulator.calls import AwsCall, Principal

# The condition operators evaluated: StringEquals by moto's evaluator (the only one it implements,
# moto/iam/policy_conditions.py), StringLike here (`_like`, IAM's wildcards).
EVALUATED_OPERATORS = frozenset({"StringEquals", "StringLike"})


def _like(pattern: str, value: str) -> bool:
    """IAM's StringLike: case-sensitive, `*` any run of characters (none included), `?` one
    character, nothing else special (unlike fnmatch, `[` is literal)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


def _holds(operator: str, values: Mapping[str, Any], context: Mapping[str, str]) -> bool:
    """An evaluable condition block holds for the call's context (every key; any of a key's values)."""
    if operator == "StringLike":
        return all(
            any(_like(str(p), context[key]) for p in (v if isinstance(v, list) else [v]))
            for key, v in values.items()
        )
    return all(
        condition.verify_condition([context[key] for key in condition.context_keys])
        for condition in TrustRelationShipConditions({operator: dict(values)})
    )


@dataclass(frozen=True)
class Call:
    principal: Principal
    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        return f"{self.principal.name} (role {self.principal.role}): {self.action} on {self.resource}"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    allowing: tuple[int, ...]  # indexes of the statements that allow the call
    why: str


def decide(statements: tuple[str, ...], call: Call) -> Decision:
    """AWS's identity-policy logic over moto's statement matcher: an explicit Deny wins, else an
    Allow is needed. A condition not evaluated here (an operator other than StringEquals and
    StringLike, or a key the call's context lacks) never makes an Allow count and always lets a Deny apply."""
    context = dict(call.context)
    allowing: list[int] = []
    for index, statement in enumerate(_parsed(statements)):
        conditions: dict[str, dict[str, Any]] = statement.get("Condition") or {}
        evaluable = all(
            operator in EVALUATED_OPERATORS and all(key in context for key in keys)
            for operator, keys in conditions.items()
        )
        if not evaluable and statement["Effect"] == "Allow":
            continue
        if evaluable and not all(_holds(op, values, context) for op, values in conditions.items()):
            continue  # its condition does not hold: the statement does not apply
        # The condition holds (or, for a Deny, cannot be evaluated): match action and resource.
        unconditional = {k: v for k, v in statement.items() if k != "Condition"}
        result = IAMPolicyStatement(unconditional).is_action_permitted(call.action, call.resource)
        if result == PermissionResult.PERMITTED:
            allowing.append(index)
        elif result == PermissionResult.DENIED:
            return Decision(False, (), f"explicitly denied by statement {index}")
    if allowing:
        return Decision(True, tuple(allowing), "allowed")
    return Decision(False, (), "no statement allows it")


@functools.lru_cache(maxsize=64)
def _parsed(statements: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(text) for text in statements)


@dataclass
class Recorder:
    """An observer (`mapload.emulator.calls.watching(RECORDER)`): the calls seen since the last
    `take()`, each as one principal, action and resource, with the KMS calls made for it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: set[Call] = field(default_factory=set)
    unmapped: set[str] = field(default_factory=set)

    def __call__(self, call: AwsCall) -> None:
        self.add(call.principal, call.operation, list(call.needs), dict(call.context))
        if call.principal is None:
            return
        service = call.operation.split(":", 1)[0]
        for kms in call.kms:
            found = [(action, kms.key) for action in kms.actions]
            self.add(call.principal, f"{service} via kms", found, dict(kms.context))

    def add(
        self, who: Principal | None, service_op: str, found: list[tuple[str, str]], ctx: Mapping[str, str]
    ) -> None:
        if who is None:
            return  # the test harness or the emulator itself, not a deployed principal
        with self.lock:
            if not found:
                self.unmapped.add(f"{who.name}: {service_op}")
            for action, resource in found:
                self.calls.add(Call(who, action, resource, tuple(sorted(ctx.items()))))

    def take(self) -> tuple[set[Call], set[str]]:
        with self.lock:
            calls, unmapped = self.calls, self.unmapped
            self.calls, self.unmapped = set(), set()
        return calls, unmapped

    def denied(self) -> list[str]:
        """Every call since the last take() that its principal's policies do not allow (and
        every operation with no known action), as lines naming principal, action and resource."""
        calls, unmapped = self.take()
        lines = []
        for call in sorted(calls, key=Call.describe):
            decision = decide(call.principal.statements, call)
            if not decision.allowed:
                lines.append(f"{call.describe()}: {decision.why}")
        lines += [f"{u}: no documented IAM action mapped for this operation" for u in sorted(unmapped)]
        return lines


RECORDER = Recorder()
