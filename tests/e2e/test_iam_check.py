"""The observed-call IAM check itself: what it records, that each grant an observed call needs is
load-bearing (removing its statement makes the evaluator deny the call), and that it denies
what no statement allows."""

from __future__ import annotations

import gc
import gzip
import json
import urllib.request
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from iamcheck import RECORDER, Call, Recorder, decide

from mapload.emulator.calls import (
    WATCHER,
    Principal,
    Watcher,
    acting_as,
    neptune_action,
    neptune_context,
    principal,
    watching,
)
from mapload.local import run_local
from mapload.sample import postcodes
from mapload.tables import wait_until_active

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

EX = "http://example.org/"
# CSV to the table and to the graph at once (Plan, Worker, Finalize, StartGraphLoad,
# PollGraphLoad and the state machine), N-Quads to the graph, and a compressed source.
GRAPH_AND_TABLE: dict[str, Any] = {
    "format": "csv",
    "dynamodb": {"key": {"pk": "PERSON#{id}", "sk": "PROFILE"}, "attributes": {"name": "{name}"}},
    "graph": {
        "pollSeconds": 1,
        "timeoutMinutes": 5,
        "statements": [
            {"subject": EX + "person/{id}", "predicate": EX + "name", "object": {"literal": "{name}"}}
        ],
    },
}
NQUADS: dict[str, Any] = {
    "format": "nquads",
    "graph": {"pollSeconds": 1, "timeoutMinutes": 5, "gzip": True},
    "shardSizeMiB": 0.01,
    "maxRejectedPercent": 50,
}
COMPRESSED: dict[str, Any] = {
    "format": "csv",
    "csv": {"header": True},
    "dynamodb": {"key": {"pk": "POSTCODE#{postcode}", "sk": "LOCATION"}, "attributes": {"lat": "{latitude}"}},
    "shardSizeMiB": 0.01,
    "maxConcurrency": 4,
}
# A numeric ADD: each record a TransactWriteItems of the table's Update and the ledger's marker
# Put, authorized by the parts' own actions (DynamoDB developer guide, "Using IAM with DynamoDB
# transactions"): dynamodb:UpdateItem on the table, dynamodb:PutItem on the ledger.
ADDING: dict[str, Any] = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "PERSON#{id}", "sk": "VISITS"},
        "writeMode": "update",
        "attributes": {"visits": {"field": "id", "type": "N", "update": "add"}},
    },
}
# putIfAbsent: PartiQL INSERTs in BatchExecuteStatement, authorized by dynamodb:PartiQLInsert on
# the table (BatchExecuteStatement has no action of its own).
INSERTING: dict[str, Any] = {
    "format": "csv",
    "dynamodb": {
        "key": {"pk": "PERSON#{id}", "sk": "NAME"},
        "writeMode": "putIfAbsent",
        "attributes": {"name": "{name}"},
    },
}
# A property graph in two jobs: vertices, then edges to them. The second job's endpoints are not
# its own vertices, so StartGraphLoad reads the shards' id files and asks the graph for them
# (s3:GetObject on staging, neptune-db:ReadDataViaQuery) before it starts the load.
PROPERTY_OPTIONS: dict[str, Any] = {"model": "property", "pollSeconds": 1, "timeoutMinutes": 5}
VERTICES: dict[str, Any] = {
    "format": "csv",
    "graph": {
        **PROPERTY_OPTIONS,
        "vertices": [{"id": "{id}", "label": "Person", "properties": {"name": "{name}"}}],
    },
    "shardSizeMiB": 0.0002,
}
# Half of its edges end nowhere (tolerated): the check reads those shards' edge files again.
EDGES: dict[str, Any] = {
    "format": "csv",
    "graph": {
        **PROPERTY_OPTIONS,
        "edges": [
            {"from": "{id}", "to": "0", "label": "KNOWS"},
            {"from": "{id}", "to": "nobody", "label": "KNOWS"},
        ],
        "maxDanglingPercent": 60,
        "failOnError": False,
    },
}
PRINCIPALS = [
    "function prepare",
    "function plan",
    "function worker",
    "function finalize",
    "function start_graph_load",
    "function poll_graph_load",
    "state machine",
]


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> set[Call]:
    RECORDER.take()
    tmp = tmp_path_factory.mktemp("iam")
    people = tmp / "people.csv"
    people.write_text("id,name\n" + "".join(f"{i},person {i}\n" for i in range(20)))
    rows = "postcode,latitude,longitude\n" + "".join(f"{c},{a},{o}\n" for c, a, o in postcodes(1_500, 7))
    quads = tmp / "data.nq"
    quads.write_text("".join(f'<{EX}s/{i}> <{EX}p> "{i}" <{EX}g> .\n' for i in range(400)) + "not a quad\n")
    compressed = tmp / "postcodes.csv.gz"
    compressed.write_bytes(gzip.compress(rows.encode()))
    # The compressed run with a customer managed data key: S3 and DynamoDB use it on the
    # functions' and the state machine's behalf (kms:ViaService conditions evaluated).
    runs = (
        (people, GRAPH_AND_TABLE, None),
        (quads, NQUADS, None),
        (compressed, COMPRESSED, {"mapload:data_key": "create"}),
        (people, ADDING, None),
        (people, INSERTING, None),
        # With a customer managed data key: StartGraphLoad decrypts the id and edge files via S3.
        (people, VERTICES, {"mapload:data_key": "create"}),
        (people, EDGES, {"mapload:data_key": "create"}),
    )
    for source, spec, context in runs:
        graph_store = tmp / "property" if spec in (VERTICES, EDGES) else None
        with watching(RECORDER):
            report = run_local(
                source,
                spec,
                report_path=tmp / "report.json",
                quiet=True,
                context=context,
                graph_store=graph_store,
            )
        assert report["status"] == "SUCCEEDED", report
        if spec is EDGES:
            assert report["graph"]["danglingEdges"]["count"] == 20
        gc.collect()  # the embedded stores release their locks when the run's loader is collected
    calls, unmapped = RECORDER.take()
    assert not unmapped
    return calls


def test_every_function_and_the_state_machine_is_observed(observed: set[Call]) -> None:
    actions = {(c.principal.name, c.action) for c in observed}
    assert {p for p, _ in actions} == set(PRINCIPALS)
    # The Worker's BatchWriteItem goes through the wire sender (before-send only), the Neptune
    # loader API through urllib, the ItemReader and Lambda invokes through moto's interpreter.
    assert ("function worker", "dynamodb:BatchWriteItem") in actions
    assert ("function worker", "dynamodb:PartiQLInsert") in actions  # putIfAbsent's INSERTs
    # The numeric ADD's transactions: their Update part on the table (no other run updates it).
    updated = {
        c.resource
        for c in observed
        if c.action == "dynamodb:UpdateItem" and c.principal.name == "function worker"
    }
    assert len(updated) == 1 and "Ledger" not in next(iter(updated))
    assert ("function start_graph_load", "neptune-db:StartLoaderJob") in actions
    # The edge endpoint check: the shards' id files, then the graph's own vertex ids, then the
    # edge files of the shards whose edges dangle; no other staged object.
    reads = {
        c.resource
        for c in observed
        if c.principal.name == "function start_graph_load" and c.action == "s3:GetObject"
    }
    id_files = {r for r in reads if "/graph-ids/" in r}
    edge_files = {r for r in reads if "/graph/edges/" in r}
    assert id_files and edge_files and reads == id_files | edge_files, sorted(reads)
    assert ("function start_graph_load", "neptune-db:ReadDataViaQuery") in actions
    assert ("function poll_graph_load", "neptune-db:GetLoaderJobStatus") in actions
    # Poll rewrites each run's report, and writes nothing else to staging.
    writes = {
        c.resource
        for c in observed
        if c.principal.name == "function poll_graph_load" and c.action == "s3:PutObject"
    }
    assert writes and all(r.endswith("/report.json") for r in writes), sorted(writes)
    assert ("state machine", "s3:GetObject") in actions
    assert ("state machine", "lambda:InvokeFunction") in actions
    assert ("function prepare", "s3:PutObject") in actions
    for name in PRINCIPALS:
        if name != "function poll_graph_load":
            assert (name, "kms:Decrypt") in actions
    assert ("function finalize", "kms:GenerateDataKey") in actions
    for call in observed:
        assert call.resource.startswith("arn:aws:"), call
        assert decide(call.principal.statements, call).allowed, call.describe()


@pytest.mark.parametrize("name", PRINCIPALS)
def test_removing_the_statement_an_observed_call_needs_denies_it(observed: set[Call], name: str) -> None:
    calls = [c for c in observed if c.principal.name == name]
    assert calls
    for call in calls:
        allowing = decide(call.principal.statements, call).allowing
        assert len(allowing) == 1, f"{call.describe()}: allowed by several statements {allowing}"
        statements = tuple(s for i, s in enumerate(call.principal.statements) if i not in allowing)
        assert not decide(statements, call).allowed, call.describe()


def test_unrelated_calls_are_denied(observed: set[Call]) -> None:
    by_worker = [c for c in observed if c.principal.name == "function worker"]
    table = next(c.resource for c in by_worker if c.action == "dynamodb:BatchWriteItem")
    staged = next(c.resource for c in observed if c.action == "s3:PutObject" and "/jobs/" in c.resource)
    source = next(c.resource for c in by_worker if c.action == "s3:GetObject" and "source" in c.resource)
    for worker in {c.principal for c in by_worker}:  # with and without the data key
        for action, resource in (
            ("dynamodb:DeleteTable", table),
            ("dynamodb:Scan", table),
            ("dynamodb:BatchWriteItem", table + "-other"),
            ("s3:DeleteObject", staged),
            ("s3:PutObject", source),
            ("kms:Decrypt", "arn:aws:kms:us-east-1:123456789012:key/other"),
            ("neptune-db:ResetDatabase", "arn:aws:neptune-db:us-east-1:123456789012:cluster-X/*"),
        ):
            assert not decide(worker.statements, Call(worker, action, resource)).allowed, action


def _allow(**extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*", **extra}


def _decide(statements: list[dict[str, Any]], **context: str) -> bool:
    who: Principal = principal("function f", "Role", "123456789012", statements)
    call = Call(who, "kms:Decrypt", "arn:aws:kms:us-east-1:123456789012:key/k", tuple(context.items()))
    return decide(who.statements, call).allowed


def test_conditions_count_only_when_they_can_be_evaluated() -> None:
    via_s3 = _allow(Condition={"StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}})
    assert _decide([via_s3], **{"kms:ViaService": "s3.us-east-1.amazonaws.com"})
    assert not _decide([via_s3], **{"kms:ViaService": "dynamodb.us-east-1.amazonaws.com"})
    assert not _decide([via_s3])  # the call's context lacks the key: the Allow does not count
    like = _allow(Condition={"StringNotEquals": {"kms:ViaService": "sqs.us-east-1.amazonaws.com"}})
    assert not _decide([like], **{"kms:ViaService": "s3.us-east-1.amazonaws.com"})  # not evaluated
    # An Allow whose condition fails does not deny what another statement allows; a Deny wins.
    assert _decide([via_s3, _allow()], **{"kms:ViaService": "sqs.us-east-1.amazonaws.com"})
    assert not _decide([_allow(), {**_allow(), "Effect": "Deny"}])
    deny_via_s3 = {**via_s3, "Effect": "Deny"}  # a Deny applies only when its condition holds
    assert _decide([_allow(), deny_via_s3], **{"kms:ViaService": "sqs.us-east-1.amazonaws.com"})
    assert not _decide([_allow(), deny_via_s3], **{"kms:ViaService": "s3.us-east-1.amazonaws.com"})
    assert not _decide([_allow(), {**like, "Effect": "Deny"}])  # not evaluable: the Deny applies


def test_string_like_has_iams_wildcards_only() -> None:
    """`*` any run (none included), `?` one character, case-sensitive; `[` is literal (not fnmatch's
    class); any of a key's values may match."""
    items = _allow(Condition={"StringLike": {"s3:prefix": ["jobs/*/*/bulk/items/*", "x?z"]}})
    assert _decide([items], **{"s3:prefix": "jobs/j/p/bulk/items/"})
    assert _decide([items], **{"s3:prefix": "jobs/j/p/bulk/items/000001-000.json.gz"})
    assert _decide([items], **{"s3:prefix": "xyz"})
    assert not _decide([items], **{"s3:prefix": "jobs/j/p/bulk/lines/"})
    assert not _decide([items], **{"s3:prefix": "JOBS/j/p/bulk/items/"})
    assert not _decide([items], **{"s3:prefix": "xz"})
    assert not _decide([items])  # no prefix in the call: the Allow does not count
    literal = _allow(Condition={"StringLike": {"s3:prefix": "a[bc]"}})
    assert _decide([literal], **{"s3:prefix": "a[bc]"}) and not _decide([literal], **{"s3:prefix": "ab"})


def test_a_denied_call_is_reported_with_function_action_and_resource() -> None:
    RECORDER.take()
    worker = principal("function worker", "WorkerRole", "123456789012", [_allow()])
    RECORDER.add(worker, "s3:PutObject", [("s3:PutObject", "arn:aws:s3:::b/k")], {})
    RECORDER.add(worker, "kms:Decrypt", [("kms:Decrypt", "arn:aws:kms:us-east-1:123456789012:key/k")], {})
    RECORDER.add(worker, "sqs:SendMessage", [], {})  # an operation with no mapped action
    assert RECORDER.denied() == [
        "function worker (role WorkerRole): s3:PutObject on arn:aws:s3:::b/k: no statement allows it",
        "function worker: sqs:SendMessage: no documented IAM action mapped for this operation",
    ]
    assert RECORDER.take() == (set(), set())


def test_the_emulator_can_report_a_call_it_makes_for_the_state_machine() -> None:
    """The hook for what the emulator layer does itself (e.g. writing a ResultWriter's results)."""
    RECORDER.take()
    machine = principal("state machine", "MachineRole", "123456789012", [_allow()])
    WATCHER.state_machines.append(machine)
    try:
        WATCHER.state_machine_call("s3:PutObject", "arn:aws:s3:::staging/jobs/j/r/results.json")
    finally:
        WATCHER.state_machines.remove(machine)
    assert RECORDER.denied() == [
        "state machine (role MachineRole): s3:PutObject on arn:aws:s3:::staging/jobs/j/r/results.json: "
        "no statement allows it"
    ]


def test_the_vertex_id_query_needs_read_data_via_query() -> None:
    """POST /openCypher (StartGraphLoad's existing-vertex check) is recorded as
    neptune-db:ReadDataViaQuery on the cluster's data resource; the loader routes keep theirs."""
    assert neptune_action("POST", "/openCypher") == "neptune-db:ReadDataViaQuery"
    assert neptune_action("GET", "/openCypher") is None  # mapload never sends it: unmapped
    assert neptune_action("POST", "/loader") == "neptune-db:StartLoaderJob"
    assert neptune_action("GET", "/loader/abc") == "neptune-db:GetLoaderJobStatus"
    base = "http://127.0.0.1:8182"
    signed = AWSRequest(method="POST", url=base + "/openCypher", data=b"query=q", headers={})
    SigV4Auth(Credentials("AKID", "secret"), "neptune-db", "us-east-1").add_auth(signed)
    request = urllib.request.Request(
        base + "/openCypher", b"query=q", dict(signed.headers.items()), method="POST"
    )
    recorder = Recorder()
    watcher = Watcher(graph_clusters={base: "cluster-ABC"}, observers=[recorder])
    start = principal("function start_graph_load", "StartRole", "123456789012", [_allow()])
    with acting_as(start):
        watcher._neptune(request)
    calls, unmapped = recorder.take()
    resource = "arn:aws:neptune-db:us-east-1:123456789012:cluster-ABC/*"
    assert ({(c.action, c.resource) for c in calls}, unmapped) == (
        {("neptune-db:ReadDataViaQuery", resource)},
        set(),
    )
    # Its request context names the query language, as Neptune's condition key does.
    assert dict(next(iter(calls)).context)["neptune-db:QueryLanguage"] == "OpenCypher"
    assert neptune_context("/openCypher") == {"neptune-db:QueryLanguage": "OpenCypher"}
    assert neptune_context("/gremlin") == {"neptune-db:QueryLanguage": "Gremlin"}
    assert neptune_context("/sparql") == {"neptune-db:QueryLanguage": "Sparql"}
    assert neptune_context("/loader/abc") == {}  # the loader API carries no query language


def test_the_vertex_id_query_is_allowed_in_opencypher_only(observed: set[Call]) -> None:
    """StartGraphLoad's ReadDataViaQuery holds only with neptune-db:QueryLanguage OpenCypher: the
    observed query is allowed by that conditioned statement; the same call in another language,
    or with no language in its context, is denied (moto evaluates the StringEquals)."""
    [query] = {c for c in observed if c.action == "neptune-db:ReadDataViaQuery"}
    assert query.principal.name == "function start_graph_load"
    assert dict(query.context)["neptune-db:QueryLanguage"] == "OpenCypher"
    [allowing] = decide(query.principal.statements, query).allowing
    condition = json.loads(query.principal.statements[allowing])["Condition"]
    assert condition == {"StringEquals": {"neptune-db:QueryLanguage": "OpenCypher"}}
    region = dict(query.context)["aws:RequestedRegion"]
    for context in (
        {"aws:RequestedRegion": region, "neptune-db:QueryLanguage": "Gremlin"},
        {"aws:RequestedRegion": region, "neptune-db:QueryLanguage": "Sparql"},
        {"aws:RequestedRegion": region},
    ):
        other = Call(query.principal, query.action, query.resource, tuple(sorted(context.items())))
        assert not decide(query.principal.statements, other).allowed, context


def test_putifabsent_s_insert_batch_needs_partiql_insert_on_its_table() -> None:
    """BatchExecuteStatement has no IAM action of its own: each INSERT needs dynamodb:PartiQLInsert
    on its table (DynamoDB developer guide, "IAM security policies with PartiQL for DynamoDB")."""
    from mapload.emulator.calls import _dynamodb

    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/"
    body = {
        "Statements": [
            {"Statement": """INSERT INTO "People" VALUE {'pk': ?}""", "Parameters": [{"S": "a"}]},
            {"Statement": """insert into "People" value {'pk': ?}""", "Parameters": [{"S": "b"}]},
        ]
    }
    assert _dynamodb("BatchExecuteStatement", body, arn) == [("dynamodb:PartiQLInsert", arn + "People")]
    select = {"Statements": [{"Statement": "SELECT * FROM People WHERE pk = 'a'"}]}
    assert _dynamodb("BatchExecuteStatement", select, arn) == []  # not mapped: reported, not guessed


# An `existing_table` its owner encrypted with a customer managed key of their own: DynamoDB uses
# that key with the caller's permissions on every item read or write (DynamoDB developer guide,
# "Encryption at rest: how it works"), so the Worker needs it, as it needs the data key.
TABLE_KEY = "arn:aws:kms:us-east-1:123456789012:key/7a7a7a7a-1111-2222-3333-444455556666"


@pytest.mark.parametrize("named", [False, True], ids=["key not named", "existing_table_key"])
def test_an_existing_table_under_its_own_key_needs_that_key_and_gets_it_when_named(
    tmp_path: Any, named: bool
) -> None:
    people = tmp_path / "people.csv"
    people.write_text("id,name\n" + "".join(f"{i},person {i}\n" for i in range(20)))
    written: dict[str, int] = {}

    def create_the_owners_table(emu: Any) -> None:
        db = emu.client("dynamodb")
        db.create_table(
            TableName="People",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            SSESpecification={"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": TABLE_KEY},
        )
        wait_until_active(db, "People")

    def count(emu: Any, _deployment: Any) -> None:
        written["items"] = emu.client("dynamodb").scan(TableName="People", Select="COUNT")["Count"]

    context = {"mapload:existing_table": "People", "mapload:graph_enabled": "false"}
    if named:
        context["mapload:existing_table_key"] = TABLE_KEY
    RECORDER.take()
    with watching(RECORDER):
        report = run_local(
            people,
            INSERTING,
            report_path=tmp_path / "report.json",
            quiet=True,
            context=context,
            region="us-east-1",
            prepare=create_the_owners_table,
            inspect=count,
        )
    calls, unmapped = RECORDER.take()
    assert report["status"] == "SUCCEEDED", report
    assert written == {"items": 20} and not unmapped
    on_the_key = [c for c in calls if c.resource == TABLE_KEY]
    assert {(c.principal.name, c.action) for c in on_the_key} == {("function worker", "kms:Decrypt")}
    denied = [c.describe() for c in calls if not decide(c.principal.statements, c).allowed]
    assert denied == ([] if named else [c.describe() for c in on_the_key])
