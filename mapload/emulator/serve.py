"""`mapload serve`: the embedded emulator's DynamoDB and S3 as a server that outlives runs.

A plain `moto_server` applies TransactWriteItems non-atomically across its request threads, so a
numeric ADD's transactions (the item's update together with its ledger marker) come back
cancelled although they were applied: a run reports them skipped. This server is moto's, in this
process, with the emulator's DynamoDB write patch (moto_patches.TRANSACTIONS) installed, so every
write mode mapload uses behaves as DynamoDB's does. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from mapload.emulator import moto_patches

HOST = "127.0.0.1"
DEFAULT_PORT = 5005
# What `run-local`, `upload --env local` and the user's own tools read to reach the server.
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_S3")


@contextmanager
def serving(port: int = DEFAULT_PORT) -> Iterator[str]:
    """moto's server on 127.0.0.1:`port` (0: a free port) with the emulator's DynamoDB write
    patch, until the block ends; yields its endpoint URL. OSError when the port is taken."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    app = DomainDispatcherApplication(create_backend_app)
    # Bound here, so a taken port is an OSError the caller sees (werkzeug's own bind exits).
    listener = socket.create_server((HOST, port))
    server = make_server(
        HOST, port, app, threaded=True, request_handler=MotoRequestHandler, fd=listener.fileno()
    )
    moto_patches.TRANSACTIONS.install()
    thread = threading.Thread(target=server.serve_forever, name="mapload-serve", daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{listener.getsockname()[1]}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
        listener.close()
        moto_patches.TRANSACTIONS.uninstall()


def exports(endpoint: str) -> list[str]:
    """The shell lines that point mapload (and the AWS CLI) at the server."""
    return [f"export {name}={endpoint}" for name in ENDPOINT_VARIABLES]
