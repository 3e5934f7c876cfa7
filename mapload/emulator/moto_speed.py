"""moto's hot paths made cheap, behaviour unchanged: each patch here only saves CPU or lock waits
(for a Map with thousands of children, a large ledger's Queries, the server's requests and each
BatchWriteItem and UpdateItem; tests/e2e/test_moto_speed.py shows each equal to moto's own)."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final

from mapload.emulator.moto_patch import SFN_ASL, Patch


def _lookup(self: Any, account_id: str) -> Any:
    """`BackendDict.__getitem__` takes moto's one global lock even when the account's backend
    exists, so every request's threads queue on it: an existing backend is returned lock-free."""
    try:
        return dict.__getitem__(self, account_id)
    except KeyError:  # first use of the account (or after a reset): moto's locked path
        return BACKEND_LOOKUP.original()(self, account_id)


class ClientReuse(Patch):
    """moto's interpreter builds a new boto3 client (`boto_client_for`, which loads the service
    model) for every Lambda task and every ResultWriter/ItemReader call: one client is reused per
    region, service and credentials while the patch is on (boto3 clients are thread-safe).
    The modules of the interpreter import `boto_client_for` by name: each one's is replaced."""

    def __init__(self) -> None:
        users = (
            f"{SFN_ASL}.utils.boto_client",
            f"{SFN_ASL}.component.state.exec.state_task.lambda_eval_utils",
            f"{SFN_ASL}.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3",
            f"{SFN_ASL}.component.state.exec.state_map.item_reader.eval.resource_eval_s3",
        )
        targets = tuple(f"{module}:boto_client_for" for module in users)
        super().__init__("client-reuse", targets, (self._client_for,) * len(targets))
        self._clients: dict[tuple[str, str, str, bool], Any] = {}
        self._lock = threading.Lock()

    def _client_for(self, region: str, service: str, state_credentials: Any = None) -> Any:
        from moto.core.models import botocore_stubber

        key = (region, service, repr(state_credentials), bool(botocore_stubber.enabled))
        client = self._clients.get(key)
        if client is None:
            with self._lock:
                client = self._clients.get(key)
                if client is None:
                    client = self._clients[key] = self.original()(region, service, state_credentials)
        return client

    def uninstall(self) -> None:
        super().uninstall()
        with self._lock:
            self._clients.clear()


_TABLE = "moto.dynamodb.models.table:Table"


class QueryPartition(Patch):
    """moto's Query of a table (no index) sorts every item of the table (`Table.all_items`) and
    keeps those of the partition: each Query costs the whole table (0.2 s at 42,000 items), so
    Finalize's reads of a 20,000-shard ledger, block by block, ran past its timeout. While the
    patch is on, that one call inside a base-table Query returns the partition's items only, in
    the same order; an index Query and a Scan still read every item."""

    def __init__(self) -> None:
        super().__init__("query-partition", (f"{_TABLE}.query", f"{_TABLE}.all_items"))
        self._querying = threading.local()
        patch = self

        def query(table: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:  # a method of Table
            return patch._query(table, hash_key, *args, **kwargs)

        def all_items(table: Any) -> Any:
            return patch._all_items(table)

        self._replacements = (query, all_items)

    def _query(self, table: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        self._querying.at = (table, hash_key) if index_name is None else None
        try:
            return self.original(f"{_TABLE}.query")(table, hash_key, *args, **kwargs)
        finally:
            self._querying.at = None

    def _all_items(self, table: Any) -> Any:
        at = getattr(self._querying, "at", None)
        if at is None or at[0] is not table:
            return self.original(f"{_TABLE}.all_items")(table)
        self._querying.at = None  # once per Query: the base-table path calls it once
        partition = table.items.get(at[1])
        if partition is None:
            return []
        items = list(partition.values()) if table.range_key_attr else [partition]
        return sorted(items, key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)


class ServerModules(Patch):
    """moto's server, to route each request, lists its own package directory (`os.listdir` and
    an `isdir` per entry, some 170 services) while holding its dispatcher's one lock: ~6 % of the
    server's CPU per BatchWriteItem, and every request thread queues behind it. The directory does
    not change while the server runs, so the names are listed once, when installed, and the same
    list (same names, same order) answers every request."""

    def __init__(self) -> None:
        super().__init__("server-modules", ("moto.backends:list_of_moto_modules",))
        self._names: tuple[str, ...] = ()

        def list_of_moto_modules() -> Iterable[str]:
            return iter(self._names)

        self._replacements = (list_of_moto_modules,)

    def install(self) -> None:
        if self.installed:
            return
        super().install()
        self._names = tuple(self.original()())


def _dynamo_type(self: Any, type_as_dict: Any) -> None:
    """`DynamoType.__init__` for what a request holds (a dict of one type and its value): the
    first key and its value read once, where moto builds two lists for them. Anything else (a
    DynamoType to copy, an empty dict) is moto's. moto has no subclass of DynamoType, so
    `type(self)` is the class moto names for a list's or map's elements."""
    if type(type_as_dict) is dict and type_as_dict:
        kind, value = next(iter(type_as_dict.items()))
        self.type = kind
        if kind == "L":
            value = [type(self)(element) for element in value]
        elif kind == "M":
            value = {name: type(self)(element) for name, element in value.items()}
        self.value = value
        return
    DYNAMO_TYPES.original()(self, type_as_dict)


def forget_method_names() -> None:
    """A class gained or lost a method (moto_seams.BULK_PUT): `_method_names` reads it again."""
    _method_names.cache_clear()


@functools.cache
def _method_names(clazz: type) -> list[str]:
    """moto's `method_names_from_class` (an `inspect.getmembers` walk of the response class, on
    every request), once per class: the classes do not change while moto runs."""
    names: list[str] = METHOD_NAMES.original()(clazz)
    return names


class NotPlain(Exception):
    """A request the fast reading does not take as it is: moto's parser reads it."""


_AV_STRINGS = frozenset({"S", "N"})
_AV_FLAGS = frozenset({"BOOL", "NULL"})
_AV_STRING_SETS = frozenset({"SS", "NS"})
_BWI_OPTIONS = ("ReturnConsumedCapacity", "ReturnItemCollectionMetrics")
_WRITE_REQUESTS = {"PutRequest": "Item", "DeleteRequest": "Key"}


def _plain_value(value: Any, blob: Callable[[str], bytes]) -> dict[str, Any]:
    """An AttributeValue as moto's parser reads it (a blob base64-decoded by `blob`); NotPlain
    for anything its shape does not hold exactly once (more than one type, a null, a number)."""
    if type(value) is not dict or len(value) != 1:
        raise NotPlain
    ((kind, held),) = value.items()
    if (kind in _AV_STRINGS and type(held) is str) or (kind in _AV_FLAGS and type(held) is bool):
        return value
    if type(held) is list:
        if kind in _AV_STRING_SETS and all(type(e) is str for e in held):
            return value
        if kind == "BS" and all(type(e) is str for e in held):
            return {kind: [blob(e) for e in held]}
        if kind == "L":
            return {kind: [_plain_value(e, blob) for e in held]}
    if kind == "B" and type(held) is str:
        return {kind: blob(held)}
    if kind == "M" and type(held) is dict:
        return {kind: {name: _plain_value(e, blob) for name, e in held.items()}}
    raise NotPlain


def plain_batch_write(body: bytes | str) -> dict[str, Any]:
    """A BatchWriteItem request's parameters as moto's model-driven parser reads them (members in
    the shape's order; blobs decoded), from one `json.loads`; NotPlain for a request that has
    anything else (a member the shape lacks, a null, a request of two kinds) or is not JSON."""
    from moto.core.parse import default_blob_parser

    try:
        document = json.loads(body)
    except ValueError:
        raise NotPlain from None
    if type(document) is not dict or not set(document) <= {"RequestItems", *_BWI_OPTIONS}:
        raise NotPlain
    requests = document.get("RequestItems")
    if type(requests) is not dict:
        raise NotPlain
    tables: dict[str, list[dict[str, Any]]] = {}
    for table, writes in requests.items():
        if type(writes) is not list:
            raise NotPlain
        tables[table] = [_plain_write(write, default_blob_parser) for write in writes]
    parameters: dict[str, Any] = {"RequestItems": tables}
    for option in _BWI_OPTIONS:
        if option in document:
            if type(document[option]) is not str:
                raise NotPlain
            parameters[option] = document[option]
    return parameters


def _plain_write(write: Any, blob: Callable[[str], bytes]) -> dict[str, Any]:
    """One WriteRequest: a PutRequest's Item or a DeleteRequest's Key, and nothing else."""
    if type(write) is not dict or len(write) != 1:
        raise NotPlain
    ((kind, request),) = write.items()
    member = _WRITE_REQUESTS.get(kind)
    if member is None or type(request) is not dict or set(request) != {member}:
        raise NotPlain
    attributes = request[member]
    if type(attributes) is not dict:
        raise NotPlain
    return {kind: {member: {name: _plain_value(v, blob) for name, v in attributes.items()}}}


def _parse_parameters(self: Any, request: Any) -> None:
    """`BaseResponse.parse_parameters` (the request's body walked along botocore's model, value by
    value: a tenth of moto's CPU per BatchWriteItem): a DynamoDB BatchWriteItem whose body holds
    only what its shape does is read with `plain_batch_write`, with the same result; every
    other request is moto's."""
    if self.boto3_service_name == "dynamodb" and self._get_action() == "BatchWriteItem":
        try:
            self.params = plain_batch_write(request.data)
            return
        except NotPlain:
            pass
    BATCH_WRITE_PARSE.original()(self, request)


# The traverser's methods whose override makes a processor moto's to walk (`_traverse` assumes
# the base class's: a node processed by the first class of `_processing_map` it is an instance of).
_TRAVERSAL = ("process", "nodes_to_be_processed", "traverse_node_recursively")
_NODE_KINDS: dict[type, bool] = {}  # a class -> whether its instances are moto's AST nodes


def _traverse(self: Any, node: Any) -> Any:
    """`DepthFirstTraverser.traverse`: moto's depth-first walk, children first, each node replaced by
    what the processor of its class returns, with the processing map read once a walk (moto builds
    it twice for every node, and tests every node against its abstract classes: three quarters of
    an UpdateItem's CPU, through the ten processors that validate its expression, twice). A
    processor that overrides how nodes are picked or walked is walked by moto."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node  # type: ignore[attr-defined]

    kind = type(self)
    if any(getattr(kind, name) is not getattr(DepthFirstTraverser, name) for name in _TRAVERSAL):
        return AST_TRAVERSE.original()(self, node)
    handlers = tuple(self._processing_map().items())
    own_hook = kind.pre_processing_of_child is not DepthFirstTraverser.pre_processing_of_child
    hook = self.pre_processing_of_child if own_hook else None
    chosen: dict[type, Any] = {}

    def walk(current: Any, child_id: int) -> Any:
        cls = type(current)
        is_node = _NODE_KINDS.get(cls)
        if is_node is None:
            is_node = _NODE_KINDS[cls] = isinstance(current, Node)
        if not is_node:
            return current
        parent = current.parent
        if current.children is not None:
            for index, child in enumerate(current.children):
                if hook is not None:
                    hook(current, index)
                walk(child, index)
        if cls not in chosen:
            chosen[cls] = next((process for base, process in handlers if issubclass(cls, base)), None)
        process = chosen[cls]
        if process is not None:
            current = process(current)
            current.parent = parent
            if parent:
                parent.children[child_id] = current
        return current

    return walk(node, -1)


@functools.lru_cache(maxsize=1024)
def _parsed_update(expression: str) -> Any:
    return UPDATE_PARSE.original()(expression)


def _update_expression(cls: Any, expression: str) -> Any:
    """`UpdateExpressionParser.make`: an UpdateExpression parsed once (moto parses it twice a request,
    a sixth of an UpdateItem's CPU), its tree shared: moto only reads it (find_clauses) or validates
    a deep copy of it (Validator.__init__), never changes it. A refused expression raises each time."""
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    if cls is not UpdateExpressionParser:  # a subclass parses as moto would, uncached
        return UPDATE_PARSE.original().__func__(cls, expression)
    return _parsed_update(expression)


QUERY_PARTITION: Final = QueryPartition()
SERVER_MODULES: Final = ServerModules()
DYNAMO_TYPES: Final = Patch(
    "dynamo-types", ("moto.dynamodb.models.dynamo_type:DynamoType.__init__",), (_dynamo_type,)
)
METHOD_NAMES: Final = Patch(
    "method-names", ("moto.core.responses:method_names_from_class",), (_method_names,)
)
BATCH_WRITE_PARSE: Final = Patch(
    "batch-write-parse", ("moto.core.responses:BaseResponse.parse_parameters",), (_parse_parameters,)
)
AST_TRAVERSE: Final = Patch(
    "ast-traverse", ("moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.traverse",), (_traverse,)
)
UPDATE_PARSE: Final = Patch(
    "update-parse",
    ("moto.dynamodb.parsing.expressions:UpdateExpressionParser.make",),
    (classmethod(_update_expression),),
)

BACKEND_LOOKUP: Final = Patch(
    # moto's backend lookup takes its global lock on every request.
    "backend-lookup",
    ("moto.core.base_backend:BackendDict.__getitem__",),
    (_lookup,),
)
CLIENT_REUSE: Final = ClientReuse()


# moto's DynamoDB hot paths: the embedded run's and `mapload serve`'s (the bench's server).
DYNAMODB_SPEED: Final = (
    BACKEND_LOOKUP,
    QUERY_PARTITION,
    DYNAMO_TYPES,
    METHOD_NAMES,
    BATCH_WRITE_PARSE,
    AST_TRAVERSE,
    UPDATE_PARSE,
)
# moto's hot paths, cheap for thousands of Map children.
SPEED: Final = (*DYNAMODB_SPEED, CLIENT_REUSE)
