"""mapload/emulator/moto_patches.py: the same backends and working clients, fewer locks and client builds."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core.base_backend import BackendDict
from moto.s3.models import s3_backends
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.utils import boto_client

from mapload.emulator import moto_limits, moto_patches
from mapload.emulator.moto_patches import Patch

pytestmark = pytest.mark.e2e


def test_install_reuses_clients_and_uninstall_restores_moto() -> None:
    originals = (BackendDict.__getitem__, boto_client.boto_client_for, lambda_eval_utils.boto_client_for)
    with mock_aws():
        moto_patches.install(*moto_patches.SPEED)
        try:
            first = lambda_eval_utils.boto_client_for("eu-west-2", "s3")
            assert first is boto_client.boto_client_for("eu-west-2", "s3")
            assert first is not boto_client.boto_client_for("eu-west-2", "dynamodb")
            assert first is not boto_client.boto_client_for("us-east-1", "s3")
            # The reused client works against the mock like a new one.
            first.create_bucket(
                Bucket="mapload-speed-check", CreateBucketConfiguration={"LocationConstraint": "eu-west-2"}
            )
            assert [b["Name"] for b in first.list_buckets()["Buckets"]] == ["mapload-speed-check"]
        finally:
            moto_patches.uninstall(*moto_patches.SPEED)
    assert (
        BackendDict.__getitem__,
        boto_client.boto_client_for,
        lambda_eval_utils.boto_client_for,
    ) == originals


def test_the_lock_free_lookup_returns_moto_s_backend_and_still_creates_new_ones() -> None:
    with mock_aws():
        moto_patches.install(*moto_patches.SPEED)
        try:
            backend = s3_backends["123456789012"]
            assert s3_backends["123456789012"] is backend  # the lock-free path: the same object
            assert "210987654321" not in dict.keys(s3_backends)
            created = s3_backends["210987654321"]  # the locked path creates it, as moto does
            assert created is not backend and created is s3_backends["210987654321"]
            assert s3_backends in BackendDict._instances  # registered for moto's reset
        finally:
            moto_patches.uninstall(*moto_patches.SPEED)


# -- BatchWriteItem's CPU in moto (dynamo-types, method-names, batch-write-parse, item-size) ---

_SCALARS = st.one_of(
    st.builds(lambda s: {"S": s}, st.text(max_size=8)),
    st.builds(lambda n: {"N": str(n)}, st.integers() | st.decimals(allow_nan=False, allow_infinity=False)),
    st.builds(lambda b: {"B": base64.b64encode(b).decode()}, st.binary(max_size=8)),
    st.builds(lambda v: {"BOOL": v}, st.booleans()),
    st.just({"NULL": True}),
    st.builds(lambda v: {"SS": v}, st.lists(st.text(max_size=4), min_size=1, max_size=3, unique=True)),
    st.builds(
        lambda v: {"NS": [str(n) for n in v]}, st.lists(st.integers(), min_size=1, max_size=3, unique=True)
    ),
    st.builds(
        lambda v: {"BS": [base64.b64encode(b).decode() for b in v]},
        st.lists(st.binary(max_size=4), min_size=1, max_size=3, unique=True),
    ),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.builds(lambda v: {"L": v}, st.lists(inner, max_size=3))
        | st.builds(lambda v: {"M": v}, st.dictionaries(st.text(max_size=4), inner, max_size=3))
    ),
    max_leaves=8,
)
# What moto's parser reads differently from the document (a member the shape lacks, a null, a
# value of another JSON type, two types in one value, two requests in one WriteRequest): each
# makes the fast reading hand the request to moto's parser.
_ODDITIES = (
    lambda d: d.update(Extra=1),
    lambda d: d.update(ReturnConsumedCapacity=None),
    lambda d: d["RequestItems"]["t"].append({"PutRequest": {"Item": {"pk": {"S": 5}}}}),
    lambda d: d["RequestItems"]["t"].append({"PutRequest": {"Item": {"pk": {"S": "a", "N": "1"}}}}),
    lambda d: d["RequestItems"]["t"].append({"PutRequest": {"Item": {"pk": {"S": None}}}}),
    lambda d: d["RequestItems"]["t"].append({"DeleteRequest": {"Key": {}, "Extra": 1}}),
    lambda d: d["RequestItems"]["t"].append({"PutRequest": {"Item": {}}, "DeleteRequest": {"Key": {}}}),
    lambda d: d["RequestItems"]["t"].append({"PutRequest": {"Item": {"l": {"L": [{"Q": "x"}]}}}}),
)


def _moto_s_reading(body: bytes) -> Any:
    from botocore.session import get_session
    from moto.core.parse import JSONParser

    operation = get_session().get_service_model("dynamodb").operation_model("BatchWriteItem")
    request = {"method": "POST", "values": {}, "headers": {}, "body": body, "url_path": "/", "url_params": {}}
    return JSONParser(operation, map_type=dict).parse(request)


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(st.dictionaries(st.text(max_size=4), _VALUES, max_size=4), max_size=4),
    keys=st.lists(st.dictionaries(st.text(max_size=4), _SCALARS, max_size=2), max_size=2),
    options=st.dictionaries(
        st.sampled_from(["ReturnConsumedCapacity", "ReturnItemCollectionMetrics"]), st.text(max_size=5)
    ),
    oddity=st.none() | st.sampled_from(range(len(_ODDITIES))),
)
def test_a_batch_write_is_read_as_moto_s_parser_reads_it(
    items: list[dict[str, Any]], keys: list[dict[str, Any]], options: dict[str, str], oddity: int | None
) -> None:
    """batch-write-parse: the parameters from one json.loads are moto's parser's, to the order of
    every member (`repr` compares it) and the bytes of every blob; a request with anything the
    parser would drop or read otherwise is left to the parser."""
    writes = [{"PutRequest": {"Item": i}} for i in items] + [{"DeleteRequest": {"Key": k}} for k in keys]
    document: dict[str, Any] = {**options, "RequestItems": {"t": writes}}
    if oddity is not None:
        _ODDITIES[oddity](document)
    body = json.dumps(document).encode()
    if oddity is None:
        assert repr(moto_patches.plain_batch_write(body)) == repr(_moto_s_reading(body))
    else:
        with pytest.raises(moto_patches.NotPlain):
            moto_patches.plain_batch_write(body)


@settings(max_examples=100, deadline=None)
@given(value=_VALUES)
def test_a_value_is_built_as_moto_builds_it(value: dict[str, Any]) -> None:
    """dynamo-types: the same type and value, a list's and map's elements DynamoType all down."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    def shape(typed: Any) -> Any:
        inner = typed.value
        if isinstance(inner, list) and typed.type == "L":
            inner = [shape(e) for e in inner]
        elif isinstance(inner, dict):
            inner = {k: shape(e) for k, e in inner.items()}
        return (type(typed), typed.type, inner)

    own = shape(DynamoType(value))
    moto_patches.DYNAMO_TYPES.install()
    try:
        patched = DynamoType(value)
        copied = DynamoType(patched)  # a DynamoType to copy: moto's own path
        with pytest.raises(IndexError):
            DynamoType({})
    finally:
        moto_patches.DYNAMO_TYPES.uninstall()
    assert shape(patched) == own == shape(copied)
    assert DynamoType.__subclasses__() == []  # `type(self)` is DynamoType


def test_the_method_names_are_moto_s_listed_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    from moto.core import responses
    from moto.dynamodb.responses import DynamoHandler
    from moto.s3.responses import S3Response

    own = [responses.method_names_from_class(c) for c in (DynamoHandler, S3Response)]
    moto_patches.METHOD_NAMES.install()
    try:
        walks: list[Any] = []
        real = inspect.getmembers
        monkeypatch.setattr(inspect, "getmembers", lambda *a, **k: walks.append(a) or real(*a, **k))
        for _ in range(3):
            assert [responses.method_names_from_class(c) for c in (DynamoHandler, S3Response)] == own
    finally:
        moto_patches.METHOD_NAMES.uninstall()
    assert "batch_write_item" in own[0]
    assert len(walks) <= 2  # at most once a class (none if an earlier test cached it)


def test_a_new_item_is_refused_past_400_kb_exactly_as_attribute_by_attribute() -> None:
    """item-size's Item.__init__: measured once as a whole, refused exactly when ITEM_BYTES is
    passed, as moto's own Item.__init__ under the attribute-by-attribute measure refuses it, and
    held as moto holds it."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict

    from mapload.emulator.limits import ITEM_BYTES, value_bytes

    nested = {"L": [{"M": {"q": {"N": "1"}}}, {"S": "z"}]}
    typed = DynamoType(nested)
    # pk (2) + "a" (1) + v (1) + the string + l (1) + the list: ITEM_BYTES at extra 0.
    rest = ITEM_BYTES - 4 - (1 + value_bytes(typed.type, typed.value))

    def item(extra: int) -> dict[str, Any]:
        return {"pk": {"S": "a"}, "v": {"S": "x" * (rest + extra)}, "l": nested}

    set_only = Patch("set-only", moto_patches.ITEM_SIZE.targets[:1], (moto_limits._set_within_item_size,))
    outcomes = []
    for patch in (set_only, moto_patches.ITEM_SIZE):
        patch.install()
        try:
            made = Item(DynamoType({"S": "a"}), None, item(0))
            with pytest.raises(ItemSizeTooLarge):
                Item(DynamoType({"S": "a"}), None, item(1))
            outcomes.append((type(made.attrs), list(made.attrs), made.attrs, made.hash_key, made.range_key))
        finally:
            patch.uninstall()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][:2] == (LimitedSizeDict, ["pk", "v", "l"])


def test_batch_writes_answer_and_store_as_moto_s_own_with_the_speed_patches() -> None:
    """DYNAMODB_SPEED and item-size together: the same answers (refusals included: duplicate
    items, an empty key, a missing table, a key of the wrong type) and the same stored items as
    moto alone, blobs, sets and nested values included."""
    import boto3

    from mapload.tables import create_pk_sk_table

    def key(n: int) -> dict[str, Any]:
        return {"pk": {"S": f"k{n}"}, "sk": {"S": "s"}}

    rich = {
        "b": {"B": b"\x00\x01"},
        "bs": {"BS": [b"a", b"b"]},
        "ns": {"NS": ["1", "2.5"]},
        "l": {"L": [{"M": {"q": {"N": "-1e3"}}}, {"NULL": True}, {"BOOL": False}]},
    }
    batches = [
        [{"PutRequest": {"Item": {**key(n), **rich, "n": {"N": str(n)}}}} for n in range(25)],
        [{"DeleteRequest": {"Key": key(3)}}, {"PutRequest": {"Item": {**key(3), "x": {"S": "y"}}}}],
        [{"PutRequest": {"Item": key(30)}}, {"PutRequest": {"Item": key(30)}}],  # duplicates
        [{"PutRequest": {"Item": {"pk": {"S": ""}, "sk": {"S": "s"}}}}],  # an empty key
        [{"PutRequest": {"Item": {"pk": {"N": "1"}, "sk": {"S": "s"}}}}],  # the key's type
        [{"DeleteRequest": {"Key": key(5)}} for _ in range(1)],
    ]

    def run() -> tuple[list[Any], list[Any]]:
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "t")
        answers: list[Any] = []
        for batch in [*batches, None]:
            items = {"t": batch} if batch is not None else {"missing": batches[0]}
            try:
                answer = db.batch_write_item(RequestItems=items, ReturnConsumedCapacity="TOTAL")
                answers.append({k: v for k, v in answer.items() if k != "ResponseMetadata"})
            except db.exceptions.ClientError as error:
                answers.append(error.response["Error"])
        stored = sorted(db.scan(TableName="t")["Items"], key=lambda i: i["pk"]["S"])
        return answers, stored

    with mock_aws():
        own = run()
    with mock_aws():
        moto_patches.install(
            moto_patches.ITEM_SIZE, moto_patches.BATCH_WRITE_UNITS, *moto_patches.DYNAMODB_SPEED
        )
        try:
            patched = run()
        finally:
            moto_patches.uninstall(
                moto_patches.ITEM_SIZE, moto_patches.BATCH_WRITE_UNITS, *moto_patches.DYNAMODB_SPEED
            )
    with mock_aws():
        moto_patches.install(moto_patches.ITEM_SIZE, moto_patches.BATCH_WRITE_UNITS)
        try:
            reference = run()  # the units as batch-write-units counts them, without the speed patches
        finally:
            moto_patches.uninstall(moto_patches.ITEM_SIZE, moto_patches.BATCH_WRITE_UNITS)
    assert patched == reference
    assert patched[1] == own[1] and len(patched[1]) == 23  # moto puts before it deletes: k3 and k5 gone
    assert [a.get("Code") for a in patched[0]] == [a.get("Code") for a in own[0]]
    assert patched[1][0]["bs"] == {"BS": [b"a", b"b"]}


# UpdateItems whose expressions take every processor of moto's validation, its executor and its
# refusals: (key number, arguments); each request goes twice (a new item, then the same again).
_UPDATES: list[tuple[int, dict[str, Any]]] = [
    (
        1,
        {
            "UpdateExpression": "SET #a0 = :a0, #a1 = :a1",
            "ExpressionAttributeNames": {"#a0": "lat", "#a1": "lon"},
            "ExpressionAttributeValues": {":a0": {"N": "51.5"}, ":a1": {"N": "-0.12"}},
        },
    ),
    (
        1,
        {
            "UpdateExpression": (
                "SET n = if_not_exists(n, :z) + :one, l = list_append(if_not_exists(l, :e), :l)"
            ),
            "ExpressionAttributeValues": {
                ":z": {"N": "0"},
                ":one": {"N": "1"},
                ":e": {"L": []},
                ":l": {"L": [{"S": "x"}, {"M": {"q": {"N": "2"}}}]},
            },
        },
    ),
    (
        1,
        {
            "UpdateExpression": "ADD c :one, s :set DELETE t :gone",
            "ExpressionAttributeValues": {
                ":one": {"N": "1"},
                ":set": {"SS": ["a", "b"]},
                ":gone": {"SS": ["z"]},
            },
        },
    ),
    (1, {"UpdateExpression": "SET m = :m", "ExpressionAttributeValues": {":m": {"M": {"x": {"N": "1"}}}}}),
    (
        1,
        {
            "UpdateExpression": "SET m.x = m.x + :one, m.y = :s REMOVE l[0]",
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":s": {"S": "why"}},
        },
    ),
    (
        1,
        {
            "UpdateExpression": "SET lat = :v",
            "ConditionExpression": "attribute_exists(lon)",
            "ExpressionAttributeValues": {":v": {"N": "3"}},
            "ReturnValues": "UPDATED_OLD",
        },
    ),
    (
        2,
        {
            "UpdateExpression": "SET a = :v",
            "ConditionExpression": "attribute_exists(lon)",
            "ExpressionAttributeValues": {":v": {"N": "3"}},
        },
    ),  # refused: no such item
    (1, {"UpdateExpression": "SET a = :v REMOVE a", "ExpressionAttributeValues": {":v": {"N": "1"}}}),
    (1, {"UpdateExpression": "SET pk = :v", "ExpressionAttributeValues": {":v": {"S": "other"}}}),
    (1, {"UpdateExpression": "SET a = :missing", "ExpressionAttributeValues": {":v": {"N": "1"}}}),
    (
        1,
        {
            "UpdateExpression": "SET a = :s + :one",
            "ExpressionAttributeValues": {":s": {"S": "x"}, ":one": {"N": "1"}},
        },
    ),
    (1, {"UpdateExpression": "SET nope.deeper = :v", "ExpressionAttributeValues": {":v": {"N": "1"}}}),
    (1, {"UpdateExpression": "SET a = :v SET b = :v", "ExpressionAttributeValues": {":v": {"N": "1"}}}),
    (
        3,
        {
            "UpdateExpression": "SET #n = :v",
            "ExpressionAttributeNames": {"#n": "name", "#x": "unused"},
            "ExpressionAttributeValues": {":v": {"N": "1"}},
        },
    ),
    (
        4,
        {
            "UpdateExpression": "REMOVE a, b[1] SET c = :v ADD d :one",
            "ExpressionAttributeValues": {":v": {"BOOL": True}, ":one": {"N": "5"}},
            "ReturnValues": "ALL_NEW",
        },
    ),
]


def test_update_items_answer_and_store_as_moto_s_own_with_the_expression_patches() -> None:
    """ast-traverse and update-parse (UpdateItem's validation walked with its map read once, its
    expression parsed once and shared): every answer, refusal and stored item as moto's own, a
    transaction's Update included, each request twice so the second reads the cached parse."""
    import boto3

    from mapload.tables import create_pk_sk_table

    def key(n: int) -> dict[str, Any]:
        return {"pk": {"S": f"k{n}"}, "sk": {"S": "s"}}

    def run() -> tuple[list[Any], list[Any]]:
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "t")
        answers: list[Any] = []
        for n, arguments in [*_UPDATES, *_UPDATES]:
            try:
                answer = db.update_item(TableName="t", Key=key(n), **arguments)
                answers.append({k: v for k, v in answer.items() if k != "ResponseMetadata"})
            except db.exceptions.ClientError as error:
                answers.append(error.response["Error"])
        update = {"TableName": "t", "Key": key(9), **_UPDATES[1][1]}
        for _ in range(2):
            db.transact_write_items(TransactItems=[{"Update": update}])
        stored = sorted(db.scan(TableName="t")["Items"], key=lambda i: i["pk"]["S"])
        return answers, stored

    patches = (moto_patches.AST_TRAVERSE, moto_patches.UPDATE_PARSE)
    with mock_aws():
        own = run()
    with mock_aws():
        moto_patches.install(*patches)
        try:
            patched = run()
        finally:
            moto_patches.uninstall(*patches)
    assert patched == own
    codes = [a.get("Code") for a in own[0]]
    assert (
        codes.count(None) >= 12
        and "ConditionalCheckFailedException" in codes
        and "ValidationException" in codes
    )
    assert {i["pk"]["S"] for i in own[1]} == {"k1", "k9"}  # k3 refused (an unused name), k4 (b[1])
    assert own[1][0]["c"] == {"N": "2"} and own[1][-1]["n"] == {"N": "2"}


def test_a_processor_that_walks_its_own_way_is_walked_by_moto() -> None:
    """ast-traverse takes moto's walk for a processor that overrides how nodes are picked, and
    gives the same tree as moto's walk for one that does not."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    class Counting(DepthFirstTraverser):  # type: ignore[misc]
        def __init__(self) -> None:
            self.seen: list[str] = []

        def _processing_map(self) -> dict[type, Any]:
            return {Node: self.note}

        def note(self, node: Any) -> Any:
            self.seen.append(type(node).__name__)
            return node

    class OwnPick(Counting):
        def process(self, node: Any) -> Any:
            self.seen.append("own")
            return node

    tree = UpdateExpressionParser.make("SET a = :v, b.c[1] = if_not_exists(b, :w) REMOVE d ADD e :one")
    walks = []
    for patched in (False, True):
        if patched:
            moto_patches.AST_TRAVERSE.install()
        try:
            plain, own_pick = Counting(), OwnPick()
            plain.traverse(tree)
            own_pick.traverse(tree)
            walks.append((plain.seen, own_pick.seen))
        finally:
            moto_patches.AST_TRAVERSE.uninstall()
    assert walks[0] == walks[1]
    assert len(walks[0][0]) > 15 and set(walks[0][1]) == {"own"}
