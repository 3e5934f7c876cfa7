"""Each AWS call the embedded run's functions and state machine make, passed to the observers a
caller attaches (`watching`, the emulator's one observer hook): who made it (its principal, with
its role's synthesized policies), the IAM actions and resources it needs, its request context and
the KMS calls the service makes with the caller's permissions. The IAM check and the key meter of
the tests (tests/iamcheck.py, tests/keymeter.py) are two such observers; with none attached,
nothing is recorded.

Recording. botocore emits `before-parameter-build` (the API parameters), `before-call` (the
signer: whose credentials) and `before-send` (the signed request) for every client call; the
Worker's BatchWriteItem sender (runtime/adapters/dynamodb_wire.py) emits only `before-send`, so
DynamoDB calls are read from the request itself (the JSON body names the tables). Neptune's
loader and openCypher APIs are plain HTTP signed for `neptune-db`: `urllib.request.urlopen` is
wrapped, and a query's context names its language (`neptune-db:QueryLanguage`) from its route.
A call is attributed to the function whose handler is running (a context variable set at the
embedded Lambda seam, carried into the threads and thread pools it starts) or to the state machine
when moto's Step Functions interpreter signs it (its clients use the access key `ak`).

Actions and resources follow AWS's Service Authorization Reference and the S3 user guide's
"Required permissions for Amazon S3 API operations" (HeadObject needs s3:GetObject, ListObjectsV2
s3:ListBucket, every multipart step s3:PutObject); an operation with no mapping here is passed on
with no actions (the IAM check reports it as unmapped rather than guessing).
"""

from __future__ import annotations

import contextvars
import json
import re
import threading
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from moto.iam.aws_managed_policies import aws_managed_policies_data

# moto's Step Functions interpreter signs every call it makes (ItemReader, ResultWriter, Lambda
# invoke, ...) with this access key (moto/stepfunctions/parser/asl/utils/boto_client.py).
STATE_MACHINE_ACCESS_KEY = "ak"

S3_OBJECT_ACTIONS = {
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "ListParts": "s3:ListMultipartUploadParts",
    "DeleteObject": "s3:DeleteObject",
    "GetObjectTagging": "s3:GetObjectTagging",
    "PutObjectTagging": "s3:PutObjectTagging",
}
S3_BUCKET_ACTIONS = {
    "ListObjectsV2": "s3:ListBucket",
    "ListObjects": "s3:ListBucket",
    "HeadBucket": "s3:ListBucket",
    "ListMultipartUploads": "s3:ListBucketMultipartUploads",
    "GetBucketLocation": "s3:GetBucketLocation",
    "CreateBucket": "s3:CreateBucket",
}
# The Neptune loader API (docs: Neptune "IAM data-access actions").
NEPTUNE_LOADER_ACTIONS = {
    ("POST", False): "neptune-db:StartLoaderJob",
    ("GET", False): "neptune-db:ListLoaderJobs",
    ("GET", True): "neptune-db:GetLoaderJobStatus",
    ("DELETE", True): "neptune-db:CancelLoaderJob",
}
# POST /openCypher: mapload sends only its vertex id query (adapters.neptune.EXISTING_IDS_QUERY),
# a read, which needs ReadDataViaQuery (docs: Neptune "Using query actions"); a query that writes
# or deletes would also need WriteDataViaQuery / DeleteDataViaQuery.
NEPTUNE_QUERY_ACTIONS = {("POST", "openCypher"): "neptune-db:ReadDataViaQuery"}
# A query's language, in the request context of its query actions as Neptune's one service
# condition key (Neptune user guide, "IAM condition keys for accessing data": values Gremlin,
# OpenCypher, Sparql; the loader API actions do not carry it), by the route the query is sent to.
NEPTUNE_QUERY_LANGUAGE_KEY = "neptune-db:QueryLanguage"
NEPTUNE_QUERY_LANGUAGES = {"gremlin": "Gremlin", "openCypher": "OpenCypher", "sparql": "Sparql"}


def neptune_action(method: str, path: str) -> str | None:
    """The IAM action a Neptune HTTP call needs, or None when none is mapped."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["loader"]:
        return NEPTUNE_LOADER_ACTIONS.get((method, len(parts) > 1))
    return NEPTUNE_QUERY_ACTIONS.get((method, "/".join(parts)))


def neptune_context(path: str) -> dict[str, str]:
    """The Neptune-specific condition keys of a call to `path`: its query language, if a query."""
    parts = [p for p in path.split("/") if p]
    language = NEPTUNE_QUERY_LANGUAGES.get(parts[0]) if parts else None
    return {NEPTUNE_QUERY_LANGUAGE_KEY: language} if language else {}


# KMS calls S3 makes with the caller's permissions on an SSE-KMS bucket (S3 user guide, "Using
# server-side encryption with AWS KMS keys": upload needs kms:GenerateDataKey, download
# kms:Decrypt, a multipart upload both); DynamoDB decrypts a table's customer managed key for
# every request that reads or writes items (DynamoDB developer guide, "Encryption at rest: how
# it works"). Both as the service, so `kms:ViaService` names it.
S3_KMS_ACTIONS = {
    "GetObject": ("kms:Decrypt",),
    "PutObject": ("kms:GenerateDataKey",),
    "CreateMultipartUpload": ("kms:GenerateDataKey", "kms:Decrypt"),
    "UploadPart": ("kms:GenerateDataKey", "kms:Decrypt"),
    "CompleteMultipartUpload": ("kms:GenerateDataKey", "kms:Decrypt"),
}
DYNAMODB_ITEM_ACTIONS = frozenset(
    f"dynamodb:{op}"
    for op in (
        *("GetItem", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"),
        *("BatchGetItem", "BatchWriteItem", "Query", "Scan"),
        "PartiQLInsert",
    )
)
DYNAMODB_TRANSACT = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}


@dataclass(frozen=True)
class Principal:
    """A function or state machine with the statements of every policy its role has."""

    name: str  # "function Worker", "state machine StateMachine"
    role: str  # the role's logical id
    account: str
    statements: tuple[str, ...] = field(repr=False)  # each statement as JSON (hashable)


@dataclass(frozen=True)
class KmsCall:
    """The KMS calls a service makes with the caller's permissions for data encrypted with `key`."""

    key: str  # the key's ARN
    actions: tuple[str, ...]
    context: tuple[tuple[str, str], ...]  # aws:RequestedRegion, kms:ViaService, kms:CallerAccount


@dataclass(frozen=True)
class AwsCall:
    """One call, as the observers see it."""

    principal: Principal | None  # None: the test harness or the emulator itself
    operation: str  # "s3:GetObject", "dynamodb:BatchWriteItem", "neptune-db:POST /loader"
    needs: tuple[tuple[str, str], ...]  # (IAM action, resource ARN); empty: no action mapped
    context: tuple[tuple[str, str], ...] = ()  # the request context's condition keys
    kms: tuple[KmsCall, ...] = ()
    # The API parameters (DynamoDB's: the request body as sent).
    request: Mapping[str, Any] = field(default_factory=dict, compare=False)


Observer = Callable[[AwsCall], None]


def role_statements(
    resources: Mapping[str, Any], role: str, resolve: Callable[[Any], Any]
) -> list[dict[str, Any]]:
    """The resolved statements of a role's inline policies, of the AWS::IAM::Policy and
    AWS::IAM::ManagedPolicy resources attached to it, and of the AWS managed policies it names."""
    props = resources[role].get("Properties", {})
    statements: list[dict[str, Any]] = []
    for policy in props.get("Policies", []):
        statements += _statements(resolve(policy["PolicyDocument"]))
    for arn in resolve(props.get("ManagedPolicyArns", [])):
        name = str(arn).rsplit("/", 1)[-1]
        if ":iam::aws:policy/" not in str(arn) or name not in _aws_managed():
            raise ValueError(f"role {role}: managed policy {arn} cannot be resolved")
        statements += _statements(_aws_managed()[name]["Document"])
    for res in resources.values():
        attached = {"Ref": role} in res.get("Properties", {}).get("Roles", [])
        if attached and res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            statements += _statements(resolve(res["Properties"]["PolicyDocument"]))
    return statements


def encryption_key(kind: str, props: Mapping[str, Any], resolve: Callable[[Any], Any]) -> str | None:
    """The customer managed KMS key a bucket's default encryption or a table's SSE names."""
    if kind == "AWS::S3::Bucket":
        rules = (props.get("BucketEncryption") or {}).get("ServerSideEncryptionConfiguration", [])
        for rule in rules:
            default = rule.get("ServerSideEncryptionByDefault") or {}
            if default.get("SSEAlgorithm") in ("aws:kms", "aws:kms:dsse") and "KMSMasterKeyID" in default:
                return str(resolve(default["KMSMasterKeyID"]))
    if kind == "AWS::DynamoDB::Table":
        sse = props.get("SSESpecification") or {}
        if sse.get("SSEEnabled") and sse.get("SSEType") == "KMS" and "KMSMasterKeyId" in sse:
            return str(resolve(sse["KMSMasterKeyId"]))
    return None


def _statements(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    statement = document["Statement"]
    return list(statement) if isinstance(statement, list) else [statement]


_MANAGED: dict[str, Any] = {}


def _aws_managed() -> dict[str, Any]:
    if not _MANAGED:
        _MANAGED.update(json.loads(aws_managed_policies_data))
    return _MANAGED


def principal(name: str, role: str, account: str, statements: list[dict[str, Any]]) -> Principal:
    return Principal(name, role, account, tuple(json.dumps(s, sort_keys=True) for s in statements))


ACTING_AS: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "mapload_iam_principal", default=None
)


@contextmanager
def acting_as(who: Principal | None) -> Iterator[None]:
    """Attribute the AWS calls made in this context (and the threads it starts) to `who`."""
    token = ACTING_AS.set(who)
    try:
        yield
    finally:
        ACTING_AS.reset(token)


@dataclass
class Watcher:
    """The observers attached, and what attributes a call: the state machines calls may come
    from, the Neptune clusters' loader URLs and the KMS keys of encrypted buckets and tables."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    observers: list[Observer] = field(default_factory=list)
    state_machines: list[Principal] = field(default_factory=list)
    graph_clusters: dict[str, str] = field(default_factory=dict)  # loader base URL -> resource id
    keys: dict[str, str] = field(default_factory=dict)  # bucket or table ARN -> its KMS key ARN
    installed: bool = False

    def emit(self, call: AwsCall) -> None:
        for observer in list(self.observers):
            observer(call)

    def state_machine_call(
        self, action: str, resource: str, context: Mapping[str, str] | None = None
    ) -> None:
        """The emulator layer acting for the state machine without a botocore client (e.g.
        `WATCHER.state_machine_call("s3:PutObject", "arn:aws:s3:::bucket/key")`)."""
        who = self.state_machine()
        if who is not None:
            self.emit(AwsCall(who, action, ((action, resource),), tuple(sorted((context or {}).items()))))

    def state_machine(self) -> Principal | None:
        with self.lock:
            if len(self.state_machines) > 1:
                names = [p.name for p in self.state_machines]
                raise RuntimeError(f"cannot tell which state machine made a call: {names}")
            return self.state_machines[0] if self.state_machines else None

    # -- botocore / urllib hooks ---------------------------------------------------------------

    def install(self) -> None:
        """Hook every botocore client created from now on (and the default session's), the
        Neptune loader's HTTP calls, and carry the principal into threads and thread pools."""
        if self.installed:
            return
        import boto3
        from botocore import handlers

        hooks = [
            ("before-parameter-build", _keep_params, None),
            ("before-call", self._before_call, None),
            ("before-send", self._before_send, handlers.REGISTER_FIRST),
        ]
        for event, hook, first in hooks:
            handlers.BUILTIN_HANDLERS.append((event, hook, first) if first else (event, hook))
            if boto3.DEFAULT_SESSION is not None:
                events = boto3.DEFAULT_SESSION.events
                (events.register_first if first else events.register)(event, hook)
        _carry_principal_into_threads()
        original = urllib.request.urlopen

        def urlopen(request: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(request, urllib.request.Request):
                self._neptune(request)
            return original(request, *args, **kwargs)

        urllib.request.urlopen = urlopen  # type: ignore[assignment]
        self.installed = True

    def caller(self, access_key: str | None) -> Principal | None:
        """Who made the request being answered (signed with `access_key`): the state machine, or
        the function whose handler is running (None: the harness, or nobody is watching)."""
        return self._who(access_key)

    def s3_call_for(
        self,
        who: Principal | None,
        operation: str,
        bucket: str,
        key: str | None,
        region: str,
        *,
        prefix: str | None = None,
        key_arn: str | None = None,
    ) -> None:
        """An S3 call a service makes with `who`'s permissions (bulk put items reading its input
        and writing its output, bulk_put.py), passed on as `who`'s own: the action and resource as
        for `who`'s client, the KMS calls for the bucket's key or `key_arn` (an SSE-KMS key the
        request names)."""
        if who is None or not self.observers:
            return
        params: dict[str, Any] = {"Bucket": bucket}
        ctx = {"aws:RequestedRegion": region}
        if key is not None:
            params["Key"] = key
        if prefix is not None:
            params["Prefix"] = ctx["s3:prefix"] = prefix
        found = _resources("s3", operation, params, region, who.account)
        data_key = key_arn or self.keys.get(f"arn:aws:s3:::{bucket}")
        kms = self._kms(who, "s3", region, data_key, S3_KMS_ACTIONS.get(operation, ()))
        self.emit(AwsCall(who, f"s3:{operation}", tuple(found), tuple(sorted(ctx.items())), kms, params))

    def _who(self, access_key: str | None) -> Principal | None:
        if access_key == STATE_MACHINE_ACCESS_KEY:
            return self.state_machine()
        return ACTING_AS.get()

    def _before_call(self, model: Any, context: dict[str, Any], request_signer: Any = None, **_: Any) -> None:
        service = model.service_model.endpoint_prefix
        if service == "dynamodb" or not self.observers:
            return  # DynamoDB is read from the request itself (before-send): the wire sender only emits that
        credentials = getattr(request_signer, "_credentials", None)
        who = self._who(getattr(credentials, "access_key", None))
        if who is None:
            return
        params = context.get("mapload_iam_params") or {}
        region = str(context.get("client_region") or "")
        found = _resources(service, model.name, params, region, who.account)
        ctx = {"aws:RequestedRegion": region}
        if service == "s3" and "Prefix" in params:
            ctx["s3:prefix"] = str(params["Prefix"])
        kms: tuple[KmsCall, ...] = ()
        if service == "s3":
            key = self.keys.get(f"arn:aws:s3:::{params.get('Bucket', '')}")
            kms = self._kms(who, "s3", region, key, S3_KMS_ACTIONS.get(model.name, ()))
        self.emit(
            AwsCall(who, f"{service}:{model.name}", tuple(found), tuple(sorted(ctx.items())), kms, params)
        )

    def _before_send(self, request: Any, **_: Any) -> None:
        """A DynamoDB request (every one, whoever sends it: the key meter counts the harness's too)."""
        target = request.headers.get("X-Amz-Target")
        target = target.decode() if isinstance(target, bytes) else target
        if not target or not str(target).startswith("DynamoDB_") or not self.observers:
            return
        scope = _credential_scope(request.headers.get("Authorization"))
        access_key, region = (scope[0], scope[1]) if scope is not None else (None, "")
        who = self._who(access_key) if scope is not None else None
        operation = str(target).split(".", 1)[1]
        body = json.loads(request.body or b"{}")
        account = who.account if who is not None else ""
        found = _dynamodb(operation, body, f"arn:aws:dynamodb:{region}:{account}:table/")
        kms: tuple[KmsCall, ...] = ()
        if who is not None:
            for action, resource in found:
                if action in DYNAMODB_ITEM_ACTIONS:
                    key = self.table_key(resource.split("/index/", 1)[0])
                    kms += self._kms(who, "dynamodb", region, key, ("kms:Decrypt",))
        context = (("aws:RequestedRegion", region),)
        self.emit(AwsCall(who, f"dynamodb:{operation}", tuple(found), context, kms, body))

    def table_key(self, table_arn: str) -> str | None:
        """The customer managed key a table is encrypted with: a created table's from its template;
        any other (an `existing_table`, created by its owner) from the table itself, as DynamoDB
        knows it (moto's record of its SSESpecification), so a call on it needs that key too."""
        if table_arn in self.keys:
            return self.keys[table_arn]
        from moto.dynamodb.models import dynamodb_backends

        _arn, _aws, _service, region, account, resource = table_arn.split(":", 5)
        name = resource.removeprefix("table/")
        backends = dynamodb_backends.get(account)
        table = backends[region].tables.get(name) if backends is not None and region in backends else None
        sse = getattr(table, "sse_specification", None) or {}
        key = sse.get("KMSMasterKeyId") if sse.get("Enabled") and sse.get("SSEType") == "KMS" else None
        if not key or ":key/" not in str(key):
            return None
        # moto fills in the AWS managed key (alias/aws/dynamodb) when none is named: not a
        # customer managed key, and DynamoDB grants itself that one.
        from moto.kms.models import kms_backends

        kms = kms_backends[account][region]
        alias = "alias/aws/dynamodb"
        managed = kms.describe_key(alias).arn if kms.alias_exists(alias) else None
        return None if key == managed else str(key)

    @staticmethod
    def _kms(
        who: Principal, service: str, region: str, key: str | None, actions: tuple[str, ...]
    ) -> tuple[KmsCall, ...]:
        """The KMS calls `service` makes on the caller's behalf for data encrypted with `key`."""
        if key is None or not actions:
            return ()
        context = {
            "aws:RequestedRegion": region,
            "kms:ViaService": f"{service}.{region}.amazonaws.com",
            "kms:CallerAccount": who.account,
        }
        return (KmsCall(key, actions, tuple(sorted(context.items()))),)

    def _neptune(self, request: urllib.request.Request) -> None:
        scope = _credential_scope(request.get_header("Authorization"))
        if scope is None or scope[2] != "neptune-db" or not self.observers:
            return
        access_key, region, _service = scope
        who = self._who(access_key)
        if who is None:
            return
        url = urlsplit(request.full_url)
        base = f"{url.scheme}://{url.netloc}"
        action = neptune_action(request.get_method(), url.path)
        cluster = self.graph_clusters.get(base)
        found = (
            ((action, f"arn:aws:neptune-db:{region}:{who.account}:{cluster}/*"),)
            if action and cluster
            else ()
        )
        context = {"aws:RequestedRegion": region, **neptune_context(url.path)}
        operation = f"neptune-db:{request.get_method()} {url.path}"
        self.emit(AwsCall(who, operation, found, tuple(sorted(context.items()))))


WATCHER = Watcher()


@contextmanager
def watching(observer: Observer) -> Iterator[Observer]:
    """Pass every AWS call made from now on to `observer` until the block ends (the hooks, once
    installed, stay: a call with no observer attached is passed to nobody)."""
    WATCHER.install()
    with WATCHER.lock:
        WATCHER.observers.append(observer)
    try:
        yield observer
    finally:
        with WATCHER.lock:
            WATCHER.observers.remove(observer)


def _keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    context["mapload_iam_params"] = dict(params)


def _credential_scope(header: Any) -> tuple[str, str, str] | None:
    """(access key, region, service) from a SigV4 Authorization header."""
    text = header.decode() if isinstance(header, bytes) else header
    match = re.search(r"Credential=([^/]+)/\d{8}/([^/]+)/([^/]+)/aws4_request", str(text or ""))
    return (match.group(1), match.group(2), match.group(3)) if match else None


def _resources(
    service: str, operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[tuple[str, str]]:
    if service == "s3":
        bucket = str(params.get("Bucket", ""))
        if operation in S3_OBJECT_ACTIONS:
            return [(S3_OBJECT_ACTIONS[operation], f"arn:aws:s3:::{bucket}/{params.get('Key', '')}")]
        if operation in S3_BUCKET_ACTIONS:
            return [(S3_BUCKET_ACTIONS[operation], f"arn:aws:s3:::{bucket}")]
        if operation in ("CopyObject", "UploadPartCopy"):
            source = params.get("CopySource")
            if isinstance(source, Mapping):
                source = f"{source.get('Bucket')}/{source.get('Key')}"
            source = unquote(str(source).lstrip("/").split("?", 1)[0])
            return [
                ("s3:PutObject", f"arn:aws:s3:::{bucket}/{params.get('Key', '')}"),
                ("s3:GetObject", f"arn:aws:s3:::{source}"),
            ]
        if operation == "DeleteObjects":
            keys = [o.get("Key", "") for o in (params.get("Delete") or {}).get("Objects", [])]
            return [("s3:DeleteObject", f"arn:aws:s3:::{bucket}/{key}") for key in keys]
        return []
    if service == "lambda" and operation == "Invoke":
        name = str(params.get("FunctionName", ""))
        arn = name if name.startswith("arn:") else f"arn:aws:lambda:{region}:{account}:function:{name}"
        qualifier = params.get("Qualifier")
        return [("lambda:InvokeFunction", f"{arn}:{qualifier}" if qualifier else arn)]
    if service == "states":
        if operation == "StartExecution":
            return [("states:StartExecution", str(params.get("stateMachineArn", "")))]
        if operation in ("DescribeExecution", "StopExecution", "GetExecutionHistory", "ListMapRuns"):
            return [(f"states:{operation}", str(params.get("executionArn", "")))]
        if operation == "ListExecutions":
            return [("states:ListExecutions", str(params.get("stateMachineArn", "")))]
        if operation == "DescribeMapRun":
            return [("states:DescribeMapRun", str(params.get("mapRunArn", "")))]
    if service == "cloudformation" and operation == "DescribeStacks":
        # The operator's commands find an environment by its stacks' outputs.
        stack = str(params.get("StackName", "*"))
        if not stack.startswith("arn:"):
            stack = f"arn:aws:cloudformation:{region}:{account}:stack/{stack}/*"
        arn = stack
        return [("cloudformation:DescribeStacks", arn)]
    return []


# A PartiQL INSERT needs dynamodb:PartiQLInsert on its table (DynamoDB developer guide, "IAM
# security policies with PartiQL for DynamoDB": BatchExecuteStatement has no action of its own).
# mapload sends INSERTs only (putIfAbsent); another statement maps to nothing: reported unmapped.
_PARTIQL_INSERT = re.compile(r'\s*INSERT\s+INTO\s+"?([\w.-]+)"?', re.I)


def _partiql(statement: str, table_arn: str) -> list[tuple[str, str]]:
    found = _PARTIQL_INSERT.match(statement)
    return [("dynamodb:PartiQLInsert", table_arn + found.group(1))] if found else []


# Bulk put items' IAM actions: UNVERIFIED. The Service Authorization Reference's DynamoDB page
# could not be read here past its opening (docs/BULK_PUT_ITEMS.md); these follow DynamoDB's rule
# for its other operations (the action named as the operation) and the resources are the table
# StartBulkPutItems names and the operation's ARN (the emulator's: table/<name>/bulk-operation/<id>).
BULK_ACTIONS = {
    "StartBulkPutItems": "dynamodb:StartBulkPutItems",
    "DescribeBulkOperation": "dynamodb:DescribeBulkOperation",
    "CancelBulkOperation": "dynamodb:CancelBulkOperation",
    "ListBulkOperations": "dynamodb:ListBulkOperations",
}


def _bulk(operation: str, body: Mapping[str, Any], table_arn: str) -> list[tuple[str, str]]:
    action = BULK_ACTIONS[operation]
    if operation == "StartBulkPutItems":
        name = str(body.get("TableName", ""))
        return [(action, name if name.startswith("arn:") else table_arn + name)]
    if operation == "ListBulkOperations":
        return [(action, "*")]
    return [(action, str(body.get("BulkOperationArn", "")))]


def _dynamodb(operation: str, body: Mapping[str, Any], table_arn: str) -> list[tuple[str, str]]:
    if operation in BULK_ACTIONS:
        return _bulk(operation, body, table_arn)
    if operation in ("BatchExecuteStatement", "ExecuteStatement"):
        statements = body.get("Statements") or [body]
        return sorted(
            {found for s in statements for found in _partiql(str(s.get("Statement", "")), table_arn)}
        )
    if operation in ("BatchWriteItem", "BatchGetItem"):
        return [(f"dynamodb:{operation}", table_arn + name) for name in body.get("RequestItems", {})]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        found: list[tuple[str, str]] = []
        for item in body.get("TransactItems", []):
            for kind, detail in item.items():
                found.append((DYNAMODB_TRANSACT[kind], table_arn + str(detail.get("TableName", ""))))
        return found
    if "TableName" in body:
        arn = table_arn + str(body["TableName"])
        if body.get("IndexName"):
            arn += f"/index/{body['IndexName']}"
        return [(f"dynamodb:{operation}", arn)]
    return []


def _carry_principal_into_threads() -> None:
    """Threads and pool tasks run in a fresh context: give them the starting thread's principal."""
    start, run, submit = threading.Thread.start, threading.Thread.run, ThreadPoolExecutor.submit

    def thread_start(self: threading.Thread) -> None:
        self._mapload_principal = ACTING_AS.get()  # type: ignore[attr-defined]
        start(self)

    def thread_run(self: threading.Thread) -> None:
        ACTING_AS.set(getattr(self, "_mapload_principal", None))
        run(self)

    def pool_submit(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return submit(self, contextvars.copy_context().run, fn, *args, **kwargs)

    threading.Thread.start = thread_start  # type: ignore[method-assign]
    threading.Thread.run = thread_run  # type: ignore[method-assign]
    ThreadPoolExecutor.submit = pool_submit  # type: ignore[method-assign,assignment]
