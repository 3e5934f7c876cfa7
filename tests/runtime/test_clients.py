"""runtime/adapters/clients.py: every client from one session (boto3's default), each built once."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest

from adapters import clients


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    clients.reset()
    yield clients
    clients.reset()


def test_every_client_reads_botocore_s_data_through_one_loader(fresh: Any) -> None:
    """One session: botocore's endpoint rules and models are read once for all of them (a
    second session reads them again, ~50 ms of a cold start)."""
    loader = fresh._core().get_component("data_loader")
    built = [fresh.s3(), fresh.dynamodb(4), fresh.ledger_dynamodb(), fresh.stepfunctions()]
    assert all(client._loader is loader for client in built)
    assert [c.meta.service_model.service_name for c in built] == [
        "s3",
        "dynamodb",
        "dynamodb",
        "stepfunctions",
    ]
    assert fresh.batch_writes(4) is fresh.batch_writes(4)
    # boto3's default session: another boto3.client in the process reads through the same loader.
    assert boto3.DEFAULT_SESSION is fresh.session()
    assert boto3.client("dynamodb")._loader is loader


def test_workers_starting_together_share_one_client(fresh: Any) -> None:
    """The embedded run starts several Workers in one process at once: the first builds the
    client, the others wait for it and get the same one."""
    got: list[Any] = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        got.append(fresh.batch_writes(10))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(g is got[0] for g in got)


def test_s3_s_client_builds_after_the_others(fresh: Any) -> None:
    """boto3 adds its transfer methods to S3's client class through a handler each boto3 session
    registers: a session per client registered it twice and S3's client refused to build."""
    fresh.dynamodb(4)
    fresh.ledger_dynamodb()
    fresh.stepfunctions()
    assert hasattr(fresh.s3(), "upload_fileobj")
