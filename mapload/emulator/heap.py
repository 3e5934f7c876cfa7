"""The emulator's long-lived heap, kept out of the garbage collector's full passes.

An embedded run holds moto's models, botocore's service descriptions and the state machine's
parsed tree (a few million objects) for the whole execution, and `mapload serve` holds every item
it stores, each a handful of objects. CPython's cyclic collector walks every tracked object on
each full pass, and it runs one whenever a quarter more objects have survived since the last: a
pass over a large heap stopped every thread of a run for 0.4-0.7 s at a time (py-spy on the
long-round-trip bench row), and a heap that keeps growing pays a full pass again and again.

`long_lived()` moves the objects alive when it starts, and those that survive each full pass
while it lasts, to the collector's permanent generation (`gc.freeze`): later passes walk only what
was made since. Reference counting still frees every one of them as soon as it is unused (a
deleted table's items included); what it does not free is a reference cycle among frozen objects
that becomes garbage while frozen, until the block ends and `gc.unfreeze` hands them back.
Nested blocks (a test's server around a run) unfreeze when the outermost ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_LOCK = threading.Lock()
_DEPTH = 0
_OLDEST = len(gc.get_threshold()) - 1  # the generation a full pass collects (2 in CPython 3.11-3.13)


def _freeze_after_full_pass(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info["generation"] == _OLDEST:
        gc.freeze()  # the survivors of a full pass: moved, not walked again


@contextmanager
def long_lived() -> Iterator[None]:
    """Freeze the heap now and after every full collection until the block ends (see above)."""
    global _DEPTH
    with _LOCK:
        _DEPTH += 1
        if _DEPTH == 1:
            gc.freeze()
            gc.callbacks.append(_freeze_after_full_pass)
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                gc.callbacks.remove(_freeze_after_full_pass)
                gc.unfreeze()
