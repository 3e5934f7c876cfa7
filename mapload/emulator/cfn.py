"""Resolve the CloudFormation intrinsics CDK emits, against names the emulator chose."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final


class UnresolvedError(Exception):
    """A template value refers to something the embedded run did not create, or uses an
    intrinsic it does not evaluate: failing loudly beats running something CloudFormation would not."""


# The intrinsics CloudFormation evaluates that this resolver does not: CDK emits none of them
# for mapload's templates today; a template that starts to must not run here half-resolved.
UNSUPPORTED_INTRINSICS: Final[frozenset[str]] = frozenset(
    {
        "Fn::If",
        "Fn::FindInMap",
        "Fn::Base64",
        "Fn::Cidr",
        "Fn::GetAZs",
        "Fn::Length",
        "Fn::ToJsonString",
        "Fn::Transform",
        "Fn::Equals",
        "Fn::And",
        "Fn::Or",
        "Fn::Not",
        "Condition",
    }
)


class _NoValue:
    """AWS::NoValue: the key holding it is removed, as CloudFormation does."""


NO_VALUE: Final = _NoValue()


class Resolver:
    def __init__(self, region: str, account: str) -> None:
        self.region = region
        self.account = account
        self.refs: dict[str, str] = {}  # logical id -> physical id (Ref)
        self.attrs: dict[tuple[str, str], str] = {}  # (logical id, attribute) -> value
        self.exports: dict[str, Any] = {}
        # (stack name, output id) -> value, for Fn::GetStackOutput (an error where it did not resolve).
        self.outputs: dict[tuple[str, str], Any] = {}
        # Resources the emulator does not create (logical id -> type): a Ref to one fails.
        self.unsupported: dict[str, str] = {}
        self._pseudo = {
            "AWS::Region": region,
            "AWS::AccountId": account,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "mapload",
        }

    def resolve(self, value: Any, where: str = "") -> Any:
        """The value with every intrinsic evaluated; `where` (a path) names the place in errors."""
        resolved = self._resolve(value, where or "$")
        if resolved is NO_VALUE:
            raise UnresolvedError(f"Ref AWS::NoValue at {where or '$'}: nothing holds the value to remove")
        return resolved

    def _resolve(self, value: Any, where: str) -> Any:
        if isinstance(value, list):
            items = (self._resolve(v, f"{where}[{i}]") for i, v in enumerate(value))
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, Mapping):
            return value
        if len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return self._ref(arg, where)
            if fn == "Fn::GetAtt":
                logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                if (logical, attr) not in self.attrs:
                    raise UnresolvedError(f"Fn::GetAtt {logical}.{attr} at {where}")
                return self.attrs[(logical, attr)]
            if fn == "Fn::Join":
                sep, parts = arg
                return sep.join(str(p) for p in self._list(parts, f"{where}.Fn::Join"))
            if fn == "Fn::Select":
                index, items = arg
                return self._list(items, f"{where}.Fn::Select")[int(self._resolve(index, where))]
            if fn == "Fn::Split":
                sep, text = arg
                return str(self._resolve(text, where)).split(sep)
            if fn == "Fn::ImportValue":
                name = self._resolve(arg, where)
                if name not in self.exports:
                    raise UnresolvedError(f"Fn::ImportValue {name} at {where}")
                if isinstance(self.exports[name], UnresolvedError):
                    raise UnresolvedError(f"Fn::ImportValue {name} at {where}: {self.exports[name]}")
                return self.exports[name]
            if fn == "Fn::GetStackOutput":
                return self._stack_output(arg, where)
            if fn == "Fn::Sub":
                return self._sub(arg, where)
            if fn in UNSUPPORTED_INTRINSICS:
                raise UnresolvedError(f"{fn} at {where}: the embedded run does not evaluate this intrinsic")
        resolved = {k: self._resolve(v, f"{where}.{k}") for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def _ref(self, name: Any, where: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self._pseudo:
            return self._pseudo[name]
        if name in self.unsupported:
            raise UnresolvedError(
                f"Ref {name} at {where}: a {self.unsupported[name]}, which the embedded run does not create"
            )
        if name not in self.refs:
            raise UnresolvedError(f"Ref {name} at {where}")
        return self.refs[name]

    def _stack_output(self, arg: Mapping[str, Any], where: str) -> Any:
        """Fn::GetStackOutput of a stack this run provisioned (same region, no role)."""
        key = (str(self._resolve(arg["StackName"], where)), str(self._resolve(arg["OutputName"], where)))
        if key not in self.outputs:
            raise UnresolvedError(f"Fn::GetStackOutput {key[0]}.{key[1]} at {where}")
        if isinstance(self.outputs[key], UnresolvedError):
            raise UnresolvedError(f"Fn::GetStackOutput {key[0]}.{key[1]} at {where}: {self.outputs[key]}")
        return self.outputs[key]

    def _list(self, value: Any, where: str) -> list[Any]:
        resolved = self._resolve(value, where)
        if not isinstance(resolved, list):
            raise UnresolvedError(f"expected a list at {where}, got {resolved!r}")
        return resolved

    def _sub(self, arg: Any, where: str) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        out = str(text)
        for name, val in variables.items():
            out = out.replace("${" + name + "}", str(self._resolve(val, f"{where}.Fn::Sub.{name}")))
        for name, val in self._pseudo.items():
            out = out.replace("${" + name + "}", str(val))
        if "${" in out:
            raise UnresolvedError(
                f"Fn::Sub at {where}: {out!r} names a variable the embedded run cannot resolve"
            )
        return out
