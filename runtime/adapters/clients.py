"""One place that builds boto3 clients for the handlers, cached per process, all from one
session (boto3's default): its loader reads botocore's endpoint rules and service models once for every
client (each new session reads them again: about 50 ms of a cold start here). A lock makes the first
call build the client and the others wait for it (the embedded run starts several Workers in one
process at once; without it each built its own)."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import boto3
import botocore.session
from botocore.config import Config

# Endpoint URLs are not passed here on purpose: boto3 reads the standard AWS_ENDPOINT_URL,
# AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL_DYNAMODB settings itself, so the same code runs
# on AWS, in the embedded emulator and against any S3/DynamoDB-compatible server.

_BUILDING = threading.RLock()  # re-entrant: batch_writes builds dynamodb, which builds _core
_F = TypeVar("_F", bound=Callable[..., Any])


def _once(factory: _F) -> _F:
    """`functools.cache`, the first build of each client under `_BUILDING`."""
    cached = functools.cache(factory)

    @functools.wraps(factory)
    def build(*args: Any) -> Any:
        with _BUILDING:
            return cached(*args)

    build.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    return build  # type: ignore[return-value]


def _client(service: str, config: Config) -> Any:
    return session().client(service, config=config)


@_once
def _core() -> botocore.session.Session:
    """The botocore session of every client, made boto3's default session too (so that
    `boto3.client` elsewhere in the process, e.g. the embedded emulator's, reads botocore's data
    through the same loader): its credentials also sign the Worker's BatchWriteItem requests
    (adapters/dynamodb_wire.py)."""
    core = botocore.session.get_session()
    boto3.setup_default_session(botocore_session=core)
    return core


@_once
def session() -> boto3.session.Session:
    """The one boto3 session around `_core()` (boto3's default). One for every client: each boto3
    session registers its handlers on the botocore session it wraps, and a second around the
    same one would register them twice (S3's client class then refuses to be built: "Cannot
    inject class attribute")."""
    _core()
    made: boto3.session.Session = boto3.DEFAULT_SESSION
    return made


@_once
def s3() -> Any:
    # One client serves every thread of a process (upload_fileobj's too): room for all of them.
    return _client("s3", Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=50))


@_once
def dynamodb(pool: int = 10) -> Any:
    # The batch writer retries throttling and UnprocessedItems itself (and counts them), so
    # botocore makes one attempt per call; the pool holds one connection per request in flight
    # (kept alive between requests). Parameter validation is off: this client only sends
    # BatchWriteItem requests and the single-item writes of a write mode (logic/writemodes.py),
    # whose items the mapper built in low-level form (logic/mapping.py), so botocore's walk over
    # every attribute value of every request would only cost CPU.
    return _client(
        "dynamodb",
        Config(
            retries={"mode": "standard", "total_max_attempts": 1},
            max_pool_connections=pool,
            tcp_keepalive=True,
            parameter_validation=False,
        ),
    )


@_once
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


@_once
def ledger_dynamodb() -> Any:
    # Finalize reads the ledger's blocks on READ_THREADS threads at once, the Worker's budget
    # thread beside its main one: a pool smaller than that makes threads wait for (or discard)
    # connections ("Connection pool is full").
    from adapters.ledger import READ_THREADS

    return _client(
        "dynamodb",
        Config(retries={"mode": "standard", "max_attempts": 8}, max_pool_connections=READ_THREADS + 2),
    )


@_once
def stepfunctions() -> Any:
    """Plan asks whether the execution holding a jobId still runs (adapters/executions.py)."""
    return _client("stepfunctions", Config(retries={"mode": "standard", "max_attempts": 5}))


def reset() -> None:
    """Forget every cached client and the session (a new endpoint, emulator or set of
    credentials needs new ones); the next client makes a new default session."""
    for factory in (s3, session, _core, dynamodb, batch_writes, ledger_dynamodb, stepfunctions):
        factory.cache_clear()  # type: ignore[attr-defined]  # _once's
