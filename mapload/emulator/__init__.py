"""The embedded emulator: AWS on this machine, for `mapload run-local` and the tests.

moto as AWS (every patch of its internals in moto_patches.py), the runtime handlers as the Lambda
functions (embedded.py: the stacks provisioned from the synthesized templates, cfn.py resolving
their intrinsics), AWS's service limits that moto does not enforce (limits.py), IAM checked from
the calls the functions make (iamcheck.py), Neptune's bulk loader on a local store
(neptune_local.py, property_store.py) and an injectable clock (clock.py). local.py runs one
file through it; serve.py serves its DynamoDB and S3 to runs as a server that outlives them.

The command reaches the emulator through this module only: what it exports below.
"""

from mapload.emulator.local import LOCAL_CONTEXT, LocalRunError, run_local
from mapload.emulator.serve import DEFAULT_PORT, exports, serving

__all__ = ["DEFAULT_PORT", "LOCAL_CONTEXT", "LocalRunError", "exports", "run_local", "serving"]
