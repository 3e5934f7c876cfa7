"""Resolve the CloudFormation intrinsics CDK emits, against names the emulator chose."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class UnresolvedError(Exception):
    """A template value refers to something the embedded run did not create."""


class Resolver:
    def __init__(self, region: str, account: str) -> None:
        self.region = region
        self.account = account
        self.refs: dict[str, str] = {}  # logical id -> physical id (Ref)
        self.attrs: dict[tuple[str, str], str] = {}  # (logical id, attribute) -> value
        self.exports: dict[str, Any] = {}
        self._pseudo = {
            "AWS::Region": region,
            "AWS::AccountId": account,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "mapload",
            "AWS::NoValue": None,
        }

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, Mapping):
            return value
        if len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                if arg in self._pseudo:
                    return self._pseudo[arg]
                if arg not in self.refs:
                    raise UnresolvedError(f"Ref {arg}")
                return self.refs[arg]
            if fn == "Fn::GetAtt":
                logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                if (logical, attr) not in self.attrs:
                    raise UnresolvedError(f"Fn::GetAtt {logical}.{attr}")
                return self.attrs[(logical, attr)]
            if fn == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(p)) for p in self.resolve_list(parts))
            if fn == "Fn::Select":
                index, items = arg
                return self.resolve_list(items)[int(self.resolve(index))]
            if fn == "Fn::Split":
                sep, text = arg
                return str(self.resolve(text)).split(sep)
            if fn == "Fn::ImportValue":
                name = self.resolve(arg)
                if name not in self.exports:
                    raise UnresolvedError(f"Fn::ImportValue {name}")
                return self.exports[name]
            if fn == "Fn::Sub":
                return self._sub(arg)
        return {k: self.resolve(v) for k, v in value.items()}

    def resolve_list(self, value: Any) -> list[Any]:
        resolved = self.resolve(value)
        if not isinstance(resolved, list):
            raise UnresolvedError(f"expected a list, got {resolved!r}")
        return resolved

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        out = str(text)
        for name, val in variables.items():
            out = out.replace("${" + name + "}", str(self.resolve(val)))
        for name, val in self._pseudo.items():
            out = out.replace("${" + name + "}", str(val))
        return out
