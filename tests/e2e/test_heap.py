"""mapload/emulator/heap.py: the heap frozen while a run or a server lasts, garbage still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from mapload.emulator import heap

pytestmark = pytest.mark.e2e


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    """A reference cycle nothing else holds: only the cyclic collector frees it."""
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    return weakref.ref(first)


def test_the_heap_is_frozen_while_the_block_lasts_and_handed_back_after() -> None:
    assert gc.get_freeze_count() == 0
    with heap.long_lived():
        at_start = gc.get_freeze_count()
        assert at_start > 1000  # the modules, classes and objects alive when it began
        kept = [_Node() for _ in range(5000)]  # long-lived objects made during the run
        gc.collect()  # a full pass: its survivors are frozen too
        assert gc.get_freeze_count() >= at_start + len(kept)
        with heap.long_lived():  # nested (a server around a run): the inner end unfreezes nothing
            pass
        assert gc.get_freeze_count() >= at_start + len(kept)
    assert gc.get_freeze_count() == 0
    assert heap._freeze_after_full_pass not in gc.callbacks


def test_garbage_made_during_the_block_is_still_collected() -> None:
    with heap.long_lived():
        gone = _cycle()
        gc.collect()
        assert gone() is None
        survivor = _Node()  # frozen by the next full pass, still freed by its count
        watch = weakref.ref(survivor)
        gc.collect()
        del survivor
        assert watch() is None


def test_a_cycle_frozen_while_alive_is_collected_once_the_block_ends() -> None:
    with heap.long_lived():
        first, second = _Node(), _Node()
        first.other, second.other = second, first
        gc.collect()  # both survive this pass: frozen
        watch = weakref.ref(first)
        del first, second
        gc.collect()
        assert watch() is not None  # a frozen cycle waits for the end of the block
    gc.collect()
    assert watch() is None
