"""`mapload init FILE --key TEMPLATE [--sort-key TEMPLATE]`: a spec from the file itself.

The file's start (measure.SAMPLE_BYTES, decompressed for gzip; a Parquet file's schema and first
rows) is read as the Worker reads it (logic/parsing.py, logic/csvrecords.py, the Parquet reader)
and every field becomes a typed attribute: `N` only when every sampled value is a canonical number
(no leading zero, no sign but `-`, no exponent: `007` and `+1` stay strings), Parquet's types from
its schema, JSON Lines' from its values; a field empty, null or missing in a sampled record is
`optional`. The spec is checked with parse_spec against the environment's table key (cdk.json)
and by mapping the sample; what was guessed is said on standard error.
"""

from __future__ import annotations

import csv
import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from mapload import ROOT

# The delimiters init tries, in order of preference when several fit.
DELIMITERS = (",", "\t", ";", "|")
# The records of the sample whose values decide the types (all of a small file).
SAMPLE_RECORDS = 10_000
# DynamoDB's number: at most 38 significant digits (logic/cells.py checks the rest).
_CANONICAL_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
_SOURCE = "s3://mapload-init/sample"  # parse_spec needs a source; init prints the input without it
# The table key an environment has when cdk.json names none (stacks/data_settings.py's defaults;
# tests/runtime/test_verify_init.py holds them equal: the installed command cannot import stacks/).
DEFAULT_TABLE_KEY = {"partition_key": {"name": "pk", "type": "S"}, "sort_key": {"name": "sk", "type": "S"}}


class InitError(Exception):
    """The file cannot be described; the message says why (one line)."""


@dataclass
class _Column:
    """What the sample says of one field."""

    name: str
    kinds: set[str] = field(default_factory=set)  # S, N (canonical number text or a number), BOOL, L, M, ...
    empty: int = 0  # records where it is empty, null or missing
    seen: int = 0


def table_key(env: str, cdk_json: Path = ROOT / "cdk.json") -> dict[str, str]:
    """The environment's table key (name -> S|N|B, partition key first), from cdk.json as synth
    reads it: `partition_key`, `sort_key` (null: none), defaults pk/sk strings."""
    try:
        block = json.loads(cdk_json.read_text(encoding="utf-8"))["context"]["mapload"]["environments"][env]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InitError(f"cannot read environment {env!r} from {cdk_json}: {error}") from error
    block = block or {}
    key: dict[str, str] = {}
    for setting in ("partition_key", "sort_key"):
        given = block.get(setting, DEFAULT_TABLE_KEY[setting])
        if isinstance(given, str):  # `-c mapload:partition_key='{"name": ...}'` style JSON text
            given = json.loads(given)
        if given is None:
            continue
        key[str(given["name"])] = str(given.get("type", "S"))
    return key


def infer(
    path: Path,
    key_templates: Sequence[str],
    key: Mapping[str, str],
    *,
    header: bool | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """The execution input (without source and jobId) that loads `path` into a table keyed `key`,
    its key filled by `key_templates` (partition key first). `header` None: guessed."""
    if len(key_templates) != len(key):
        names = " and ".join(key)
        raise InitError(
            f"the table's key is {names}: give --key"
            + (" and --sort-key" if len(key) == 2 else " alone (the table has no sort key)")
        )
    fmt = _format(path)
    if fmt == "parquet":
        spec, columns, rows = _parquet(path)
    elif fmt == "csv":
        spec, columns, rows = _csv(path, header, say)
    else:
        spec, columns, rows = _json_lines(path, fmt)
    if fmt != "csv":
        say(
            f"mapload init: {path.name}: {fmt}, {len(columns)} fields"
            + (" (from its schema)" if fmt == "parquet" else "")
        )
    templates = dict(zip(key, key_templates, strict=True))
    _check_templates(templates, [column.name for column in columns])
    attributes: dict[str, Any] = {}
    for column in columns:
        if column.name in key:
            if templates[column.name] == f"{{{column.name}}}":
                continue  # the key attribute holds it already
            raise InitError(
                f"field {column.name!r} is named like the table's key attribute: give "
                f"--{'key' if column.name == next(iter(key)) else 'sort-key'} '{{{column.name}}}' "
                "to load it as the key, or rename it"
            )
        kind = _kind(column, fmt)
        attribute: dict[str, Any] = {"field": column.name, "type": kind}
        if column.empty:
            attribute["optional"] = True
        attributes[column.name] = attribute
    spec["dynamodb"] = {"key": templates, "attributes": attributes}
    parsed = _validated(spec, key)
    for column in columns:
        if column.name in attributes:
            a = attributes[column.name]
            note = f", optional ({column.empty} of {column.seen} empty or missing)" if column.empty else ""
            say(f"  {column.name}: {a['type']}{note}")
    _check_sample(parsed, rows, say)
    return spec


def _format(path: Path) -> str:
    from mapload.measure import MeasureError, _sample

    if path.is_dir() or path.suffix.lower() == ".parquet":
        return "parquet"
    if not path.is_file():
        raise InitError(f"{path}: no such file or folder")
    with path.open("rb") as handle:
        if handle.read(4) == b"PAR1":
            return "parquet"
    try:
        data, _, _ = _sample(path)
    except MeasureError as error:
        raise InitError(str(error)) from error
    first = next((line.strip() for line in data.split(b"\n") if line.strip()), b"")
    if first.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    if not first.startswith(b"{"):
        return "csv"
    try:
        value = json.loads(first)
    except ValueError:
        return "jsonl"  # the first record may be cut; JSON Lines by its first character
    if isinstance(value, dict) and list(value) == ["Item"] and isinstance(value["Item"], dict):
        return "dynamodb-json"
    return "jsonl"


def _sample_lines(path: Path) -> tuple[bytes, bool]:
    from mapload.measure import MeasureError, _sample

    try:
        data, whole, _ = _sample(path)
    except MeasureError as error:
        raise InitError(str(error)) from error
    if not whole:  # the sample ends inside a line: leave it out
        data = data[: data.rfind(b"\n") + 1]
    return data, whole


def _csv(
    path: Path, header: bool | None, say: Callable[[str], None]
) -> tuple[dict[str, Any], list[_Column], list[Any]]:
    """A delimited file's csv options, columns and sampled records. Kept whole: the header,
    delimiter and comment decisions share one sample and build on each other."""
    from logic.csvrecords import reference_records
    from logic.errors import InputValidationError
    from logic.parsing import is_skipped, make_parser, split_csv_line
    from logic.planning import read_header
    from logic.records import BOM
    from logic.values import Line, Reject

    data, whole = _sample_lines(path)
    if data.startswith(BOM):
        data = data[len(BOM) :]  # read_header strips it too; the sniffing below sees the text
    lines = [raw.rstrip(b"\r") for raw in data.split(b"\n")]
    first = next((raw for raw in lines if raw.strip()), None)
    if first is None:
        raise InitError(f"{path}: no data in its first {len(data):,} bytes")
    comment = "#" if first.startswith(b"#") else None
    content = [
        raw.decode("utf-8", "replace")
        for raw in lines
        if raw.strip() and not (comment is not None and raw.startswith(b"#"))
    ][:200]
    if not content:
        raise InitError(f"{path}: only comment lines in its first {len(data):,} bytes")
    delimiter = _delimiter(content)
    split = [v for v in (split_csv_line(text, delimiter) for text in content) if not isinstance(v, Reject)]
    if not split:
        raise InitError(f"{path}: no line of its start splits into fields (unbalanced quotes?)")
    guessed = header is None
    if header is None:
        header = _looks_like_header(split[0], split[1:], "\n".join(content))
    options: dict[str, Any] = {"header": header, "delimiter": delimiter}
    if comment is not None:
        options["comment"] = comment
    if header:
        names = list(split[0])
        bad = next((n for n in names if not n.strip()), None) is not None or len(set(names)) < len(names)
        if bad:
            raise InitError(
                f"{path}: the header line {content[0][:80]!r} does not name every column once: "
                "give --no-header (columns c1...cN)"
            )
    else:
        width = max(len(values) for values in split)
        names = [f"c{i}" for i in range(1, width + 1)]
        options["columns"] = names
    provisional = _provisional({"format": "csv", "csv": options})
    try:
        found, start = read_header(data, provisional, len(data) if whole else len(data) + 1)
    except InputValidationError as error:
        raise InitError(f"{path}: {error}") from error
    shown = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}.get(delimiter, repr(delimiter))
    named = (
        f"a header line naming {len(names)} columns" if header else f"no header: columns c1...c{len(names)}"
    )
    say(
        f"mapload init: {path.name}: CSV, {shown}-delimited, {named}"
        + (" (guessed: --header / --no-header to say)" if guessed else "")
        + (", '#' comment lines" if comment is not None else "")
    )
    parse = make_parser(provisional, found)
    columns = [_Column(name) for name in names]
    rows: list[Any] = []
    record_comment = comment.encode() if comment is not None else None
    records = reference_records(
        data[start:],
        max_record=provisional.csv.max_record_bytes,
        comment=record_comment,
        base=start,
        delimiter=delimiter.encode(),
    )
    longer = 0
    for record in records:
        if len(rows) >= SAMPLE_RECORDS:
            break
        if not isinstance(record, Line):
            rows.append(Reject(record.code, record.reason))
            continue
        if is_skipped(record.raw, provisional):
            continue
        rows.append(parse(record))
        values = split_csv_line(record.raw.decode("utf-8", "replace"), delimiter)
        if isinstance(values, Reject):
            continue
        longer += len(values) > len(columns)
        for index, column in enumerate(columns):
            column.seen += 1
            value = values[index] if index < len(values) else ""
            if value == "":
                column.empty += 1
            else:
                column.kinds.add("N" if _canonical_number(value) else "S")
    if longer:
        say(f"mapload init: {longer} sampled rows have more fields than the {len(columns)} columns")
    return {"format": "csv", "csv": options}, columns, rows


def _delimiter(lines: Sequence[str]) -> str:
    """The candidate that splits the lines most alike (the share of lines with the most common field
    count, then that count); a file of one column gets a delimiter its sample never holds."""
    from logic.parsing import split_csv_line
    from logic.values import Reject

    best: tuple[float, int] | None = None
    chosen = None
    for delimiter in DELIMITERS:
        counts = [len(v) for v in (split_csv_line(t, delimiter) for t in lines) if not isinstance(v, Reject)]
        if not counts or max(counts) < 2:
            continue
        mode = max(set(counts), key=lambda n: (counts.count(n), n))
        if mode < 2:
            continue
        score = (counts.count(mode) / len(lines), mode)
        if best is None or score > best:
            best, chosen = score, delimiter
    if chosen is not None:
        return chosen
    return next((d for d in DELIMITERS if not any(d in line for line in lines)), ",")


def _looks_like_header(first: Sequence[str], rest: Sequence[Sequence[str]], text: str) -> bool:
    """A first line of distinct non-empty names, none a number, above a column of numbers (or
    that csv.Sniffer takes for a header: its lengths or types differ from the rows below)."""
    if any(not name.strip() or _canonical_number(name) for name in first) or len(set(first)) < len(first):
        return False
    for index in range(len(first)):
        below = [row[index] for row in rest if index < len(row) and row[index] != ""]
        if below and all(_canonical_number(value) for value in below):
            return True
    try:
        return bool(csv.Sniffer().has_header(text))
    except csv.Error:
        return False


def _canonical_number(text: str) -> bool:
    return len(text) <= 40 and _CANONICAL_NUMBER.fullmatch(text) is not None and _digits(text) <= 38


def _digits(text: str) -> int:
    return len(text.lstrip("-").replace(".", "").lstrip("0") or "0")


def _json_lines(path: Path, fmt: str) -> tuple[dict[str, Any], list[_Column], list[Any]]:
    from logic.parsing import is_skipped, make_parser
    from logic.values import Line, Reject

    data, _ = _sample_lines(path)
    provisional = _provisional({"format": fmt})
    parse = make_parser(provisional, None)
    columns: dict[str, _Column] = {}
    rows: list[Any] = []
    objects = 0  # records parsed into fields (a field first seen now was missing from those before)
    for number, raw in enumerate(data.split(b"\n"), 1):
        raw = raw.rstrip(b"\r")
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if is_skipped(raw, provisional):
            continue
        if len(rows) >= SAMPLE_RECORDS:
            break
        fields = parse(Line(number, 0, raw))
        rows.append(fields)
        if isinstance(fields, Reject):
            continue
        for name, value in fields.items():
            columns.setdefault(name, _Column(name, empty=objects, seen=objects))
            if fmt == "dynamodb-json":
                columns[name].kinds.add(next(iter(value)))
            elif value is None or value == "":
                columns[name].empty += 1
            else:
                columns[name].kinds.add(_json_kind(value))
        for column in columns.values():
            column.seen += 1
            if column.name not in fields:
                column.empty += 1
        objects += 1
    if not columns:
        first = next((row for row in rows if isinstance(row, Reject)), None)
        why = f": {first.reason}" if first is not None else ""
        raise InitError(f"{path}: no record of its first {len(data):,} bytes has a field{why}")
    return {"format": fmt}, list(columns.values()), rows


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, Decimal | int | float):
        return "N"
    if isinstance(value, dict):
        return "M"
    if isinstance(value, list):
        return "L"
    return "S"


def _parquet(path: Path) -> tuple[dict[str, Any], list[_Column], list[Any]]:
    import itertools

    import pyarrow.types as pat  # type: ignore[import-untyped]

    from mapload.measure import MeasureError, _parquet_rows, checked_footers

    provisional = _provisional({"format": "parquet"})
    try:
        footers = checked_footers(path, provisional)
    except MeasureError as error:
        raise InitError(str(error)) from error
    schema = footers[0][1].schema.to_arrow_schema()
    columns = []
    for arrow_field in schema:
        kind = arrow_field.type
        if pat.is_dictionary(kind):
            kind = kind.value_type
        column = _Column(arrow_field.name)
        column.kinds.add(_arrow_kind(kind))
        column.seen = sum(meta.num_rows for _, meta in footers)
        column.empty = _nulls(footers, arrow_field.name, arrow_field.nullable)
        columns.append(column)
    rows = list(itertools.islice(_parquet_rows([file for file, _ in footers], provisional), SAMPLE_RECORDS))
    for column in columns:
        if not column.empty and "S" in column.kinds:  # an empty string: left out as optional
            column.empty = sum(1 for row in rows if row.get(column.name) == "")
    return {"format": "parquet"}, columns, rows


def _arrow_kind(kind: Any) -> str:
    import pyarrow.types as pat

    if pat.is_boolean(kind):
        return "BOOL"
    if pat.is_integer(kind) or pat.is_floating(kind) or pat.is_decimal(kind):
        return "N"
    if pat.is_binary(kind) or pat.is_large_binary(kind) or pat.is_fixed_size_binary(kind):
        return "B"
    if pat.is_list(kind) or pat.is_large_list(kind) or pat.is_fixed_size_list(kind):
        return "L"
    if pat.is_struct(kind) or pat.is_map(kind):
        return "M"
    if pat.is_null(kind):
        return "NULL"
    return "S"  # strings, dates, times and timestamps (as the Worker renders them)


def _nulls(footers: Iterable[tuple[Path, Any]], name: str, nullable: bool) -> int:
    """Nulls in a column by its row groups' statistics; a nullable column without statistics
    counts as holding some."""
    nulls = 0
    for _, meta in footers:
        for group in range(meta.num_row_groups):
            row_group = meta.row_group(group)
            for index in range(row_group.num_columns):
                chunk = row_group.column(index)
                if chunk.path_in_schema.split(".")[0] != name:
                    continue
                stats = chunk.statistics
                if stats is None or not stats.has_null_count:
                    return 1 if nullable else 0
                nulls += stats.null_count
    return nulls


def _kind(column: _Column, fmt: str) -> str:
    kinds = column.kinds
    if not kinds:
        return "NULL" if fmt in ("jsonl", "dynamodb-json", "parquet") and column.seen else "S"
    if len(kinds) == 1:
        return next(iter(kinds))
    if fmt == "dynamodb-json" and kinds <= {"N", "S"}:
        return "S"
    if kinds <= {"N", "S", "BOOL"}:
        return "S"  # a JSON field of mixed scalars: as text
    raise InitError(
        f"field {column.name!r} holds values of kinds {', '.join(sorted(kinds))} in the sample: "
        "no one attribute type takes them all; write its attribute by hand"
    )


def _check_templates(templates: Mapping[str, str], names: Sequence[str]) -> None:
    from logic.errors import InputValidationError
    from logic.spec.parse import parse_template

    for key_name, text in templates.items():
        try:
            template = parse_template(text, key_name, allow_empty=False)
        except InputValidationError as error:
            raise InitError(f"the template for key attribute {error}") from error
        for name in template.fields:
            if name not in names and name.split(".")[0] not in names:
                hint = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
                suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
                shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
                raise InitError(
                    f"the template for key attribute {key_name} names field {name!r}, which the file "
                    f"does not have{suggestion}; fields: {shown}"
                )


def _provisional(spec: Mapping[str, Any]) -> Any:
    """The format's options validated into a JobSpec whose target is a placeholder (the parsers
    read only the format's part)."""
    from logic.spec.parse import parse_spec

    raw = {**spec, "source": _SOURCE, "dynamodb": {"key": {"k": "k"}}}
    return parse_spec(raw, table_key={"k": "S"}, execution_name="init")


def _validated(spec: Mapping[str, Any], key: Mapping[str, str]) -> Any:
    from logic.errors import InputValidationError
    from logic.spec.parse import parse_spec

    try:
        return parse_spec({**spec, "source": _SOURCE}, table_key=key, execution_name="init")
    except InputValidationError as error:  # a bug here, or a name the models refuse
        raise InitError(f"the spec made from the file is not valid: {error}") from error


def _check_sample(spec: Any, rows: Sequence[Any], say: Callable[[str], None]) -> None:
    """Map the sampled records with the spec, as the Worker would: say how many load; none: fail."""
    from collections import Counter

    from logic.mapping import make_mapper
    from logic.values import Item, Reject

    mapped = make_mapper(spec)
    codes: Counter[str] = Counter()
    first: Reject | None = None
    items = 0
    for row in rows:
        result = row if isinstance(row, Reject) else mapped(row)
        if isinstance(result, Item):
            items += 1
        else:
            assert isinstance(result, Reject)
            codes[result.code] += 1
            first = first or result
    rejected = ", ".join(f"{code} {count}" for code, count in codes.most_common())
    refused = (
        f", {sum(codes.values()):,} would be rejected ({rejected}; first: {first.reason})" if first else ""
    )
    say(f"mapload init: the sample's {len(rows):,} records: {items:,} map to items{refused}")
    if rows and not items and first is not None:
        raise InitError(f"no sampled record maps to an item: {first.reason}")


def add_command(sub: Any) -> None:
    """`mapload init`: its arguments and help."""
    from mapload.arguments import add_env_argument

    init = sub.add_parser(
        "init",
        help="print a spec for FILE: every field typed from a sample, the key from --key/--sort-key",
        description=(
            "Read the start of FILE as the Worker reads it (CSV with a header line, or columns c1...cN "
            "without one, the delimiter sniffed; JSON Lines; DynamoDB JSON; Parquet's schema) and print "
            "the execution input without source and jobId: one JSON object on standard output, keyed by "
            "the environment's table key (cdk.json). A column is N only when every sampled value is a "
            "canonical number (no leading zero: codes stay strings); a field empty or missing in the "
            "sample is optional. What was guessed goes to standard error."
        ),
    )
    init.add_argument("file", help="the file (CSV, JSON Lines, DynamoDB JSON; plain or gzip), or Parquet")
    init.add_argument(
        "--key", required=True, metavar="TEMPLATE", help="the partition key's template, e.g. 'PRODUCT#{sku}'"
    )
    init.add_argument(
        "--sort-key", metavar="TEMPLATE", help="the sort key's template (a table with a sort key)"
    )
    header = init.add_mutually_exclusive_group()
    header.add_argument(
        "--header",
        dest="header",
        action="store_true",
        default=None,
        help="CSV: the first line names the columns",
    )
    header.add_argument(
        "--no-header", dest="header", action="store_false", help="CSV: no header line (columns c1...cN)"
    )
    add_env_argument(init, "the environment whose table key the spec fills (default: dev)", "dev")
    init.set_defaults(func=run)


def run(args: Any) -> int:
    import sys

    guessed: list[str] = []  # said once the spec is made: a refusal is one line alone
    try:
        key = table_key(args.env)
        templates = [args.key] + ([args.sort_key] if args.sort_key is not None else [])
        spec = infer(Path(args.file), templates, key, header=args.header, say=guessed.append)
    except InitError as error:
        print(f"mapload init: {error}", file=sys.stderr)
        return 2
    print(*guessed, sep="\n", file=sys.stderr)
    print(json.dumps(spec, indent=2, ensure_ascii=False))
    return 0
