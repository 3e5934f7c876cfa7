"""One place that builds boto3 clients for the handlers, cached per process."""

from __future__ import annotations

import functools
import os
from typing import Any

import boto3
import botocore.session
from botocore.config import Config

# Endpoint URLs are not passed here on purpose: boto3 reads the standard AWS_ENDPOINT_URL,
# AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL_DYNAMODB settings itself, so the same code runs
# on AWS, in the embedded emulator and against any S3/DynamoDB-compatible server.


@functools.cache
def s3() -> Any:
    # One client serves every thread of a process (upload_fileobj's too): room for all of them.
    return boto3.client(
        "s3", config=Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=50)
    )


@functools.cache
def _core() -> botocore.session.Session:
    """The botocore session of the DynamoDB clients: its credentials also sign the Worker's
    BatchWriteItem requests (adapters/dynamodb_wire.py)."""
    return botocore.session.get_session()


@functools.cache
def dynamodb(pool: int = 10) -> Any:
    # The batch writer retries throttling and UnprocessedItems itself (and counts them), so
    # botocore makes one attempt per call; the pool holds one connection per request in flight
    # (kept alive between requests). Parameter validation is off: this client only sends
    # BatchWriteItem requests and the single-item writes of a write mode (logic/writemodes.py),
    # whose items the mapper built in low-level form (logic/mapping.py), so botocore's walk over
    # every attribute value of every request would only cost CPU.
    return boto3.session.Session(botocore_session=_core()).client(
        "dynamodb",
        config=Config(
            retries={"mode": "standard", "total_max_attempts": 1},
            max_pool_connections=pool,
            tcp_keepalive=True,
            parameter_validation=False,
        ),
    )


@functools.cache
def batch_writes(pool: int = 10) -> Any:
    """What the Worker writes items with: BatchWriteItem to `dynamodb(pool)`'s endpoint, with its
    configuration and the session's credentials, without its per-call pipeline
    (adapters/dynamodb_wire.py)."""
    from adapters.dynamodb_wire import BatchWriteClient

    core = _core()
    # What botocore verifies a client's TLS with when the client is not told: the session's
    # ca_bundle (AWS_CA_BUNDLE or the config file), else REQUESTS_CA_BUNDLE, else the defaults.
    verify = core.get_config_variable("ca_bundle") or os.environ.get("REQUESTS_CA_BUNDLE") or True
    return BatchWriteClient(dynamodb(pool), core.get_credentials(), verify=verify)


@functools.cache
def ledger_dynamodb() -> Any:
    # Finalize reads the ledger's blocks on READ_THREADS threads at once, the Worker's budget
    # thread beside its main one: a pool smaller than that makes threads wait for (or discard)
    # connections ("Connection pool is full").
    from adapters.ledger import READ_THREADS

    return boto3.client(
        "dynamodb",
        config=Config(retries={"mode": "standard", "max_attempts": 8}, max_pool_connections=READ_THREADS + 2),
    )


@functools.cache
def stepfunctions() -> Any:
    """Plan asks whether the execution holding a jobId still runs (adapters/executions.py)."""
    return boto3.client("stepfunctions", config=Config(retries={"mode": "standard", "max_attempts": 5}))


def reset() -> None:
    """Forget every cached client (a new endpoint or emulator needs new ones)."""
    for factory in (s3, _core, dynamodb, batch_writes, ledger_dynamodb, stepfunctions):
        factory.cache_clear()
