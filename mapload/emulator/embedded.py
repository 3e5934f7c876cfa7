"""Run the synthesized state machine on this machine: moto as the AWS emulator, the runtime
handlers as the Lambda functions, the resources created from the CDK templates."""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import boto3
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.config import DefaultConfig

from adapters.buckets import create_bucket
from mapload.emulator import bulk_put, calls, limits, moto_patches
from mapload.emulator import clock as clocks
from mapload.emulator.cfn import Resolver, UnresolvedError
from mapload.emulator.neptune_local import LocalNeptuneLoader
from mapload.tables import POLL_SECONDS, enable_ttl, wait_until_active

ACCOUNT = "123456789012"
MOTO_CONFIG: DefaultConfig = {
    "lambda": {"use_docker": False},
    "stepfunctions": {"execute_state_machine": True},
}
# Step Functions and Lambda always stay inside the emulator; only these may point elsewhere.
DATA_ENDPOINTS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB")
EMULATOR_ONLY = (
    "AWS_ENDPOINT_URL_LAMBDA",
    "AWS_ENDPOINT_URL_SFN",
    "AWS_ENDPOINT_URL_STEPFUNCTIONS",
    "AWS_ENDPOINT_URL_IAM",
)
# How long Emulator.wait waits for one execution by default: longer than any local run takes.
WAIT_DEADLINE_SECONDS = 6 * 3600.0


class StackTemplate(Protocol):
    """One synthesized stack: its name and its CloudFormation template (mapload.synth's)."""

    @property
    def name(self) -> str: ...

    @property
    def template(self) -> Mapping[str, Any]: ...


class _LoadsWait:
    """Real time whose Wait states end once the emulator's local graph loads and bulk put items
    operations are done (or their seconds pass): Neptune and DynamoDB need the poll's seconds, the
    local models only their own running time."""

    def __init__(self, emulator: Emulator) -> None:
        self._emulator = emulator

    def time(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> None:
        loader = self._emulator.graph_loader
        if loader is None and not bulk_put.MODEL.active():
            time.sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        if loader is not None:
            loader.wait_idle(seconds)
        bulk_put.MODEL.wait_idle(max(0.0, deadline - time.monotonic()))


class EmulatorTimeoutError(Exception):
    """An execution in the emulator did not end before the caller's deadline."""


@dataclass
class FunctionDef:
    logical_id: str
    name: str
    arn: str
    handler: str
    env: dict[str, str]
    principal: calls.Principal | None = None  # its role's policies, for the call observers
    # The template's Timeout (CloudFormation's default is 3 s).
    timeout_seconds: float = 3.0
    # The emulator's clock, for a handler that reads the time (its `handle` takes `now`).
    now: Callable[[], float] | None = None

    @property
    def module(self) -> str:
        return self.handler.rsplit(".", 1)[0].replace("/", ".")

    @property
    def role(self) -> str:
        """Plan, Worker or Finalize, from the handler module's name."""
        return self.module.rsplit(".", 1)[-1]


@dataclass
class Deployment:
    outputs: dict[str, str] = field(default_factory=dict)
    # Outputs naming what the embedded run does not create (a VPC, a dashboard): why, if asked for.
    unresolved: dict[str, UnresolvedError] = field(default_factory=dict)
    buckets: dict[str, str] = field(default_factory=dict)  # logical id -> name
    tables: dict[str, str] = field(default_factory=dict)
    functions: dict[str, FunctionDef] = field(default_factory=dict)
    state_machines: dict[str, str] = field(default_factory=dict)  # logical id -> arn
    # What the run should tell its user about the resources (a table's TTL left off): one line each.
    warnings: list[str] = field(default_factory=list)

    def output(self, suffix: str) -> str:
        for name, value in self.outputs.items():
            if name == suffix or name.endswith(suffix):
                return value
        for name, error in self.unresolved.items():
            if name == suffix or name.endswith(suffix):
                raise error
        raise KeyError(f"no stack output named {suffix} (have {sorted(self.outputs)})")


class Invocations:
    """What the Lambda seam saw: lets the runner show progress without polling AWS."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shard_total: int | None = None
        self.shards_done = 0
        self.records_read = 0
        self.final: dict[str, Any] | None = None
        self.errors: list[dict[str, str]] = []

    def saw(self, fn: FunctionDef, result: Any) -> None:
        with self.lock:
            if fn.role == "plan" and isinstance(result, dict):
                self.shard_total = int(result.get("shardCount", 0))
            elif fn.role == "worker" and isinstance(result, dict) and "index" in result:
                # A shard's result (the Worker also syncs writeMode sync's buckets: not shards).
                self.shards_done += 0 if result.get("more") else 1  # else stopped at a checkpoint
                self.records_read += int(result.get("read", 0))
            elif fn.role == "finalize" and isinstance(result, dict):
                self.final = result
            elif fn.role == "poll_graph_load" and isinstance(result, dict) and not result.get("pending"):
                self.final = result  # the report with the graph load's outcome


_SEAM_LOCK = threading.Lock()
_FUNCTIONS: dict[str, FunctionDef] = {}
_OBSERVER: list[Invocations] = []


def _invoke(
    function_name: str, body: Any, headers: Mapping[str, Any], response_headers: dict[str, Any]
) -> bytes | None:
    """moto's one place where a Lambda invocation lands (moto_patches.LAMBDA_INVOKE): call the
    runtime handler instead, within Lambda's limits (payload sizes, the function's timeout, JSON
    marshalling of the result). None for a function no emulator registered (moto answers it)."""
    fn = _FUNCTIONS.get(function_name) or _FUNCTIONS.get(function_name.rsplit(":", 1)[-1])
    if fn is None:
        return None
    invocation_type = str(headers.get("X-Amz-Invocation-Type") or "RequestResponse")
    limits.check_request(fn.name, invocation_type, len(body or b""))
    event = json.loads(body or b"{}")
    try:
        result = limits.run_with_timeout(fn.name, fn.timeout_seconds, lambda: _call(fn, event))
        payload = limits.marshal(result)
    except Exception as error:
        response_headers["x-amz-function-error"] = "Unhandled"
        # Lambda's own failures (Sandbox.Timedout) have names no Python class can have.
        error_type = (
            error.error_type if isinstance(error, limits.LambdaFunctionError) else type(error).__name__
        )
        for observer in _OBSERVER:
            with observer.lock:
                observer.errors.append({"function": fn.role, "type": error_type, "message": str(error)})
        return json.dumps(
            {
                "errorType": error_type,
                "errorMessage": str(error),
                "stackTrace": traceback.format_exception(error)[-5:],
            }
        ).encode()
    for observer in _OBSERVER:
        observer.saw(fn, result)
    return payload


def _call(fn: FunctionDef, event: Any) -> Any:
    module = importlib.import_module(fn.module)
    # The function's own environment, as the template defines it: many functions share
    # this process, so nothing may come from process-wide variables.
    parameters = inspect.signature(module.handle).parameters
    takes_now = fn.now is not None and "now" in parameters
    extra: dict[str, Any] = {"now": fn.now} if takes_now else {}
    if "remaining" in parameters:  # the Worker's deadline, as Lambda's context gives it
        extra["remaining"] = _remaining(fn.timeout_seconds)
    with calls.acting_as(fn.principal):
        return module.handle(event, fn.env, **extra)


def _remaining(timeout_seconds: float) -> Callable[[], float]:
    """The invocation's time left in seconds (Lambda's `get_remaining_time_in_millis`): the
    function's Timeout from now, in real time, as `limits.run_with_timeout` enforces it."""
    deadline = time.monotonic() + timeout_seconds
    return lambda: deadline - time.monotonic()


def _bucket_name(env_name: str, logical_id: str) -> str:
    return f"mapload-{env_name}-{logical_id}".lower()[:63]


class Emulator:
    """An in-process AWS (moto) holding one deployed environment of the CDK app."""

    def __init__(
        self,
        env_name: str,
        region: str = "us-east-1",
        *,
        graph_store: Path | None = None,
        clock: clocks.Clock | None = None,
        graph_loader: Callable[[Path | None], LocalNeptuneLoader] = LocalNeptuneLoader,
        table_poll_seconds: float = POLL_SECONDS,
    ) -> None:
        """`clock`: the time the Wait states spend and the functions read (default: real time);
        `graph_loader`: makes the Neptune stand-in from the store's directory;
        `table_poll_seconds`: how often a new table's status is read until it is ACTIVE."""
        self.env_name = env_name
        self.table_poll_seconds = table_poll_seconds
        self.region = region
        # The Neptune stand-in: started when a template defines a Neptune cluster.
        self.graph_store = graph_store
        self.graph_loader: LocalNeptuneLoader | None = None
        self._make_graph_loader = graph_loader
        self.clock = clock
        self._mock = mock_aws(config=MOTO_CONFIG)
        self._saved_env: dict[str, str | None] = {}
        self.deployment = Deployment()
        self._principals: list[calls.Principal] = []
        self._keyed: list[str] = []  # encrypted buckets and tables, for the call observers

    def __enter__(self) -> Emulator:
        # Everything __enter__ changes is undone by one ExitStack, last change first: a step
        # that fails on exit does not leave the later ones (moto's patches, os.environ) undone.
        undo = self._undo = ExitStack()
        undo.callback(_clear_runtime_clients)
        overrides = {"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}
        general = os.environ.get("AWS_ENDPOINT_URL")
        for name in DATA_ENDPOINTS:  # a general endpoint serves the data services only
            if general and not os.environ.get(name):
                overrides[name] = general
        for name, value in overrides.items():
            self._saved_env[name] = os.environ.get(name)
            os.environ[name] = value
        for name in ("AWS_ENDPOINT_URL", *EMULATOR_ONLY):
            self._saved_env[name] = os.environ.pop(name, None)
        undo.callback(self._restore_environment)
        logging.getLogger("moto").setLevel(logging.CRITICAL)  # its interpreter logs every caught error
        # moto's internals, patched while the emulator is open (moto_patches.py names each one).
        moto_patches.LAMBDA_INVOKE.install(_invoke)
        undo.callback(moto_patches.LAMBDA_INVOKE.uninstall)
        # What AWS enforces and moto's interpreter does not; moto's hot paths, cheap for thousands
        # of Map children; TransactWriteItems isolated from other threads' writes.
        # DynamoDB's bulk put items, which moto lacks, on the local model (bulk_put.py).
        for patch in (
            *moto_patches.LIMITS,
            *moto_patches.SPEED,
            moto_patches.TRANSACTIONS,
            moto_patches.BULK_PUT,
        ):
            patch.install()
            undo.callback(patch.uninstall)
        # A Wait state (the graph load's poll) moves a given clock on; in real time it waits only
        # while a local graph load runs, so the poll sees a finished load at once.
        moto_patches.WAIT_CLOCK.install(self.clock if self.clock is not None else _LoadsWait(self))
        undo.callback(moto_patches.WAIT_CLOCK.uninstall)
        undo.callback(self._forget_deployment)
        self._mock.start()
        undo.callback(self._mock.stop)
        # Bulk put items operations still running end before moto's backends go with the mock.
        undo.callback(bulk_put.MODEL.close)
        _clear_runtime_clients()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._undo:
            if self.graph_loader is not None:
                self.graph_loader.__exit__(None, None, None)
                self.graph_loader = None

    def _forget_deployment(self) -> None:
        """Drop this emulator's principals, keys and functions from the process-wide registries."""
        with calls.WATCHER.lock:
            calls.WATCHER.state_machines[:] = [
                p for p in calls.WATCHER.state_machines if p not in self._principals
            ]
            for arn in self._keyed:
                calls.WATCHER.keys.pop(arn, None)
        with _SEAM_LOCK:
            for fn in self.deployment.functions.values():
                _FUNCTIONS.pop(fn.name, None)
                _FUNCTIONS.pop(fn.arn, None)

    def _restore_environment(self) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=self.region)

    # -- provisioning ---------------------------------------------------------------------
    def provision(self, stacks: Sequence[StackTemplate]) -> Deployment:
        """Create what the templates define: buckets, tables, functions, state machines."""
        resolver = Resolver(self.region, ACCOUNT)
        iam = self.client("iam")
        try:
            role_arn = iam.create_role(RoleName="mapload-embedded", AssumeRolePolicyDocument="{}")["Role"][
                "Arn"
            ]
        except ClientError:
            role_arn = iam.get_role(RoleName="mapload-embedded")["Role"]["Arn"]
        pending = list(stacks)
        while pending:
            progressed = False
            for stack in list(pending):
                if not self._imports_ready(stack.template, resolver):
                    continue
                self._provision_stack(stack, resolver, role_arn)
                pending.remove(stack)
                progressed = True
            if not progressed:
                raise RuntimeError(f"stacks import values nobody exports: {[s.name for s in pending]}")
        return self.deployment

    @staticmethod
    def _imports_ready(template: Mapping[str, Any], resolver: Resolver) -> bool:
        needed: list[str] = []
        outputs: list[tuple[str, str]] = []

        def walk(value: Any) -> None:
            if isinstance(value, Mapping):
                if "Fn::ImportValue" in value and isinstance(value["Fn::ImportValue"], str):
                    needed.append(value["Fn::ImportValue"])
                if isinstance(value.get("Fn::GetStackOutput"), Mapping):
                    read = value["Fn::GetStackOutput"]
                    outputs.append((str(read["StackName"]), str(read["OutputName"])))
                for v in value.values():
                    walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)

        walk(template.get("Resources", {}))
        return all(name in resolver.exports for name in needed) and all(
            key in resolver.outputs for key in outputs
        )

    def _provision_stack(self, stack: StackTemplate, resolver: Resolver, role_arn: str) -> None:
        resources: dict[str, Any] = stack.template.get("Resources", {})
        # Names first, so every Ref and GetAtt resolves whatever order resources come in.
        for logical, res in resources.items():
            self._name_resource(logical, res["Type"], resolver, role_arn)
        self._create_stores(resources, resolver)
        self._create_functions(resources, resolver, role_arn)
        self._create_state_machines(stack, resolver, role_arn)
        self._record_outputs(stack, resolver)

    def _name_resource(self, logical: str, kind: str, resolver: Resolver, role_arn: str) -> None:
        """The Ref and GetAtt values of one resource, as CloudFormation would give them."""
        if kind == "AWS::S3::Bucket":
            name = _bucket_name(self.env_name, logical)
            resolver.refs[logical] = name
            resolver.attrs[(logical, "Arn")] = f"arn:aws:s3:::{name}"
            resolver.attrs[(logical, "DomainName")] = f"{name}.s3.amazonaws.com"
            resolver.attrs[(logical, "RegionalDomainName")] = f"{name}.s3.{self.region}.amazonaws.com"
        elif kind == "AWS::DynamoDB::Table":
            name = f"mapload-{self.env_name}-{logical}"
            resolver.refs[logical] = name
            resolver.attrs[(logical, "Arn")] = f"arn:aws:dynamodb:{self.region}:{ACCOUNT}:table/{name}"
            resolver.attrs[(logical, "StreamArn")] = (
                f"arn:aws:dynamodb:{self.region}:{ACCOUNT}:table/{name}/stream/x"
            )
        elif kind == "AWS::Lambda::Function":
            name = f"mapload-{self.env_name}-{logical}"[:64]
            resolver.refs[logical] = name
            resolver.attrs[(logical, "Arn")] = f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{name}"
        elif kind == "AWS::StepFunctions::StateMachine":
            # As CloudFormation names it: <logical id>-<suffix> (the Plan role's grant relies on it).
            name = f"{logical}-{self.env_name}"[:80]
            arn = f"arn:aws:states:{self.region}:{ACCOUNT}:stateMachine:{name}"
            resolver.refs[logical] = arn
            resolver.attrs[(logical, "Arn")] = arn
            resolver.attrs[(logical, "Name")] = name
        elif kind == "AWS::IAM::Role":
            resolver.refs[logical] = f"{logical}"
            resolver.attrs[(logical, "Arn")] = role_arn
        elif kind == "AWS::Logs::LogGroup":
            resolver.refs[logical] = f"/mapload/{self.env_name}/{logical}"
            resolver.attrs[(logical, "Arn")] = (
                f"arn:aws:logs:{self.region}:{ACCOUNT}:log-group:/mapload/{self.env_name}/{logical}:*"
            )
        elif kind == "AWS::Neptune::DBCluster":
            # The cluster endpoint is the local loader's URL (scheme included: the client
            # keeps a scheme it is given), so the functions' own HTTP + SigV4 code talks to it.
            loader = self._graph_loader()
            resolver.refs[logical] = f"mapload-{self.env_name}-{logical}".lower()
            resolver.attrs[(logical, "Endpoint")] = "http://127.0.0.1"
            resolver.attrs[(logical, "ReadEndpoint")] = "http://127.0.0.1"
            resolver.attrs[(logical, "Port")] = str(loader.port)
            resolver.attrs[(logical, "ClusterResourceId")] = f"cluster-{logical}".upper()[:40]
            calls.WATCHER.graph_clusters[f"http://127.0.0.1:{loader.port}"] = resolver.attrs[
                (logical, "ClusterResourceId")
            ]
        elif kind == "AWS::EC2::SecurityGroup":
            resolver.refs[logical] = f"sg-{logical}".lower()
            resolver.attrs[(logical, "GroupId")] = f"sg-{logical}".lower()
        elif kind == "AWS::KMS::Key":
            resolver.refs[logical] = f"key-{logical}"
            resolver.attrs[(logical, "Arn")] = f"arn:aws:kms:{self.region}:{ACCOUNT}:key/{logical}"
        else:
            # Not created here: a Ref to it fails, naming it, instead of passing its logical id on.
            resolver.unsupported[logical] = kind

    def _create_stores(self, resources: Mapping[str, Any], resolver: Resolver) -> None:
        """Buckets and tables, and the KMS keys that encrypt them (for the call observers). Every
        table is created before any is waited for, so their CREATING moments overlap."""
        tables: list[tuple[str, Mapping[str, Any]]] = []
        for logical, res in resources.items():
            kind, props = res["Type"], res.get("Properties", {})
            if kind == "AWS::S3::Bucket":
                self._create_bucket(resolver.refs[logical])
                self.deployment.buckets[logical] = resolver.refs[logical]
            elif kind == "AWS::DynamoDB::Table":
                self._create_table(resolver.refs[logical], props)
                self.deployment.tables[logical] = resolver.refs[logical]
                tables.append((resolver.refs[logical], props))
            key = calls.encryption_key(kind, props, resolver.resolve)
            if key is not None:  # the KMS calls S3 or DynamoDB then make for the caller
                calls.WATCHER.keys[resolver.attrs[(logical, "Arn")]] = key
                self._keyed.append(resolver.attrs[(logical, "Arn")])
        for name, props in tables:
            self._ready_table(name, props)

    def _create_functions(self, resources: Mapping[str, Any], resolver: Resolver, role_arn: str) -> None:
        for logical, res in resources.items():
            kind, props = res["Type"], res.get("Properties", {})
            if kind == "AWS::Lambda::Function":
                self._create_function(logical, resolver, props, role_arn)
                fn = self.deployment.functions[logical]
                fn.principal = self._principal(f"function {fn.role}", resources, props["Role"], resolver)

    def _create_state_machines(self, stack: StackTemplate, resolver: Resolver, role_arn: str) -> None:
        resources: dict[str, Any] = stack.template.get("Resources", {})
        for logical, res in resources.items():
            kind, props = res["Type"], res.get("Properties", {})
            if kind == "AWS::StepFunctions::StateMachine":
                definition = props.get("DefinitionString")
                if definition is None:
                    definition = json.dumps(props["Definition"])
                definition = resolver.resolve(definition, f"{stack.name}.{logical}.DefinitionString")
                self.client("stepfunctions").create_state_machine(
                    name=resolver.attrs[(logical, "Name")], definition=definition, roleArn=role_arn
                )
                self.deployment.state_machines[logical] = resolver.refs[logical]
                machine = self._principal("state machine", resources, props["RoleArn"], resolver)
                self._principals.append(machine)
                with calls.WATCHER.lock:
                    calls.WATCHER.state_machines.append(machine)

    def _record_outputs(self, stack: StackTemplate, resolver: Resolver) -> None:
        for name, output in stack.template.get("Outputs", {}).items():
            # An output naming something not created here (a VPC, a dashboard) fails when used.
            value: Any
            try:
                value = resolver.resolve(output["Value"], f"{stack.name}.Outputs.{name}")
                self.deployment.outputs[f"{stack.name}.{name}"] = value
            except UnresolvedError as error:
                value = self.deployment.unresolved[f"{stack.name}.{name}"] = error
            resolver.outputs[(stack.name, name)] = value
            export = output.get("Export", {}).get("Name")
            if export:
                resolver.exports[resolver.resolve(export, f"{stack.name}.Outputs.{name}.Export")] = value

    @staticmethod
    def _principal(
        name: str, resources: Mapping[str, Any], role_ref: Mapping[str, Any], resolver: Resolver
    ) -> calls.Principal:
        """The function's or state machine's role (`Fn::GetAtt [Role, Arn]`), with its policies."""
        role = role_ref["Fn::GetAtt"][0]
        statements = calls.role_statements(resources, role, resolver.resolve)
        return calls.principal(name, role, ACCOUNT, statements)

    def _graph_loader(self) -> LocalNeptuneLoader:
        if self.graph_loader is None:
            if self.graph_store is not None:
                self.graph_store.mkdir(parents=True, exist_ok=True)
            self.graph_loader = self._make_graph_loader(self.graph_store).__enter__()
        return self.graph_loader

    def _create_bucket(self, name: str) -> None:
        """As the commands create one: a re-run against a kept endpoint reuses its buckets."""
        create_bucket(self.client("s3"), name, self.region)

    def _create_table(self, name: str, props: Mapping[str, Any]) -> None:
        """Create the table (or reuse one a kept endpoint holds, if its key is the template's);
        `_ready_table` then waits for it and turns its TTL on."""
        db = self.client("dynamodb")
        args: dict[str, Any] = {
            "TableName": name,
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
        }
        if args["BillingMode"] == "PROVISIONED":
            args["ProvisionedThroughput"] = props.get(
                "ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
            )
        try:
            db.create_table(**args)
        except ClientError as error:
            if error.response["Error"]["Code"] != "ResourceInUseException":
                raise
            existing = db.describe_table(TableName=name)["Table"]["KeySchema"]
            if existing != props["KeySchema"]:
                raise RuntimeError(
                    f"table {name} exists with key {existing}, but the template defines {props['KeySchema']}"
                ) from error

    def _ready_table(self, name: str, props: Mapping[str, Any]) -> None:
        """Wait until the table is ACTIVE (DynamoDB keeps a new one CREATING for seconds; so does
        this emulator, patch table-creating), then turn on the TTL the template sets; a TTL that
        stays off is in `deployment.warnings`, for the command to say (tables.enable_ttl)."""
        db = self.client("dynamodb")
        wait_until_active(db, name, poll_seconds=self.table_poll_seconds)
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            problem = enable_ttl(db, name, str(ttl["AttributeName"]))
            if problem is not None:
                self.deployment.warnings.append(problem)

    def _create_function(
        self, logical: str, resolver: Resolver, props: Mapping[str, Any], role_arn: str
    ) -> None:
        name = resolver.refs[logical]
        env = {
            k: str(v)
            for k, v in resolver.resolve(
                props.get("Environment", {}).get("Variables", {}), f"{logical}.Environment.Variables"
            ).items()
        }
        # As Lambda sets it for every function (CloudFormation's default MemorySize is 128).
        env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = str(props.get("MemorySize", 128))
        fn = FunctionDef(
            logical,
            name,
            resolver.attrs[(logical, "Arn")],
            str(props["Handler"]),
            env,
            timeout_seconds=float(props.get("Timeout", 3)),
            now=self.clock.time if self.clock is not None else None,
        )
        self.add_function(fn, role_arn, runtime=str(props.get("Runtime", "python3.12")))

    def add_function(self, fn: FunctionDef, role_arn: str, *, runtime: str = "python3.12") -> None:
        """A Lambda function whose invocations run `fn.handler`'s module `handle(event, env)`."""
        self.client("lambda").create_function(
            FunctionName=fn.name,
            Runtime=runtime,
            Role=role_arn,
            Handler=fn.handler,
            Code={"ZipFile": b"embedded: handled in-process"},
            Environment={"Variables": fn.env},
        )
        self.deployment.functions[fn.logical_id] = fn
        with _SEAM_LOCK:
            _FUNCTIONS[fn.name] = fn
            _FUNCTIONS[fn.arn] = fn

    # -- running --------------------------------------------------------------------------
    def start(self, state_machine_arn: str, name: str, payload: Mapping[str, Any]) -> str:
        return str(
            self.client("stepfunctions").start_execution(
                stateMachineArn=state_machine_arn, name=name, input=json.dumps(payload)
            )["executionArn"]
        )

    def wait(
        self,
        execution_arn: str,
        on_tick: Callable[[], None] | None = None,
        interval: float = 0.25,
        deadline_seconds: float = WAIT_DEADLINE_SECONDS,
    ) -> dict[str, Any]:
        """The execution's description once it has ended; EmulatorTimeoutError past the deadline.
        While it runs, its status is read from moto's backend in this process: through the SDK, a
        DescribeExecution every `interval` cost the run's process as much of its interpreter lock
        as a twentieth of its writes."""
        from moto.stepfunctions.responses import get_backend

        sfn = self.client("stepfunctions")
        backend = get_backend(ACCOUNT, self.region)
        started = time.monotonic()
        while True:
            if backend.describe_execution(execution_arn).status != "RUNNING":
                described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
                return described
            waited = time.monotonic() - started
            if waited > deadline_seconds:
                raise EmulatorTimeoutError(
                    f"execution {execution_arn} still RUNNING after {waited:.1f} s "
                    f"(deadline {deadline_seconds:g} s)"
                )
            if on_tick:
                on_tick()
            time.sleep(interval)


@contextmanager
def observing() -> Iterator[Invocations]:
    seen = Invocations()
    _OBSERVER.append(seen)
    try:
        yield seen
    finally:
        _OBSERVER.remove(seen)


def _clear_runtime_clients() -> None:
    """The handlers cache boto3 clients; a new emulator (or endpoint) needs new ones. Their new
    session is made now, as boto3's default: the emulator's own clients (`Emulator.client`) then
    read botocore's data through it, once for both."""
    try:
        from adapters import clients
    except ImportError:
        return
    clients.reset()
    clients.session()
