"""Each write mode's model states what the mode does, and the Worker has a writer for every mode and
engine the models allow (logic/spec/dynamodb.py, runtime/shards/writing.py)."""

from __future__ import annotations

from typing import get_args

import pytest

from logic.batching import BATCH_ITEMS
from logic.spec.dynamodb import (
    ENGINES,
    LAMBDA,
    WRITE_MODE_TYPES,
    WRITE_MODES,
    DynamoDbTarget,
    EstimateModel,
    write_mode_type,
)
from shards.writing import WRITERS, writer_factory

pytestmark = pytest.mark.runtime

CAPABILITIES = ("name", "batched", "items_per_request", "conditional", "counts", "operation", "engines")


def test_every_write_mode_has_its_model_under_its_name() -> None:
    assert tuple(WRITE_MODE_TYPES) == WRITE_MODES
    for name, mode in WRITE_MODE_TYPES.items():
        assert mode.name == name and write_mode_type(name) is mode
        assert get_args(mode.model_fields["write_mode"].annotation) == (name,)
    with pytest.raises(ValueError, match="unknown write mode 'upsert'"):
        write_mode_type("upsert")


@pytest.mark.parametrize("name", WRITE_MODES)
def test_each_mode_states_what_it_does(name: str) -> None:
    mode = write_mode_type(name)
    for capability in CAPABILITIES:
        assert hasattr(mode, capability), f"{name} does not say {capability}"
    assert isinstance(mode.estimate, EstimateModel) and mode.engines
    assert mode.items_per_request == (BATCH_ITEMS if mode.batched else 1)
    assert mode.versioned == ("version" in mode.model_fields)


def test_the_modes_do_what_their_documentation_says() -> None:
    """The facts the write modes' documentation (docs/INPUT.md, logic/writemodes.py) gives."""
    facts = {
        name: (mode.later_wins, mode.batched, mode.conditional, mode.counts, mode.operation)
        for name, mode in WRITE_MODE_TYPES.items()
    }
    assert facts == {
        "put": (True, True, False, False, "PutItem"),
        "putIfAbsent": (False, True, True, False, "PutItem"),
        "newerWins": (False, False, True, False, "PutItem"),
        "update": (False, False, False, True, "UpdateItem"),
        "delete": (False, True, False, False, "DeleteItem"),
        "sync": (False, True, False, False, "PutItem"),
    }


def test_the_worker_has_a_writer_for_every_mode_and_engine_the_models_allow() -> None:
    allowed = {(mode, engine) for mode in WRITE_MODE_TYPES.values() for engine in mode.engines}
    assert set(WRITERS) == allowed
    assert {engine for _mode, engine in allowed} == set(ENGINES)


def test_a_model_derived_from_a_mode_is_written_as_that_mode() -> None:
    from logic.spec.dynamodb import ExportDeleteTarget, ExportPutTarget

    assert writer_factory(ExportPutTarget) is WRITERS[(write_mode_type("put"), LAMBDA)]
    assert writer_factory(ExportDeleteTarget) is WRITERS[(write_mode_type("delete"), LAMBDA)]
    assert ExportDeleteTarget.name == "delete" and ExportDeleteTarget.batched

    class Unwritten(DynamoDbTarget):
        pass

    with pytest.raises(ValueError, match="no writer"):
        writer_factory(Unwritten)
