"""The embedded loader's openCypher loads (mapload/emulator/neptune_local.py into
mapload/emulator/property_store.py): vertex files before edge files whatever their names, parsing
and insert errors counted as Neptune counts them, failOnError honoured; the vertex id query
(POST /openCypher) answered from that graph and every other query refused; on moto's S3."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pipeline_support import REGION
from scripted_neptune import ScriptedNeptuneLoader

from adapters.neptune import EXISTING_IDS_QUERY, LoaderClient
from mapload.emulator.property_store import FILE_NAME

pytestmark = pytest.mark.runtime

PREFIX = "jobs/g/run-1/graph/"
VERTICES = b":ID,:LABEL,age:Int\r\np1,Person,41\r\np2,Person;Admin,\r\n"
CREDENTIALS = Credentials("AKID", "secret")
EDGES = b":ID,:START_ID,:END_ID,:TYPE,w:Double\r\ne1,p1,p2,KNOWS,0.5\r\n"


@pytest.fixture
def server(aws: Any) -> Iterator[ScriptedNeptuneLoader]:
    with ScriptedNeptuneLoader() as loader:
        yield loader


def client(server: ScriptedNeptuneLoader) -> LoaderClient:
    return LoaderClient(server.url, REGION, credentials=CREDENTIALS, sleep=lambda _: None)


def load(server: ScriptedNeptuneLoader, **extra: Any) -> dict[str, Any]:
    client = LoaderClient(server.url, REGION, credentials=CREDENTIALS, sleep=lambda _: None)
    request = {
        "source": f"s3://stg/{PREFIX}",
        "format": "opencypher",
        "iamRoleArn": "arn:role",
        "region": REGION,
    }
    load_id = client.start({**request, **extra})
    server.wait(load_id)
    payload: dict[str, Any] = client.status(load_id)
    return payload


def test_edge_files_named_first_still_load_after_the_vertex_files(
    aws: Any, server: ScriptedNeptuneLoader
) -> None:
    aws.put_object(Bucket="stg", Key=PREFIX + "a-edges.csv", Body=EDGES)
    aws.put_object(Bucket="stg", Key=PREFIX + "b-vertices.csv", Body=VERTICES)
    overall = load(server)["overallStatus"]
    assert (overall["status"], overall["totalRecords"], overall["totalDuplicates"]) == (
        "LOAD_COMPLETED",
        3,
        0,
    )
    rows = server.property_graph.query(
        "MATCH (a:Vertex)-[e:Edge]->(b:Vertex) RETURN a.id, a.age, e.type, e.w, b.labels"
    )
    assert rows == [["p1", 41, "KNOWS", 0.5, ["Person", "Admin"]]]


def test_a_bad_row_is_a_parsing_error_and_failonerror_decides(
    aws: Any, server: ScriptedNeptuneLoader
) -> None:
    aws.put_object(Bucket="stg", Key=PREFIX + "v.csv", Body=VERTICES + b"p3,Person,old\r\n")
    payload = load(server, failOnError="FALSE")
    overall = payload["overallStatus"]
    # failOnError false: the good rows are loaded, and the load still ends LOAD_FAILED (Neptune).
    assert (overall["status"], overall["parsingErrors"], overall["totalRecords"]) == ("LOAD_FAILED", 1, 2)
    assert server.property_graph.counts() == (2, 0)
    assert payload["errors"]["errorLogs"][0]["recordNum"] == 4
    failed = load(server)["overallStatus"]
    assert (failed["status"], failed["parsingErrors"]) == ("LOAD_FAILED", 1)


def test_an_edge_without_its_vertices_is_an_insert_error(aws: Any, server: ScriptedNeptuneLoader) -> None:
    aws.put_object(Bucket="stg", Key=PREFIX + "e.csv", Body=EDGES)
    payload = load(server)
    assert payload["overallStatus"]["status"] == "LOAD_FAILED"
    assert payload["overallStatus"]["insertErrors"] == 1
    assert payload["errors"]["errorLogs"][0]["errorCode"] == "FROM_OR_TO_VERTEX_ARE_MISSING"


def open_cypher(server: ScriptedNeptuneLoader, form: dict[str, str], *, sign: bool = True) -> tuple[int, Any]:
    """(HTTP status, JSON answer) of a POST /openCypher with this form, signed as the client signs."""
    data = urllib.parse.urlencode(form).encode()
    url = server.url + "/openCypher"
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if sign:
        signed = AWSRequest(method="POST", url=url, data=data, headers=headers)
        SigV4Auth(CREDENTIALS, "neptune-db", REGION).add_auth(signed)
        headers = dict(signed.headers.items())
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers, method="POST")) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_vertex_id_query_answers_the_loaded_vertices_only(
    aws: Any, server: ScriptedNeptuneLoader
) -> None:
    assert client(server).existing_vertex_ids(["p1"]) == set()  # no property graph yet
    assert not server.has_property_graph  # and asking made none
    aws.put_object(Bucket="stg", Key=PREFIX + "v.csv", Body=VERTICES)
    aws.put_object(Bucket="stg", Key=PREFIX + "e.csv", Body=EDGES)
    assert load(server)["overallStatus"]["status"] == "LOAD_COMPLETED"
    # Across batches; an edge id and an unknown id are not vertices.
    assert client(server).existing_vertex_ids(["p9", "p1", "e1", "p2"], batch=2) == {"p1", "p2"}
    status, answer = open_cypher(
        server, {"query": EXISTING_IDS_QUERY, "parameters": json.dumps({"ids": ["p2", "nope"]})}
    )
    assert (status, answer) == (200, {"results": [{"id": "p2"}]})


def test_a_graph_a_past_run_left_is_queried_without_a_load(aws: Any, tmp_path: Path) -> None:
    aws.put_object(Bucket="stg", Key=PREFIX + "v.csv", Body=VERTICES)
    with ScriptedNeptuneLoader(tmp_path / "past") as past:
        assert load(past)["overallStatus"]["status"] == "LOAD_COMPLETED"
    # The graph file alone (the RDF store beside it stays locked while `past` lives).
    (tmp_path / "now").mkdir()
    shutil.copy(tmp_path / "past" / FILE_NAME, tmp_path / "now" / FILE_NAME)
    with ScriptedNeptuneLoader(tmp_path / "now") as now:
        assert client(now).existing_vertex_ids(["p1", "p3"]) == {"p1"}


def test_any_other_query_or_bad_parameters_is_refused(server: ScriptedNeptuneLoader) -> None:
    ids = json.dumps({"ids": ["p1"]})
    status, answer = open_cypher(server, {"query": "MATCH (n) RETURN n", "parameters": ids})
    assert (status, answer["code"]) == (400, "MalformedQueryException")
    assert answer["detailedMessage"].startswith(
        "the embedded Neptune answers only mapload's vertex id query: "
    )
    assert "MATCH (n) RETURN n" in answer["detailedMessage"]
    status, answer = open_cypher(server, {"query": EXISTING_IDS_QUERY})
    assert (status, answer["code"]) == (400, "MissingParameterException")
    assert "'parameters'" in answer["detailedMessage"]
    for parameters in ("not json", json.dumps({"ids": "p1"}), json.dumps({"ids": [1]}), "[]"):
        status, answer = open_cypher(server, {"query": EXISTING_IDS_QUERY, "parameters": parameters})
        assert (status, answer["code"]) == (400, "InvalidParameterException"), parameters
        assert "parameters" in answer["detailedMessage"]
    status, answer = open_cypher(server, {"query": EXISTING_IDS_QUERY, "parameters": ids}, sign=False)
    assert (status, answer["code"]) == (403, "AccessDeniedException")
