"""Guards for mapload/emulator/moto_patches.py: each patch replaces moto internals as moto 5.2.5
ships them. These tests read unpatched moto and fail, naming the patch, when an upgrade changes,
fixes or moves what a patch replaces or relies on: re-check that patch against the new moto (drop
it if moto now does the right thing), then record the new fingerprint here."""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import textwrap
from typing import Any

import pytest
from moto import mock_aws

from mapload.emulator import moto_patches
from mapload.emulator.moto_patches import Patch, resolve

pytestmark = pytest.mark.e2e

MOTO_VERSION = "5.2.5"
_SFN = "moto.stepfunctions.parser.asl"
_MAP = f"{_SFN}.component.state.exec.state_map"
_BOTO_CLIENT_FOR = "1f44dc2ac8aa2179"
_DYNAMO = "moto.dynamodb.responses:DynamoHandler"
ABSENT = "absent"  # the fingerprint of an attribute moto does not have

# Per patch: sha256 (first 16 hex digits) of the dedented source of every moto attribute it
# replaces, as moto 5.2.5 ships it.
REPLACES: dict[str, dict[str, str]] = {
    "lambda-invoke": {"moto.awslambda_simple.models:LambdaSimpleBackend.invoke": "b09b0396b92dd439"},
    "wait-clock": {
        f"{_SFN}.component.state.wait.wait_function.wait_function:WaitFunction._wait_interval": (
            "2baecc23124bf46c"
        )
    },
    "history-limit": {f"{_SFN}.component.state.state:CommonStateField._eval_body": "37d888452f39c5f0"},
    "map-result-limit": {f"{_MAP}.state_map:StateMap._eval_execution": "037ef76eaae3b613"},
    "uncatchable-errors": {
        f"{_SFN}.component.common.error_name.error_equals_decl:ErrorEqualsDecl._eval_body": "fa479cb1270a1b07"
    },
    "result-writer-parameters": {
        f"{_MAP}.result_writer.result_writer_decl:ResultWriter._eval_body": ("3f249af5027e0450")
    },
    "result-writer-files": {
        f"{_MAP}.result_writer.resource_eval.resource_eval_s3"
        ":ResourceEvalS3._handle_put_object": "674d49d3e22cc489"
    },
    "backend-lookup": {"moto.core.base_backend:BackendDict.__getitem__": "b7c5b4bc0fc87260"},
    # Operations moto lacks: an upgrade that adds one fails here (drop the emulator's then).
    "bulk-put-items": {
        f"{_DYNAMO}.{name}": ABSENT
        for name in (
            "start_bulk_put_items",
            "describe_bulk_operation",
            "list_bulk_operations",
            "cancel_bulk_operation",
        )
    },
    "client-reuse": {
        f"{_SFN}.utils.boto_client:boto_client_for": _BOTO_CLIENT_FOR,
        f"{_SFN}.component.state.exec.state_task.lambda_eval_utils:boto_client_for": _BOTO_CLIENT_FOR,
        f"{_MAP}.result_writer.resource_eval.resource_eval_s3:boto_client_for": _BOTO_CLIENT_FOR,
        f"{_MAP}.item_reader.eval.resource_eval_s3:boto_client_for": _BOTO_CLIENT_FOR,
    },
    "transactions": {
        "moto.dynamodb.models:DynamoDBBackend.put_item": "b043f1999f49f820",
        "moto.dynamodb.models:DynamoDBBackend.update_item": "f1d5d4acae8ed91c",
        "moto.dynamodb.models:DynamoDBBackend.delete_item": "a03a3f819a3f4344",
        "moto.dynamodb.models:DynamoDBBackend.transact_write_items": "0b5c3b73cdccf326",
        # its items written through the backend's put_item/delete_item: not checked for conflicts
        f"{_DYNAMO}.batch_write_item": "39626abe4b473902",
        "moto.dynamodb.models:copy": "copy",  # a module moto imports by that name (fingerprint)
    },
    "dynamodb-expressions": {
        f"{_DYNAMO}.put_item": "56935bb97fd7ec61",
        f"{_DYNAMO}.update_item": "20632da862bdd2e2",
        f"{_DYNAMO}.delete_item": "3bba496d07b00299",
        f"{_DYNAMO}.get_item": "bd62be85a4a0c1b9",
        f"{_DYNAMO}.query": "1521e6ec60e2dd98",
        f"{_DYNAMO}.scan": "3e3949930c517f90",
        f"{_DYNAMO}.transact_write_items": "b9f060594221b40c",
        f"{_DYNAMO}.transact_get_items": "3107f9f91a3a52b7",
    },
    "item-size": {
        "moto.dynamodb.models.dynamo_type:LimitedSizeDict.__setitem__": "7894fedd60a6272d",
        "moto.dynamodb.models.dynamo_type:Item.__init__": "bebd778553426982",
        "moto.dynamodb.parsing.executors:UpdateExpressionExecutor.execute": "2a1a857eae2ff545",
    },
    "query-partition": {
        "moto.dynamodb.models.table:Table.query": "c08e16587862d4ca",
        "moto.dynamodb.models.table:Table.all_items": "2091a7dc1699504c",
    },
    "partiql-insert": {f"{_DYNAMO}.batch_execute_statement": "0a66ed1efd93ad41"},
    "batch-write-units": {f"{_DYNAMO}.batch_write_item": "39626abe4b473902"},
    "table-creating": {
        "moto.dynamodb.models:DynamoDBBackend.create_table": "308058b8f7317c03",
        "moto.dynamodb.models:DynamoDBBackend.get_table": "d041975772c42c17",
        "moto.dynamodb.models:DynamoDBBackend.describe_table": "10d61c582188186f",
    },
    "server-modules": {"moto.backends:list_of_moto_modules": "4f741a10b06500e8"},
    "dynamo-types": {"moto.dynamodb.models.dynamo_type:DynamoType.__init__": "8a6aadb1d581d395"},
    "method-names": {"moto.core.responses:method_names_from_class": "9dbac89d082b655f"},
    "batch-write-parse": {"moto.core.responses:BaseResponse.parse_parameters": "812610851e45cef1"},
    "ast-traverse": {"moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.traverse": "f037e7b6fa96e0e2"},
    "update-parse": {"moto.dynamodb.parsing.expressions:UpdateExpressionParser.make": "7bda627b702e588f"},
}

# Per patch: what its replacement reads of moto besides the original it calls.
RELIES_ON: dict[str, dict[str, str]] = {
    "history-limit": {
        f"{_SFN}.eval.event.event_manager:EventManager.__init__": "3896664a2eb395d6",  # _history_event_list
        f"{_SFN}.eval.environment:Environment.is_frame": "ab85d9403a7258c0",
        f"{_SFN}.eval.environment:Environment.set_error": "4caa76a68982a9dc",
    },
    "map-result-limit": {f"{_MAP}.state_map:StateMap._verify_size_quota": "09afeb39bdc0f1cf"},
    "result-writer-parameters": {
        f"{_MAP}.result_writer.result_writer_decl:ResultWriter.__init__": ("db16bb9cac256226")
    },
    "backend-lookup": {
        "moto.core.base_backend:BackendDict._create_account_specific_backend": "1eb9c6b3c9aa0867"
    },
    # How moto holds a value: a list's and map's elements as DynamoType, read by value_bytes; a
    # new item's attributes added by LimitedSizeDict's __init__ without __setitem__.
    "item-size": {
        "moto.dynamodb.models.dynamo_type:DynamoType.__init__": "8a6aadb1d581d395",
        "moto.dynamodb.models.dynamo_type:LimitedSizeDict.__init__": "5fa07e23c564cc50",
    },
    # The blobs decoded as moto's parser decodes them; the names read by call_action alone.
    "batch-write-parse": {"moto.core.parse:default_blob_parser": "b4e8503d3331b904"},
    "method-names": {"moto.core.responses:BaseResponse.call_action": "34a17a4a36ddf8af"},
    # An INSERT's table found by get_table, its key looked up by Table.get_item, then put_item.
    "partiql-insert": {
        "moto.dynamodb.models:DynamoDBBackend.put_item": "b043f1999f49f820",
        "moto.dynamodb.models:DynamoDBBackend.get_table": "d041975772c42c17",
        "moto.dynamodb.models.table:Table.get_item": "9e8ab8ae75cdba46",
    },
    # Each op's item found where Table's writes keep it (items[hash] or items[hash][range]), its key
    # derived as the writes derive it, its table by get_table, the stream's records as add appends.
    "transactions": {
        "moto.dynamodb.models:DynamoDBBackend.get_table": "d041975772c42c17",
        "moto.dynamodb.models:DynamoDBBackend.get_keys_value": "581f281276a14122",
        "moto.dynamodb.models.table:Table.put_item": "48ae94c63fda4002",
        "moto.dynamodb.models.table:Table.delete_item": "697be260776b20ea",
        "moto.dynamodb.models.table:StreamShard.add": "6619a16a15952c64",
    },
    # moto's server reads the names through the module (`backends.list_of_moto_modules()`).
    "server-modules": {
        "moto.moto_server.werkzeug_app:DomainDispatcherApplication.get_backend_for_host": "105a0141fcfd0a6d"
    },
    # The walk `_traverse` repeats (children first, the first matching class's processor, the
    # parent's child replaced), and the picks it assumes when a processor overrides none of them.
    "ast-traverse": {
        "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.traverse_node_recursively": "a2419ef6f92ab4fe",
        "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.process": "f690f826cd910cc5",
        "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.nodes_to_be_processed": "492c7300031d4012",
    },
    # A shared parse is safe while moto validates a deep copy of it and only reads it otherwise.
    "update-parse": {
        "moto.dynamodb.parsing.validators:Validator.__init__": "68516c2da4600116",
        "moto.dynamodb.parsing.ast_nodes:Node.find_clauses": "9c930f4b97182b12",
    },
    # DescribeTable's answer as Table.describe builds it (its TableStatus set over moto's ACTIVE).
    "table-creating": {"moto.dynamodb.models.table:Table.describe": "308524db5759ceb7"},
    "batch-write-units": {
        "moto.dynamodb.models.table:Table.get_item": "9e8ab8ae75cdba46",
        "moto.dynamodb.models.dynamo_type:DynamoType.__init__": "8a6aadb1d581d395",
    },
}


def fingerprint(target: str) -> str:
    """A function's or class's source digest; a module's name (a patch that shadows a module
    moto imports checks that moto still imports it, not the standard library's source)."""
    owner, attribute = resolve(target)
    if not hasattr(owner, attribute):
        return ABSENT
    value = getattr(owner, attribute)
    if inspect.ismodule(value):
        return value.__name__
    source = textwrap.dedent(inspect.getsource(value))
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def by_name(name: str) -> Patch:
    return next(patch for patch in moto_patches.ALL if patch.name == name)


def test_moto_is_the_version_the_patches_were_written_against() -> None:
    assert importlib.metadata.version("moto") == MOTO_VERSION, (
        "moto changed: re-check every patch in mapload/emulator/moto_patches.py, then this file"
    )


def test_every_patch_has_its_fingerprints_and_no_patch_is_installed() -> None:
    assert {patch.name for patch in moto_patches.ALL} == set(REPLACES)
    for patch in moto_patches.ALL:
        assert set(patch.targets) == set(REPLACES[patch.name]), patch.name
        assert not patch.installed, f"{patch.name} left installed: the guards read unpatched moto"


def test_the_index_names_each_patch_by_its_constant_under_its_reason() -> None:
    """moto_patches.py's docstring lists every patch (by its constant's name, once) under the module
    of its reason, and names no other (it once named UNCATCHABLE_ERRORS, a number, for UNCATCHABLE)."""
    listed: dict[str, str] = {}
    module = ""
    for line in (moto_patches.__doc__ or "").splitlines():
        if not line.startswith((" ", "- ")) and "(moto_" in line:  # a reason's heading
            module = line.split("(moto_", 1)[1].split(".py", 1)[0]
        elif line.startswith("- "):
            for name in line[2:].split(":", 1)[0].split(", "):
                assert name not in listed, f"{name} listed twice"
                listed[name] = f"mapload.emulator.moto_{module}"
    constants = {name: getattr(moto_patches, name) for name in moto_patches.__all__}
    patches = {name: value for name, value in constants.items() if isinstance(value, Patch)}
    assert set(patches.values()) == set(moto_patches.ALL) and len(patches) == len(moto_patches.ALL) == 23
    assert set(listed) == set(patches)
    for name, module in listed.items():
        assert (
            type(patches[name]).__module__ == module
            or vars(importlib.import_module(module)).get(name) is patches[name]
        ), f"{name} is not defined in {module}"


@pytest.mark.parametrize("name", sorted(REPLACES))
def test_what_each_patch_replaces_is_unchanged_in_moto(name: str) -> None:
    expected = REPLACES[name] | RELIES_ON.get(name, {})
    changed = {target for target, digest in expected.items() if fingerprint(target) != digest}
    assert not changed, f"moto changed under the {name} patch ({by_name(name).__doc__ or ''}): {changed}"


def test_moto_s_simple_lambda_still_answers_with_the_request_body() -> None:
    """lambda-invoke: without the seam, an invocation runs nothing."""
    from moto.awslambda_simple.models import lambda_simple_backends

    with mock_aws():
        backend = lambda_simple_backends["123456789012"]["us-east-1"]
        assert backend.invoke("any", None, '{"a": 1}', {}, {}) == b'{"a": 1}'


def test_the_interpreter_s_modules_still_import_boto_client_for_by_name() -> None:
    """client-reuse: each module holds moto's function under its own name (so each is replaced),
    and moto still builds a new client per call."""
    from moto.stepfunctions.parser.asl.utils import boto_client

    for target in REPLACES["client-reuse"]:
        owner, attribute = resolve(target)
        assert getattr(owner, attribute) is boto_client.boto_client_for, target
    with mock_aws():
        assert boto_client.boto_client_for("us-east-1", "s3") is not boto_client.boto_client_for(
            "us-east-1", "s3"
        )


def test_states_all_is_still_the_name_the_uncatchable_patch_matches() -> None:
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl

    assert ErrorEqualsDecl._STATE_ALL_ERROR.error_name == "States.ALL"


def update_with_sets(count: int, *, stem: str = "a") -> dict[str, Any]:
    """UpdateItem arguments (table "t") that SET `count` attributes, placeholders `#<stem><i>`."""
    actions = (f"#{stem}{i} = :{stem}{i}" for i in range(count))
    return {
        "TableName": "t",
        "Key": {"pk": {"S": "a"}, "sk": {"S": "b"}},
        "UpdateExpression": "SET " + ", ".join(actions),
        "ExpressionAttributeNames": {f"#{stem}{i}": f"x{i}" for i in range(count)},
        "ExpressionAttributeValues": {f":{stem}{i}": {"S": "v"} for i in range(count)},
    }


def test_moto_still_accepts_an_expression_over_4_kb_and_recurses_per_action() -> None:
    """dynamodb-expressions: moto checks no expression's size (10 SETs with 250-byte placeholders
    are ~5 KB, which AWS refuses), and its parser overflows the default recursion limit on 300
    short SET actions (in a thread, as the Workers' lanes run)."""
    import sys
    import threading

    import boto3

    from mapload.tables import create_pk_sk_table

    assert sys.getrecursionlimit() < moto_patches.EXPRESSION_RECURSION
    outcome: list[BaseException | None] = []
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "t")
        over = update_with_sets(10, stem="n" * 240)
        assert len(over["UpdateExpression"]) > 4096
        db.update_item(**over)

        def deep() -> None:
            try:
                db.update_item(**update_with_sets(300))
                outcome.append(None)
            except RecursionError as error:
                outcome.append(error)

        thread = threading.Thread(target=deep)
        thread.start()
        thread.join()
    assert isinstance(outcome[0], RecursionError)


def test_moto_still_measures_an_item_its_own_way() -> None:
    """item-size: moto refuses a 406,000-byte string, which AWS's 400 KB (409,600) allows, and
    accepts a list of 210,000 nulls, which AWS counts as 420,000 bytes (3 + 2 per element)."""
    import boto3

    from mapload.tables import create_pk_sk_table

    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "t")
        with pytest.raises(db.exceptions.ClientError, match="Item size has exceeded"):
            db.put_item(TableName="t", Item={**key, "v": {"S": "x" * 406_000}})
        db.put_item(TableName="t", Item={**key, "v": {"L": [{"NULL": True}] * 210_000}})


def test_moto_still_keeps_part_of_an_update_it_refuses_for_the_item_s_size() -> None:
    """item-size: moto applies an update's actions one by one, so one refused for the item's size
    leaves the earlier ones applied; DynamoDB applies an update whole or not at all."""
    import boto3

    from mapload.tables import create_pk_sk_table

    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "t")
        db.put_item(TableName="t", Item={**key, "n": {"N": "1"}, "big": {"S": "x" * 300_000}})
        with pytest.raises(db.exceptions.ClientError, match="size"):
            db.update_item(
                TableName="t",
                Key=key,
                UpdateExpression="SET n = :n, more = :m",
                ExpressionAttributeValues={":n": {"N": "2"}, ":m": {"S": "y" * 150_000}},
            )
        assert db.get_item(TableName="t", Key=key)["Item"]["n"] == {"N": "2"}
        moto_patches.install(moto_patches.ITEM_SIZE)
        try:
            with pytest.raises(db.exceptions.ClientError, match="size"):
                db.update_item(
                    TableName="t",
                    Key=key,
                    UpdateExpression="SET n = :n, more = :m",
                    ExpressionAttributeValues={":n": {"N": "3"}, ":m": {"S": "y" * 150_000}},
                )
            stored = db.get_item(TableName="t", Key=key)["Item"]
            assert stored["n"] == {"N": "2"} and "more" not in stored
        finally:
            moto_patches.uninstall(moto_patches.ITEM_SIZE)


def test_uninstall_restores_moto_exactly() -> None:
    """Every patch installed and uninstalled leaves moto's own objects in place (a staticmethod
    stays one, an inherited attribute is not copied down)."""
    from mapload.emulator.clock import Clock

    class Still:
        def time(self) -> float:
            return 0.0

        def advance(self, seconds: float) -> None:
            return None

    clock: Clock = Still()
    before = {
        target: resolve(target)[0].__dict__.get(resolve(target)[1])
        for patch in moto_patches.ALL
        for target in patch.targets
    }
    moto_patches.LAMBDA_INVOKE.install(lambda *args: None)
    moto_patches.WAIT_CLOCK.install(clock)
    rest = tuple(
        p for p in moto_patches.ALL if p not in (moto_patches.LAMBDA_INVOKE, moto_patches.WAIT_CLOCK)
    )
    moto_patches.install(*rest)
    try:
        assert all(patch.installed for patch in moto_patches.ALL)
        assert all(resolve(t)[0].__dict__.get(resolve(t)[1]) is not v for t, v in before.items())
    finally:
        moto_patches.uninstall(*moto_patches.ALL)
    after = {target: resolve(target)[0].__dict__.get(resolve(target)[1]) for target in before}
    assert all(after[target] is before[target] for target in before)


def test_a_patch_installed_in_a_fresh_interpreter_uninstalls_to_moto_s_own_objects() -> None:
    """In a process that has not imported the interpreter's modules yet, installing client-reuse
    must not let a module import the replacement as its own name (`from ...boto_client import
    boto_client_for`), or uninstalling would leave the patch in place for every later test."""
    import subprocess
    import sys

    script = textwrap.dedent(
        """
        import importlib
        from mapload.emulator import moto_patches
        patch = moto_patches.CLIENT_REUSE
        patch.install()
        patch.uninstall()
        origin = importlib.import_module("moto.stepfunctions.parser.asl.utils.boto_client").boto_client_for
        for target in patch.targets:
            owner, attribute = moto_patches.resolve(target)
            assert getattr(owner, attribute) is origin, target
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_a_query_reads_only_its_partition_and_answers_as_moto_does() -> None:
    """query-partition: the same items, in the same order, with and without the patch, for a
    base-table Query (forward, backward, a range condition) and a GSI Query (unpatched path)."""
    import boto3

    def answers() -> list[Any]:
        db = boto3.client("dynamodb", region_name="us-east-1")
        db.create_table(
            TableName="q",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
                {"AttributeName": "g", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "byg",
                    "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        for i in range(60):
            item = {"pk": {"S": f"P{i % 3}"}, "sk": {"S": f"S{i:03d}"}, "g": {"S": f"G{i % 2}"}}
            db.put_item(TableName="q", Item=item)
        found = []
        for forward in (True, False):
            found.append(
                db.query(
                    TableName="q",
                    KeyConditionExpression="pk = :p AND sk > :s",
                    ExpressionAttributeValues={":p": {"S": "P1"}, ":s": {"S": "S010"}},
                    ScanIndexForward=forward,
                    Limit=7,
                )["Items"]
            )
        found.append(
            db.query(
                TableName="q",
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": "nowhere"}},
            )["Items"]
        )
        found.append(
            sorted(
                i["sk"]["S"]
                for i in db.query(
                    TableName="q",
                    IndexName="byg",
                    KeyConditionExpression="g = :g",
                    ExpressionAttributeValues={":g": {"S": "G1"}},
                )["Items"]
            )
        )
        return found

    with mock_aws():
        plain = answers()
    moto_patches.QUERY_PARTITION.install()
    try:
        with mock_aws():
            patched = answers()
    finally:
        moto_patches.QUERY_PARTITION.uninstall()
    assert patched == plain and len(plain[0]) == 7 and plain[2] == [] and len(plain[3]) == 30


def _insert_table() -> Any:
    import boto3

    from mapload.tables import create_pk_sk_table

    db = boto3.client("dynamodb", region_name="us-east-1")
    create_pk_sk_table(db, "t")
    return db


def _insert(table: str, item: dict[str, Any]) -> dict[str, Any]:
    names = ", ".join("'" + name.replace("'", "''") + "': ?" for name in item)
    return {"Statement": f'INSERT INTO "{table}" VALUE {{{names}}}', "Parameters": list(item.values())}


def test_moto_s_own_partiql_still_cannot_read_an_insert_s_parameters() -> None:
    """partiql-insert: without it, putIfAbsent's batches fail in moto."""
    from moto import mock_aws

    with mock_aws():
        db = _insert_table()
        with pytest.raises(TypeError):
            db.batch_execute_statement(Statements=[_insert("t", {"pk": {"S": "a"}, "sk": {"S": "s"}})])


def test_an_insert_batch_answers_per_statement_as_aws_documents() -> None:
    """partiql-insert (developer guide "PartiQL insert statements", API reference
    BatchExecuteStatement, BatchStatementError): an item with the key stored answers DuplicateItem
    and stays as it was; a missing table ResourceNotFound; a malformed statement (parameters that
    do not match its names, a key attribute missing or of the wrong type, an item past 400 KB)
    ValidationError; each statement alone, the others stored. Past 25 statements the request is
    refused. Any other statement is moto's."""
    from moto import mock_aws

    item = {"pk": {"S": "a"}, "sk": {"S": "s"}, "it's": {"N": "1"}}
    statements = [
        _insert("t", item),
        _insert("t", {**item, "it's": {"N": "2"}}),  # the same key: DuplicateItem
        _insert("missing", item),
        {**_insert("t", {"pk": {"S": "b"}, "sk": {"S": "s"}}), "Parameters": [{"S": "b"}]},
        _insert("t", {"pk": {"N": "1"}, "sk": {"S": "s"}}),
        _insert("t", {"sk": {"S": "s"}}),
        _insert("t", {"pk": {"S": "big"}, "sk": {"S": "s"}, "x": {"S": "x" * 400 * 1024}}),
        _insert("t", {"pk": {"S": "c"}, "sk": {"S": "s"}}),
    ]
    with mock_aws():
        moto_patches.install(moto_patches.ITEM_SIZE, moto_patches.PARTIQL_INSERT)
        try:
            db = _insert_table()
            answers = db.batch_execute_statement(Statements=statements)["Responses"]
            codes = [answer.get("Error", {}).get("Code") for answer in answers]
            stored = {row["pk"]["S"]: row for row in db.scan(TableName="t")["Items"]}
            with pytest.raises(db.exceptions.ClientError, match="25"):
                db.batch_execute_statement(Statements=[_insert("t", item)] * 26)
            select = [{"Statement": "SELECT * FROM t WHERE pk = 'a' AND sk = 's'"}]
            patched = db.batch_execute_statement(Statements=select)["Responses"]
        finally:
            moto_patches.uninstall(moto_patches.ITEM_SIZE, moto_patches.PARTIQL_INSERT)
        assert db.batch_execute_statement(Statements=select)["Responses"] == patched  # moto's own
    assert codes == [
        None,
        "DuplicateItem",
        "ResourceNotFound",
        "ValidationError",
        "ValidationError",
        "ValidationError",
        "ValidationError",
        None,
    ]
    assert sorted(stored) == ["a", "c"] and stored["a"]["it's"] == {"N": "1"}
    assert patched == [{"TableName": "t", "Item": stored["a"]}]


def test_only_inserts_of_parameters_are_the_patch_s() -> None:
    assert moto_patches.parse_insert("""INSERT INTO "t" VALUE {'pk': ?, 'it''s' : ?}""") == (
        "t",
        ["pk", "it's"],
    )
    for other in (
        "INSERT INTO \"t\" VALUE {'pk': 'a'}",  # a value inlined
        "INSERT INTO \"t\" VALUE {'pk': ?,}",
        'INSERT INTO "t" VALUE {}',
        'SELECT * FROM "t"',
        'UPDATE "t" SET a = ? WHERE pk = ?',
    ):
        assert moto_patches.parse_insert(other) is None, other


def test_a_batch_write_reports_the_units_of_each_item_written_or_deleted() -> None:
    """batch-write-units (developer guide, "DynamoDB read and write capacity"): with
    ReturnConsumedCapacity, a put costs the larger of its item and the one it replaces, a delete
    the item it deletes, 1 KB units, at least 1 (nothing stored). moto alone reports 1 a request."""
    from moto import mock_aws

    def key(n: int) -> dict[str, Any]:
        return {"pk": {"S": f"k{n}"}, "sk": {"S": "s"}}

    big = {**key(1), "x": {"S": "y" * 3000}}  # 3 units
    requests = [
        {"DeleteRequest": {"Key": key(1)}},  # the stored 3 KB item: 3
        {"DeleteRequest": {"Key": key(2)}},  # nothing stored: 1
        {"PutRequest": {"Item": {**key(3), "x": {"S": "y" * 1500}}}},  # replaces a 3 KB item: 3
        {"PutRequest": {"Item": {**key(4), "x": {"S": "y" * 1500}}}},  # new, 1.5 KB: 2
    ]

    def consumed() -> Any:
        db = _insert_table()
        for n in (1, 3):
            db.put_item(TableName="t", Item={**big, **key(n)})
        answer = db.batch_write_item(RequestItems={"t": requests}, ReturnConsumedCapacity="TOTAL")
        plain = db.batch_write_item(RequestItems={"t": [{"DeleteRequest": {"Key": key(9)}}]})
        return answer["ConsumedCapacity"], "ConsumedCapacity" in plain, len(db.scan(TableName="t")["Items"])

    with mock_aws():
        own = consumed()
    with mock_aws():
        moto_patches.BATCH_WRITE_UNITS.install()
        try:
            patched = consumed()
        finally:
            moto_patches.BATCH_WRITE_UNITS.uninstall()
    assert own[0] == [{"TableName": "t", "CapacityUnits": 1.0, "Table": {"CapacityUnits": 1.0}}]
    assert patched[0] == [{"TableName": "t", "CapacityUnits": 9.0, "Table": {"CapacityUnits": 9.0}}]
    assert patched[1:] == own[1:]  # not asked: moto's own answer; the same items written


def test_a_new_table_is_creating_until_a_describe_sees_it_after_a_moment() -> None:
    """table-creating (API reference: ResourceNotFoundException, "its status might not be ACTIVE"):
    right after CreateTable, DescribeTable says CREATING and every request on the table's items
    (GetItem, PutItem, a batch, a transaction, a PartiQL INSERT) is ResourceNotFoundException, as
    moto answers a missing table; the SDK's table_exists waiter then sees it ACTIVE, and it is
    usable. moto alone makes it ACTIVE at once."""
    import boto3
    from botocore.exceptions import ClientError
    from moto import mock_aws

    from mapload.tables import PK_SK_TABLE

    def created() -> Any:
        db = boto3.client("dynamodb", region_name="us-east-1")
        db.create_table(TableName="t", **PK_SK_TABLE)
        return db

    key = {"pk": {"S": "a"}, "sk": {"S": "s"}}
    with mock_aws():
        assert created().describe_table(TableName="t")["Table"]["TableStatus"] == "ACTIVE"
    with mock_aws():
        moto_patches.install(moto_patches.TABLE_CREATING, moto_patches.PARTIQL_INSERT)
        try:
            db = created()
            status = db.describe_table(TableName="t")["Table"]["TableStatus"]
            refused = []
            for call in (
                lambda: db.get_item(TableName="t", Key=key),
                lambda: db.put_item(TableName="t", Item=key),
                lambda: db.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": key}}]}),
                lambda: db.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": key}}]),
                lambda: db.update_time_to_live(
                    TableName="t", TimeToLiveSpecification={"Enabled": True, "AttributeName": "x"}
                ),
            ):
                with pytest.raises(ClientError) as error:
                    call()
                refused.append(error.value.response["Error"]["Code"])
            inserted = db.batch_execute_statement(Statements=[_insert("t", key)])["Responses"]
            db.get_waiter("table_exists").wait(TableName="t", WaiterConfig={"Delay": 0.05, "MaxAttempts": 40})
            db.put_item(TableName="t", Item=key)
            stored = db.get_item(TableName="t", Key=key)["Item"]
        finally:
            moto_patches.uninstall(moto_patches.TABLE_CREATING, moto_patches.PARTIQL_INSERT)
    assert status == "CREATING"
    assert refused[:4] == ["ResourceNotFoundException"] * 4
    assert refused[4] == "ResourceNotFound"  # moto's code for a missing table here
    assert inserted == [{"Error": {"Code": "ResourceNotFound", "Message": "Requested resource not found"}}]
    assert stored == key


def test_the_server_s_service_names_are_moto_s_own_listed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """server-modules: moto's server lists its package directory (a listdir and an isdir per
    service, under its dispatcher's one lock) on every request; the patch answers the same names,
    in the same order, from one listing."""
    import os

    from moto import backends

    own = list(backends.list_of_moto_modules())
    moto_patches.SERVER_MODULES.install()
    try:
        listed: list[str] = []
        real = os.listdir
        monkeypatch.setattr(os, "listdir", lambda path: listed.append(path) or real(path))
        answers = [list(backends.list_of_moto_modules()) for _ in range(3)]
        assert "dynamodb" in answers[0]
        assert "dynamodb" in backends.list_of_moto_modules()  # a membership test, as the server's
    finally:
        moto_patches.SERVER_MODULES.uninstall()
    assert answers == [own] * 3
    assert listed == []  # listed once, when installed
    assert list(backends.list_of_moto_modules()) == own


def test_mapload_serve_installs_the_server_s_speed_patch() -> None:
    from mapload.emulator import server as serve

    assert moto_patches.SERVER_MODULES in serve.PATCHES


def test_a_batch_write_s_units_are_counted_without_moto_s_objects_for_plain_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """batch-write-units counts a put's size from the request's own values (as many units as
    moto's objects would give, nested lists and maps included), building moto's objects only for
    the keys it looks up and for lists and maps: its count was ~10 % of moto's CPU a BatchWriteItem."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    from mapload.emulator.moto_limits import BatchWriteUnits, _units

    items = [
        {"pk": {"S": "k"}, "sk": {"S": "s"}, "n": {"N": "-1.5e10"}, "b": {"B": "aGVsbG8="}},
        {"pk": {"S": "é" * 700}, "sk": {"S": "s"}, "t": {"BOOL": True}, "z": {"NULL": True}},
        {"pk": {"S": "k2"}, "sk": {"S": "s"}, "ss": {"SS": ["a", "bb"]}, "ns": {"NS": ["1", "22"]}},
        {"pk": {"S": "k3"}, "sk": {"S": "s"}, "bs": {"BS": ["aGk="]}, "x": {"S": "y" * 2000}},
        {"pk": {"S": "k4"}, "sk": {"S": "s"}, "l": {"L": [{"S": "a"}, {"M": {"q": {"N": "1"}}}]}},
    ]
    for item in items:
        assert BatchWriteUnits.item_units(item) == _units({n: DynamoType(v) for n, v in item.items()})

    with mock_aws():
        db = _insert_table()
        from moto.dynamodb.models import dynamodb_backends

        backend = dynamodb_backends["123456789012"]["us-east-1"]
        made: list[Any] = []
        own_init = DynamoType.__init__

        def counted(self: Any, type_as_dict: Any) -> None:
            made.append(type_as_dict)
            own_init(self, type_as_dict)

        expected = sum(BatchWriteUnits.item_units(i) for i in items)
        monkeypatch.setattr(DynamoType, "__init__", counted)
        units = BatchWriteUnits._consumed(backend, {"t": [{"PutRequest": {"Item": i}} for i in items]})
        del db
    assert units == {"t": expected}
    # The keys of each lookup (2 an item), and the list, its two elements and its map's value.
    assert len(made) == 2 * len(items) + 4
