"""S3 multipart uploads: parts in flight from files or a stream, coordinated through the ledger
so that many processes on many hosts build one object (docs/CONTRACTS.md "Ledger items")."""

from __future__ import annotations

import base64
import contextlib
import random
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

import xxhash
from botocore.exceptions import ClientError
from s3transfer.utils import ReadFileChunk  # type: ignore[import-untyped]

from logic.errors import PartMismatchError, UploadConflictError, UploadGoneError
from logic.parts import Part, PartPlan, describe_missing
from logic.retry import backoff_delays

DAY = 86_400
HASH_CHUNK = 1024 * 1024
# How far PartHasher may hash ahead of the parts sent: bytes the page cache holds a little longer.
HASH_AHEAD_BYTES = 256 * 1024 * 1024
# The checksum each part carries to S3 (x-amz-checksum-crc32), which S3 checks on arrival and
# composes into the object's: CRC32 is what the AWS SDKs send by default, and it costs a third of
# SHA-256's CPU on both sides.
WIRE_CHECKSUM = "CRC32"
# The ledger identifies a part by its XXH3-128 (UploadLedger): a 128-bit hash against accidental
# differences (another file, a changed file; the ledger's writers are trusted), at ~30 GB/s a
# core where SHA-256 runs at ~2 (the client hashed every byte twice as long as it took to send it
# to a local server, and over https boto3 hashes nothing but the CRC32).
PART_HASH = "XXH3-128"
# Partition keys an upload's part records are spread over (by part number), beside the upload
# item's own: DynamoDB serves a partition key at most 1,000 write units a second, and one upload's
# parts arrive at up to S3's 3,500 PUTs a second on its key (2 units a record, transactional):
# tests/runtime/test_ledger_keys.py computes the bound from these constants.
PART_KEYS = 16
# The upload item's `checksum`: what the parts carry to S3, how the ledger names them and how many
# keys their records are spread over. An upload with another value was created by another
# mapload version and is refused, not joined, except SINGLE_KEY_FORMAT's (the mapload before
# PART_KEYS, its records under the upload item's key), which is read and joined as it was made.
LEDGER_FORMAT = f"{WIRE_CHECKSUM}/{PART_HASH}/{PART_KEYS}-part-keys"
SINGLE_KEY_FORMAT = f"{WIRE_CHECKSUM}/{PART_HASH}"
PART_KEYS_OF = {LEDGER_FORMAT: PART_KEYS, SINGLE_KEY_FORMAT: 1}
# How long a process waits for the elected creator to record the UploadId before taking over.
CLAIM_TIMEOUT_SECONDS = 60.0
# Parts recorded in one TransactWriteItems and counted in one UpdateItem on the upload record: two
# requests a batch, not two a part; each part adds "NOT contains(doneParts, :nN)" (~35 bytes) to
# the count's 4 KB condition expression (a transaction takes up to 100 items).
COUNT_BATCH = 25
# A batch not yet full is recorded all the same once its first part has waited this long: what a
# killed process had sent but not recorded is sent again on resume, so that much stays small.
RECORD_SECONDS = 5.0
# A transaction of part records cancelled only for these reasons (another writer on one of its
# items, throttling) is sent again, at most RECORD_ATTEMPTS times: its conditions accept the same
# parts again, and botocore's retries do not cover a TransactionConflict.
RETRIED_REASONS = frozenset(
    {
        "None",
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
    }
)
RECORD_ATTEMPTS = 8
_RNG = random.Random()

Progress = Callable[[int], None]


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _conditionally(write: Callable[[], object]) -> bool:
    """Whether a conditional DynamoDB write happened: False when its condition failed."""
    try:
        write()
    except ClientError as error:
        if _code(error) == "ConditionalCheckFailedException":
            return False
        raise
    return True


@dataclass(frozen=True)
class ListedPart:
    """A part as S3's ListParts shows it."""

    etag: str
    size: int
    crc32: str  # base64, S3's ChecksumCRC32 ("" when S3 returned none)


_UNLISTED = ListedPart("", -1, "")


def same_bytes(listed: ListedPart, recorded: UploadedPart) -> bool:
    """S3 holds the recorded bytes for this part. By CRC32 and size, not ETag: under SSE-KMS (or
    SSE-C) a part's ETag is not the MD5 of its bytes and differs each time the same bytes are sent,
    so two hosts sending one part leave S3 holding an ETag only the later one recorded. S3 returns
    the part's CRC32 because the upload was created with ChecksumAlgorithm CRC32 (it also checked
    it on receipt); an older record without one is compared by ETag."""
    if listed.size != recorded.size:
        return False
    if listed.crc32 and recorded.crc32:
        return listed.crc32 == recorded.crc32
    return listed.etag == recorded.etag


@dataclass(frozen=True)
class UploadedPart:
    number: int
    etag: str
    size: int
    xxh128: str  # base64 of the part's XXH3-128: its identity in the ledger
    crc32: str  # base64 of the part's CRC32, as S3's ChecksumCRC32: its check in transit


def file_part_checksums(part: Part) -> tuple[str, str]:
    """The part's XXH3-128 and CRC32 (base64), from one read of its bytes."""
    digest = xxhash.xxh3_128()
    crc = 0
    with open(part.path, "rb") as f:
        f.seek(part.offset)
        left = part.size
        while left:
            chunk = f.read(min(HASH_CHUNK, left))
            if not chunk:
                raise PartMismatchError(f"{part.path} is shorter than planned (part {part.number})")
            digest.update(chunk)
            crc = zlib.crc32(chunk, crc)
            left -= len(chunk)
    return base64.b64encode(digest.digest()).decode(), _crc32_base64(crc)


class PartHasher:
    """Each part's checksums (file_part_checksums), computed by one thread in the order given, at
    most `ahead` bytes beyond the parts taken (and the part it is hashing: a close waits for that
    one, milliseconds for an 8 MiB part): started before the clients and the election, it
    hashes the first parts on a core that start-up leaves idle, and the part threads only send.

    One part is hashed at a time (XXH3-128 and CRC32 together run at ~5 GB/s a core, ahead of any
    one host's uploads): threads hashing their first parts at once held back the first byte sent until
    all had finished. A part taken before the thread reached it (a resumed run checks its recorded
    parts first, and a taker may overtake the thread) is hashed by the taker, still one at a time.
    Only digests are kept: memory does not grow with `ahead`; the page cache holds the bytes
    hashed ahead until they are sent."""

    def __init__(self, parts: Sequence[Part], ahead: int) -> None:
        self._parts = list(parts)
        self._ahead = ahead
        self._ready: dict[int, tuple[str, str] | BaseException] = {}
        self._claimed: set[int] = set()
        self._waiting = 0  # bytes hashed and not taken yet
        self._closed = False
        self._changed = threading.Condition()
        self._hashing = threading.Lock()  # one part at a time, by the thread or a taker
        self._thread = threading.Thread(target=self._run, name="part-hasher", daemon=True)
        self._thread.start()

    def take(self, part: Part) -> tuple[str, str]:
        """The part's XXH3-128 and CRC32 (base64); raises what hashing it raised."""
        with self._changed:
            mine = part.number not in self._claimed
            if mine:
                self._claimed.add(part.number)
            else:
                while part.number not in self._ready:
                    self._changed.wait()
                self._waiting -= part.size
                self._changed.notify_all()
        if mine:
            with self._hashing:
                outcome = _checksums(part)
        else:
            outcome = self._ready.pop(part.number)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join()

    def __enter__(self) -> PartHasher:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _run(self) -> None:
        for part in self._parts:
            with self._changed:
                while self._waiting >= self._ahead and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                if part.number in self._claimed:
                    continue
                self._claimed.add(part.number)
            with self._hashing:
                outcome = _checksums(part)
            with self._changed:
                self._ready[part.number] = outcome
                self._waiting += part.size
                self._changed.notify_all()


def _checksums(part: Part) -> tuple[str, str] | BaseException:
    try:
        return file_part_checksums(part)
    except Exception as error:  # raised in the thread that takes the part
        return error


def bytes_crc32(data: bytes) -> str:
    return _crc32_base64(zlib.crc32(data))


def _crc32_base64(crc: int) -> str:
    return base64.b64encode(crc.to_bytes(4, "big")).decode()


class S3Multipart:
    """The S3 calls of one multipart upload of `s3://bucket/key`, parts checked by CRC32."""

    def __init__(self, client: Any, bucket: str, key: str) -> None:
        self._s3 = client
        self.bucket = bucket
        self.key = key

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def create(self, content_type: str | None = None) -> str:
        extra = {"ContentType": content_type} if content_type else {}
        response = self._s3.create_multipart_upload(
            Bucket=self.bucket, Key=self.key, ChecksumAlgorithm=WIRE_CHECKSUM, **extra
        )
        return str(response["UploadId"])

    def upload_part(self, upload_id: str, number: int, body: Any, crc32: str) -> str:
        try:
            response = self._s3.upload_part(
                Bucket=self.bucket,
                Key=self.key,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
                ChecksumCRC32=crc32,  # S3 refuses the part if the bytes it got differ
            )
        except ClientError as error:
            if _code(error) == "NoSuchUpload":
                raise UploadGoneError(self._gone(upload_id)) from error
            raise
        return str(response["ETag"])

    def list_parts(self, upload_id: str) -> dict[int, ListedPart]:
        """Part number -> (ETag, size, CRC32) of the parts S3 holds for this upload (the CRC32 as
        S3 returns it for an upload created with ChecksumAlgorithm CRC32; "" without)."""
        found: dict[int, ListedPart] = {}
        marker: dict[str, Any] = {}
        try:
            while True:  # pages by hand: a paginator loads a model of every service's (~10-40 ms)
                page = self._s3.list_parts(Bucket=self.bucket, Key=self.key, UploadId=upload_id, **marker)
                for part in page.get("Parts", []):
                    found[int(part["PartNumber"])] = ListedPart(
                        str(part["ETag"]), int(part["Size"]), str(part.get("ChecksumCRC32") or "")
                    )
                if not page.get("IsTruncated"):
                    break
                marker = {"PartNumberMarker": page["NextPartNumberMarker"]}
        except ClientError as error:
            if _code(error) == "NoSuchUpload":
                raise UploadGoneError(self._gone(upload_id)) from error
            raise
        return found

    def complete(self, upload_id: str, parts: Iterable[UploadedPart]) -> str:
        """Each part by the ETag S3 holds for it now (a part sent again has another ETag under
        SSE-KMS or SSE-C, the same bytes), checked by its recorded CRC32."""
        ordered = sorted(parts, key=lambda p: p.number)
        response = self._s3.complete_multipart_upload(
            Bucket=self.bucket,
            Key=self.key,
            UploadId=upload_id,
            MultipartUpload={
                "Parts": [{"PartNumber": p.number, "ETag": p.etag, "ChecksumCRC32": p.crc32} for p in ordered]
            },
        )
        return str(response.get("ETag", ""))

    def abort(self, upload_id: str) -> bool:
        try:
            self._s3.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=upload_id)
        except ClientError as error:
            if _code(error) == "NoSuchUpload":
                return False
            raise
        return True

    def in_progress(self) -> list[str]:
        """UploadIds of every unfinished multipart upload of exactly this key."""
        ids: list[str] = []
        for page in self._s3.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket, Prefix=self.key
        ):
            ids.extend(str(u["UploadId"]) for u in page.get("Uploads", []) if u["Key"] == self.key)
        return ids

    def completed_with(self, parts: int) -> bool:
        """The object exists and was built by a multipart upload of `parts` parts (its ETag says so)."""
        try:
            etag = str(self._s3.head_object(Bucket=self.bucket, Key=self.key)["ETag"])
        except ClientError as error:
            if _code(error) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return etag.strip('"').endswith(f"-{parts}")

    def put(self, data: bytes, content_type: str | None = None) -> str:
        extra = {"ContentType": content_type} if content_type else {}
        response = self._s3.put_object(
            Bucket=self.bucket, Key=self.key, Body=data, ChecksumCRC32=bytes_crc32(data), **extra
        )
        return str(response.get("ETag", ""))

    def _gone(self, upload_id: str) -> str:
        return (
            f"{self.uri}: multipart upload {upload_id} no longer exists in S3 (aborted, or expired by "
            "the bucket's lifecycle rule); run `mapload upload --abort` to clear its records, "
            "then upload again"
        )


class UploadLedger:
    """The coordination records of one target object in the ledger table (generic pk/sk, TTL).

    upload: pk=UPLOAD#s3://bucket/key, sk=UPLOAD — owner, total, name, checksum, uploadId,
            partsDone, doneParts (NS), createdAt, expiresAt
    part:   pk=UPART#<number % PART_KEYS:02d>#s3://bucket/key, sk=PART#<uploadId>#<number:05d> —
            number, etag, size, xxh128, crc32, uploadId (each upload's records are its own items: a
            process still recording for an upload completed or aborted meanwhile writes beside
            the next upload's records, never over them; such leftovers go by TTL or `--abort`).
            An upload whose checksum is SINGLE_KEY_FORMAT keeps them under the upload's pk
            (`part_keys` 1: set by `use_format` when joining one).
    """

    def __init__(self, client: Any, table: str, bucket: str, key: str, ttl_days: int = 7) -> None:
        self._db = client
        self._table = table
        self._pk = {"S": f"UPLOAD#s3://{bucket}/{key}"}
        self._ttl_days = ttl_days
        self.uri = f"s3://{bucket}/{key}"
        self.part_keys = PART_KEYS  # of the upload this process creates or joins (use_format)

    def use_format(self, checksum: str) -> None:
        """Read and write part records as the upload's `checksum` (LEDGER_FORMAT or
        SINGLE_KEY_FORMAT) lays them out."""
        self.part_keys = PART_KEYS_OF[checksum]

    def _part_pk(self, number: int, part_keys: int | None = None) -> dict[str, str]:
        keys = self.part_keys if part_keys is None else part_keys
        return self._pk if keys == 1 else {"S": f"UPART#{number % keys:02d}#{self.uri}"}

    def _part_pks(self, part_keys: int) -> list[dict[str, str]]:
        return [self._part_pk(n, part_keys) for n in range(part_keys)]

    def _expires(self) -> dict[str, str]:
        return {"N": str(int(time.time()) + self._ttl_days * DAY)}

    def get(self) -> dict[str, Any] | None:
        item = self._db.get_item(
            TableName=self._table, Key={"pk": self._pk, "sk": {"S": "UPLOAD"}}, ConsistentRead=True
        ).get("Item")
        return _upload_record(item) if item else None

    def claim(self, owner: str, total: int, name: str) -> tuple[bool, dict[str, Any] | None]:
        """The election: the one process whose conditional put succeeds creates the upload. One
        request either way: (True, None) when this process won; (False, the upload record) when
        one was there, as the failed condition returns it (ALL_OLD; a server that ignores that
        parameter is asked with a GetItem; None when the record has gone since)."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    "pk": self._pk,
                    "sk": {"S": "UPLOAD"},
                    "owner": {"S": owner},
                    "total": {"N": str(total)},
                    "name": {"S": name},
                    "partsDone": {"N": "0"},
                    "createdAt": {"N": str(int(time.time()))},
                    "expiresAt": self._expires(),
                },
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if _code(error) != "ConditionalCheckFailedException":
                raise
            item = error.response.get("Item")
            record = _upload_record(item) if item else self.get()
            if record is not None and record.get("owner") == owner and not record.get("uploadId"):
                return True, None  # our own put, applied; its answer was lost and the SDK retried it
            return False, record
        return True, None

    def take_over(self, old_owner: str, owner: str) -> bool:
        """Replace a creator that claimed the upload but never recorded its UploadId."""
        return _conditionally(
            lambda: self._db.update_item(
                TableName=self._table,
                Key={"pk": self._pk, "sk": {"S": "UPLOAD"}},
                UpdateExpression="SET #o = :me, createdAt = :now",
                ConditionExpression="#o = :old AND attribute_not_exists(uploadId)",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={
                    ":me": {"S": owner},
                    ":old": {"S": old_owner},
                    ":now": {"N": str(int(time.time()))},
                },
            )
        )

    def set_upload_id(self, owner: str, upload_id: str) -> bool:
        """Record the UploadId and, with it, LEDGER_FORMAT (an older mapload recorded none, or only
        "CRC32" with SHA-256 part records: its uploads are refused, not joined)."""
        return _conditionally(
            lambda: self._db.update_item(
                TableName=self._table,
                Key={"pk": self._pk, "sk": {"S": "UPLOAD"}},
                UpdateExpression="SET uploadId = :id, checksum = :checksum",
                ConditionExpression="#o = :me AND attribute_not_exists(uploadId)",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={
                    ":id": {"S": upload_id},
                    ":me": {"S": owner},
                    ":checksum": {"S": LEDGER_FORMAT},
                },
            )
        )

    def parts(self, upload_id: str | None = None) -> dict[int, UploadedPart]:
        """The part records of `upload_id`; of any upload when None (`--abort`: whether there are
        any; an older mapload's records, `PART#<number>`, included)."""
        found: dict[int, UploadedPart] = {}
        for item in self._part_items(upload_id):
            number = int(item["number"]["N"])
            found[number] = UploadedPart(
                number,
                item["etag"]["S"],
                int(item["size"]["N"]),
                # an older mapload's records name a sha256 (read only to be cleared)
                item.get("xxh128", item.get("sha256", {})).get("S", ""),
                item.get("crc32", {}).get("S", ""),  # none in an older mapload's records
            )
        return found

    def _part_items(self, upload_id: str | None) -> Iterator[dict[str, Any]]:
        """The part records of `upload_id` under its layout's keys; of any upload (None) under
        every layout's (the upload's own key holds SINGLE_KEY_FORMAT's and older ones)."""
        prefix = "PART#" if upload_id is None else f"PART#{upload_id}#"
        every = [self._pk, *self._part_pks(PART_KEYS)]
        pks = every if upload_id is None else self._part_pks(self.part_keys)
        for pk in pks:
            start: dict[str, Any] = {}
            while True:  # pages by hand, as S3Multipart.list_parts
                page = self._db.query(
                    TableName=self._table,
                    KeyConditionExpression="pk = :pk AND begins_with(sk, :part)",
                    ExpressionAttributeValues={":pk": pk, ":part": {"S": prefix}},
                    ConsistentRead=True,
                    **start,
                )
                yield from page.get("Items", [])
                if "LastEvaluatedKey" not in page:
                    break
                start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}

    def _put_part(self, upload_id: str, part: UploadedPart) -> dict[str, Any]:
        """The conditional put that records a part: the integrity check of recorded parts."""
        return {
            "TableName": self._table,
            "Item": {
                "pk": self._part_pk(part.number),
                "sk": {"S": f"PART#{upload_id}#{part.number:05d}"},
                "number": {"N": str(part.number)},
                "etag": {"S": part.etag},
                "size": {"N": str(part.size)},
                "xxh128": {"S": part.xxh128},
                "crc32": {"S": part.crc32},
                "uploadId": {"S": upload_id},
                "expiresAt": self._expires(),
            },
            "ConditionExpression": "attribute_not_exists(sk) OR (xxh128 = :hash AND #s = :size)",
            "ExpressionAttributeNames": {"#s": "size"},
            "ExpressionAttributeValues": {":hash": {"S": part.xxh128}, ":size": {"N": str(part.size)}},
        }

    def record_parts(self, upload_id: str, parts: Sequence[UploadedPart]) -> None:
        """Record up to COUNT_BATCH parts in one TransactWriteItems, each under record_part's
        condition, all or none (2 write units a part, as any transactional write: the batch saves
        requests, not units). The same parts again are fine (a retry whose answer was lost). A
        transaction cancelled by a conflict or throttling is sent again; one cancelled by a
        condition (a part recorded with other bytes) records each part alone: every part that can
        be is recorded, then the first that differs is raised, naming it."""
        if len(parts) > COUNT_BATCH:
            raise ValueError(f"at most {COUNT_BATCH} parts a record, got {len(parts)}")
        if not parts:
            return
        delays = _delays()
        for _ in range(RECORD_ATTEMPTS):
            try:
                self._db.transact_write_items(
                    TransactItems=[{"Put": self._put_part(upload_id, part)} for part in parts]
                )
                return
            except ClientError as error:
                if _code(error) != "TransactionCanceledException":
                    raise
                reasons = {str(r.get("Code", "None")) for r in error.response.get("CancellationReasons", [])}
                if not reasons or not reasons <= RETRIED_REASONS:
                    break
                time.sleep(next(delays))
        mismatch: PartMismatchError | None = None
        for part in parts:
            try:
                self.record_part(upload_id, part)
            except PartMismatchError as error:
                mismatch = mismatch or error
        if mismatch is not None:
            raise mismatch

    def record_part(self, upload_id: str, part: UploadedPart) -> None:
        """Record a part once; the same part again is fine, a different one for the same i is not."""
        delays = _delays()
        for attempt in range(RECORD_ATTEMPTS):
            try:
                self._db.put_item(**self._put_part(upload_id, part))
                return
            except ClientError as error:
                code = _code(error)
                if code == "TransactionConflictException" and attempt + 1 < RECORD_ATTEMPTS:
                    time.sleep(next(delays))  # another process's transaction holds this part's item
                    continue
                if code != "ConditionalCheckFailedException":
                    raise
                recorded = self.parts(upload_id).get(part.number)
                raise PartMismatchError(_mismatch(self.uri, part, recorded)) from error

    def count_part(self, upload_id: str, number: int, counter: str) -> int | None:
        """Atomically count part `number` as done; the new count, or None if another count had it.

        Each count also stores `lastCount = <counter>#<number>`. The SDK retries an UpdateItem whose
        answer was lost (timeout, 5xx, dropped connection) although DynamoDB may have applied it;
        the retry then fails the condition. The token tells this process that the count that
        applied was its own, so the process whose count reached the total still completes the
        object: without it nobody would, and the object would never appear.
        """
        return self.count_parts(upload_id, [number], counter)

    def count_parts(self, upload_id: str, numbers: Sequence[int], counter: str) -> int | None:
        """Count up to COUNT_BATCH parts in one UpdateItem, all or none (as count_part, whose token
        `<counter>#<n>,<n>...` names them). If one of them was counted already (a resumed run, or
        another process holding the same part), each is counted alone: the highest new count, or
        None when another count had every one of them."""
        if len(numbers) > COUNT_BATCH:
            raise ValueError(f"at most {COUNT_BATCH} parts a count, got {len(numbers)}")
        token = f"{counter}#{','.join(map(str, numbers))}"
        names = {f":n{i}": {"N": str(n)} for i, n in enumerate(numbers)}
        try:
            response = self._db.update_item(
                TableName=self._table,
                Key={"pk": self._pk, "sk": {"S": "UPLOAD"}},
                UpdateExpression="ADD partsDone :k, doneParts :set SET lastCount = :token",
                ConditionExpression=" AND ".join(
                    ["uploadId = :id", *(f"NOT contains(doneParts, {name})" for name in names)]
                ),
                ExpressionAttributeValues={
                    ":k": {"N": str(len(numbers))},
                    ":set": {"NS": [str(n) for n in numbers]},
                    ":id": {"S": upload_id},
                    ":token": {"S": token},
                    **names,
                },
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as error:
            if _code(error) != "ConditionalCheckFailedException":
                raise
            current = self.get()
            if current is None or current.get("uploadId") != upload_id:
                raise UploadConflictError(
                    f"{self.uri}: the upload's records were removed or replaced while this process ran "
                    "(completed or aborted by another process)"
                ) from error
            if current.get("lastCount") == token:
                return int(current["partsDone"])  # our own count, applied; its answer was lost
            if len(numbers) == 1:
                return None
            counts = [self.count_part(upload_id, n, counter) for n in numbers]
            return max((c for c in counts if c is not None), default=None)
        return int(response["Attributes"]["partsDone"]["N"])

    def clear(self, upload_id: str | None = None, parts: Iterable[int] | None = None) -> int:
        """Delete the part records (`upload_id`'s numbered `parts`, when the caller has just read
        them; else every upload's), then the upload record; returns how many items went."""
        if upload_id is not None and parts is not None:
            keys = [{"pk": self._part_pk(n), "sk": {"S": f"PART#{upload_id}#{n:05d}"}} for n in sorted(parts)]
        else:
            keys = [{"pk": item["pk"], "sk": item["sk"]} for item in self._part_items(None)]
        keys.append({"pk": self._pk, "sk": {"S": "UPLOAD"}})
        for start in range(0, len(keys), 25):
            requests = [{"DeleteRequest": {"Key": k}} for k in keys[start : start + 25]]
            pending: dict[str, Any] = {self._table: requests}
            delays = _delays()
            for _ in range(10):
                left = self._db.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not left:
                    break
                pending = left
                time.sleep(next(delays))
            else:
                raise RuntimeError(f"{self.uri}: could not delete the upload's coordination records")
        return len(keys)


_NONE = UploadedPart(0, "", 0, "", "")  # no record: its ETag matches no part S3 lists


def _format_of(record: dict[str, Any]) -> str:
    """What an older mapload's upload carried, from its upload item's `checksum`."""
    if not record.get("checksum"):
        return "SHA-256 to S3, SHA-256 in the ledger"
    if record["checksum"] == WIRE_CHECKSUM:
        return f"{WIRE_CHECKSUM} to S3, SHA-256 in the ledger"
    return str(record["checksum"])


def _upload_record(item: dict[str, Any]) -> dict[str, Any]:
    """The upload item as plain values: N as int, NS as a set of ints, S as str."""
    out: dict[str, Any] = {}
    for name, value in item.items():
        kind, raw = next(iter(value.items()))
        out[name] = int(raw) if kind == "N" else ({int(v) for v in raw} if kind == "NS" else raw)
    return out


def _delays() -> Iterator[float]:
    """The ledger's retry delays: 50 ms doubling to 2 s, full jitter."""
    return backoff_delays(0.05, 2.0, _RNG)


def _mismatch(uri: str, part: UploadedPart, recorded: UploadedPart | None) -> str:
    was = f"xxh128 {recorded.xxh128}, {recorded.size:,} bytes" if recorded is not None else "another part"
    return (
        f"{uri}: part {part.number} differs from the part {part.number} already recorded "
        f"(recorded: {was}; this one: xxh128 {part.xxh128}, {part.size:,} bytes). The records belong to "
        "another part set or the file changed; run `mapload upload --abort` to start over"
    )


@dataclass
class UploadResult:
    uri: str
    total: int
    uploaded: int  # parts this process sent
    skipped: int  # parts already recorded and present in S3
    bytes_sent: int
    completed: bool  # this process completed the object
    recorded: int  # parts recorded by all processes when this one finished
    missing: str  # part numbers not yet recorded ("" when none)
    upload_id: str
    etag: str = ""


class CoordinatedUpload:
    """One process's share of an object built by any number of processes (see UploadLedger)."""

    def __init__(
        self,
        s3: S3Multipart,
        ledger: UploadLedger,
        *,
        in_flight: int = 4,
        claim_timeout: float = CLAIM_TIMEOUT_SECONDS,
        poll_seconds: float = 0.2,
        content_type: str | None = None,
    ) -> None:
        self.s3 = s3
        self.ledger = ledger
        self.in_flight = max(1, in_flight)
        self.claim_timeout = claim_timeout
        self.poll_seconds = poll_seconds
        self.content_type = content_type
        self.owner = f"{uuid.uuid4().hex}"
        self.created = ""  # the UploadId this process created, if it did

    def upload_id(self, plan: PartPlan) -> str:
        """Join the upload in progress, or be elected to create it (exactly one process does)."""
        waited_since = time.monotonic()
        won, record = self.ledger.claim(self.owner, plan.total, plan.name)
        while True:
            if won:
                return self._create()
            if record is None:  # gone since (completed or aborted): stand again
                won, record = self.ledger.claim(self.owner, plan.total, plan.name)
                continue
            if int(record["total"]) != plan.total:
                raise UploadConflictError(
                    f"{self.s3.uri}: the upload in progress has {record['total']} parts "
                    f"(N={record['total']}), this part set has N={plan.total}; finish that upload (for "
                    "one file, N follows --part-size-mib: give the part size it was started with) or "
                    "run `mapload upload --abort` first"
                )
            if record.get("uploadId"):
                if record.get("checksum") not in PART_KEYS_OF:
                    raise UploadConflictError(
                        f"{self.s3.uri}: the upload in progress was created by an older mapload, whose "
                        f"parts carry {_format_of(record)} (this one: {WIRE_CHECKSUM} to S3, "
                        f"{PART_HASH} in the ledger); finish it with that version or run "
                        "`mapload upload --abort` first"
                    )
                self.ledger.use_format(str(record["checksum"]))
                return str(record["uploadId"])
            if time.monotonic() - waited_since > self.claim_timeout and self.ledger.take_over(
                str(record["owner"]), self.owner
            ):
                return self._create()
            time.sleep(self.poll_seconds)
            record = self.ledger.get()

    def _create(self) -> str:
        upload_id = self.s3.create(self.content_type)
        if not self.ledger.set_upload_id(self.owner, upload_id):  # taken over meanwhile: use theirs
            self.s3.abort(upload_id)
            record = self.ledger.get() or {}
            if not record.get("uploadId"):
                raise UploadConflictError(f"{self.s3.uri}: lost the upload's record while creating it")
            self.ledger.use_format(str(record.get("checksum")))  # the taker's: this version's
            return str(record["uploadId"])
        self.created = upload_id
        return upload_id

    def run(
        self, plan: PartPlan, progress: Progress | None = None, hasher: PartHasher | None = None
    ) -> UploadResult:
        """Send this process's parts (recorded ones first), complete the object if it counted the
        last part; `hasher`: the plan's parts, hashed from before the run (one started here if
        None, closed at the end either way)."""
        with hasher or PartHasher(plan.parts, HASH_AHEAD_BYTES) as hashes:
            return self._run(plan, progress, hashes)

    def _run(self, plan: PartPlan, progress: Progress | None, hashes: PartHasher) -> UploadResult:
        """run's body. Kept whole: the per-part closure shares the counters, the lock and what the
        ledger and S3 listed with the worker threads; split, each would be one more argument."""
        upload_id = self.upload_id(plan)
        # Created just now: nothing can be counted, and what other processes record from here on
        # is checked when this one records the same part (three round trips fewer before it starts).
        start = {} if upload_id == self.created else self.ledger.get() or {}
        # Every part already counted at the start: the process that counted the last one died
        # before completing (or is completing now; a second complete is harmless).
        stuck = start.get("uploadId") == upload_id and int(start.get("partsDone", 0)) == plan.total
        recorded = {} if upload_id == self.created else self.ledger.parts(upload_id)
        try:
            listed = {} if upload_id == self.created else self.s3.list_parts(upload_id)
        except UploadGoneError:
            if stuck and self.s3.completed_with(plan.total):
                # A completer died after CompleteMultipartUpload, before removing the records.
                self.ledger.clear()
                return UploadResult(self.s3.uri, plan.total, 0, 0, 0, False, plan.total, "", upload_id)
            raise
        lock = threading.Lock()
        stats = {"uploaded": 0, "skipped": 0, "bytes": 0}
        completer: list[str] = []
        # The records of this upload this process has read or written: when they hold every part,
        # the completer need not read them back.
        known: dict[int, UploadedPart] = dict(recorded)
        # In S3, not counted yet: with the part's record when it is not recorded yet either.
        queued: list[tuple[int, UploadedPart | None]] = []
        oldest = [0.0]  # when the first part of the queue was queued

        def settle(number: int | None, record: UploadedPart | None = None, *, due: bool = False) -> None:
            """Queue part `number` (and its `record`, when new); record and count a full batch or
            one that waited RECORD_SECONDS, or (None) what is queued (`due`: only if it waited). A
            batch that fails goes back to the queue's head: the error path tries it once more."""
            with lock:
                if number is not None:
                    if not queued:
                        oldest[0] = time.monotonic()
                    queued.append((number, record))
                waited = time.monotonic() - oldest[0] >= RECORD_SECONDS
                if not queued or ((number is not None or due) and len(queued) < COUNT_BATCH and not waited):
                    return
                batch = queued[:COUNT_BATCH]
                del queued[:COUNT_BATCH]
                oldest[0] = time.monotonic()
            try:
                records = [r for _, r in batch if r is not None]
                self.ledger.record_parts(upload_id, records)
                with lock:
                    known.update((r.number, r) for r in records)
                done = self.ledger.count_parts(upload_id, [n for n, _ in batch], self.owner)
            except BaseException:
                with lock:
                    queued[:0] = batch
                    oldest[0] = 0.0
                raise
            if done == plan.total:
                completer.append(upload_id)

        def one(part: Part) -> None:
            identity, crc = hashes.take(part)
            mine = UploadedPart(part.number, "", part.size, identity, crc)
            before = recorded.get(part.number)
            if before is not None and (before.xxh128 != identity or before.size != part.size):
                raise PartMismatchError(_mismatch(self.s3.uri, mine, before))
            if before is not None and same_bytes(listed.get(part.number, _UNLISTED), before):
                with lock:
                    stats["skipped"] += 1
                if progress:
                    progress(part.size)
                settle(part.number)  # a crash may have left it uncounted
            else:
                with ReadFileChunk.from_filename(
                    part.path, part.offset, part.size, callbacks=[_HighWater(progress)] if progress else None
                ) as body:
                    etag = self.s3.upload_part(upload_id, part.number, body, crc)
                with lock:
                    stats["uploaded"] += 1
                    stats["bytes"] += part.size
                settle(part.number, UploadedPart(part.number, etag, part.size, identity, crc))

        def due() -> None:
            """Between parts, so that a queued batch waits RECORD_SECONDS at most."""
            settle(None, due=True)

        try:
            # Parts already recorded first: a part set that differs from the records fails before
            # it has sent a single new part.
            _run_all(one, [p for p in plan.parts if p.number in recorded], self.in_flight, due)
            _run_all(one, [p for p in plan.parts if p.number not in recorded], self.in_flight, due)
        except BaseException:
            with contextlib.suppress(Exception):  # the parts sent so far are recorded all the same
                while queued:
                    settle(None)
            raise
        while queued:
            settle(None)
        record = None if completer else self.ledger.get()
        etag = ""
        completed = False
        if completer or (stuck and record is not None and record.get("uploadId") == upload_id):
            # This process counted the last part: it alone completes the object.
            etag = self.complete(upload_id, plan.total, known if len(known) == plan.total else None)
            completed = True
            record = None
        done_parts: set[int] = (
            set(record.get("doneParts", set())) if record else set(range(1, plan.total + 1))
        )
        return UploadResult(
            uri=self.s3.uri,
            total=plan.total,
            uploaded=stats["uploaded"],
            skipped=stats["skipped"],
            bytes_sent=stats["bytes"],
            completed=completed,
            recorded=len(done_parts),
            missing=describe_missing(plan.total, done_parts),
            upload_id=upload_id,
            etag=etag,
        )

    def complete(self, upload_id: str, total: int, known: dict[int, UploadedPart] | None = None) -> str:
        """Complete with every recorded part in order, after checking S3 holds exactly those. The
        records (unless `known`: every part's, as this process read or wrote them) and S3's list
        are read at once: both round trips are on the path to the object."""
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="list-parts") as pool:
            listing = pool.submit(self.s3.list_parts, upload_id)
            parts = known if known is not None else self.ledger.parts(upload_id)
            missing = [n for n in range(1, total + 1) if n not in parts]
            if missing:
                raise UploadConflictError(
                    f"{self.s3.uri}: cannot complete, parts {missing[:20]} are not recorded"
                )
            listed = listing.result()
        wrong = [n for n, p in parts.items() if not same_bytes(listed.get(n, _UNLISTED), p)]
        if wrong and known is not None:
            # Another process may have recorded one of these parts since: the records decide.
            parts = self.ledger.parts(upload_id)
            wrong = [
                n
                for n in range(1, total + 1)
                if not same_bytes(listed.get(n, _UNLISTED), parts.get(n, _NONE))
            ]
        if wrong:
            raise PartMismatchError(
                f"{self.s3.uri}: S3 holds other bytes than recorded for parts {wrong[:20]} "
                "(two processes uploaded different files for the same part); run `mapload upload --abort`"
            )
        # S3 completes a part only by the ETag it holds now (a part sent again since it was
        # recorded has another under SSE-KMS): the listed one, the bytes checked above by CRC32.
        current = (replace(parts[n], etag=listed[n].etag) for n in range(1, total + 1))
        try:
            etag = self.s3.complete(upload_id, current)
        except ClientError as error:
            if _code(error) == "NoSuchUpload" and self.ledger.get() is None:
                return ""  # another process completed it and removed the records meanwhile
            raise
        self.ledger.clear(upload_id, parts)
        return etag

    def abort(self) -> tuple[list[str], int]:
        """Abort the recorded upload and every other unfinished upload of the key; clear the records."""
        record = self.ledger.get()
        aborted: list[str] = []
        ids = set(self.s3.in_progress())
        if record and record.get("uploadId"):
            ids.add(str(record["uploadId"]))
        for upload_id in sorted(ids):
            if self.s3.abort(upload_id):
                aborted.append(upload_id)
        cleared = self.ledger.clear() if record is not None or self.ledger.parts() else 0
        return aborted, cleared


class _HighWater:
    """Reports each byte of a part once, although botocore may read a body twice (payload
    signing over http, retries): ReadFileChunk reports reads and seeks back as +/- amounts."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._position = 0
        self._reported = 0

    def __call__(self, bytes_transferred: int) -> None:
        self._position += bytes_transferred
        if self._position > self._reported:
            self._progress(self._position - self._reported)
            self._reported = self._position


def _run_all(
    fn: Callable[[Part], None], parts: Iterable[Part], in_flight: int, tick: Callable[[], None] | None = None
) -> None:
    """fn over every part, `in_flight` at a time; the first error stops new parts and is raised.
    `tick` runs at least once a second while parts are in flight (and after each one finishes)."""
    pending = iter(parts)
    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="part") as pool:
        running: set[Future[None]] = set()
        for part in _take(pending, in_flight):
            running.add(pool.submit(fn, part))
        while running:
            finished, running = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in finished:
                future.result()  # raises the first error; the pool finishes what is in flight
                for part in _take(pending, 1):
                    running.add(pool.submit(fn, part))
            if tick is not None:
                tick()


def _take(parts: Iterator[Part], n: int) -> list[Part]:
    taken: list[Part] = []
    for part in parts:
        taken.append(part)
        if len(taken) == n:
            break
    return taken


class StreamUpload:
    """One process writes a stream of unknown length to one object: parts of `part_size` bytes
    buffered and sent `in_flight` at a time (memory ~ part_size x (in_flight + 1)); an object
    smaller than one part is one PutObject. Aborts its upload on any error."""

    def __init__(
        self, s3: S3Multipart, *, part_size: int, in_flight: int = 4, content_type: str | None = None
    ):
        self.s3 = s3
        self.part_size = part_size
        self.in_flight = max(1, in_flight)
        self.content_type = content_type
        self.size = 0
        self.parts = 0

    def write_all(self, chunks: Iterable[bytes]) -> int:
        buffer = bytearray()
        upload_id: str | None = None
        number = 0
        running: dict[Future[str], tuple[int, int, str]] = {}
        done: list[UploadedPart] = []
        pool = ThreadPoolExecutor(max_workers=self.in_flight, thread_name_prefix="part")

        def collect(block: bool) -> None:
            while running and (block or len(running) >= self.in_flight):
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in finished:
                    n, size, crc = running.pop(future)
                    done.append(UploadedPart(n, future.result(), size, "", crc))
                if not block:
                    break

        def send(data: bytes) -> None:
            nonlocal upload_id, number
            if upload_id is None:
                upload_id = self.s3.create(self.content_type)
            number += 1
            collect(block=False)
            crc = bytes_crc32(data)
            running[pool.submit(self.s3.upload_part, upload_id, number, data, crc)] = (number, len(data), crc)

        try:
            for chunk in chunks:
                buffer += chunk
                self.size += len(chunk)
                while len(buffer) >= self.part_size:
                    send(bytes(buffer[: self.part_size]))
                    del buffer[: self.part_size]
            if upload_id is None:
                self.s3.put(bytes(buffer), self.content_type)
                self.parts = 1
                return self.size
            if buffer or number == 0:
                send(bytes(buffer))
            collect(block=True)
            self.s3.complete(upload_id, done)
            self.parts = number
            return self.size
        except BaseException:
            for future in running:
                future.cancel()
            pool.shutdown(wait=True)
            if upload_id is not None:
                self.s3.abort(upload_id)
            raise
        finally:
            pool.shutdown(wait=True)
