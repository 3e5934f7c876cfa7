"""One logical table written as Parquet by three independent writers (pyarrow, DuckDB, Polars).

Six rows, repeated REPEAT times (the id counts on: row `id` is base row `(id - 1) % 6`), in
row groups of ROWS_PER_GROUP (DuckDB rounds a row group to 2,048 rows, so the table is long
enough for several groups from every writer): every logical type the issue names (integers, decimals up
to 38 digits, float and double, strings, binary, booleans, dates, times, timestamps in ms, us and
ns with and without UTC adjustment, INT96), lists, structs (nested), a map, and a row whose
columns are all null but its id. Each writer writes it with every codec it has. What a writer
cannot say is left out of its file and listed in WRITER_GAPS (Polars has no map type and writes
no INT96; DuckDB keeps times and zoned timestamps in microseconds).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_PER_GROUP = 2048
REPEAT = 700
CODECS = ("snappy", "gzip", "zstd", "lz4", "brotli", "uncompressed")
WRITERS = ("pyarrow", "duckdb", "polars")
# Columns left out of a writer's files: INT96 goes to pyarrow's own `-int96` file (pyarrow writes
# every timestamp of a file as INT96 or none), and Polars has no map type.
WRITER_GAPS = {"polars": ("attrs", "at_int96"), "duckdb": ("at_int96",), "pyarrow": ("at_int96",)}

_ADDRESS = pa.struct(
    [
        ("city", pa.string()),
        ("zip", pa.string()),
        ("geo", pa.struct([("lat", pa.float64()), ("lon", pa.float64())])),
    ]
)
_NESTED = pa.list_(pa.struct([("k", pa.string()), ("v", pa.list_(pa.int64()))]))
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("small", pa.int16()),
        ("big", pa.uint64()),
        ("price", pa.decimal128(38, 10)),
        ("amount", pa.decimal128(9, 2)),
        ("ratio", pa.float64()),
        ("f32", pa.float32()),
        ("name", pa.string()),
        ("blob", pa.binary()),
        ("flag", pa.bool_()),
        ("day", pa.date32()),
        ("clock", pa.time64("us")),
        ("at_utc", pa.timestamp("us", tz="UTC")),
        ("at_local", pa.timestamp("ms")),
        ("at_ns", pa.timestamp("ns")),
        ("at_int96", pa.timestamp("ns")),
        ("tags", pa.list_(pa.string())),
        ("scores", pa.list_(pa.int64())),
        ("address", _ADDRESS),
        ("attrs", pa.map_(pa.string(), pa.int32())),
        ("nested", _NESTED),
    ]
)

_US = 1_000_000
COLUMNS: dict[str, list[object]] = {
    "id": [1, 2, 3, 4, 5, 6],
    "small": [-32768, 0, 7, 32767, None, 1],
    "big": [18446744073709551615, 0, 1, 2, None, 3],
    "price": [
        Decimal("1234567890123456789012345678.1234567891"),
        Decimal("-0.0000000001"),
        Decimal("0"),
        Decimal("100.5000000000"),
        None,
        Decimal("1"),
    ],
    "amount": [
        Decimal("19.99"),
        Decimal("-0.50"),
        Decimal("0.00"),
        Decimal("9999999.99"),
        None,
        Decimal("1.00"),
    ],
    "ratio": [0.1, 1e-05, -2.5, 1e20, None, 3.0],
    "f32": [0.1, 16777216.0, -1.5, 3.4028234663852886e38, None, 0.0],
    "name": ["Zoë", "", "a,b\nc", 'o\'neil "q"', None, "x"],
    "blob": [b"\x00\xff", b"", b"hello", b"\n", None, b"z"],
    "flag": [True, False, True, False, None, True],
    "day": [20454, 0, -1, 2932896, None, 1],
    "clock": [0, 1, 86399 * _US + 999999, 12 * 3600 * _US, None, 1000],
    "at_utc": [1767225600 * _US + 123456, 0, -1, 253402300799 * _US, None, 1],
    "at_local": [1767225600123, 0, -1, 1, None, 1000],
    "at_ns": [1767225600123456000, 0, -1000, 1000, None, 1],
    "at_int96": [1767225600123456789, 0, -1, 1, None, 1],
    "tags": [["a", "b", "a"], [], ["ü"], None, None, ["x"]],
    "scores": [[1, 2, 2], [], [-1], [10**18], None, [0]],
    "address": [
        {"city": "Aberdeen", "zip": "AB1", "geo": {"lat": 57.1, "lon": -2.1}},
        {"city": "", "zip": None, "geo": None},
        {"city": "Ely", "zip": "CB7", "geo": {"lat": 52.4, "lon": 0.26}},
        {"city": None, "zip": None, "geo": {"lat": None, "lon": 1e-07}},
        None,
        {"city": "York", "zip": "YO1", "geo": {"lat": 53.9, "lon": -1.08}},
    ],
    "attrs": [[("a", 1), ("b", 2)], [], [("c", None)], [("d", -4)], None, [("e", 5)]],
    "nested": [
        [{"k": "p", "v": [1, 2]}, {"k": None, "v": []}],
        [],
        [{"k": "q", "v": None}],
        None,
        None,
        [None],
    ],
}


def table(without: tuple[str, ...] = (), repeat: int = REPEAT) -> pa.Table:
    """The logical table (without some columns)."""
    kept = [field for field in SCHEMA if field.name not in without]
    columns = {name: values * repeat for name, values in COLUMNS.items()}
    columns["id"] = list(range(1, 6 * repeat + 1))
    return pa.table(
        {field.name: pa.array(columns[field.name], field.type) for field in kept}, pa.schema(kept)
    )


def write_pyarrow(path: Path, codec: str) -> None:
    data = table(WRITER_GAPS["pyarrow"])
    pq.write_table(
        data, path, compression=codec if codec != "uncompressed" else "none", row_group_size=ROWS_PER_GROUP
    )
    # Spark and Impala's INT96: pyarrow writes it for every timestamp column of a file, so its own file.
    int96 = table()
    pq.write_table(
        int96.select(["id", "at_int96"]),
        path.with_name(path.stem + "-int96.parquet"),
        compression=codec if codec != "uncompressed" else "none",
        row_group_size=ROWS_PER_GROUP,
        use_deprecated_int96_timestamps=True,
    )


def write_duckdb(path: Path, codec: str) -> None:
    data = table(WRITER_GAPS["duckdb"])  # noqa: F841 (DuckDB reads the local variable by its name)
    with duckdb.connect() as connection:
        connection.execute(
            f"COPY (SELECT * FROM data) TO '{path}' "
            f"(FORMAT parquet, COMPRESSION {codec}, ROW_GROUP_SIZE {ROWS_PER_GROUP})"
        )


def write_polars(path: Path, codec: str) -> None:
    frame = pl.from_arrow(table(WRITER_GAPS["polars"]))
    assert isinstance(frame, pl.DataFrame)
    frame.write_parquet(path, compression=codec, row_group_size=ROWS_PER_GROUP)  # type: ignore[arg-type]


WRITE: dict[str, Callable[[Path, str], None]] = {
    "pyarrow": write_pyarrow,
    "duckdb": write_duckdb,
    "polars": write_polars,
}


def write(directory: Path, writer: str, codec: str) -> Path:
    """The table as `writer` writes it with `codec`: the file's path."""
    path = directory / f"{writer}-{codec}.parquet"
    WRITE[writer](path, codec)
    return path
