"""moto's server for `make bench`, answering putIfAbsent's BatchExecuteStatement INSERTs as the
embedded run and `mapload serve` do (mapload/emulator/moto_patches.py PARTIQL_INSERT: moto's own
PartiQL cannot read their parameters). Arguments as `python -m moto.server`'s."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from moto import server

from mapload.emulator import moto_patches

if __name__ == "__main__":
    moto_patches.PARTIQL_INSERT.install()
    server.main(sys.argv[1:])
