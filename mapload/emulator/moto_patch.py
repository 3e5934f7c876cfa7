"""One change to moto's private internals (moto 5.2.5, as pinned in constraints.txt): its targets
replaced on install, moto's own objects put back exactly on uninstall; the patches themselves are
in moto_seams.py, moto_limits.py, moto_transactions.py and moto_speed.py (moto_patches.py lists them)."""

from __future__ import annotations

import importlib
from typing import Any, Final

_MISSING: Final = object()
# The package of moto's Step Functions interpreter, which several patches reach into.
SFN_ASL: Final = "moto.stepfunctions.parser.asl"


def resolve(target: str) -> tuple[Any, str]:
    """A target's owner and attribute name: the class for "module:Owner.attribute", the module
    for "module:attribute"."""
    module_name, _, path = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *owners, attribute = path.split(".")
    for name in owners:
        owner = getattr(owner, name)
    return owner, attribute


class Patch:
    """One moto behaviour mended by replacing its `targets` with `replacements` (same order)."""

    def __init__(self, name: str, targets: tuple[str, ...], replacements: tuple[Any, ...] = ()) -> None:
        self.name = name
        self.targets = targets
        self._replacements = replacements
        # target -> (what the owner's own namespace held, the attribute as moto's code read it)
        self._saved: dict[str, tuple[Any, Any]] = {}

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    def install(self) -> None:
        if self.installed:
            return
        # Import every target's module before replacing any: a module that imports a name from
        # another target's module (`from ...boto_client import boto_client_for`) and is first
        # imported after that module was patched would save the replacement as moto's own.
        for target in self.targets:
            resolve(target)
        for target, replacement in zip(self.targets, self._replacements, strict=True):
            self._swap(target, replacement)

    def original(self, target: str | None = None) -> Any:
        """moto's own attribute (the first target's by default), as its code read it: a plain
        function for a method (call it with the instance), the function for a module's name."""
        return self._saved[target or self.targets[0]][1]

    def uninstall(self) -> None:
        for target, (own, _) in self._saved.items():
            owner, attribute = resolve(target)
            if own is _MISSING:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, own)
        self._saved.clear()

    def _swap(self, target: str, replacement: Any) -> None:
        owner, attribute = resolve(target)
        if target not in self._saved:
            # A target moto lacks (an operation the emulator adds) is put back as missing.
            self._saved[target] = (vars(owner).get(attribute, _MISSING), getattr(owner, attribute, _MISSING))
        setattr(owner, attribute, replacement)
