"""`mapload init` -> `mapload run-local` -> `mapload verify` on files other tools wrote: a CSV with a
header (Python's csv module, minimal quoting), a headerless tab-separated file (bytes written by
hand: quotes inside fields, CRLF, a comment line, an empty last field), JSON Lines
(polars) and Parquet (duckdb). Each is loaded with the spec init printed, as it is; verify then
finds the table equal, and after an item is deleted and another changed by hand names both and
exits 1."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from servers import mapload_serve

from mapload import cli
from mapload.local import run_local

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mapload_serve(tmp_path_factory.mktemp("serve") / "serve.log") as url:
        yield url


@pytest.fixture
def served(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return endpoint


def _csv_with_header(path: Path) -> None:
    rows = [
        ["code", "name", "population", "area", "note"],
        ["007", "Bond, James", "1", "0.5", ""],
        ["010", 'the "quoted" one', "42", "12.25", "x"],
        ["100", "line\nbreak", "0", "3", ""],
        ["200", "plain", "-5", "1000000", "y"],
    ]
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, quoting=csv.QUOTE_MINIMAL).writerows(rows)


def _headerless(path: Path) -> None:
    # A tab-separated file as tzdata writes them: a comment line, a fourth column empty on one row.
    path.write_bytes(
        b"# a comment line\r\n"
        b'AD\t+4230+00131\tEurope/Andorra\t5" disk\r\n'
        b"AE\t+2518+05518\tAsia/Dubai\tOman, UAE\r\n"
        b'AF\t+3431+06912\tAsia/Kabul\tsee "x"\r\n'
        b"AG\t+1703-06148\tAmerica/Puerto_Rico\t\r\n"
    )


def _json_lines(path: Path) -> None:
    import polars as pl

    frame = pl.DataFrame(
        {
            "id": [1, 2, 3],
            "name": ["a", "b", None],
            "score": [1.5, 2.0, 3.25],
            "ok": [True, False, True],
        }
    )
    frame.write_ndjson(path)


def _parquet(path: Path) -> None:
    import duckdb

    duckdb.sql(
        "COPY (SELECT i AS id, 'n' || i AS label, i * 1.5 AS weight, "
        "CASE WHEN i % 2 = 0 THEN NULL ELSE i END AS odd FROM range(1, 6) t(i)) "
        f"TO '{path}' (FORMAT PARQUET)"
    )


# name, writer, --key, --sort-key, the items the file maps to
FILES: list[tuple[str, Callable[[Path], None], str, str, int]] = [
    ("countries.csv", _csv_with_header, "CSV#{code}", "{name}", 4),
    ("zones.tab", _headerless, "ZONE#{c1}", "{c3}", 4),
    ("rows.jsonl", _json_lines, "JSONL#{id}", "ROW", 3),
    ("table.parquet", _parquet, "PARQUET#{id}", "{label}", 5),
]


def _init(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = cli.main(["init", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else {}, err


def _verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("name", "write", "key", "sort_key", "items"), FILES, ids=[f[0] for f in FILES])
def test_init_then_run_local_then_verify(
    tmp_path: Path,
    served: str,
    capsys: pytest.CaptureFixture[str],
    name: str,
    write: Callable[[Path], None],
    key: str,
    sort_key: str,
    items: int,
) -> None:
    source = tmp_path / name
    write(source)
    code, spec, err = _init(capsys, str(source), "--key", key, "--sort-key", sort_key)
    assert code == 0, err
    assert "source" not in spec and "jobId" not in spec
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")

    report = run_local(source, spec, report_path=tmp_path / "report.json", quiet=True)
    assert report["status"] == "SUCCEEDED", report.get("error")
    assert report["records"]["written"] == items and report["records"]["rejected"] == 0
    table = report["dynamodb"]["table"]

    code, out, err = _verify(capsys, str(source), "--spec", str(spec_path), "--table", table)
    assert code == 0, out + err
    assert f"{items} compared: {items} as the file maps them" in out
    assert "extra     0 items" in out  # the key prefix bounds this load's keys in a shared table

    db = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    prefix = key.split("#")[0] + "#"
    stored = [
        item
        for page in db.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
        if item["pk"]["S"].startswith(prefix)
    ]
    assert len(stored) == items
    gone, changed = stored[0], stored[1]
    db.delete_item(TableName=table, Key={"pk": gone["pk"], "sk": gone["sk"]})
    attribute = next(name for name in changed if name not in ("pk", "sk"))
    db.update_item(
        TableName=table,
        Key={"pk": changed["pk"], "sk": changed["sk"]},
        UpdateExpression="SET #a = :v",
        ExpressionAttributeNames={"#a": attribute},
        ExpressionAttributeValues={":v": {"S": "changed by hand"}},
    )
    code, out, _ = _verify(capsys, str(source), "--spec", str(spec_path), "--table", table)
    assert code == 1
    assert "missing   1" in out and f"pk={gone['pk']['S']}" in out
    assert "differing 1" in out and f"pk={changed['pk']['S']}" in out and attribute in out
    assert "changed by hand" in out


def test_init_types_codes_as_strings_and_empty_columns_as_optional(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "countries.csv"
    _csv_with_header(source)
    code, spec, err = _init(capsys, str(source), "--key", "CSV#{code}", "--sort-key", "{name}")
    assert code == 0, err
    assert spec["csv"] == {"header": True, "delimiter": ","}
    assert spec["dynamodb"]["key"] == {"pk": "CSV#{code}", "sk": "{name}"}
    attributes = spec["dynamodb"]["attributes"]
    assert attributes["code"] == {"field": "code", "type": "S"}  # 007: a leading zero
    assert attributes["population"] == {"field": "population", "type": "N"}
    assert attributes["area"] == {"field": "area", "type": "N"}
    assert attributes["note"] == {"field": "note", "type": "S", "optional": True}
    assert "guessed" in err


def test_init_headerless_names_columns_and_sniffs_the_delimiter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "zones.tab"
    _headerless(source)
    code, spec, err = _init(capsys, str(source), "--key", "ZONE#{c1}", "--sort-key", "{c3}")
    assert code == 0, err
    assert spec["csv"] == {
        "header": False,
        "delimiter": "\t",
        "comment": "#",
        "columns": ["c1", "c2", "c3", "c4"],
    }
    assert spec["dynamodb"]["attributes"]["c4"] == {"field": "c4", "type": "S", "optional": True}


def test_init_parquet_types_come_from_its_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "table.parquet"
    _parquet(source)
    code, spec, err = _init(capsys, str(source), "--key", "P#{id}", "--sort-key", "{label}")
    assert code == 0, err
    attributes = spec["dynamodb"]["attributes"]
    assert {name: a["type"] for name, a in attributes.items()} == {
        "id": "N",
        "label": "S",
        "weight": "N",
        "odd": "N",
    }
    assert attributes["odd"].get("optional") is True and "optional" not in attributes["id"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--key", "CSV#{cod}", "--sort-key", "x"], "did you mean 'code'?"),
        (["--key", "CSV#{code}"], "--sort-key"),
        (["--key", "{code", "--sort-key", "x"], "pk"),
    ],
)
def test_init_refuses_in_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    source = tmp_path / "countries.csv"
    _csv_with_header(source)
    code, _, err = _init(capsys, str(source), *argv)
    assert code == 2
    assert err.count("\n") == 1 and says in err and "Traceback" not in err


def test_init_of_a_missing_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _init(capsys, str(tmp_path / "nope.csv"), "--key", "{a}", "--sort-key", "b")
    assert code == 2 and "no such file" in err and err.count("\n") == 1


def test_verify_without_a_table_to_compare_with_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    source = tmp_path / "countries.csv"
    _csv_with_header(source)
    (tmp_path / "spec.json").write_text("{}", encoding="utf-8")
    code, out, err = _verify(capsys, str(source), "--spec", str(tmp_path / "spec.json"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "AWS_ENDPOINT_URL_DYNAMODB" in err
