"""Every change the emulator makes to moto's private internals, by reason (moto 5.2.5, as pinned in
constraints.txt), and the sets the embedded run and the server install.

Each patch names the moto behaviour it mends and the internals it replaces (`targets`, each
"module:Owner.attribute" or "module:attribute"; moto_patch.py). tests/e2e/test_moto_patches.py
holds, per patch, a fingerprint of those internals as moto 5.2.5 ships them: an upgrade that
fixes, changes or moves one fails that test naming the patch. `install()` is idempotent and
`uninstall()` puts moto's own objects back exactly as they were; the Emulator (embedded.py)
installs its patches on entry and uninstalls them on exit, the server (server.py) while it serves.

Seams the run needs (moto_seams.py):
- LAMBDA_INVOKE: moto's simple Lambda backend answers every invocation with a canned body; the
  embedded run's seam runs the runtime handler in-process instead.
- WAIT_CLOCK: a Wait state sleeps real seconds; given a clock, it moves the clock on instead.
- BULK_PUT: moto has no DynamoDB bulk put items (StartBulkPutItems, DescribeBulkOperation,
  ListBulkOperations, CancelBulkOperation); its DynamoDB handler gains them, answered by the
  local model (bulk_put.py) on the emulator's S3 and tables, in the embedded run and `mapload serve`.

What AWS enforces or answers and moto does not (moto_limits.py, LIMITS; the numbers in limits.py):
- HISTORY_LIMIT, MAP_RESULT_LIMIT, UNCATCHABLE, RESULT_WRITER_PARAMETERS, RESULT_WRITER_FILES:
  Step Functions (moto checks each state's output and each task's result against 256 KiB, but not
  a Map's collected results; lets States.ALL catch States.DataLimitExceeded; counts no history;
  and its ResultWriter selects its parameters from the children's outputs and writes an empty
  manifest).
- DYNAMODB_EXPRESSIONS: DynamoDB's expression limits (4 KB a string, 300 operators or functions
  an UpdateExpression), which moto does not check; and moto's expression parser kept from
  overflowing Python's recursion limit on an expression AWS accepts.
- ITEM_SIZE: DynamoDB's 400 KB item limit as AWS counts an item's size (moto's own measure
  ignores a list's and map's overhead and stops at 405,000 bytes); a new item is measured once;
  an update refused for the item's size changes nothing (moto kept its earlier actions).
- PARTIQL_INSERT: BatchExecuteStatement of the INSERTs putIfAbsent sends, with AWS's per-statement
  answers (moto's PartiQL copies every item of every table for each statement, and cannot read
  an INSERT's `?` parameters).
- BATCH_WRITE_UNITS: the write units a BatchWriteItem consumed, when asked (ReturnConsumedCapacity),
  as AWS counts them (moto reports one per request, whatever it wrote or deleted).
- TABLE_CREATING: a new table CREATING for a moment, its items ResourceNotFoundException until a
  DescribeTable sees it ACTIVE (moto makes it ACTIVE at once; DynamoDB takes seconds).

Transactions (moto_transactions.py):
- TRANSACTIONS: TransactWriteItems isolated from other threads' writes, as DynamoDB's are,
  rolled back item by item (moto deep-copies every table a transaction names, each time), and in
  conflict with another write to one of its items while in progress (TransactionConflict), as
  DynamoDB answers (moto has no conflicts).

Speed only, behaviour unchanged (moto_speed.py; each shown equal to moto's own in
tests/e2e/test_moto_speed.py):
- BACKEND_LOOKUP, CLIENT_REUSE: two hot paths made cheap for a Map with thousands of children
  (py-spy on a 2,000-shard run, docs/ARCHITECTURE.md "The embedded emulator").
- QUERY_PARTITION: a base-table Query reads its partition's items, not the whole table's.
- SERVER_MODULES: moto's server (`mapload serve`) lists its package directory under its
  dispatcher's lock on every request; the list is taken once.
- DYNAMO_TYPES, METHOD_NAMES, BATCH_WRITE_PARSE: the CPU moto spends on each BatchWriteItem, a
  quarter less.
- AST_TRAVERSE, UPDATE_PARSE: the CPU of an UpdateItem's validation (its expression parsed once
  and shared, each of the ten validating walks reading its map once), a quarter less in moto's
  backend, answers and stored items unchanged.
DYNAMODB_SPEED (all but CLIENT_REUSE and SERVER_MODULES) is installed in the embedded run and
`mapload serve` (the bench's server too); SPEED adds CLIENT_REUSE for the embedded run.
"""

from __future__ import annotations

from typing import Final

from mapload.emulator.moto_limits import (
    BATCH_WRITE_UNITS,
    DYNAMODB_EXPRESSIONS,
    EXPRESSION_RECURSION,
    HISTORY_LIMIT,
    ITEM_SIZE,
    LIMITS,
    MAP_RESULT_LIMIT,
    PARTIQL_INSERT,
    RESULT_WRITER_FILES,
    RESULT_WRITER_PARAMETERS,
    TABLE_CREATING,
    UNCATCHABLE,
    batch_request,
    parse_insert,
)
from mapload.emulator.moto_patch import Patch, resolve
from mapload.emulator.moto_seams import BULK_PUT, LAMBDA_INVOKE, WAIT_CLOCK
from mapload.emulator.moto_speed import (
    AST_TRAVERSE,
    BACKEND_LOOKUP,
    BATCH_WRITE_PARSE,
    CLIENT_REUSE,
    DYNAMO_TYPES,
    DYNAMODB_SPEED,
    METHOD_NAMES,
    QUERY_PARTITION,
    SERVER_MODULES,
    SPEED,
    UPDATE_PARSE,
    NotPlain,
    plain_batch_write,
)
from mapload.emulator.moto_transactions import TRANSACTIONS

__all__ = [
    "ALL",
    "AST_TRAVERSE",
    "BACKEND_LOOKUP",
    "BATCH_WRITE_PARSE",
    "BATCH_WRITE_UNITS",
    "BULK_PUT",
    "CLIENT_REUSE",
    "DYNAMODB_EXPRESSIONS",
    "DYNAMODB_SPEED",
    "DYNAMO_TYPES",
    "EXPRESSION_RECURSION",
    "HISTORY_LIMIT",
    "ITEM_SIZE",
    "LAMBDA_INVOKE",
    "LIMITS",
    "MAP_RESULT_LIMIT",
    "METHOD_NAMES",
    "PARTIQL_INSERT",
    "QUERY_PARTITION",
    "RESULT_WRITER_FILES",
    "RESULT_WRITER_PARAMETERS",
    "SERVER_MODULES",
    "SPEED",
    "TABLE_CREATING",
    "TRANSACTIONS",
    "UNCATCHABLE",
    "UPDATE_PARSE",
    "WAIT_CLOCK",
    "NotPlain",
    "Patch",
    "batch_request",
    "install",
    "parse_insert",
    "plain_batch_write",
    "resolve",
    "uninstall",
]

# Every patch, for the guard test (SERVER_MODULES: moto's server only, `mapload serve`).
ALL: Final[tuple[Patch, ...]] = (
    LAMBDA_INVOKE,
    WAIT_CLOCK,
    BULK_PUT,
    *LIMITS,
    *SPEED,
    TRANSACTIONS,
    SERVER_MODULES,
)


def install(*patches: Patch) -> None:
    """Install parameterless patches (e.g. `install(*SPEED)`); uninstall() undoes them."""
    for patch in patches:
        patch.install()


def uninstall(*patches: Patch) -> None:
    for patch in reversed(patches):
        patch.uninstall()
