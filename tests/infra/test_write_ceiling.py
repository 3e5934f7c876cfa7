"""max_write_concurrency: the explicit upper bound of a worker's write window, passed to the Worker."""

from __future__ import annotations

from typing import Any

import pytest

from handlers.settings import WorkerSettings
from stacks.config import load_environment
from stacks.settings import MaploadConfigError

pytestmark = pytest.mark.infra

WORKER_ENV = {
    "SOURCE_BUCKETS": "src",
    "STAGING_BUCKET": "stg",
    "LEDGER_TABLE": "ledger",
    "TABLE_NAME": "target",
    "LEDGER_TTL_DAYS": "7",
    "WRITE_CONCURRENCY": "8",
}


def load(**settings: Any) -> Any:
    return load_environment({"environments": {"dev": settings}}, "dev")


def test_the_default_ceiling_is_64_and_an_override_is_read() -> None:
    assert load().loader.max_write_concurrency == 64
    assert load(write_concurrency=16, max_write_concurrency=128).loader.max_write_concurrency == 128


def test_a_ceiling_below_the_write_concurrency_is_refused_naming_both() -> None:
    with pytest.raises(MaploadConfigError) as raised:
        load(write_concurrency=16, max_write_concurrency=8)
    assert str(raised.value).startswith(
        "mapload.environments.dev.max_write_concurrency: 8 must be at least write_concurrency 16"
    )


def test_the_worker_reads_its_ceiling_and_its_pool_follows_it() -> None:
    assert WorkerSettings.from_env({**WORKER_ENV, "MAX_WRITE_CONCURRENCY": "40"}).write_ceiling == 40
    # Unset (an older stack): the ceiling is write_concurrency, as before.
    assert WorkerSettings.from_env(WORKER_ENV).write_ceiling == 8
    assert "MAX_WRITE_CONCURRENCY" in WorkerSettings.ENV_NAMES


def test_the_workers_writers_and_http_pool_follow_the_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters import clients
    from handlers import worker
    from logic.spec.parse import parse_spec
    from shards import writing

    pools: list[int] = []
    monkeypatch.setattr(clients, "batch_writes", lambda pool: pools.append(pool) or object())
    monkeypatch.setattr(clients, "s3", lambda: None)
    monkeypatch.setattr(clients, "ledger_dynamodb", lambda: None)
    monkeypatch.setattr(worker, "process_shard", lambda *arguments, **_: {})
    worker.handle({"shard": {}, "job": {}}, {**WORKER_ENV, "MAX_WRITE_CONCURRENCY": "40"})
    assert pools == [42]

    settings = WorkerSettings.from_env({**WORKER_ENV, "MAX_WRITE_CONCURRENCY": "40"})
    for mode in ("put", "update"):
        target = {"key": {"pk": "{id}", "sk": "V"}, "writeMode": mode}
        raw = {"source": "s3://src/x.jsonl", "format": "jsonl", "dynamodb": target}
        spec = parse_spec(raw, table_key={"pk": "S", "sk": "S"}, execution_name="e")
        sender = writing.writer(object(), object(), spec, settings, None)  # type: ignore[arg-type]
        assert sender is not None
        assert (sender.window.allowed, sender.threads) == (8, 40)
        sender.close()


def test_the_estimate_models_the_window_following_the_round_trip() -> None:
    from mapload import estimate as est
    from stacks.loader_settings import LoaderConfig

    assert LoaderConfig.model_fields["max_write_concurrency"].default == est.DEFAULT_MAX_WRITE_CONCURRENCY
    assert est.requests_in_flight(16, 20) == est.requests_in_flight(16, 5) == 16
    assert est.requests_in_flight(16, 50) == 40 and est.requests_in_flight(16, 500) == 64
    assert est.requests_in_flight(16, 500, max_in_flight=16) == 16
    # Single items at 50 ms: 40 in flight, 800 items/s, as at 20 ms (no loop bound given).
    assert est.worker_rate("update", in_flight=16, round_trip_ms=50, loop_items_per_second=1e9) == 800
    assert est.worker_rate("put", in_flight=16, round_trip_ms=50, loop_items_per_second=1e9) == 20_000
