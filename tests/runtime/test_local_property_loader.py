"""The embedded loader's openCypher loads (mapload/neptune_local.py into mapload/property_store.py):
vertex files before edge files whatever their names, parsing and insert errors counted as
Neptune counts them, failOnError honoured; on moto's S3."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials
from pipeline_support import REGION
from scripted_neptune import ScriptedNeptuneLoader

from adapters.neptune import LoaderClient

pytestmark = pytest.mark.runtime

PREFIX = "jobs/g/run-1/graph/"
VERTICES = b":ID,:LABEL,age:Int\r\np1,Person,41\r\np2,Person;Admin,\r\n"
EDGES = b":ID,:START_ID,:END_ID,:TYPE,w:Double\r\ne1,p1,p2,KNOWS,0.5\r\n"


@pytest.fixture
def server(aws: Any) -> Iterator[ScriptedNeptuneLoader]:
    with ScriptedNeptuneLoader() as loader:
        yield loader


def load(server: ScriptedNeptuneLoader, **extra: Any) -> dict[str, Any]:
    client = LoaderClient(server.url, REGION, credentials=Credentials("AKID", "secret"), sleep=lambda _: None)
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
    assert (overall["status"], overall["parsingErrors"], overall["totalRecords"]) == ("LOAD_COMPLETED", 1, 2)
    assert payload["errors"]["errorLogs"][0]["recordNum"] == 4
    failed = load(server)["overallStatus"]
    assert (failed["status"], failed["parsingErrors"]) == ("LOAD_FAILED", 1)


def test_an_edge_without_its_vertices_is_an_insert_error(aws: Any, server: ScriptedNeptuneLoader) -> None:
    aws.put_object(Bucket="stg", Key=PREFIX + "e.csv", Body=EDGES)
    payload = load(server)
    assert payload["overallStatus"]["status"] == "LOAD_FAILED"
    assert payload["overallStatus"]["insertErrors"] == 1
    assert payload["errors"]["errorLogs"][0]["errorCode"] == "FROM_OR_TO_VERTEX_ARE_MISSING"
