"""max_write_concurrency: the explicit upper bound of a worker's write window, passed to the Worker."""

from __future__ import annotations

from typing import Any

import pytest

from handlers.settings import WorkerSettings
from stacks.config import MaploadConfigError, load_environment

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
    from logic.spec import parse_spec
    from shards import writing

    pools: list[int] = []
    monkeypatch.setattr(clients, "batch_writes", lambda pool: pools.append(pool) or object())
    monkeypatch.setattr(clients, "s3", lambda: None)
    monkeypatch.setattr(clients, "ledger_dynamodb", lambda: None)
    monkeypatch.setattr(worker, "process_shard", lambda *arguments: {})
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
