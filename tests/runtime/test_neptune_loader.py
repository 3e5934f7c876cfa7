"""The Neptune loader client and the StartGraphLoad/PollGraphLoad handlers against a local HTTP
server that answers like the Neptune loader (mapload/emulator/neptune_local.py, scripted by
tests/scripted_neptune.py), on moto's S3 and DynamoDB."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials
from pipeline_support import REGION
from scripted_neptune import ScriptedNeptuneLoader

from adapters.ledger import Ledger
from adapters.neptune import EXISTING_IDS_QUERY, LoaderClient, base_url
from adapters.s3 import S3Store
from graph_loads import poll as graph_poll
from graph_loads import start as graph_start
from handlers.settings import StartGraphLoadSettings
from logic import graph_load
from logic.errors import GraphLoaderAccessDeniedError, GraphLoaderBusyError, GraphLoaderError
from mapload.emulator.neptune_local import LocalNeptuneLoader

pytestmark = pytest.mark.runtime

CREDENTIALS = Credentials("AKIDEXAMPLE", "secret")
NQ = b'<http://a/s> <http://a/p> "one" .\n<http://a/s> <http://a/p> "two" <http://a/g> .\n'
FAILED_LOGS = [
    {
        "errorCode": "PARSING_ERROR",
        "errorMessage": "Expected '.'",
        "fileName": "s3://stg/x.nq",
        "recordNum": 3,
    }
]


@pytest.fixture
def server(aws: Any) -> Iterator[ScriptedNeptuneLoader]:
    aws.put_object(Bucket="stg", Key="jobs/j/run-1/graph/000000.nq", Body=NQ)
    aws.put_object(Bucket="stg", Key="jobs/j/run-1/graph/000001.nq", Body=NQ)  # duplicates of the first file
    with ScriptedNeptuneLoader() as loader:
        yield loader


def client(server: ScriptedNeptuneLoader, **kwargs: Any) -> LoaderClient:
    return LoaderClient(server.url, REGION, credentials=CREDENTIALS, sleep=lambda _: None, **kwargs)


def body(**extra: Any) -> dict[str, Any]:
    return {
        "source": "s3://stg/jobs/j/run-1/graph/",
        "format": "nquads",
        "iamRoleArn": "arn:aws:iam::123456789012:role/loader",
        "region": REGION,
        **extra,
    }


def test_base_url_keeps_a_given_scheme() -> None:
    assert base_url("cluster.abc.eu-west-2.neptune.amazonaws.com", 8182) == (
        "https://cluster.abc.eu-west-2.neptune.amazonaws.com:8182"
    )
    assert base_url("http://127.0.0.1", 5000) == "http://127.0.0.1:5000"


def test_start_and_poll_a_completed_load_with_sigv4_headers(server: ScriptedNeptuneLoader) -> None:
    loader = client(server)
    load_id = loader.start(body())
    server.wait(load_id)
    payload = loader.status(load_id)
    overall = payload["overallStatus"]
    assert overall["status"] == "LOAD_COMPLETED"
    assert (overall["totalRecords"], overall["totalDuplicates"]) == (4, 2)
    assert len(server.store) == 2
    for request in server.requests:
        auth = request["headers"]["Authorization"]
        assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert f"/{REGION}/neptune-db/aws4_request" in auth
        assert request["headers"]["X-Amz-Date"]
    assert [r["method"] for r in server.requests] == ["POST", "GET"]


def test_an_unsigned_request_is_refused_like_neptune_with_iam_auth(server: ScriptedNeptuneLoader) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(urllib.request.Request(server.url + "/loader/x", method="GET"), timeout=5)
    assert caught.value.code == 403


def test_queued_and_in_progress_answers_come_before_the_outcome(server: ScriptedNeptuneLoader) -> None:
    server.script = ["LOAD_NOT_STARTED", "LOAD_IN_QUEUE", "LOAD_IN_PROGRESS"]
    loader = client(server)
    load_id = loader.start(body())
    server.wait(load_id)
    seen = [loader.status(load_id)["overallStatus"]["status"] for _ in range(4)]
    assert seen == ["LOAD_NOT_STARTED", "LOAD_IN_QUEUE", "LOAD_IN_PROGRESS", "LOAD_COMPLETED"]


def test_a_failed_load_reports_its_error_details(server: ScriptedNeptuneLoader) -> None:
    server.fail_with = ("LOAD_FAILED", FAILED_LOGS)
    loader = client(server)
    load_id = loader.start(body())
    server.wait(load_id)
    payload = loader.status(load_id)
    assert payload["overallStatus"]["status"] == "LOAD_FAILED"
    assert payload["errors"]["errorLogs"] == FAILED_LOGS


def test_a_4xx_is_not_retried_and_names_the_answer(server: ScriptedNeptuneLoader) -> None:
    loader = client(server)
    with pytest.raises(
        GraphLoaderError, match=r"POST /loader refused: HTTP 400 BadRequestException: .*format"
    ) as caught:
        loader.start(body(format="turtle"))
    assert caught.value.status == 400
    assert loader.retries == 0
    with pytest.raises(GraphLoaderError, match="HTTP 404 LoadNotFoundException"):
        loader.status("no-such-load")


@pytest.mark.parametrize(
    "fault",
    [
        (500, {"code": "InternalFailureException", "detailedMessage": "boom"}),
        (503, {}),
        (429, {"code": "ThrottlingException", "detailedMessage": "Rate exceeded"}),
        (
            400,
            {
                "code": "BadRequestException",
                "detailedMessage": "Failed to start new load: max concurrent load limit breached",
            },
        ),
    ],
)
def test_5xx_throttling_and_too_many_loads_are_retried(
    server: ScriptedNeptuneLoader, fault: tuple[int, dict[str, Any]]
) -> None:
    server.faults.extend([fault, fault])
    loader = client(server)
    load_id = loader.start(body())
    assert load_id in server.loads
    assert loader.retries == 2
    assert len(server.loads) == 1


def test_retries_are_bounded_and_end_in_a_clear_error(server: ScriptedNeptuneLoader) -> None:
    busy = (400, {"code": "BadRequestException", "detailedMessage": "max concurrent load limit breached"})
    server.faults.extend([busy] * 3)
    with pytest.raises(GraphLoaderBusyError, match="at its concurrent load limit after 3 attempts"):
        client(server, attempts=3).start(body())
    server.faults.extend([(503, {})] * 2)
    with pytest.raises(
        GraphLoaderBusyError, match="unavailable or throttling after 2 attempts; last answer: HTTP 503"
    ):
        client(server, attempts=2).status("x")
    assert not server.loads


def test_a_403_is_access_denied_for_the_state_machine_to_retry_not_retried_here(
    server: ScriptedNeptuneLoader,
) -> None:
    # Neptune applies IAM changes within up to 10 minutes: right after a deploy the functions'
    # neptune-db grant may not hold yet. No sleeping in a Lambda: the error has its own name,
    # which the state machine retries a bounded number of times (stacks/graph_load.py).
    denied = (403, {"code": "AccessDeniedException", "detailedMessage": "Missing or invalid SigV4"})
    server.faults.append(denied)
    loader = client(server)
    with pytest.raises(GraphLoaderAccessDeniedError, match=r"POST /loader refused: HTTP 403") as caught:
        loader.start(body())
    assert (caught.value.status, loader.retries) == (403, 0)
    assert isinstance(caught.value, GraphLoaderError) and not isinstance(caught.value, GraphLoaderBusyError)
    assert not server.loads


def _asked_ids(request: dict[str, Any]) -> list[str]:
    """The ids one recorded POST /openCypher asked about (its form: query and parameters)."""
    form = urllib.parse.parse_qs(request["body"].decode(), strict_parsing=True)
    assert set(form) == {"query", "parameters"}
    assert form["query"] == [EXISTING_IDS_QUERY]
    ids: list[str] = json.loads(form["parameters"][0])["ids"]
    return ids


def test_existing_vertex_ids_asks_in_signed_form_posts_of_batch_ids(server: ScriptedNeptuneLoader) -> None:
    ids = [f"v{i}" for i in range(2_500)]
    assert client(server).existing_vertex_ids([*ids, "v7"]) == set()  # no graph loaded yet
    assert [(r["method"], r["path"]) for r in server.requests] == [("POST", "/openCypher")] * 3
    # Batches go QUERY_CONCURRENCY at a time, so they arrive in any order.
    assert sorted(len(_asked_ids(r)) for r in server.requests) == [500, 1000, 1000]
    asked = [i for r in server.requests for i in _asked_ids(r)]
    assert sorted(asked) == sorted(ids)  # each id once
    assert sorted(_asked_ids(r)[0] for r in server.requests) == sorted(["v0", "v1000", "v2000"])  # in order
    for request in server.requests:
        headers = request["headers"]
        assert headers["Content-Type"] == "application/x-www-form-urlencoded"
        assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert f"/{REGION}/neptune-db/aws4_request" in headers["Authorization"]


def test_existing_vertex_ids_of_no_ids_asks_nothing(server: ScriptedNeptuneLoader) -> None:
    assert client(server).existing_vertex_ids([]) == set()
    assert server.requests == []
    with pytest.raises(ValueError, match="batch must be at least 1"):
        client(server).existing_vertex_ids(["a"], batch=0)


def test_existing_vertex_ids_retries_a_503_then_reads_the_results(server: ScriptedNeptuneLoader) -> None:
    server.faults.extend([(503, {}), (200, {"results": [{"id": "v1"}, {"id": "v3"}]})])
    loader = client(server)
    assert loader.existing_vertex_ids(["v1", "v2", "v3"]) == {"v1", "v3"}
    assert loader.retries == 1
    assert [_asked_ids(r) for r in server.requests] == [["v1", "v2", "v3"]] * 2


def test_a_refused_opencypher_query_names_the_request(server: ScriptedNeptuneLoader) -> None:
    refused = (400, {"code": "MalformedQueryException", "detailedMessage": "Invalid input"})
    server.faults.append(refused)
    loader = client(server)
    with pytest.raises(
        GraphLoaderError,
        match=r"^Neptune openCypher POST /openCypher refused: HTTP 400 MalformedQueryException: Invalid in",
    ) as caught:
        loader.existing_vertex_ids(["v1"])
    assert (caught.value.status, loader.retries) == (400, 0)
    server.faults.extend([(503, {})] * 2)
    with pytest.raises(
        GraphLoaderBusyError,
        match=r"^Neptune openCypher POST /openCypher unavailable or throttling after 2 attempts",
    ):
        client(server, attempts=2).existing_vertex_ids(["v1"])


def test_an_opencypher_answer_without_id_results_is_an_error(server: ScriptedNeptuneLoader) -> None:
    for answer in ({"status": "200 OK"}, {"results": [{"n": "v1"}]}):
        server.faults.append((200, answer))
        with pytest.raises(GraphLoaderError, match="POST /openCypher answered without results of ids"):
            client(server).existing_vertex_ids(["v1"])


S3_SOURCE = "s3://stg/jobs/j/run-1/graph/"


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        (
            (
                500,
                {
                    "code": "InternalFailureException",
                    "detailedMessage": f"Unable to connect to S3 endpoint. Provided source = {S3_SOURCE} "
                    f"and region = {REGION}",
                },
            ),
            r"cannot reach S3.*security group.*egress 443 to the S3 prefix list.*gateway endpoint",
        ),
        (
            (
                500,
                {
                    "code": "InternalFailureException",
                    "detailedMessage": "Failed to start load because of unknown error from S3: Access Denied "
                    "(Service: Amazon S3; Status Code: 403; Error Code: AccessDenied)",
                },
            ),
            r"S3 denied the loader role.*iamRoleArn.*s3:GetObject",
        ),
        (
            (400, {"code": "BadRequestException", "detailedMessage": "Unable to perform S3 list operation"}),
            r"S3 denied the loader role.*s3:ListBucket",
        ),
        (
            (
                400,
                {
                    "code": "BadRequestException",
                    "detailedMessage": "Couldn't find the AWS credential for iam_role_arn",
                },
            ),
            r"not associated with the cluster",
        ),
    ],
)
def test_an_s3_access_error_fails_at_once_naming_the_cause(
    server: ScriptedNeptuneLoader, fault: tuple[int, dict[str, Any]], cause: str
) -> None:
    # The loader answers HTTP 500 for "Unable to connect to S3 endpoint": not transient, since
    # nothing changes between attempts (the security group, the endpoint, the role stay as they are).
    server.faults.extend([fault] * 3)
    loader = client(server)
    with pytest.raises(GraphLoaderError, match=cause) as caught:
        loader.start(body())
    assert not isinstance(caught.value, GraphLoaderBusyError)
    assert caught.value.status == fault[0]
    assert loader.retries == 0
    assert str(fault[1]["detailedMessage"]) in str(caught.value)


def test_a_full_load_queue_is_busy_not_failed(server: ScriptedNeptuneLoader) -> None:
    # Neptune queues up to 64 loads; the next POST answers "Max concurrent load limit breached".
    server.hold = True
    loader = client(server, attempts=2)
    for _ in range(LocalNeptuneLoader.QUEUE_LIMIT):
        loader.start(body())
    with pytest.raises(GraphLoaderBusyError, match="at its concurrent load limit after 2 attempts"):
        loader.start(body())
    assert len(server.loads) == LocalNeptuneLoader.QUEUE_LIMIT


# The loader's documented statuses (Neptune "Loader Error and Feed Messages"): which ones the poll
# loop waits through; every other one ends the load.
DOCUMENTED_PENDING = {
    "LOAD_NOT_STARTED",
    "LOAD_IN_QUEUE",
    "LOAD_IN_PROGRESS",
    "LOAD_COMMITTED_W_WRITE_CONFLICTS",
}
DOCUMENTED_FINAL = {
    "LOAD_COMPLETED",
    "LOAD_CANCELLED_BY_USER",
    "LOAD_CANCELLED_DUE_TO_ERRORS",
    "LOAD_UNEXPECTED_ERROR",
    "LOAD_FAILED",
    "LOAD_S3_READ_ERROR",
    "LOAD_S3_ACCESS_DENIED_ERROR",
    "LOAD_DATA_DEADLOCK",
    "LOAD_DATA_FAILED_DUE_TO_FEED_MODIFIED_OR_DELETED",
    "LOAD_FAILED_BECAUSE_DEPENDENCY_NOT_SATISFIED",
    "LOAD_FAILED_INVALID_REQUEST",
}


def test_status_rules_follow_the_documented_semantics() -> None:
    assert {status for status in DOCUMENTED_PENDING | DOCUMENTED_FINAL if graph_load.is_pending(status)} == (
        DOCUMENTED_PENDING
    )


def _ended(status: str, feeds: list[str], codes: list[str], **counts: int) -> dict[str, Any]:
    """A GET /loader/{id} payload: the overall status and counts, failed feeds, logged errors."""
    return {
        "overallStatus": {"status": status, "totalRecords": 10, **counts},
        "failedFeeds": [{"fullUri": f"s3://stg/e{i}.csv", "status": f} for i, f in enumerate(feeds)],
        "errors": {"errorLogs": [{"errorCode": c, "fileName": "s3://stg/e0.csv"} for c in codes]},
    }


MISSING = "FROM_OR_TO_VERTEX_ARE_MISSING"


@pytest.mark.parametrize(
    ("payload", "tolerated", "accepted"),
    [
        # failOnError false: Neptune skips the two edges, loads the rest, ends LOAD_FAILED.
        (_ended("LOAD_FAILED", ["LOAD_FAILED"], [MISSING, MISSING], insertErrors=2), 2, True),
        (_ended("LOAD_FAILED", ["LOAD_FAILED"], [MISSING], insertErrors=1), 2, True),
        (_ended("LOAD_FAILED", ["LOAD_FAILED"], [MISSING] * 3, insertErrors=3), 2, False),
        (_ended("LOAD_FAILED", ["LOAD_FAILED"], [MISSING], insertErrors=1), 0, False),
        (
            _ended(
                "LOAD_FAILED", ["LOAD_FAILED"], [MISSING, "PARSING_ERROR"], insertErrors=1, parsingErrors=1
            ),
            5,
            False,
        ),
        (
            _ended("LOAD_FAILED", ["LOAD_FAILED"], [MISSING], insertErrors=1, datatypeMismatchErrors=1),
            5,
            False,
        ),
        (_ended("LOAD_FAILED", ["LOAD_FAILED", "LOAD_S3_READ_ERROR"], [MISSING], insertErrors=1), 5, False),
        (_ended("LOAD_FAILED", ["LOAD_FAILED"], ["DUPLICATE_ID"], insertErrors=1), 5, False),
        (_ended("LOAD_FAILED", ["LOAD_S3_ACCESS_DENIED_ERROR"], [], insertErrors=0), 5, False),
        (_ended("LOAD_DATA_DEADLOCK", ["LOAD_FAILED"], [MISSING], insertErrors=1), 5, False),
        (_ended("LOAD_CANCELLED_BY_USER", [], [], insertErrors=0), 5, False),
    ],
)
def test_a_load_failed_only_for_the_tolerated_dangling_edges_is_accepted(
    payload: dict[str, Any], tolerated: int, accepted: bool
) -> None:
    summary = graph_load.summarize(payload, tolerated=tolerated)
    assert graph_load.succeeded(summary) is accepted
    assert (summary["errors"] or {}).get("tolerated") == (
        payload["overallStatus"]["insertErrors"] if accepted else None
    )


def test_a_completed_load_succeeds_without_a_tolerance() -> None:
    assert graph_load.succeeded(graph_load.summarize(_ended("LOAD_COMPLETED", [], [])))
    assert not graph_load.succeeded(graph_load.summarize(_ended("LOAD_FAILED", [], [], parsingErrors=1)))


def test_only_s3_reach_and_access_answers_have_a_cause() -> None:
    assert graph_load.access_cause("boom") is None
    assert graph_load.access_cause("Failed to start new load: max concurrent load limit breached") is None
    assert graph_load.access_cause("Rate exceeded") is None
    assert "prefix list" in str(
        graph_load.access_cause("Unable to connect to S3 endpoint. Provided source = x")
    )


def test_a_connection_refused_is_retried_then_named() -> None:
    loader = LoaderClient(
        "http://127.0.0.1:9", REGION, credentials=CREDENTIALS, attempts=2, sleep=lambda _: None
    )
    with pytest.raises(GraphLoaderBusyError, match="URLError"):
        loader.start(body())


# -- handlers ----------------------------------------------------------------------------------

START_ENV = {
    "NEPTUNE_ENDPOINT": "unused",
    "NEPTUNE_PORT": "8182",
    "NEPTUNE_REGION": REGION,
    "LOADER_ROLE_ARN": "arn:aws:iam::123456789012:role/loader",
    "STAGING_BUCKET": "stg",
    "LEDGER_TABLE": "ledger",
    "LEDGER_TTL_DAYS": "1",
}
JOB = {
    "jobId": "j",
    "runId": "run-1",
    "spec": {"format": "nquads", "graph": {"pollSeconds": 1, "timeoutMinutes": 5}},
}


def ledger() -> Ledger:
    import boto3

    return Ledger(boto3.client("dynamodb", region_name=REGION), "ledger", 1)


def started(server: ScriptedNeptuneLoader) -> dict[str, Any]:
    settings = StartGraphLoadSettings.from_env(START_ENV)
    return graph_start.start({"job": JOB}, settings, client(server), ledger(), staging())


def staging() -> S3Store:
    import boto3

    return S3Store(boto3.client("s3", region_name=REGION))


def test_start_is_idempotent_a_retry_starts_no_second_load(server: ScriptedNeptuneLoader) -> None:
    first = started(server)
    again = started(server)
    assert again["loadId"] == first["loadId"]
    assert [r["method"] for r in server.requests] == ["POST"]
    assert first["source"] == "s3://stg/jobs/j/run-1/graph/"
    assert first["waitSeconds"] == 1
    assert 0 < first["deadline"] - time.time() <= 300
    request = server.loads[first["loadId"]].request
    assert request["iamRoleArn"] == START_ENV["LOADER_ROLE_ARN"]
    assert (request["failOnError"], request["parallelism"], request["queueRequest"]) == (
        "TRUE",
        "HIGH",
        "TRUE",
    )
    assert request["updateSingleCardinalityProperties"] == "FALSE"


def test_a_start_that_died_after_its_post_adopts_that_load(server: ScriptedNeptuneLoader) -> None:
    source = "s3://stg/jobs/j/run-1/graph/"
    # The earlier attempt: claimed, started the load, and died before recording its id.
    assert ledger().claim_graph_load("j", "run-1", source)
    other = client(server).start(body(source="s3://stg/jobs/other/run-9/graph/"))
    lost = client(server).start(body())
    server.requests.clear()
    again = started(server)
    assert again["loadId"] == lost != other
    assert [r["method"] for r in server.requests if r["method"] == "POST"] == []
    assert ledger().graph_load("j", "run-1")["loadId"] == lost  # type: ignore[index]


def test_a_claim_never_adopts_a_load_of_the_same_source_that_started_before_it(
    server: ScriptedNeptuneLoader,
) -> None:
    # A re-run of the same plan stages under the same source: the first run's load ended long
    # before this run claimed its own; the attempt that claimed it died before its POST.
    earlier = client(server).start(body())
    server.wait(earlier)
    server.loads[earlier].started -= 3600
    assert ledger().claim_graph_load("j", "run-1", "s3://stg/jobs/j/run-1/graph/")
    again = started(server)
    assert again["loadId"] != earlier
    assert [r["method"] for r in server.requests].count("POST") == 2


def test_a_claim_without_a_started_load_starts_it(server: ScriptedNeptuneLoader) -> None:
    assert ledger().claim_graph_load("j", "run-1", "s3://stg/jobs/j/run-1/graph/")
    first = started(server)
    assert [r["method"] for r in server.requests] == ["GET", "POST"]
    assert started(server)["loadId"] == first["loadId"]
    assert len(server.loads) == 1


def test_a_property_graph_start_checks_once_and_a_retry_reuses_the_claims_check(
    server: ScriptedNeptuneLoader, aws: Any
) -> None:
    from logic import endpoints, layout

    # One shard: vertices a and c, edges a -> b where b is nowhere and a -> c: 1 of 2 edges
    # dangles, tolerated.
    vertices_key, open_key = layout.graph_ids_keys("j", "run-1", 0)
    aws.put_object(Bucket="stg", Key=vertices_key, Body=endpoints.encode_ids(["a", "c"]))
    aws.put_object(Bucket="stg", Key=open_key, Body=endpoints.encode_ids(["b"]))
    edges = b":ID,:START_ID,:END_ID,:TYPE\r\ne1,a,b,KNOWS\r\ne2,a,c,KNOWS\r\n"
    aws.put_object(
        Bucket="stg", Key=layout.property_graph_keys("j", "run-1", 0, compressed=False)[1], Body=edges
    )
    graph = {"model": "property", "pollSeconds": 1, "maxDanglingPercent": 50, "failOnError": False}
    job = {**JOB, "spec": {"format": "csv", "graph": graph}}
    event = {"job": job, "shardCount": 1, "graph": {"edges": 2, "openEndpoints": 1}}
    settings = StartGraphLoadSettings.from_env(START_ENV)

    def start() -> dict[str, Any]:
        return graph_start.start(event, settings, client(server, attempts=1), ledger(), staging())

    # The check's query (b is not in the graph), the claim, then the POST fails: the check the
    # claim recorded comes back on the retry.
    server.faults.extend([(200, {"results": []}), (503, {})])
    with pytest.raises(GraphLoaderBusyError):
        start()
    checked = [r for r in server.requests if r["path"] == "/openCypher"]
    assert len(checked) == 1
    for key in (vertices_key, open_key):  # a second check could not even read its files
        aws.delete_object(Bucket="stg", Key=key)
    again = start()
    assert again["danglingEdges"]["count"] == 1 and again["danglingEdges"]["blocked"] is False
    assert [r for r in server.requests if r["path"] == "/openCypher"] == checked
    assert start()["danglingEdges"] == again["danglingEdges"]  # recorded with the load id too


def finalize_result(aws: Any, **graph: Any) -> dict[str, Any]:
    report = {
        "jobId": "j",
        "runId": "run-1",
        "status": "SUCCEEDED",
        "error": None,
        "graph": {"staged": 4, **graph},
    }
    aws.put_object(Bucket="stg", Key="jobs/j/run-1/report.json", Body=json.dumps(report).encode())
    return {
        "status": "SUCCEEDED",
        "jobId": "j",
        "report": report,
        "reportUri": "s3://stg/jobs/j/run-1/report.json",
        "error": None,
        "cause": "",
        "graphLoad": True,
    }


def poll(
    server: ScriptedNeptuneLoader, aws: Any, load: dict[str, Any], now: float | None = None
) -> dict[str, Any]:
    """The first poll: StartGraphLoad's answer is in the result ($.result.load)."""
    return graph_poll.poll(
        {"result": {**finalize_result(aws), "load": load}},
        client(server),
        S3Store(aws),
        ledger(),
        now=(lambda: now) if now is not None else time.time,
    )


def stored_report(aws: Any) -> dict[str, Any]:
    return dict(json.loads(aws.get_object(Bucket="stg", Key="jobs/j/run-1/report.json")["Body"].read()))


def test_poll_is_pending_then_completes_and_writes_the_report(
    server: ScriptedNeptuneLoader, aws: Any
) -> None:
    server.script = ["LOAD_IN_QUEUE"]
    load = started(server)
    server.wait(load["loadId"])
    pending = poll(server, aws, load)
    assert (pending["pending"], pending["graphStatus"], pending["status"]) == (
        True,
        "LOAD_IN_QUEUE",
        "SUCCEEDED",
    )
    done = poll(server, aws, load)
    assert (done["pending"], done["status"], done["graphStatus"]) == (False, "SUCCEEDED", "LOAD_COMPLETED")
    graph = stored_report(aws)["graph"]
    assert (graph["staged"], graph["loaded"], graph["records"], graph["duplicates"]) == (4, 2, 4, 2)
    assert graph["loadId"] == load["loadId"] and graph["errors"] is None
    assert done["report"] == stored_report(aws)


def test_a_failed_load_fails_the_job_with_the_loaders_details(
    server: ScriptedNeptuneLoader, aws: Any
) -> None:
    server.fail_with = ("LOAD_FAILED", FAILED_LOGS)
    load = started(server)
    server.wait(load["loadId"])
    result = poll(server, aws, load)
    assert (result["status"], result["error"], result["pending"]) == ("FAILED", "GraphLoadFailedError", False)
    assert "ended LOAD_FAILED; parsingErrors 1; first error PARSING_ERROR: Expected '.'" in result["cause"]
    report = stored_report(aws)
    assert report["status"] == "FAILED" and report["error"]["where"] == "GraphLoad"
    assert report["graph"]["errors"]["first"] == FAILED_LOGS


CHECK = {
    "count": 1,
    "edges": 2,
    "percent": 50.0,
    "maxPercent": 100,
    "lookedUp": 1,
    "missingVertices": 1,
    "blocked": False,
    "sample": [{"id": "e1", "from": "a", "to": "b", "missing": ["b"], "shard": 0}],
}


def test_the_first_poll_moves_the_edge_check_into_the_report_so_the_state_holds_it_once(
    server: ScriptedNeptuneLoader, aws: Any
) -> None:
    server.script = ["LOAD_IN_QUEUE"]
    load = {**started(server), "danglingEdges": CHECK}
    server.wait(load["loadId"])
    pending = poll(server, aws, load)
    assert pending["pending"] is True and pending["report"]["graph"]["danglingEdges"] == CHECK
    assert pending["load"] == {k: v for k, v in load.items() if k != "danglingEdges"}
    # The next round is given what this one returned (its ResultPath is $.result).
    done = graph_poll.poll({"result": pending}, client(server), S3Store(aws), ledger())
    assert (done["pending"], done["status"], done["load"]) == (False, "SUCCEEDED", pending["load"])
    assert done["report"]["graph"]["danglingEdges"] == CHECK == stored_report(aws)["graph"]["danglingEdges"]
    assert json.dumps(done).count('"danglingEdges"') == 1


def test_a_held_back_load_fails_at_the_first_poll_with_the_check_in_the_report(aws: Any) -> None:
    check = {**CHECK, "maxPercent": 0, "blocked": True}
    load = {"loadId": None, "source": "s3://stg/jobs/j/run-1/graph/", "waitSeconds": 1, "startedAt": 0}
    loader = LoaderClient("http://127.0.0.1:9", REGION, credentials=CREDENTIALS)  # never asked
    answers = [
        graph_poll.poll(event, loader, S3Store(aws), ledger())
        for event in (
            {"result": {**finalize_result(aws), "load": {**load, "danglingEdges": check}}},
            # An execution started before the check rode in the result: the load beside it.
            {"load": {**load, "danglingEdges": check}, "result": finalize_result(aws)},
        )
    ]
    assert answers[0] == answers[1]
    result = answers[0]
    assert (result["status"], result["error"], result["graphStatus"]) == (
        "FAILED",
        "DanglingEdgesError",
        "BLOCKED",
    )
    assert "1 of 2 edges (50.0%)" in result["cause"] and "e.g. 'b'" in result["cause"]
    assert result["report"]["graph"]["danglingEdges"] == check == stored_report(aws)["graph"]["danglingEdges"]
    assert result["load"] == load


def test_committed_with_write_conflicts_is_pending_while_the_loader_resolves_them(
    server: ScriptedNeptuneLoader, aws: Any
) -> None:
    # The loader resolves write conflicts in separate transactions and updates the status as it goes.
    server.script = ["LOAD_COMMITTED_W_WRITE_CONFLICTS", "LOAD_COMMITTED_W_WRITE_CONFLICTS"]
    load = started(server)
    server.wait(load["loadId"])
    for _ in range(2):
        pending = poll(server, aws, load)
        assert (pending["pending"], pending["graphStatus"]) == (True, "LOAD_COMMITTED_W_WRITE_CONFLICTS")
    done = poll(server, aws, load)
    assert (done["pending"], done["status"], done["graphStatus"]) == (False, "SUCCEEDED", "LOAD_COMPLETED")


def test_a_load_s3_denied_names_the_loader_role(server: ScriptedNeptuneLoader, aws: Any) -> None:
    server.deny_s3 = True
    load = started(server)
    server.wait(load["loadId"])
    result = poll(server, aws, load)
    assert (result["status"], result["graphStatus"]) == ("FAILED", "LOAD_FAILED")
    assert "LOAD_S3_ACCESS_DENIED_ERROR" in result["cause"]
    assert "S3 denied the loader role" in result["cause"]


def test_past_the_deadline_the_load_is_cancelled_and_the_job_fails(
    server: ScriptedNeptuneLoader, aws: Any
) -> None:
    server.script = ["LOAD_IN_PROGRESS"] * 5
    load = started(server)
    result = poll(server, aws, load, now=load["deadline"] + 1)
    assert (result["status"], result["error"]) == ("FAILED", "GraphLoadTimeoutError")
    assert "the load was cancelled" in result["cause"]
    assert [r["method"] for r in server.requests][-1] == "DELETE"
    assert server.loads[load["loadId"]].status == "LOAD_CANCELLED_BY_USER"


def test_a_start_that_failed_for_good_still_finishes_the_report(aws: Any) -> None:
    cause = json.dumps({"errorType": "GraphLoaderBusyError", "errorMessage": "at its concurrent load limit"})
    result = graph_poll.poll(
        {"error": {"Error": "GraphLoaderBusyError", "Cause": cause}, "result": finalize_result(aws)},
        LoaderClient("http://127.0.0.1:9", REGION, credentials=CREDENTIALS),
        S3Store(aws),
        ledger(),
    )
    assert (result["status"], result["error"], result["graphStatus"]) == (
        "FAILED",
        "GraphLoaderBusyError",
        "ERROR",
    )
    assert stored_report(aws)["error"] == {
        "type": "GraphLoaderBusyError",
        "message": "at its concurrent load limit",
        "where": "GraphLoad",
    }


def test_plan_refuses_a_graph_input_where_the_environment_has_no_graph(aws: Any) -> None:
    from pipeline_support import ENV

    from handlers import plan
    from logic.errors import InputValidationError

    event = {
        "input": {"source": "s3://src/x.nq", "format": "nquads"},
        "execution": {"name": "r", "id": "arn:r"},
    }
    with pytest.raises(InputValidationError, match="no graph database") as caught:
        plan.handle(event, {**ENV, "GRAPH_ENABLED": "false"})
    assert caught.value.field == "format"


@pytest.mark.parametrize("property_graph", [True, False])
def test_a_graph_load_function_that_ran_out_of_time_names_the_settings_to_raise(
    aws: Any, property_graph: bool
) -> None:
    cause = json.dumps(
        {"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out after 300.00 seconds"}
    )
    graph = {"vertices": 2, "edges": 2} if property_graph else {}
    graph_poll.poll(
        {"error": {"Error": "Sandbox.Timedout", "Cause": cause}, "result": finalize_result(aws, **graph)},
        LoaderClient("http://127.0.0.1:9", REGION, credentials=CREDENTIALS),
        S3Store(aws),
        ledger(),
    )
    message = stored_report(aws)["error"]["message"]
    if not property_graph:  # an RDF job's graph functions do nothing that grows with the job
        assert message == "Task timed out after 300.00 seconds"
        return
    assert message.startswith("Task timed out after 300.00 seconds (StartGraphLoad checks")
    assert "control_timeout_seconds" in message and "control_memory_mib" in message
