"""The embedded emulator: AWS on this machine, for `mapload run-local`, `mapload serve` and the tests.

moto as AWS (every patch of its internals listed in moto_patches.py, by reason), the runtime
handlers as the Lambda functions (embedded.py: the stacks provisioned from the synthesized
templates, cfn.py resolving their intrinsics), AWS's service limits that moto does not enforce
(limits.py), each AWS call the functions and the state machine make passed to the observers a
caller attaches (calls.py: the tests' IAM check and key meter are two), Neptune's bulk loader on
a local store (neptune_local.py, property_store.py) and an injectable clock (clock.py). server.py
serves its DynamoDB and S3 as a server that outlives runs. It imports nothing of the command.

The command (mapload/local.py, mapload/serve.py) reaches the emulator through this module only:
what it exports below.
"""

from mapload.emulator.clock import Clock
from mapload.emulator.embedded import DATA_ENDPOINTS, Deployment, Emulator, observing
from mapload.emulator.heap import long_lived
from mapload.emulator.neptune_local import LocalNeptuneLoader
from mapload.emulator.server import serving

__all__ = [
    "DATA_ENDPOINTS",
    "Clock",
    "Deployment",
    "Emulator",
    "LocalNeptuneLoader",
    "long_lived",
    "observing",
    "serving",
]
