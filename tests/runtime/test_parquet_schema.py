"""Plan's check of a Parquet object's columns (check_schema), and Parquet values in the graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from parquet_corpus import write
from test_parquet_values import parquet_spec

from logic.errors import InputValidationError
from logic.graph import make_graph_mapper
from logic.parquet import columns_read
from logic.parquet_values import batch_fields, check_schema
from logic.property_graph import PropertyRecord, make_property_mapper
from logic.spec.graph import XSD

pytestmark = pytest.mark.runtime

KEY = {"pk": "ROW#{id}", "sk": "S"}
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ratio", pa.float64()),
        ("name", pa.string()),
        ("blob", pa.binary()),
        ("tags", pa.list_(pa.string())),
        ("empty", pa.list_(pa.int32())),
        ("address", pa.struct([("city", pa.string()), ("geo", pa.struct([("lat", pa.float64())]))])),
        ("codes", pa.map_(pa.int32(), pa.string())),
        ("names", pa.map_(pa.string(), pa.string())),
        ("at", pa.timestamp("ms", tz="UTC")),
        ("day", pa.date32()),
        ("took", pa.duration("s")),
    ]
)


def refusal(attributes: Any, schema: pa.Schema = SCHEMA) -> str:
    with pytest.raises(InputValidationError) as caught:
        check_schema(schema, parquet_spec({"key": KEY, "attributes": attributes}), "s3://b/in/part-0.parquet")
    return str(caught.value)


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        (
            {"x": "{nme}"},
            "dynamodb.attributes.x: s3://b/in/part-0.parquet: names column 'nme', "
            "which the object does not have (did you mean 'name'?); columns: id, ratio, name,",
        ),
        (
            {"x": {"field": "ratio", "type": "BOOL"}},
            "dynamodb.attributes.x.field: s3://b/in/part-0.parquet: column 'ratio' is double; "
            "this needs a boolean",
        ),
        (
            {"x": {"field": "address", "type": "SS"}},
            "dynamodb.attributes.x.field: s3://b/in/part-0.parquet: column 'address' is struct<",
        ),
        (
            {"x": {"field": "empty", "type": "SS"}},
            "dynamodb.attributes.x.field: s3://b/in/part-0.parquet: column 'empty' is list<item: int32>; "
            "this needs a list of strings",
        ),
        ({"x": {"field": "blob", "type": "N"}}, "column 'blob' is binary; this needs a number or a string"),
        ({"x": "{blob}"}, "column 'blob' is binary; this needs a scalar that is not binary"),
        ({"x": "{tags}"}, "column 'tags' is list<item: string>; this needs a scalar"),
        (
            {"x": {"field": "day", "type": "N", "from": "iso8601"}},
            "column 'day' is date32[day]; this needs a timestamp",
        ),
        ({"x": {"field": "codes", "type": "M"}}, "column 'codes' is map<int32, string>: a map's keys become"),
        (
            {"x": {"field": "took", "type": "S"}},
            "column 'took' is duration[s], which has no DynamoDB or graph type",
        ),
        ({"x": "{address.town}"}, "names column 'address.town', which the object does not have"),
        ({"x": {"field": "address.geo.lat", "type": "BOOL"}}, "column 'address.geo.lat' is double"),
    ],
)
def test_a_column_that_cannot_give_the_attribute_is_refused_at_plan(attributes: Any, message: str) -> None:
    assert message in refusal(attributes)


def test_columns_that_fit_pass_and_nested_paths_reach_struct_fields() -> None:
    spec = parquet_spec(
        {
            "key": KEY,
            "attributes": {
                "ratio": {"field": "ratio", "type": "N"},
                "city": "{address.city}",
                "lat": {"field": "address.geo.lat", "type": "N"},
                "tags": {"field": "tags", "type": "SS"},
                "names": {"field": "names", "type": "M"},
                "ttl": {"field": "at", "type": "N", "from": "iso8601"},
                "blob": {"field": "blob", "type": "B"},
                "flag": {"field": "name", "type": "BOOL"},
            },
        }
    )
    check_schema(SCHEMA, spec, "s3://b/in/part-0.parquet")
    read = columns_read(spec, SCHEMA.names)
    assert read == ["id", "ratio", "name", "blob", "tags", "address", "names", "at"]


def test_copy_all_reads_every_column_and_refuses_one_no_item_can_hold() -> None:
    assert columns_read(parquet_spec({"key": KEY, "attributes": "*"}), SCHEMA.names) is None
    assert "column 'codes' is map<int32, string>" in refusal("*")
    check_schema(
        SCHEMA.remove(SCHEMA.get_field_index("codes")).remove(10),
        parquet_spec({"key": KEY, "attributes": "*"}),
        "k",
    )


def test_graph_columns_are_checked_too() -> None:
    spec = parquet_spec(
        graph={
            "model": "property",
            "vertices": [
                {"id": "r{id}", "label": "Row", "properties": {"d": {"field": "name", "type": "Date"}}}
            ],
        }
    )
    check_schema(SCHEMA, spec, "k")
    bad = parquet_spec(
        graph={
            "model": "property",
            "vertices": [
                {"id": "r{id}", "label": "Row", "properties": {"d": {"field": "ratio", "type": "Date"}}}
            ],
        }
    )
    with pytest.raises(InputValidationError) as caught:
        check_schema(SCHEMA, bad, "k")
    assert str(caught.value) == (
        "graph.vertices[0].properties.d.field: k: column 'ratio' is double; this needs a date or a string"
    )


def first_rows(tmp_path: Path) -> list[dict[str, Any]]:
    path = write(tmp_path, "pyarrow", "zstd")
    return batch_fields(pq.ParquetFile(path).read_row_group(0).to_batches(max_chunksize=6)[0])


def test_property_graph_values_from_parquet(tmp_path: Path) -> None:
    spec = parquet_spec(
        graph={
            "model": "property",
            "vertices": [
                {
                    "id": "r{id}",
                    "label": "Row",
                    "properties": {
                        "ratio": {"field": "ratio", "type": "Double", "optional": True},
                        "f32": {"field": "f32", "type": "Float", "optional": True},
                        "small": {"field": "small", "type": "Int", "optional": True},
                        "flag": {"field": "flag", "type": "Bool", "optional": True},
                        "day": {"field": "day", "type": "Date", "optional": True},
                        "at": {"field": "at_utc", "type": "DateTime", "optional": True},
                        "local": {"field": "at_local", "type": "DateTime", "optional": True},
                        "city": {"field": "address.city", "type": "String", "optional": True},
                    },
                }
            ],
        }
    )
    to_rows = make_property_mapper(spec, "s3://b/in/part-0.parquet")
    rows = [to_rows(fields, 0) for fields in first_rows(tmp_path)]
    assert rows[0] == PropertyRecord(
        [
            [
                "r1",
                "Row",
                "0.1",
                "0.1",
                "-32768",
                "true",
                "2026-01-01",
                "2026-01-01T00:00:00.123456Z",
                "2026-01-01T00:00:00.123",
                "Aberdeen",
            ]
        ],
        [],
    )
    assert rows[3] == PropertyRecord(
        [
            [
                "r4",
                "Row",
                "1e+20",
                "3.4028235e+38",
                "32767",
                "false",
                "9999-12-31",
                "9999-12-31T23:59:59.000000Z",
                "1970-01-01T00:00:00.001",
                "",
            ]
        ],
        [],
    )
    assert rows[4] == PropertyRecord([["r5", "Row", "", "", "", "", "", "", "", ""]], [])


def test_rdf_literals_from_parquet(tmp_path: Path) -> None:
    spec = parquet_spec(
        graph={
            "statements": [
                {
                    "subject": "http://example.org/row/{id}",
                    "predicate": "http://example.org/ratio",
                    "object": {"literal": "{ratio}", "datatype": "xsd:double", "optional": True},
                },
                {
                    "subject": "http://example.org/row/{id}",
                    "predicate": "http://example.org/city",
                    "object": {"literal": "{address.city}", "optional": True},
                },
            ]
        }
    )
    to_statements = make_graph_mapper(spec)
    rows = [to_statements(fields) for fields in first_rows(tmp_path)]
    subject = ("iri", "http://example.org/row/1")
    assert rows[0] == [
        (subject, ("iri", "http://example.org/ratio"), ("literal", "0.1", XSD + "double", None), None),
        (subject, ("iri", "http://example.org/city"), ("literal", "Aberdeen", None, None), None),
    ]
    assert rows[4] == []


def test_a_float_that_is_no_number_is_a_graph_reject_or_neptunes_spelling() -> None:
    fields = batch_fields(pa.record_batch({"id": [1], "x": [float("nan")]}))[0]
    rdf = parquet_spec(
        graph={
            "statements": [
                {"subject": "http://e.org/{id}", "predicate": "http://e.org/p", "object": {"literal": "{x}"}}
            ]
        }
    )
    result = make_graph_mapper(rdf)(fields)
    assert (
        getattr(result, "reason", None)
        == "field 'x' in graph.statements[0].object is nan, not a finite number"
    )
    cypher = parquet_spec(
        graph={
            "model": "property",
            "vertices": [
                {"id": "v{id}", "label": "V", "properties": {"x": {"field": "x", "type": "Double"}}}
            ],
        }
    )
    assert make_property_mapper(cypher, "k")(fields, 0) == PropertyRecord([["v1", "V", "NaN"]], [])
