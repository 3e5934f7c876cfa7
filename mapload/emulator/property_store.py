"""The embedded run's property graph: openCypher CSV rows loaded into a LadybugDB database.

Neptune's property graph has no schema: a vertex has any labels and properties, an edge one type.
LadybugDB (an embedded Cypher database) types its tables, so the graph is held in two tables
that keep Neptune's model whole: `Vertex(id, labels STRING[], <properties>)` and
`Edge(FROM Vertex TO Vertex, id, type, <properties>)`, a property column added the first time a
load names it. Query it after the run with Cypher, e.g.
`MATCH (a:Vertex)-[e:Edge]->(b:Vertex) WHERE a.id = 'p1' AND e.type = 'REPORTS_TO' RETURN b.id`
(labels: `list_contains(a.labels, 'Person')`). DateTime values are kept as their ISO 8601 text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ladybug

from logic.opencypher import Column, Header, Row

# The file inside --graph-store DIR (the directory itself is the RDF store's).
FILE_NAME = "property-graph.lbug"
_TYPES = {
    "Bool": "BOOLEAN",
    "Byte": "INT8",
    "Short": "INT16",
    "Int": "INT32",
    "Long": "INT64",
    "Float": "FLOAT",
    "Double": "DOUBLE",
    "String": "STRING",
    "DateTime": "STRING",
}


class MissingEndpointError(Exception):
    """An edge whose start or end vertex is not in the graph (Neptune: FROM_OR_TO_VERTEX_ARE_MISSING)."""


class PropertyTypeError(Exception):
    """A property column whose type differs from the one the graph already holds for that name."""


class PropertyGraphStore:
    """`PropertyGraphStore(dir)` keeps the graph in `dir/property-graph.lbug`; None: in memory."""

    def __init__(self, directory: Path | None) -> None:
        self.path = directory / FILE_NAME if directory is not None else None
        self._db = ladybug.Database(str(self.path) if self.path is not None else ":memory:")
        self._conn = ladybug.Connection(self._db)
        tables = {row[1] for row in self._rows("CALL show_tables() RETURN *")}
        if "Vertex" not in tables:
            self._conn.execute("CREATE NODE TABLE Vertex(id STRING, labels STRING[], PRIMARY KEY(id))")
        if "Edge" not in tables:
            self._conn.execute("CREATE REL TABLE Edge(FROM Vertex TO Vertex, id STRING, type STRING)")

    def _rows(self, query: str, parameters: Mapping[str, Any] | None = None) -> list[list[Any]]:
        result = self._conn.execute(query, dict(parameters or {}))
        assert not isinstance(result, list)
        rows: list[list[Any]] = []
        while result.has_next():
            rows.append(list(result.get_next()))
        return rows

    def _columns(self, table: str) -> dict[str, str]:
        return {row[1]: row[2] for row in self._rows(f"CALL table_info('{table}') RETURN *")}

    def prepare(self, header: Header) -> None:
        """Add the header's property columns the table lacks; raises PropertyTypeError for a name
        the graph holds with another type."""
        table = "Vertex" if header.kind == "node" else "Edge"
        existing = self._columns(table)
        for column in header.properties:
            wanted = _column_type(column)
            name = _identifier(column.name)
            if column.name in existing:
                if existing[column.name] != wanted:
                    raise PropertyTypeError(
                        f"property {column.name!r} is {existing[column.name]} in the graph, {wanted} here"
                    )
                continue
            self._conn.execute(f"ALTER TABLE {table} ADD {name} {wanted}")
            existing[column.name] = wanted

    def add_vertex(self, header: Header, row: Row) -> bool:
        """Add a vertex, or merge its labels and properties into the one with its id; True when new."""
        values = _values(header, row)
        found = self._rows("MATCH (v:Vertex {id: $id}) RETURN v.labels", {"id": row.id})
        sets = "".join(f", v.{_identifier(name)} = $p{i}" for i, name in enumerate(values))
        parameters = {"id": row.id, "labels": list(row.labels)} | {
            f"p{i}": value for i, value in enumerate(values.values())
        }
        if found:
            self._conn.execute(
                "MATCH (v:Vertex {id: $id}) SET v.labels = list_distinct(list_concat(v.labels, $labels))"
                + sets,
                parameters,
            )
            return False
        self._conn.execute("CREATE (v:Vertex {id: $id}) SET v.labels = $labels" + sets, parameters)
        return True

    def add_edge(self, header: Header, row: Row) -> bool:
        """Add an edge; an id the graph holds is a duplicate (True only when new). Raises
        MissingEndpointError when a vertex it joins is not in the graph."""
        if self._rows("MATCH ()-[e:Edge {id: $id}]->() RETURN e.id", {"id": row.id}):
            return False
        values = _values(header, row)
        sets = "".join(f", e.{_identifier(name)} = $p{i}" for i, name in enumerate(values))
        parameters = {"id": row.id, "type": row.type, "src": row.start, "dst": row.end} | {
            f"p{i}": value for i, value in enumerate(values.values())
        }
        made = self._rows(
            "MATCH (a:Vertex {id: $src}), (b:Vertex {id: $dst}) "
            "CREATE (a)-[e:Edge {id: $id, type: $type}]->(b) SET e.type = $type" + sets + " RETURN count(e)",
            parameters,
        )
        if not made or made[0][0] == 0:
            raise MissingEndpointError(
                f"edge {row.id!r}: vertex {row.start!r} or {row.end!r} is not in the graph"
            )
        return True

    def counts(self) -> tuple[int, int]:
        """(vertices, edges) in the graph now."""
        vertices = self._rows("MATCH (v:Vertex) RETURN count(v)")[0][0]
        edges = self._rows("MATCH ()-[e:Edge]->() RETURN count(e)")[0][0]
        return int(vertices), int(edges)

    def existing_ids(self, ids: Sequence[str]) -> list[str]:
        """The ids among `ids` that are vertices of the graph."""
        rows = self._rows("MATCH (v:Vertex) WHERE v.id IN $ids RETURN v.id", {"ids": list(ids)})
        return [str(row[0]) for row in rows]

    def query(self, cypher: str, parameters: Mapping[str, Any] | None = None) -> list[list[Any]]:
        return self._rows(cypher, parameters)

    def close(self) -> None:
        self._conn.close()
        self._db.close()


def _column_type(column: Column) -> str:
    kind = _TYPES[column.type]
    return kind + "[]" if column.array else kind


def _identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _values(header: Header, row: Row) -> dict[str, Any]:
    """The row's property values as the table's column types take them."""
    kinds = {column.name: column for column in header.properties}
    out: dict[str, Any] = {}
    for name, value in row.properties.items():
        column = kinds.get(name)
        if column is None:  # a name:ID column's copy of the id
            continue
        out[name] = (
            [_value(column.type, v) for v in value]
            if isinstance(value, tuple)
            else _value(column.type, value)
        )
    return out


def _value(kind: str, text: str) -> Any:
    if kind == "Bool":
        return text.lower() == "true"
    if kind in ("Byte", "Short", "Int", "Long"):
        return int(text)
    if kind in ("Float", "Double"):
        return float(text)
    return text
