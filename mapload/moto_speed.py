"""Two of moto's hot paths made cheap for a Map with thousands of children; behaviour unchanged.

With a hundred Map iterations in flight as threads, two costs of moto 5.2.5 dominate the
embedded run (py-spy on a 2,000-shard run, see docs/ARCHITECTURE.md "The embedded emulator"):
- every request looks its backend up through `BackendDict.__getitem__`, which takes moto's one
  global lock even when the account's backend exists, so all threads queue on it;
- the interpreter builds a new boto3 client (`boto_client_for`) for every Lambda task and every
  ResultWriter/ItemReader call: loading the service model each time.
`install()` gives the lookup a lock-free path for an account that already has its backend (the
locked path still creates one, as before) and reuses one client per region, service and
credentials while the mock is on (boto3 clients are thread-safe; creating them is not cheap).
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

# The modules of moto's interpreter that imported `boto_client_for` by name.
_CLIENT_USERS = (
    "moto.stepfunctions.parser.asl.utils.boto_client",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval.resource_eval_s3",
)

_SAVED: dict[tuple[Any, str], Any] = {}
_CLIENTS: dict[tuple[str, str, str, bool], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def install() -> None:
    """Patch the two paths (idempotent; uninstall() restores them and drops the clients)."""
    from moto.core.base_backend import BackendDict
    from moto.stepfunctions.parser.asl.utils import boto_client

    if _SAVED:
        return
    locked_lookup = BackendDict.__getitem__
    _SAVED[(BackendDict, "__getitem__")] = locked_lookup

    def lookup(self: Any, account_id: str) -> Any:
        try:
            return dict.__getitem__(self, account_id)
        except KeyError:  # first use of the account (or after a reset): moto's locked path
            return locked_lookup(self, account_id)

    BackendDict.__getitem__ = lookup  # type: ignore[method-assign]

    create = boto_client.boto_client_for

    def client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        from moto.core.models import botocore_stubber

        key = (region, service, repr(state_credentials), bool(botocore_stubber.enabled))
        client = _CLIENTS.get(key)
        if client is None:
            with _CLIENTS_LOCK:
                client = _CLIENTS.get(key)
                if client is None:
                    client = _CLIENTS[key] = create(region, service, state_credentials)
        return client

    for name in _CLIENT_USERS:
        module = importlib.import_module(name)
        _SAVED[(module, "boto_client_for")] = getattr(module, "boto_client_for")  # noqa: B009
        setattr(module, "boto_client_for", client_for)  # noqa: B010


def uninstall() -> None:
    for (owner, name), original in _SAVED.items():
        setattr(owner, name, original)
    _SAVED.clear()
    with _CLIENTS_LOCK:
        _CLIENTS.clear()
