"""No report or edge endpoint check can make the graph load loop's state pass 256 KiB (AWS fails
the execution with States.DataLimitExceeded, which no Catch sees).

The largest answers the handlers can give (every sample full of the costliest characters, the
most listed, the numbers at their longest) go through the synthesized definition's Parameters,
ResultSelector and ResultPath, state by state, as Step Functions passes them on. Each state's input
and output, each Lambda request and result is measured as Step Functions counts a payload: the
UTF-8 bytes of its JSON. How that JSON is written changes the count: Lambda's python3.12 runtime
writes non-ASCII characters as they are (awslambdaric: ensure_ascii=False), moto (which runs the
same definition in `mapload run-local`) and the older runtimes escape them (中 is 6 bytes as
\\u4e2d, an astral character 12 as a surrogate pair); both escape control characters. Both are
measured; the escaped one is never the smaller.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from adapters.ledger import Ledger
from graph_loads import endpoint_check as edge_check
from graph_loads import poll as graph_poll
from graph_loads import start as graph_start
from handlers.settings import FinalizeSettings, StartGraphLoadSettings
from logic import endpoints, layout, planning, report
from logic.spec.parse import parse_spec, spec_to_json
from mapload.emulator.limits import STATE_PAYLOAD_BYTES
from reports import service as reports_service
from tests.infra.support import Synth
from tests.infra.test_state_machine import definition

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
# Half the limit: the execution input rides in the state twice (at its root and as Plan's
# normalized spec), and an input larger than the example below needs the rest.
LOOP_BUDGET_BYTES = STATE_PAYLOAD_BYTES // 2
DYNAMODB_ITEM_BYTES = 400 * 1024
# One of each kind of costly character: ASCII, 2-, 3- and 4-byte UTF-8, JSON's own escapes.
CHARACTERS = ["x", "é", "中", "😀", "\x01", '"']
LONG = 1 << 16  # characters: longer than any sample keeps
BIG = 10**15  # counts, offsets, line numbers at their longest plausible
NOW = 1_800_000_000.0

# The longest names AWS allows where they appear in the report.
STAGING = "s" * 63  # an S3 bucket name
JOB_ID = "j" * 80  # the input's jobId pattern
RUN_ID = "r" * 80  # an execution name
PK, SK = "p" * 255, "s" * 255  # DynamoDB key attribute names
TABLE_KEY = {PK: "S", SK: "S"}
SHARDS = planning.DEFAULT_MAX_SHARDS
ENV = {
    "SOURCE_BUCKETS": "src",
    "STAGING_BUCKET": STAGING,
    "LEDGER_TABLE": "ledger",
    "LEDGER_TTL_DAYS": "7",
    "TABLE_NAME": "t" * 255,
    "TABLE_ARN": "arn:aws:dynamodb:eu-west-2:123456789012:table/" + "t" * 255,
    "NEPTUNE_ENDPOINT": "cluster.abc.eu-west-2.neptune.amazonaws.com",
    "NEPTUNE_PORT": "8182",
    "NEPTUNE_REGION": "eu-west-2",
    "LOADER_ROLE_ARN": "arn:aws:iam::123456789012:role/loader",
}
# An ordinary property graph input with a DynamoDB target in a write mode that skips (docs/INPUT.md).
INPUT = {
    "source": "s3://src/people/",
    "format": "csv",
    "jobId": JOB_ID,
    "dynamodb": {"key": {PK: "PERSON#{id}", SK: "PROFILE"}, "writeMode": "putIfAbsent"},
    "maxRejectedPercent": 100,
    "graph": {
        "model": "property",
        "failOnError": False,
        "vertices": [
            {
                "id": "person-{id}",
                "label": "Person",
                "properties": {"name": "{name}", "age": {"field": "age", "type": "Int", "optional": True}},
            }
        ],
        "edges": [{"from": "person-{id}", "to": "person-{manager}", "label": "REPORTS_TO"}],
    },
}
# What Lambda adds around a function's answer in a LambdaInvoke task's result.
LAMBDA_METADATA = {
    "ExecutedVersion": "$LATEST",
    "SdkHttpMetadata": {
        "AllHttpHeaders": {
            "X-Amz-Executed-Version": ["$LATEST"],
            "x-amzn-Remapped-Content-Length": ["0"],
            "Connection": ["keep-alive"],
            "x-amzn-RequestId": ["0" * 36],
            "Content-Length": ["262144"],
            "Date": ["Thu, 01 Jan 2026 00:00:00 GMT"],
            "X-Amzn-Trace-Id": ["Root=1-00000000-000000000000000000000000;Parent=0000000000000000;Sampled=0"],
            "Content-Type": ["application/json"],
        },
        "HttpHeaders": {"Content-Type": "application/json", "x-amzn-RequestId": "0" * 36},
        "HttpStatusCode": 200,
    },
    "SdkResponseMetadata": {"RequestId": "0" * 36},
    "StatusCode": 200,
}


def written(value: Any) -> tuple[int, int]:
    """A payload's size as Step Functions counts it (UTF-8 bytes of its JSON), written as Lambda's
    python3.12 runtime writes it (non-ASCII as is, compact) and as moto writes it (escaped)."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return len(raw), len(json.dumps(value).encode())


def item_bytes(item: Mapping[str, Mapping[str, str]]) -> int:
    """A DynamoDB item's size as DynamoDB counts it: names and values in UTF-8 (numbers: at most
    their digits)."""
    return sum(len(name.encode()) + len(next(iter(value.values())).encode()) for name, value in item.items())


def costly(char: str, limit: int = LONG, utf8_bytes: int | None = None) -> str:
    """`char` repeated: `limit` characters, or as many as fit in `utf8_bytes`."""
    return char * (limit if utf8_bytes is None else utf8_bytes // len(char.encode()))


def reason_codes() -> list[str]:
    """Every reject reason code docs/REPORT.md's table lists (the report's byReason keys)."""
    text = (ROOT / "docs" / "REPORT.md").read_text()
    rows = text.split("Reject reason codes:", 1)[1].strip().splitlines()
    table = rows[2 : next(n for n, row in enumerate(rows) if not row.startswith("|"))]
    return [code for row in table for code in re.findall(r"`([a-z_0-9]+)`", row.split("|")[1])]


# -- the definition, run as Step Functions runs it -----------------------------------------------


def read(document: Any, path: str) -> Any:
    for name in [p for p in path.lstrip("$").split(".") if p]:
        document = document[name]
    return document


def resolve(template: Any, state: Any, context: Mapping[str, Any]) -> Any:
    """Parameters / ResultSelector: `name.$` fields read their path (`$$.` from the context)."""
    if isinstance(template, dict):
        return {
            (k[:-2] if k.endswith(".$") else k): (
                read(context if v.startswith("$$") else state, v[1:] if v.startswith("$$") else v)
                if k.endswith(".$")
                else resolve(v, state, context)
            )
            for k, v in template.items()
        }
    if isinstance(template, list):
        return [resolve(v, state, context) for v in template]
    return template


def placed(state: dict[str, Any], path: str | None, result: Any) -> dict[str, Any]:
    """ResultPath: the result written into (a copy of) the state input."""
    if path is None:
        return state
    names = [p for p in path.lstrip("$").split(".") if p]
    if not names:
        return dict(result)
    out = copy.deepcopy(state)
    target = out
    for name in names[:-1]:
        target = target.setdefault(name, {})
    target[names[-1]] = result
    return out


class Run:
    """One execution's data through the definition's Lambda tasks, every payload measured."""

    def __init__(self, states: Mapping[str, Any]) -> None:
        self.states = states
        execution = {"Name": RUN_ID, "Id": f"arn:aws:states:eu-west-2:1:execution:m:{RUN_ID}"}
        self.context = {"Execution": {**execution, "StartTime": "2026-01-01T00:00:00.000Z"}}
        # The largest of each kind of payload: (as python3.12 writes it, as moto writes it).
        self.sizes: dict[str, tuple[int, int]] = {}
        self.outputs: list[dict[str, Any]] = []

    def task(self, name: str, state: dict[str, Any], handler: Callable[[Any], Any]) -> dict[str, Any]:
        asl = self.states[name]
        request = resolve(asl["Parameters"], state, self.context)["Payload"]
        answer = json.loads(json.dumps(handler(request)))  # as Lambda marshals it
        result = {**LAMBDA_METADATA, "Payload": answer}
        kept = resolve(asl.get("ResultSelector", {"Payload.$": "$.Payload"}), result, self.context)
        output = placed(state, asl.get("ResultPath", "$"), kept)
        self.outputs.append(output)
        for part, value in (("input", state), ("request", request), ("result", result), ("output", output)):
            key = f"{name} {part}"
            self.sizes[key] = max(self.sizes.get(key, (0, 0)), written(value), key=max)
        return output

    def largest(self) -> tuple[str, int, int]:
        """The largest payload: which, and its bytes as python3.12 and as moto write it."""
        name = max(self.sizes, key=lambda key: max(self.sizes[key]))
        return name, *self.sizes[name]


# -- the handlers' fakes: in memory, the calls each handler makes -------------------------------


class MemoryStore:
    def __init__(self, objects: dict[str, Any]) -> None:
        self.objects = objects

    def get_json(self, bucket: str, key: str) -> Any:
        return self.objects[key]

    def put_json(self, bucket: str, key: str, value: Any) -> None:
        self.objects[key] = value

    def read_start(self, bucket: str, key: str, limit: int) -> tuple[bytes, int]:
        body = b"".join(line + b"\n" for line in self.objects[key])
        return body[:limit], len(body)

    def stream_from(self, bucket: str, key: str, first: int) -> Iterator[bytes]:
        yield b"".join(line + b"\n" for line in self.objects[key])[first:]

    def streaming_upload(self, bucket: str, key: str, content_type: str) -> Any:
        store = self

        class Upload:
            def __enter__(self) -> Upload:
                return self

            def write(self, data: bytes) -> None:
                store.objects.setdefault(key, []).append(data)

            def __exit__(self, *exc: object) -> None:
                return None

        return Upload()


class MemoryDynamoDB:
    """The low-level calls the Ledger makes for the graph load claim and the job's end."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}

    def get_item(self, TableName: str, Key: Mapping[str, Any], **_: Any) -> dict[str, Any]:
        item = self.items.get((Key["pk"]["S"], Key["sk"]["S"]))
        return {"Item": item} if item else {}

    def put_item(self, TableName: str, Item: dict[str, Any], **_: Any) -> None:
        self.items[(Item["pk"]["S"], Item["sk"]["S"])] = Item

    def update_item(self, TableName: str, Key: Mapping[str, Any], **kwargs: Any) -> None:
        item = self.items.setdefault((Key["pk"]["S"], Key["sk"]["S"]), dict(Key))
        if "loadId" in kwargs["UpdateExpression"]:
            item.update({"loadId": kwargs["ExpressionAttributeValues"][":id"]})


class MemoryLedger:
    def __init__(
        self, shards: dict[int, dict[str, Any]], failures: dict[int, dict[str, Any]] | None = None
    ) -> None:
        self._shards = shards
        self._failures = failures or {}

    def shards(self, job_id: str, plan_id: str, count: int) -> dict[int, dict[str, Any]]:
        return self._shards

    def shard_failures(self, job_id: str, plan_id: str, indices: Any) -> dict[int, dict[str, Any]]:
        return {index: self._failures[index] for index in indices if index in self._failures}

    def finish_job(self, job_id: str, run_id: str, status: str, *, writers_until: int | None = None) -> None:
        return None

    def record_loaded(self, job_id: str, plan_id: str, generation: int, loaded: Any) -> None:
        return None

    def get_job(self, job_id: str) -> None:
        return None  # no other run holds it


class Loader:
    """The Neptune loader: a started load that answers `answers` in turn."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers

    def find_load(self, source: str) -> None:
        return None

    def start(self, body: Mapping[str, Any]) -> str:
        return "0" * 8 + "-" + "0" * 4 + "-" + "0" * 4 + "-" + "0" * 4 + "-" + "0" * 12

    def status(self, load_id: str) -> dict[str, Any]:
        return self.answers.pop(0)

    def cancel(self, load_id: str) -> None:
        return None

    def existing_vertex_ids(self, ids: object) -> set[str]:
        return set()


# -- the worst case of each answer -------------------------------------------------------------


def worst_shards(char: str, plan_id: str) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The objects and ledger items Finalize reads: SHARDS shards, the first with every sample
    full (the rejects file's lines hold each text at its longest; S3 keys are 1,024 bytes)."""
    source = f"s3://{'b' * 63}/" + costly(char, utf8_bytes=1024)
    line = {
        "source": source,
        "member": costly(char),
        "shardLine": BIG,
        "offset": BIG,
        "code": max(reason_codes(), key=len),
        "reason": costly(char),
        "raw": costly(char),
        "rawBase64": "A" * LONG,
    }
    rejects_key = layout.shard_rejects_key(JOB_ID, RUN_ID, 0)
    # DynamoDB keys: a partition key value of at most 2,048 bytes, a sort key of 1,024.
    skipped = {PK: costly(char, utf8_bytes=2048), SK: costly(char, utf8_bytes=1024)}
    codes = reason_codes()
    first = {
        "read": BIG,
        "written": 0,
        "skipped": 5,
        "rejected": 0,
        "duplicates": BIG,
        "lines": BIG,
        "bytes": BIG,
        "requests": BIG,
        "retries": BIG,
        "throttles": BIG,
        "s3Retries": BIG,
        "byReason": {code: BIG // 10**3 for code in codes},
        "skippedSample": [skipped] * 5,
        "rejectsKey": rejects_key,
        "graphStaged": BIG,
        "graphVertices": BIG // 2,
        "graphEdges": BIG // 2,
        "runId": RUN_ID,
    }
    first["rejected"] = sum(first["byReason"].values())
    first["written"] = BIG - first["rejected"] - first["skipped"]
    other = {"read": 1, "written": 1, "lines": 1, "graphStaged": 1, "graphEdges": 1, "runId": RUN_ID}
    shards = {0: first, **{index: other for index in range(1, SHARDS)}}
    manifest = [{"bucket": "src", "key": "people/a.csv", "index": i, "lineBase": 1} for i in range(SHARDS)]
    objects = {
        layout.manifest_key(JOB_ID, RUN_ID): manifest,
        rejects_key: [json.dumps(dict(line, shardLine=n)).encode() for n in range(1, 20)],
    }
    return objects, shards


def worst_check(char: str, max_percent: float) -> dict[str, Any]:
    """graph.danglingEdges with a full sample: ten edges whose ids, ends and missing ends are long."""

    def vertex(n: int) -> str:
        return costly(char) + str(n)

    dangling = endpoints.DanglingEdges({vertex(n) for n in range(40)})
    for n in range(0, 40, 2):
        dangling.add(vertex(n + 100), vertex(n), vertex(n + 1), SHARDS - 1)
    dangling.count = BIG // 2  # half of the edges: held back at 0 %, let through at 50 %
    return endpoints.verdict(dangling, edges=BIG, looked_up=BIG, max_percent=max_percent)


def worst_load_answers(char: str, plan_id: str) -> list[dict[str, Any]]:
    """The loader's answers: in progress, then failed with every error listed at its longest."""
    staged = f"s3://{STAGING}/" + layout.property_graph_keys(JOB_ID, plan_id, SHARDS - 1, compressed=True)[1]
    overall = {"status": "LOAD_FAILED", "totalRecords": BIG, "totalDuplicates": BIG, "totalTimeSpent": BIG}
    counts = {"parsingErrors": BIG, "datatypeMismatchErrors": BIG, "insertErrors": BIG}
    errors = [
        {
            "errorCode": "FROM_OR_TO_VERTEX_ARE_MISSING",
            "errorMessage": costly(char),
            "fileName": staged,
            "recordNum": BIG,
        }
    ] * 20
    return [
        {"overallStatus": {**overall, "status": "LOAD_IN_PROGRESS"}},
        {
            "overallStatus": {**overall, **counts},
            "errors": {"errorLogs": errors},
            "failedFeeds": [{"fullUri": staged, "status": "LOAD_FAILED"}] * 20,
        },
    ]


def finalized(
    states: Mapping[str, Any], char: str, *, max_percent: float, missing: int = 0, earlier: bool = False
) -> Any:
    """Prepare, Plan and Finalize as the definition passes their answers on: (the run, the state
    after Finalize, the staging objects, the plan id). `missing`: shards without counts;
    `earlier`: every other shard done by an earlier run of its own (the longest execution names)."""
    given = {**INPUT, "graph": {**INPUT["graph"], "maxDanglingPercent": max_percent}}
    spec_json = spec_to_json(parse_spec(given, table_key=TABLE_KEY, execution_name=RUN_ID))
    plan_id = planning.plan_id([], spec_json)
    objects, shards = worst_shards(char, plan_id)
    # Each missing shard's Worker recorded the longest cause of the worst characters.
    cause = {**report.shard_failure(RuntimeError(char * 10_000), RUN_ID), "shardLine": 2**40, "offset": 2**40}
    failures = {}
    for index in range(SHARDS - missing, SHARDS):
        del shards[index]
        failures[index] = cause
    for index in range(0, SHARDS, 2) if earlier else ():
        shards[index] = {**shards[index], "runId": f"{index:080d}"}
    run = Run(states)
    prepared = {"preparedKey": layout.run_prefix(JOB_ID, RUN_ID) + "p.json", "objects": 1, "compressed": 0}
    state = run.task("Prepare", json.loads(json.dumps(given)), lambda _: prepared)
    job = {"jobId": JOB_ID, "runId": RUN_ID, "planId": plan_id, "spec": spec_json, "tableKey": TABLE_KEY}
    plan = {
        "job": {**job, "objects": BIG, "bytes": BIG},
        "manifestKey": layout.manifest_key(JOB_ID, RUN_ID),
        "mapResultsPrefix": layout.map_results_prefix(JOB_ID, RUN_ID),
        "maxConcurrency": 10_000,
        "shardCount": SHARDS,
        "syncBuckets": [],  # no sync: the Sync Map does not run
        "syncConcurrency": 1,
        "bulkPut": False,  # the Lambda engine: no bulk put items hand-off
    }
    state = run.task("Plan", state, lambda _: plan)
    store = MemoryStore(objects)
    settings = FinalizeSettings.from_env(ENV)
    ledger = MemoryLedger(shards, failures)
    state = run.task(
        "Finalize",
        state,
        lambda event: reports_service.finalize(event, settings, store, ledger),  # type: ignore[arg-type]
    )
    return run, state, store, plan_id


def run_graph_loop(
    states: Mapping[str, Any], char: str, monkeypatch: pytest.MonkeyPatch, *, max_percent: float
) -> tuple[Run, MemoryDynamoDB]:
    """Prepare, Plan, Finalize, then the graph load loop to its end, every payload measured."""
    run, state, store, plan_id = finalized(states, char, max_percent=max_percent)
    assert state["result"]["status"] == "SUCCEEDED" and state["result"]["graphLoad"] is True
    check = worst_check(char, max_percent)
    monkeypatch.setattr(edge_check, "check_edges", lambda *args, **kwargs: check)
    db = MemoryDynamoDB()
    ledger = Ledger(db, "ledger", 7)
    loader = Loader(worst_load_answers(char, plan_id))
    start_settings = StartGraphLoadSettings.from_env(ENV)
    state = run.task(
        "StartGraphLoad",
        state,
        lambda event: graph_start.start(event, start_settings, loader, ledger, store, lambda: NOW),  # type: ignore[arg-type]
    )
    while True:  # in progress once, then failed with its errors (held back: at once)
        state = run.task(
            "PollGraphLoad",
            state,
            lambda event: graph_poll.poll(event, loader, store, ledger, lambda: NOW),  # type: ignore[arg-type]
        )
        if not state["result"]["pending"]:
            break
    assert state["result"]["status"] == "FAILED"
    assert state["result"]["report"]["graph"]["danglingEdges"] == check
    return run, db


@pytest.mark.parametrize("char", CHARACTERS, ids=[f"U+{ord(c):04X}" for c in CHARACTERS])
@pytest.mark.parametrize("max_percent", [50, 0], ids=["loaded", "blocked"])
def test_the_graph_load_loop_state_stays_within_the_payload_limit(
    dev: Synth, monkeypatch: pytest.MonkeyPatch, char: str, max_percent: float
) -> None:
    run, db = run_graph_loop(definition(dev)["States"], char, monkeypatch, max_percent=max_percent)
    name, raw, escaped = run.largest()
    print(f"\n{char!r} maxDanglingPercent {max_percent}: largest {name}: {raw:,} / {escaped:,} bytes")
    assert max(raw, escaped) < LOOP_BUDGET_BYTES, (name, raw, escaped)
    # The check is carried once: no state holds two copies of its sample.
    sample = json.dumps(run.outputs[-1]["result"]["report"]["graph"]["danglingEdges"]["sample"])
    assert max(json.dumps(output).count(sample) for output in run.outputs) == 1
    # The ledger item holding the check (the claim) stays far inside DynamoDB's 400 KB.
    for item in db.items.values():
        assert item_bytes(item) < DYNAMODB_ITEM_BYTES // 4, item_bytes(item)


@pytest.mark.parametrize("char", CHARACTERS, ids=[f"U+{ord(c):04X}" for c in CHARACTERS])
def test_a_job_failed_at_finalize_with_the_most_shards_listed_stays_within_the_payload_limit(
    dev: Synth, char: str
) -> None:
    run, state, _, _ = finalized(definition(dev)["States"], char, max_percent=0, missing=25)
    assert state["result"]["status"] == "FAILED" and len(state["result"]["report"]["shards"]["missing"]) == 20
    assert len(state["result"]["report"]["shards"]["failures"]) == 5
    assert state["result"]["error"] == "RuntimeError"
    name, raw, escaped = run.largest()
    assert max(raw, escaped) < LOOP_BUDGET_BYTES, (name, raw, escaped)


@pytest.mark.parametrize("char", CHARACTERS[:1], ids=[f"U+{ord(c):04X}" for c in CHARACTERS[:1]])
def test_a_run_after_as_many_earlier_runs_as_shards_stays_within_the_payload_limit(
    dev: Synth, char: str
) -> None:
    run, state, _, _ = finalized(definition(dev)["States"], char, max_percent=100, earlier=True)
    carried = state["result"]["report"]["carried"]
    assert carried["shards"] == state["result"]["report"]["shards"]["carried"] > len(carried["runs"]) == 20
    name, raw, escaped = run.largest()
    assert max(raw, escaped) < LOOP_BUDGET_BYTES, (name, raw, escaped)
