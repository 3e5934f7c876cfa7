"""moto's server for `make bench`, answering putIfAbsent's BatchExecuteStatement INSERTs as the
embedded run and `mapload serve` do (mapload/emulator/moto_patches.py PARTIQL_INSERT: moto's own
PartiQL cannot read their parameters), and reporting a delete's units as DynamoDB does
(BATCH_WRITE_UNITS), its routing made as cheap as `mapload serve`'s (SERVER_MODULES), and a numeric
add's TransactWriteItems isolated and rolled back item by item as there (TRANSACTIONS: moto's own
deep-copies the tables it names for each transaction). Arguments as `python -m moto.server`'s."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from moto import server

from mapload.emulator import moto_patches

if __name__ == "__main__":
    moto_patches.install(
        moto_patches.PARTIQL_INSERT,
        moto_patches.BATCH_WRITE_UNITS,
        moto_patches.SERVER_MODULES,
        moto_patches.TRANSACTIONS,
    )
    server.main(sys.argv[1:])
