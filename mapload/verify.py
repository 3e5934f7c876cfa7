"""`mapload verify FILE --spec SPEC`: is what the file maps to in the table?

FILE is read whole as the Worker reads it (CSV records by logic/csvrecords.py, lines, Parquet
rows; the spec's parser and mapping), in batches of BATCH_GET_KEYS distinct keys, each looked up
with BatchGetItem (strongly consistent; UnprocessedKeys asked again with a backoff), so memory
stays within a batch whatever the file's size. Each item is compared with the stored one as its
writeMode writes it: put, putIfAbsent and newerWins the whole item; update only the mapped
attributes, a `set` one by value, an `add` or `setIfAbsent` one by presence (a numeric add's value
depends on what was there); delete: the key must be gone. Extra items: the table's items whose key
begins with the key template's constant prefix, counted with a Scan (Select COUNT), less the file's
distinct keys found, while those fit in MAX_KEPT_KEYS.

Within a batch a later record wins over an earlier one with the same key (as BatchWriteItem's
put does); a key repeated farther apart shows its earlier record as differing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

# BatchGetItem takes at most 100 keys a request (and answers at most 16 MB: the rest comes back
# in UnprocessedKeys).
BATCH_GET_KEYS = 100
# BatchGetItem requests in flight at once (--in-flight).
IN_FLIGHT = 8
# How often a batch's UnprocessedKeys are asked again before the command gives up.
UNPROCESSED_ATTEMPTS = 12
# The distinct keys held (as 16-byte digests) to count extra items; a larger file is not counted.
MAX_KEPT_KEYS = 2_000_000
# The largest table whose extra items a local verify counts unless told (--extra, --no-extra): a
# local server's Scan is slow (moto: ~30 s a 1 MB page of 12,600 small items on a busy machine).
LOCAL_SCAN_ITEMS = 50_000
# Missing and differing items shown (each count is complete).
SHOWN = 5
CHUNK_BYTES = 1024 * 1024
_SOURCE = "s3://mapload-verify/file"  # parse_spec needs a source; verify reads FILE


class VerifyError(Exception):
    """A usage, spec or connection error: one line, exit 2."""


@dataclass
class Outcome:
    records: int = 0
    rejected: int = 0  # records the spec rejects: not expected in the table
    items: int = 0  # distinct keys looked up (per batch)
    equal: int = 0
    missing: int = 0
    differing: int = 0
    missing_shown: list[str] = field(default_factory=list)
    differing_shown: list[str] = field(default_factory=list)
    extra: int | None = None
    extra_note: str = ""

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.differing == 0


# -- reading the file as the Worker does ----------------------------------------------------------


def _opener(path: Path) -> tuple[Callable[[], IO[bytes]], bool]:
    """How to open the file's data (gzip decompressed), and whether it is gzip."""
    import gzip

    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic[:2] == b"\x1f\x8b":
        return (lambda: cast(IO[bytes], gzip.open(path, "rb"))), True
    if magic == b"PK\x03\x04":
        raise VerifyError(f"{path}: a zip archive; verify its member file, unzipped")
    return (lambda: path.open("rb")), False


def _chunks(open_file: Callable[[], IO[bytes]], first: int) -> Iterator[bytes]:
    with open_file() as handle:
        skip = first
        while skip > 0:  # a gzip stream seeks by reading; this is plain for both
            dropped = handle.read(min(skip, CHUNK_BYTES))
            if not dropped:
                return
            skip -= len(dropped)
        while chunk := handle.read(CHUNK_BYTES):
            yield chunk


def records(path: Path, spec: Any) -> Iterator[Any]:
    """The file's records as the Worker parses them: Fields, or a Reject.
    Kept whole: one generator over the file's records, per format, as the Worker reads them."""
    from logic.csvrecords import ShardRecords
    from logic.errors import InputValidationError
    from logic.parsing import is_skipped, make_parser
    from logic.planning import probe_header
    from logic.records import iter_shard_lines
    from logic.values import Line, Reject

    if spec.format == "parquet":
        from mapload.measure import MeasureError, _parquet_rows, checked_footers

        try:
            files = [file for file, _ in checked_footers(path, spec)]
        except MeasureError as error:
            raise VerifyError(str(error)) from error
        yield from _parquet_rows(files, spec)
        return
    if not path.is_file():
        raise VerifyError(f"{path}: no such file")
    open_file, gzipped = _opener(path)
    size = sum(len(chunk) for chunk in _chunks(open_file, 0)) if gzipped else path.stat().st_size

    def read_range(first: int, last: int) -> bytes:
        """Bytes first..last (inclusive), as a ranged GET: only as many as asked are read."""
        wanted, out = last - first + 1, bytearray()
        for chunk in _chunks(open_file, first):
            out += chunk[: wanted - len(out)]
            if len(out) >= wanted:
                break
        return bytes(out)

    header, data_start = None, 0
    if spec.csv is not None and spec.csv.header:
        try:
            header, data_start, _ = probe_header(read_range, size, spec)
        except InputValidationError as error:
            raise VerifyError(f"{path}: {error}") from error
        if header is None:
            header = []
    lines: Iterable[Any]
    if spec.csv is not None:
        if header is not None and spec.csv.header:
            from logic.spec.checks import check_fields

            try:
                check_fields(spec, header)
            except InputValidationError as error:
                raise VerifyError(f"the spec does not fit {path}: {error}") from error
        lines = ShardRecords(
            lambda first: _chunks(open_file, first),
            start=data_start,
            end=size,
            object_size=size,
            data_start=data_start,
            max_record=spec.csv.max_record_bytes,
            comment=spec.csv.comment.encode() if spec.csv.comment is not None else None,
            delimiter=spec.csv.delimiter.encode(),
        )
    else:
        lines = iter_shard_lines(_chunks(open_file, 0), read_from=0, start=0, end=size)
    parse = make_parser(spec, header)
    for line in lines:
        if not isinstance(line, Line):
            yield Reject(line.code, line.reason)
        elif not is_skipped(line.raw, spec):
            yield parse(line)


class KeptKeys:
    """The distinct keys found, as digests, up to `limit` (then `overflow`, and none are kept)."""

    def __init__(self, limit: int = MAX_KEPT_KEYS) -> None:
        self.digests: set[bytes] = set()
        self.limit, self.overflow = limit, False

    def add(self, key: Any) -> None:
        if self.overflow:
            return
        if len(self.digests) >= self.limit:
            self.overflow = True
            self.digests.clear()
            return
        self.digests.add(hashlib.blake2b(repr(key).encode(), digest_size=16).digest())

    def __len__(self) -> int:
        return len(self.digests)


# -- comparing -------------------------------------------------------------------------------------


def _canonical(typed: Mapping[str, Any]) -> Any:
    from logic.writemodes import _canonical as canonical_item

    return canonical_item({"v": typed})


def _shown_key(key: Mapping[str, Mapping[str, Any]]) -> str:
    return ", ".join(f"{name}={next(iter(value.values()))!s}" for name, value in key.items())


def _shown_value(typed: Mapping[str, Any] | None) -> str:
    if typed is None:
        return "(absent)"
    text = json.dumps(typed, default=str, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def differences(target: Any, item: Mapping[str, Any], stored: Mapping[str, Any]) -> list[str]:
    """The attributes where `stored` is not what writing `item` with the target's writeMode leaves."""
    from logic.spec.dynamodb import SET, TypedField, UpdateTarget

    if isinstance(target, UpdateTarget):
        found = []
        for name, value in item.items():
            if name in target.key:
                continue
            mapped = target.mapped.get(name)
            action = mapped.update_action if isinstance(mapped, TypedField) else SET
            if name not in stored:
                found.append(f"{name}: {_shown_value(value)} in the file, absent in the table")
            elif action == SET and _canonical(stored[name]) != _canonical(value):
                found.append(
                    f"{name}: {_shown_value(value)} in the file, {_shown_value(stored[name])} in the table"
                )
        return found
    names = list(item) + [name for name in stored if name not in item]
    return [
        f"{name}: {_shown_value(item.get(name))} in the file, {_shown_value(stored.get(name))} in the table"
        for name in names
        if name not in item or name not in stored or _canonical(item[name]) != _canonical(stored[name])
    ]


def batch_get(
    client: Any, table: str, keys: list[dict[str, Any]], *, sleep: Callable[[float], None] = time.sleep
) -> list[dict[str, Any]]:
    """The stored items of up to BATCH_GET_KEYS distinct keys; UnprocessedKeys asked again with an
    exponential backoff (DynamoDB answers some of a batch under throttling or past 16 MB)."""
    if len(keys) > BATCH_GET_KEYS:
        raise ValueError(f"BatchGetItem takes at most {BATCH_GET_KEYS} keys, got {len(keys)}")
    found: list[dict[str, Any]] = []
    request: dict[str, Any] = {table: {"Keys": keys, "ConsistentRead": True}}
    for attempt in range(UNPROCESSED_ATTEMPTS):
        answer = client.batch_get_item(RequestItems=request)
        found.extend(answer.get("Responses", {}).get(table, []))
        request = answer.get("UnprocessedKeys") or {}
        if not request.get(table, {}).get("Keys"):
            return found
        sleep(min(5.0, 0.05 * 2**attempt))
    left = len(request[table]["Keys"])
    raise VerifyError(
        f"table {table}: {left} keys still unprocessed after {UNPROCESSED_ATTEMPTS} BatchGetItem calls"
    )


def compare(
    client: Any,
    table: str,
    spec: Any,
    fields: Iterable[Any],
    *,
    kept: KeptKeys | None,
    in_flight: int = IN_FLIGHT,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Map every record and compare its item with the table, a batch at a time: up to `in_flight`
    BatchGetItem requests at once (a request waits on DynamoDB, not on this process), the batches
    compared in the file's order; memory holds `in_flight` batches."""
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    from logic.mapping import make_mapper
    from logic.values import Item, Reject

    target = spec.dynamodb
    key_names = list(target.key)
    mapped = make_mapper(spec)
    outcome = Outcome()
    pending: deque[tuple[dict[Any, dict[str, Any]], Future[list[dict[str, Any]]]]] = deque()

    def settle() -> None:
        batch, answer = pending.popleft()
        stored = {_key_of(found, key_names): found for found in answer.result()}
        for key, item in batch.items():
            _judge(outcome, target, key_names, item, stored.get(key), kept, key)

    with ThreadPoolExecutor(max_workers=max(1, in_flight), thread_name_prefix="verify") as pool:

        def send(batch: dict[Any, dict[str, Any]]) -> None:
            keys = [{name: item[name] for name in key_names} for item in batch.values()]
            pending.append((batch, pool.submit(batch_get, client, table, keys, sleep=sleep)))
            if len(pending) >= max(1, in_flight):
                settle()

        batch: dict[Any, dict[str, Any]] = {}
        for record in fields:
            outcome.records += 1
            item = record if isinstance(record, Reject) else mapped(record)
            if not isinstance(item, Item):
                outcome.rejected += 1
                continue
            key = _key_of(item.attributes, key_names)
            batch.pop(key, None)  # the later record wins
            batch[key] = item.attributes
            if len(batch) >= BATCH_GET_KEYS:
                send(batch)
                batch = {}
        if batch:
            send(batch)
        while pending:
            settle()
    return outcome


def _judge(
    outcome: Outcome,
    target: Any,
    key_names: list[str],
    item: dict[str, Any],
    got: dict[str, Any] | None,
    kept: KeptKeys | None,
    key: Any,
) -> None:
    """Count one item: equal, missing or differing (the first SHOWN of each kept to show)."""
    outcome.items += 1
    from logic.spec.dynamodb import DeleteTarget

    shown = _shown_key({name: item[name] for name in key_names})
    if isinstance(target, DeleteTarget):
        if got is None:
            outcome.equal += 1
        else:
            outcome.differing += 1
            if len(outcome.differing_shown) < SHOWN:
                outcome.differing_shown.append(f"{shown}: still in the table (writeMode delete)")
        return
    if got is None:
        outcome.missing += 1
        if len(outcome.missing_shown) < SHOWN:
            outcome.missing_shown.append(shown)
        return
    if kept is not None:
        kept.add(key)
    found = differences(target, item, got)
    if found:
        outcome.differing += 1
        if len(outcome.differing_shown) < SHOWN:
            outcome.differing_shown.append(f"{shown}: " + "; ".join(found[:3]))
    else:
        outcome.equal += 1


def _key_of(item: Mapping[str, Any], names: list[str]) -> Any:
    return tuple(_canonical(item[name]) for name in names)


def count_extra(client: Any, table: str, spec: Any, found: int) -> tuple[int | None, str]:
    """Items in the table beyond the file's: those whose partition key starts with the template's
    constant prefix (a Scan, Select COUNT), less the distinct keys found."""
    first = spec.dynamodb.key_attributes[0]
    prefix = first.template.literals[0] if first.type == "S" else ""
    arguments: dict[str, Any] = {"TableName": table, "Select": "COUNT"}
    where = "in the table"
    if prefix:
        arguments |= {
            "FilterExpression": "begins_with(#k, :p)",
            "ExpressionAttributeNames": {"#k": first.name},
            "ExpressionAttributeValues": {":p": {"S": prefix}},
        }
        where = f"whose {first.name} begins with {prefix!r}"
    total = sum(page["Count"] for page in client.get_paginator("scan").paginate(**arguments))
    return total - found, where


# -- the command ------------------------------------------------------------------------------------


def _client(env: str | None, table: str | None, region: str | None) -> tuple[Any, str]:
    """The DynamoDB client and the table: a deployed environment's (its Data stack's TableName), or
    the local server's (AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL, its one mapload-*-StoreTable*)."""
    import boto3

    from mapload import region as regions

    if env is not None:
        from mapload.environment import Clients, OpsError, describe_environment

        try:
            clients = Clients(region)
            name = table or describe_environment(clients, env).outputs.get("TableName")
        except OpsError as error:
            raise VerifyError(str(error)) from error
        if not name:
            raise VerifyError(f"the stacks of {env!r} have no output TableName: give --table")
        return clients.dynamodb, name
    endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        raise VerifyError(
            "no table to compare with: set AWS_ENDPOINT_URL_DYNAMODB to the local server "
            "(mapload serve prints it), or give --env for a deployed environment's table"
        )
    from botocore.config import Config

    session = boto3.session.Session(region_name=regions.resolve(region))
    credentials = (
        {} if session.get_credentials() else {"aws_access_key_id": "x", "aws_secret_access_key": "x"}
    )
    # A local server that is not there is said at once, not after the SDK's default retries.
    config = Config(connect_timeout=5, read_timeout=600, retries={"mode": "standard", "max_attempts": 2})
    client = session.client("dynamodb", config=config, **credentials)
    if table:
        return client, table
    names = [
        name
        for page in client.get_paginator("list_tables").paginate()
        for name in page["TableNames"]
        if name.startswith("mapload-") and "-StoreTable" in name
    ]
    if len(names) != 1:
        found = ", ".join(names) if names else "none"
        raise VerifyError(f"{endpoint}: give --table (the run's target tables found: {found})")
    return client, names[0]


def _table_key(client: Any, table: str) -> tuple[dict[str, str], int]:
    """The table's key (name -> S|N|B, partition key first) and its ItemCount (DynamoDB updates it
    about every six hours; a local server's is exact)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        described = client.describe_table(TableName=table)["Table"]
    except ClientError as error:
        found = error.response.get("Error", {})
        raise VerifyError(f"table {table}: {found.get('Code')}: {found.get('Message')}") from error
    except BotoCoreError as error:
        raise VerifyError(f"cannot reach DynamoDB for table {table}: {error}") from error
    types = {a["AttributeName"]: a["AttributeType"] for a in described["AttributeDefinitions"]}
    ordered = sorted(described["KeySchema"], key=lambda k: k["KeyType"] != "HASH")
    return {k["AttributeName"]: types[k["AttributeName"]] for k in ordered}, int(
        described.get("ItemCount", 0)
    )


def _named_table(path: str) -> str | None:
    """The table the spec at `path` names (`dynamodb.table`); None when it names none or cannot be
    read (`_spec` then says why)."""
    from logic.tables import named_table

    try:
        return named_table(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _spec(path: str, key: Mapping[str, str]) -> Any:
    from logic.errors import InputValidationError
    from logic.spec.parse import parse_spec

    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise VerifyError(f"cannot read --spec {path}: {error}") from error
    if not isinstance(raw, dict):
        raise VerifyError(f"--spec {path} must hold a JSON object (the execution input)")
    raw.pop("source", None)
    try:
        spec = parse_spec({**raw, "source": _SOURCE}, table_key=key, execution_name="verify")
    except InputValidationError as error:
        raise VerifyError(f"the spec is not valid for the table: {error}") from error
    if spec.dynamodb is None:
        raise VerifyError("the spec has no dynamodb target: verify compares DynamoDB items")
    if spec.dry_run:
        raise VerifyError("the spec is a dry run (dryRun true): it writes nothing to compare")
    return spec


def verify(
    file: Path,
    spec_path: str,
    *,
    env: str | None,
    table: str | None,
    region: str | None,
    extra: bool | None,
    in_flight: int = IN_FLIGHT,
) -> tuple[Outcome, str]:
    from botocore.exceptions import BotoCoreError, ClientError

    from logic.spec.dynamodb import DeleteTarget

    try:
        # No --table: the table the spec names (`dynamodb.table`), else the environment's.
        client, name = _client(env, table or _named_table(spec_path), region)
        key, item_count = _table_key(client, name)
        spec = _spec(spec_path, key)
        # By default only a local server's table, and a small one: a Scan reads every item.
        small = item_count <= LOCAL_SCAN_ITEMS
        kept = KeptKeys() if (extra if extra is not None else env is None and small) else None
        outcome = compare(client, name, spec, records(file, spec), kept=kept, in_flight=in_flight)
        if kept is None:
            about = "" if small else f"the table holds about {item_count:,} items; "
            outcome.extra_note = f"not counted ({about}--extra scans the table: it reads every item)"
        elif kept.overflow:
            outcome.extra_note = f"not counted: the file has more than {MAX_KEPT_KEYS:,} keys"
        elif isinstance(spec.dynamodb, DeleteTarget):
            outcome.extra_note = "not counted (writeMode delete)"
        else:
            outcome.extra, where = count_extra(client, name, spec, len(kept))
            outcome.extra_note = where
    except (ClientError, BotoCoreError) as error:
        raise VerifyError(f"AWS error: {' '.join(str(error).split())}") from error
    return outcome, name


def lines(outcome: Outcome, file: str, table: str) -> list[str]:
    out = [
        f"mapload verify {file} against {table}: {'OK' if outcome.ok else 'DIFFERENT'}",
        f"  records   {outcome.records:,} read, {outcome.rejected:,} rejected by the spec (not expected)",
        f"  items     {outcome.items:,} compared: {outcome.equal:,} as the file maps them",
        f"  missing   {outcome.missing:,}",
        *(f"            {key}" for key in outcome.missing_shown),
        f"  differing {outcome.differing:,}",
        *(f"            {shown}" for shown in outcome.differing_shown),
    ]
    if outcome.extra is None:
        out.append(f"  extra     {outcome.extra_note}")
    else:
        out.append(f"  extra     {outcome.extra:,} items {outcome.extra_note} that the file does not map to")
    return out


def add_command(sub: Any) -> None:
    from mapload.arguments import add_region_argument, environment

    cmd = sub.add_parser(
        "verify",
        help="compare what FILE maps to with the table: items missing, differing, extra",
        description=(
            "Map FILE with SPEC as the Worker does and look every item up in the table (BatchGetItem, "
            "100 keys a request): items missing, items differing (the first few shown), and extra items "
            "counted with a Scan where the key template's constant prefix bounds them. The table: the "
            "local server's (AWS_ENDPOINT_URL_DYNAMODB, as mapload serve prints it) or a deployed "
            "environment's (--env). writeMode update compares the mapped attributes only (an add or "
            "setIfAbsent one: present); delete checks the keys are gone. Exit 0: nothing missing or "
            "differing; 1: some; 2: a usage, spec or connection error."
        ),
    )
    cmd.add_argument("file", help="the file that was loaded (plain or gzip), or a Parquet file or folder")
    cmd.add_argument(
        "--spec", required=True, help="its execution input as JSON (source, if there, is ignored)"
    )
    cmd.add_argument(
        "--env", type=environment, help="a deployed environment's table (default: the local server's)"
    )
    cmd.add_argument(
        "--table",
        help="the table's name (default: the spec's dynamodb.table, else the environment's, or the "
        "local server's one)",
    )
    cmd.add_argument(
        "--extra",
        action=__import__("argparse").BooleanOptionalAction,
        default=None,
        help="count the table's items the file does not map to, with a Scan (default: a local table of at "
        f"most {LOCAL_SCAN_ITEMS:,} items yes, --env no)",
    )
    cmd.add_argument(
        "--in-flight",
        type=int,
        default=IN_FLIGHT,
        help=f"BatchGetItem requests at once, {BATCH_GET_KEYS} keys each (default: {IN_FLIGHT})",
    )
    add_region_argument(cmd)
    cmd.set_defaults(func=run)


def run(args: Any) -> int:
    try:
        outcome, table = verify(
            Path(args.file),
            args.spec,
            env=args.env,
            table=args.table,
            region=args.region,
            extra=args.extra,
            in_flight=args.in_flight,
        )
    except VerifyError as error:
        print(f"mapload verify: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines(outcome, args.file, table)))
    return 0 if outcome.ok else 1
