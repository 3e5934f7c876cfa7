"""The embedded emulator's DynamoDB and S3 as a server that outlives runs (`mapload serve` runs it).

A plain `moto_server` applies TransactWriteItems non-atomically across its request threads, so a
numeric ADD's transactions (the item's update together with its ledger marker) come back
cancelled although they were applied: a run reports them skipped. This server is moto's, in this
process, with the emulator's DynamoDB patches installed (PATCHES: the write lock and item-by-item
rollback of transactions, the expression limits and the item size the in-process run enforces),
so every write mode mapload uses behaves as DynamoDB's does and what DynamoDB refuses is refused
here too; DynamoDB's bulk put items operations are answered by the local model (bulk_put.py).
Its S3 checks each part against its checksum on arrival, as S3 does (SERVE_PATCHES:
s3_checksums). The DynamoDB requests mapload sends are answered by moto's own handler without the
web framework around it (lane.py), and the stored items stay out of the garbage collector's full
passes (heap.py). It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from mapload.emulator import heap, moto_patches
from mapload.emulator.lane import DynamoDbLane
from mapload.emulator.s3_checksums import PART_CHECKSUMS

HOST = "127.0.0.1"
# The DynamoDB/S3-side patches the embedded run installs (its `__enter__`): the others act on
# Step Functions and Lambda, which the server does not serve; and moto's hot paths, the server's
# own and DynamoDB's.
PATCHES = (
    moto_patches.TRANSACTIONS,
    moto_patches.DYNAMODB_EXPRESSIONS,
    moto_patches.ITEM_SIZE,
    moto_patches.PARTIQL_INSERT,
    moto_patches.BATCH_WRITE_UNITS,
    moto_patches.SERVER_MODULES,
    *moto_patches.DYNAMODB_SPEED,
    moto_patches.BULK_PUT,
)
# S3 as well: parts checked against their checksums on arrival (see s3_checksums).
SERVE_PATCHES = (*PATCHES, PART_CHECKSUMS)


@contextmanager
def serving(port: int) -> Iterator[str]:
    """moto's server on 127.0.0.1:`port` (0: a free port) with the emulator's DynamoDB
    patches (PATCHES), until the block ends; yields its endpoint URL. OSError when the port is taken."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    app = DynamoDbLane(DomainDispatcherApplication(create_backend_app))
    # Bound here, so a taken port is an OSError the caller sees (werkzeug's own bind exits).
    listener = socket.create_server((HOST, port))
    server = make_server(
        HOST, port, app, threaded=True, request_handler=MotoRequestHandler, fd=listener.fileno()
    )
    moto_patches.install(*SERVE_PATCHES)
    thread = threading.Thread(target=server.serve_forever, name="mapload-serve", daemon=True)
    thread.start()
    try:
        with heap.long_lived():  # the stored items stay out of the collector's full passes
            yield f"http://{HOST}:{listener.getsockname()[1]}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
        listener.close()
        moto_patches.uninstall(*SERVE_PATCHES)
