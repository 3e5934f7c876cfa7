"""moto-backed S3 and DynamoDB for the handler tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from pipeline_support import REGION

from adapters import clients
from mapload.emulator import moto_patches
from mapload.tables import create_pk_sk_table


def _clear_clients() -> None:
    clients.reset()


@pytest.fixture(autouse=True)
def partiql_insert() -> Iterator[None]:
    """moto answers putIfAbsent's BatchExecuteStatement INSERTs as the embedded run and `mapload
    serve` do (moto_patches.PARTIQL_INSERT: moto's own PartiQL cannot read their parameters)."""
    moto_patches.PARTIQL_INSERT.install()
    try:
        yield
    finally:
        moto_patches.PARTIQL_INSERT.uninstall()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An S3 client on a fresh moto with buckets src, stg, elsewhere and tables ledger, target."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        _clear_clients()
        s3 = boto3.client("s3", region_name=REGION)
        for bucket in ("src", "stg", "elsewhere"):
            s3.create_bucket(Bucket=bucket)
        db = boto3.client("dynamodb", region_name=REGION)
        for table in ("ledger", "target"):
            create_pk_sk_table(db, table)
        yield s3
    _clear_clients()
