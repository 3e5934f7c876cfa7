"""moto's server for `make bench`, with `mapload serve`'s DynamoDB patches (serve.PATCHES, from
mapload/emulator/moto_patches.py): putIfAbsent's BatchExecuteStatement INSERTs answered as the
embedded run answers them (moto's own PartiQL cannot read their parameters), a delete's units
reported as DynamoDB counts them, a numeric add's TransactWriteItems isolated and rolled back
item by item (moto's own deep-copies the tables it names for each), AWS's item and expression
limits, and moto's hot paths made cheap (its routing, and a fifth of its CPU per BatchWriteItem). Arguments as
`python -m moto.server`'s."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from moto import server

from mapload.emulator import moto_patches, serve

if __name__ == "__main__":
    moto_patches.install(*serve.PATCHES)
    server.main(sys.argv[1:])
