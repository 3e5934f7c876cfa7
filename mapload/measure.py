"""`mapload estimate --file F --spec S`: the rows and item size of a real file, measured.

The file's first SAMPLE_BYTES (decompressed, for gzip) are read as the Worker reads them: the
spec's own parser (CSV header and records, JSON Lines, DynamoDB JSON) and its own mapping to
items, whose sizes are DynamoDB's (logic/mapping.py). The rows of the whole file are the
sample's records scaled by the file's size; a file that fits in the sample is counted exactly.
A Parquet file or folder is counted exactly from its footers, its first SAMPLE_ROWS rows mapped.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

SAMPLE_BYTES = 4 * 2**20
SAMPLE_SOURCE = "s3://mapload-estimate/sample"  # the spec needs a source; nothing reads it


class MeasureError(Exception):
    """The file or spec cannot be measured; the message says why."""


@dataclass(frozen=True)
class Measured:
    rows: int  # records in the whole file (exact when `exact`)
    item_bytes: int  # average item size (bytes, DynamoDB's measure), at least 1
    row_bytes: int  # average source bytes per record (uncompressed)
    sampled: int  # records read
    rejected: int  # of those, records the spec rejects
    exact: bool
    spec: Any  # the parsed JobSpec: write mode, shard size, concurrency
    # An item's DynamoDB JSON (what bulk put items reads, a line's wrapper aside) and its staged
    # line of writeMode sync gzip-compressed (logic/sync.py), on average: bytes, at least 1.
    json_bytes: int = 1
    staged_bytes: int = 1


def _staged(items: list[Any], spec: Any) -> tuple[int, int]:
    """(DynamoDB JSON bytes, gzip-compressed sync staged line bytes) an item, on average."""
    import gzip
    import json

    from logic import sync

    key = tuple(spec.dynamodb.key) if spec.dynamodb is not None else ()
    lines, json_total = [], 0
    for item in items:
        plain = sync.plain_item(item.attributes)
        json_total += len(json.dumps(plain, separators=(",", ":")).encode())
        lines.append(sync.staged_line(sync.key_text(plain, key), plain))
    compressed = len(gzip.compress(b"".join(lines), 6))
    count = max(1, len(items))
    return max(1, round(json_total / count)), max(1, round(compressed / count))


def _gunzip_start(handle: IO[bytes], limit: int) -> tuple[bytes, int]:
    """Up to `limit` + 1 decompressed bytes of a gzip stream (members in a row too), and how many
    compressed bytes made them."""
    out: list[bytes] = []
    produced = consumed = 0
    inflate = zlib.decompressobj(wbits=31)
    pending = b""
    while produced <= limit:
        if not pending:
            pending = handle.read(64 * 1024)
            if not pending:
                break
        chunk = inflate.decompress(pending, limit + 1 - produced)
        consumed += len(pending) - len(inflate.unconsumed_tail) - len(inflate.unused_data)
        pending = inflate.unconsumed_tail or inflate.unused_data
        out.append(chunk)
        produced += len(chunk)
        if inflate.eof:  # the next member, if any
            inflate = zlib.decompressobj(wbits=31)
    return b"".join(out), consumed


def _sample(path: Path) -> tuple[bytes, bool, float]:
    """(up to SAMPLE_BYTES of the data, whether that is all of it, the data's whole size: exact for
    a plain file, estimated for gzip)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        if handle.read(2) != b"\x1f\x8b":
            handle.seek(0)
            data = handle.read(SAMPLE_BYTES + 1)
            return data[:SAMPLE_BYTES], len(data) <= SAMPLE_BYTES, float(size)
        handle.seek(0)
        try:
            data, consumed = _gunzip_start(handle, SAMPLE_BYTES)
        except zlib.error as error:
            raise MeasureError(f"{path}: not a readable gzip file ({error})") from error
        whole = len(data) <= SAMPLE_BYTES
        data = data[:SAMPLE_BYTES]
        if whole:
            return data, True, len(data)
        handle.seek(-4, 2)
        return data, False, _gzip_size(size * len(data) / max(consumed, 1), handle.read(4), len(data))


def _gzip_size(by_ratio: float, trailer: bytes, sampled: int) -> float:
    """A gzip file's decompressed size: its trailer's ISIZE (the last member's size modulo 2**32)
    lifted by whole 2**32 to the nearest of the sample's ratio, when it can be the whole size (one
    member, within a factor 2 of the ratio's); else the ratio's estimate (a file's start may
    compress differently from the rest)."""
    isize = int.from_bytes(trailer, "little")
    if isize < sampled and by_ratio < 2**32:
        return by_ratio  # several members: the trailer tells the last one only
    lifted = isize + round((by_ratio - isize) / 2**32) * 2**32
    # Far from the ratio's estimate: the trailer is one member's of several (`cat a.gz b.gz`).
    return float(lifted) if lifted >= sampled and by_ratio / 2 <= lifted <= by_ratio * 2 else by_ratio


def _header(path: Path, data: bytes, spec: Any) -> tuple[list[str] | None, int]:
    """A CSV sample's header and where its data starts (none and 0 for other formats)."""
    from logic.errors import InputValidationError
    from logic.planning import read_header
    from logic.spec.checks import check_fields

    if spec.csv is None:
        return None, 0
    try:
        header, start = read_header(data, spec, len(data))
        if header is not None:  # Plan's check of each object's header, and its message
            check_fields(spec, header)
    except InputValidationError as error:
        raise MeasureError(f"{path}: {error}") from error
    return header, start


def measure(path: Path, raw_spec: dict[str, Any]) -> Measured:
    """Parse and map the start of `path` with `raw_spec` (the execution input, without source)."""
    from logic.mapping import make_mapper
    from logic.parsing import make_parser
    from logic.values import Item, Line, Reject

    spec = _spec(raw_spec)
    if spec.format == "parquet":
        return _measure_parquet(path, spec)
    if not path.is_file():
        raise MeasureError(f"{path}: no such file")
    data, whole, data_size = _sample(path)
    header, start = _header(path, data, spec)
    body = data[start:]
    if not whole:  # the sample ends inside a record: leave that record out
        body = body[: body.rfind(b"\n") + 1]
    records = _records(spec, body, start)
    parse, mapped = make_parser(spec, header), make_mapper(spec)
    comment_bytes = spec.csv.comment.encode() if spec.csv is not None and spec.csv.comment else None
    sizes: list[int] = []
    items: list[Any] = []
    rejected = 0
    for record in records:
        if not isinstance(record, Line):
            rejected += 1  # a record the reader cuts (too large, an unclosed quote)
            continue
        if not record.raw.strip() or (comment_bytes is not None and record.raw.startswith(comment_bytes)):
            continue
        fields = parse(record)
        item = fields if isinstance(fields, Reject) else mapped(fields)
        if isinstance(item, Item):
            sizes.append(item.size)
            items.append(item)
        else:
            rejected += 1
    sampled = len(sizes) + rejected
    if not sizes:
        raise MeasureError(f"{path}: no record of the first {len(data):,} bytes maps to an item")
    json_bytes, staged_bytes = _staged(items, spec)
    rows = sampled if whole else round(sampled * (data_size - start) / max(len(body), 1))
    return Measured(
        rows=rows,
        item_bytes=max(1, round(sum(sizes) / len(sizes))),
        row_bytes=max(1, round(len(body) / sampled)),
        sampled=sampled,
        rejected=rejected,
        exact=whole,
        spec=spec,
        json_bytes=json_bytes,
        staged_bytes=staged_bytes,
    )


# The rows of a Parquet source `estimate` maps (the first ones, through the Worker's reader).
SAMPLE_ROWS = 10_000


def parquet_files(path: Path) -> list[Path]:
    """A local Parquet source's data files: the file, or a folder's files by the rules Plan applies
    to a prefix (a name below it starting with `_` or `.` is not data; a table format's folder is
    refused)."""
    from logic.errors import InputValidationError
    from logic.parquet import check_not_table_format, is_data

    if path.is_file():
        return [path]
    if not path.is_dir():
        raise MeasureError(f"{path}: no such file or folder")
    found = sorted(p for p in path.rglob("*") if p.is_file())
    try:
        check_not_table_format((p.relative_to(path).as_posix() for p in found), "", str(path))
    except InputValidationError as error:
        raise MeasureError(str(error)) from error
    files = [p for p in found if is_data(p.relative_to(path).as_posix())]
    if not files:
        raise MeasureError(f"{path}: no Parquet data files (names starting _ or . are not data)")
    return files


def checked_footers(path: Path, spec: Any) -> list[tuple[Path, Any]]:
    """A local Parquet source's data files (`parquet_files`) with their footers, each checked as
    Plan checks an object: a Parquet file with every column the mapping names, of a type that gives
    what it declares. Raises MeasureError naming the file (and the column)."""
    from logic.errors import InputValidationError
    from logic.parquet_values import check_schema

    footers = []
    try:
        for file in parquet_files(path):
            meta = local_footer(file)
            check_schema(meta.schema.to_arrow_schema(), spec, str(file))
            footers.append((file, meta))
    except InputValidationError as error:
        raise MeasureError(str(error)) from error
    return footers


def local_footer(path: Path) -> Any:
    """A local Parquet file's footer, read as Plan reads an object's (its last bytes only); raises
    InputValidationError naming the file when it is not Parquet or its footer is corrupt."""
    from logic.parquet import read_footer

    with path.open("rb") as handle:

        def read_range(first: int, last: int) -> bytes:
            handle.seek(first)
            return handle.read(last - first + 1)

        return read_footer(read_range, path.stat().st_size, str(path))


def _measure_parquet(path: Path, spec: Any) -> Measured:
    """Rows exactly, from the footers; the item size from the first SAMPLE_ROWS rows mapped; the
    source bytes per row as the shards count them (compressed bytes of the row groups)."""
    from logic.mapping import make_mapper
    from logic.parquet import row_groups
    from logic.values import Item

    footers = checked_footers(path, spec)
    files = [file for file, _ in footers]
    rows = sum(meta.num_rows for _, meta in footers)
    stored = sum(group.end - group.start for _, meta in footers for group in row_groups(meta))
    mapped, sizes, rejected = make_mapper(spec), [], 0
    items: list[Any] = []
    for fields in itertools.islice(_parquet_rows(files, spec), SAMPLE_ROWS):
        item = mapped(fields)
        if isinstance(item, Item):
            sizes.append(item.size)
            items.append(item)
        else:
            rejected += 1
    if not sizes:
        raise MeasureError(f"{path}: no row of the first {len(sizes) + rejected:,} maps to an item")
    sampled = len(sizes) + rejected
    json_bytes, staged_bytes = _staged(items, spec)
    return Measured(
        rows=rows,
        item_bytes=max(1, round(sum(sizes) / len(sizes))),
        row_bytes=max(1, round(stored / max(rows, 1))),
        sampled=sampled,
        rejected=rejected,
        exact=True,  # a footer counts its rows
        spec=spec,
        json_bytes=json_bytes,
        staged_bytes=staged_bytes,
    )


def _parquet_rows(files: list[Path], spec: Any) -> Iterator[dict[str, Any]]:
    """The files' rows in order, only the columns the mapping reads, as the Worker reads them."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from logic.parquet import columns_read
    from logic.parquet_values import batch_fields

    for file in files:
        reader = pq.ParquetFile(file)
        columns = columns_read(spec, reader.schema_arrow.names)
        for batch in reader.iter_batches(batch_size=1024, columns=columns):
            yield from batch_fields(batch)


def _spec(raw_spec: dict[str, Any]) -> Any:
    """The input validated as Plan would, against a table whose key is the spec's (all S: types
    do not change an item's size much)."""
    from logic.errors import InputValidationError
    from logic.spec.parse import parse_spec

    if "source" in raw_spec:
        raise MeasureError("the spec must not name 'source': give the file with --file")
    key = (raw_spec.get("dynamodb") or {}).get("key")
    if not isinstance(key, dict) or not key:
        raise MeasureError("the spec has no dynamodb.key: estimate measures the DynamoDB items a load writes")
    try:
        spec = parse_spec(
            {**raw_spec, "source": SAMPLE_SOURCE},
            table_key=dict.fromkeys(key, "S"),
            execution_name="estimate",
        )
    except InputValidationError as error:
        raise MeasureError(f"the spec is not valid: {error}") from error
    return spec


def _records(spec: Any, body: bytes, start: int) -> Iterable[Any]:
    """The sample's records as the Worker groups them: CSV by its grammar, else one per line."""
    from logic.csvrecords import reference_records
    from logic.values import Line

    if spec.csv is None:
        return (Line(n, 0, raw.rstrip(b"\r")) for n, raw in enumerate(body.split(b"\n"), 1))
    comment = spec.csv.comment.encode() if spec.csv.comment is not None else None
    return reference_records(
        body,
        max_record=spec.csv.max_record_bytes,
        comment=comment,
        base=start,
        delimiter=spec.csv.delimiter.encode(),
    )


def job_settings(measured: Measured) -> dict[str, Any]:
    """What the spec says about the load's shape: its write mode (and whether an update adds
    numbers: a transaction a record), shard size, concurrency and write budget."""
    spec = measured.spec
    return {
        "write_mode": spec.dynamodb.write_mode if spec.dynamodb is not None else None,
        "numeric_add": bool(spec.dynamodb is not None and spec.dynamodb.counters),
        # None: the input gives none, and estimate chooses it as Plan does (planning.chosen_shard_mib)
        "shard_mib": spec.shard_size_mib if "shard_size_mib" in spec.model_fields_set else None,
        "concurrency": spec.max_concurrency,
        "budget": spec.write_units_per_second,
    }


def describe(measured: Measured, file: str) -> str:
    """One line: what was sampled and what it says."""
    rows = f"{measured.rows:,} rows" if measured.exact else f"about {measured.rows:,} rows"
    return (
        f"{file}: {rows} (sampled {measured.sampled:,} records, {measured.rejected:,} rejected); "
        f"items {measured.item_bytes:,} bytes on average, {measured.row_bytes:,} source bytes per row"
    )
