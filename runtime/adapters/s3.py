"""S3 access for the handlers: object listing, ranged streaming reads, small JSON objects."""

from __future__ import annotations

import builtins
import contextlib
import gzip
import http.client
import io
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from urllib3.exceptions import ProtocolError

from logic.errors import SourceChangedError, SourceNotFoundError, SourceReadError, StagedFileGoneError
from logic.parts import DEFAULT_PART_BYTES, stream_part_size

CHUNK_BYTES = 1024 * 1024
STREAM_RESUMES = 5


@dataclass(frozen=True)
class ObjectInfo:
    bucket: str
    key: str
    size: int
    etag: str


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _staged_error(bucket: str, key: str, error: ClientError) -> StagedFileGoneError | None:
    """A staged file's read that failed: StagedFileGoneError when it is gone, else None."""
    # Without s3:ListBucket, S3 answers a missing key with 403 rather than 404.
    if _code(error) not in ("NoSuchKey", "404", "AccessDenied", "403"):
        return None
    return StagedFileGoneError(
        f"s3://{bucket}/{key}, staged by a shard the ledger records done, is gone (or may not be "
        "read): the staging bucket expires files after the environment's staging_expiry_days while "
        "the ledger keeps shards for ledger_ttl_days; start the job again under a new jobId"
    )


class S3Store:
    def __init__(self, client: Any) -> None:
        self._s3 = client
        self.retries = 0  # requests botocore retried (SlowDown, 5xx) plus resumed streams

    def head(self, bucket: str, key: str) -> ObjectInfo:
        try:
            meta = self._s3.head_object(Bucket=bucket, Key=key)
        except ClientError as error:
            if _code(error) in ("404", "NoSuchKey", "NotFound"):
                raise SourceNotFoundError(f"source object s3://{bucket}/{key} does not exist") from error
            if _code(error) in ("NoSuchBucket",):
                raise SourceNotFoundError(f"source bucket {bucket} does not exist") from error
            raise
        return ObjectInfo(bucket, key, int(meta["ContentLength"]), str(meta["ETag"]))

    def list(self, bucket: str, prefix: str, skip: Callable[[str], object] | None = None) -> list[ObjectInfo]:
        """Every object under `prefix`, but folder markers and the keys `skip` is true of."""
        found: list[ObjectInfo] = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for obj in page.get("Contents", []):
                    if obj["Key"].endswith("/"):  # console "folder" markers hold no data
                        continue
                    if skip is not None and skip(obj["Key"]):
                        continue
                    found.append(ObjectInfo(bucket, obj["Key"], int(obj["Size"]), str(obj["ETag"])))
        except ClientError as error:
            if _code(error) == "NoSuchBucket":
                raise SourceNotFoundError(f"source bucket {bucket} does not exist") from error
            raise
        if not found:
            raise SourceNotFoundError(f"no objects under s3://{bucket}/{prefix}")
        return found

    def read_range(self, obj: ObjectInfo, first: int, last: int) -> bytes:
        """Bytes first..last (inclusive) of an object that must still be the version planned."""
        body = self._get(obj, first, last)
        try:
            return bytes(body.read())
        finally:
            body.close()

    def stream(self, obj: ObjectInfo, first: int) -> Iterator[bytes]:
        """Chunks from byte `first` to the object's end; the caller may stop early.

        A connection that breaks mid-body is resumed with a new ranged GET from the next byte
        (botocore retries the request, not the body), at most STREAM_RESUMES times per stream.
        """
        position, resumes = first, 0
        while position < obj.size:
            body = self._get(obj, position, obj.size - 1)
            try:
                for chunk in body.iter_chunks(CHUNK_BYTES):
                    position += len(chunk)
                    yield chunk
                return
            except (BotoCoreError, ProtocolError, http.client.HTTPException, OSError) as error:
                resumes += 1
                self.retries += 1
                if resumes > STREAM_RESUMES:
                    raise SourceReadError(
                        f"reading s3://{obj.bucket}/{obj.key} broke off {resumes} times "
                        f"(last at byte {position}): {error}"
                    ) from error
                time.sleep(min(2.0, 0.05 * 2**resumes))
            finally:
                body.close()  # stopping early drops the connection instead of reading the rest

    def _get(self, obj: ObjectInfo, first: int, last: int) -> Any:
        try:
            response = self._s3.get_object(
                Bucket=obj.bucket, Key=obj.key, Range=f"bytes={first}-{last}", IfMatch=obj.etag
            )
            self.retries += int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
            return response["Body"]
        except ClientError as error:
            if _code(error) in ("PreconditionFailed", "412"):
                raise SourceChangedError(
                    f"s3://{obj.bucket}/{obj.key} changed after it was planned (ETag is no longer {obj.etag})"
                ) from error
            if _code(error) in ("NoSuchKey", "404"):
                raise SourceNotFoundError(
                    f"source object s3://{obj.bucket}/{obj.key} does not exist"
                ) from error
            if _code(error) in ("AccessDenied", "403"):
                # Without s3:ListBucket, S3 answers a missing key with 403 rather than 404.
                raise SourceNotFoundError(
                    f"cannot read s3://{obj.bucket}/{obj.key}: it was deleted after planning, "
                    "or this function may not read it (AccessDenied)"
                ) from error
            raise

    def put_json(self, bucket: str, key: str, value: Any) -> None:
        body = json.dumps(value, separators=(",", ":"), default=str).encode()
        self._s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")

    def put_bytes(self, bucket: str, key: str, body: bytes, content_type: str) -> None:
        self._s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)

    def get_bytes(self, bucket: str, key: str) -> bytes:
        return bytes(self._s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    def list_keys(self, bucket: str, prefix: str, limit: int) -> tuple[Sequence[str], str | None]:
        """The first `limit` keys under `prefix` (ListObjectsV2, 1,000 a page), and S3's error as
        text when a request fails (the caller's listing is best effort), else None."""
        keys: builtins.list[str] = []
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, PaginationConfig={"MaxItems": limit}
            )
            for page in pages:
                keys.extend(str(obj["Key"]) for obj in page.get("Contents", []))
        except ClientError as error:
            return keys, str(error)
        return keys[:limit], None

    def delete_keys(self, bucket: str, keys: Sequence[str]) -> str | None:
        """Delete objects, 1,000 a DeleteObjects request (a key that is not there is no error);
        S3's error as text when a request fails (the caller's deletes are best effort), else None."""
        try:
            for start in range(0, len(keys), 1000):
                objects = [{"Key": key} for key in keys[start : start + 1000]]
                self._s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
        except ClientError as error:
            return str(error)
        return None

    def get_bytes_range(self, bucket: str, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object (a sync shard's bucket section)."""
        if end <= start:
            return b""
        response = self._s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}")
        return bytes(response["Body"].read())

    def get_staged(self, bucket: str, key: str) -> bytes:
        """A file an earlier step staged; StagedFileGoneError when it is no longer there."""
        try:
            return self.get_bytes(bucket, key)
        except ClientError as error:
            gone = _staged_error(bucket, key, error)
            if gone is None:
                raise
            raise gone from error

    @contextlib.contextmanager
    def open_staged_text(self, bucket: str, key: str, *, gzipped: bool) -> Iterator[io.TextIOWrapper]:
        """`open_text` of a file an earlier step staged; StagedFileGoneError when it is gone."""
        with contextlib.ExitStack() as stack:
            try:
                text = stack.enter_context(self.open_text(bucket, key, gzipped=gzipped))
            except ClientError as error:
                gone = _staged_error(bucket, key, error)
                if gone is None:
                    raise
                raise gone from error
            yield text

    def get_json(self, bucket: str, key: str) -> Any:
        return json.loads(self._s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    def streaming_upload(self, bucket: str, key: str, content_type: str) -> StreamingUpload:
        return StreamingUpload(self._s3, bucket, key, content_type)

    def upload_if_written(self, bucket: str, key: str, content_type: str) -> LazyUpload:
        return LazyUpload(lambda: self.streaming_upload(bucket, key, content_type))

    @contextlib.contextmanager
    def open_text(self, bucket: str, key: str, *, gzipped: bool) -> Iterator[io.TextIOWrapper]:
        """An object as UTF-8 text, read as it streams (gunzipped when `gzipped`); newlines kept as
        they are, for the csv module."""
        body = self._s3.get_object(Bucket=bucket, Key=key)["Body"]
        try:
            raw: Any = gzip.GzipFile(fileobj=body, mode="rb") if gzipped else body
            yield io.TextIOWrapper(raw, encoding="utf-8", newline="")
        finally:
            body.close()

    def read_start(self, bucket: str, key: str, limit: int) -> tuple[bytes, int]:
        """An object's first `limit` bytes (all of it if smaller) and its size: one ranged GET."""
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit - 1}")
        except ClientError as error:
            if _code(error) == "InvalidRange":  # an empty object has no byte 0
                return b"", 0
            raise
        body = response["Body"]
        try:
            data = bytes(body.read())
        finally:
            body.close()
        # "bytes 0-1023/5000": the object's size is after the slash (absent: the whole object came).
        total = str(response.get("ContentRange") or "").rpartition("/")[2]
        return data, int(total) if total.isdigit() else len(data)

    def stream_from(self, bucket: str, key: str, first: int) -> Iterator[bytes]:
        """An object's chunks from byte `first` to its end: one ranged GET, read as it streams."""
        body = self._s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-")["Body"]
        try:
            yield from body.iter_chunks(CHUNK_BYTES)
        finally:
            body.close()


class RangedFile(io.RawIOBase):
    """A read-only, seekable file over one planned object version: every read is a ranged GET of
    just the bytes asked for, pinned to the planned ETag (If-Match), so a Parquet reader fetches
    only the column chunks it decodes. `bytes_read` counts what S3 sent."""

    def __init__(self, store: S3Store, obj: ObjectInfo) -> None:
        super().__init__()
        self._store, self._obj, self._pos = store, obj, 0
        self.bytes_read = 0
        self.requests = 0
        # What the last read raised: a reader that wraps it (pyarrow turns it into an OSError)
        # can tell a failed GET from data it could not decode.
        self.failure: BaseException | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._obj.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        wanted = min(len(buffer), self._obj.size - self._pos)
        if wanted <= 0:
            return 0
        try:
            data = self._store.read_range(self._obj, self._pos, self._pos + wanted - 1)
        except BaseException as error:
            self.failure = error
            raise
        view = memoryview(buffer).cast("B")
        view[: len(data)] = data
        self._pos += len(data)
        self.bytes_read += len(data)
        self.requests += 1
        return len(data)


# A stream's first parts (S3's smallest part but the last is 5 MiB); later parts grow with what
# was sent (logic/parts.py stream_part_size), so 10,000 parts hold up to S3's 5 TiB.
PART_BYTES = DEFAULT_PART_BYTES


class StreamingUpload:
    """An S3 object written as it is produced: each full part goes out as a multipart part, so
    memory holds one part and nothing touches /tmp; a small object is one PutObject. Parts start
    at `part_bytes` and grow with what was sent (`stream_part_size`, the file upload's rule), so
    the object is not cut off at 10,000 parts. An error inside the `with` aborts the upload (the
    bucket's lifecycle rule is the backstop)."""

    def __init__(
        self, client: Any, bucket: str, key: str, content_type: str, part_bytes: int = PART_BYTES
    ) -> None:
        self._s3, self.bucket, self.key = client, bucket, key
        self._content_type = content_type
        self._part_bytes = part_bytes
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self.size = 0
        self._sent = 0  # bytes sent in parts

    def __enter__(self) -> StreamingUpload:
        return self

    def write(self, data: bytes) -> None:
        self._buffer += data
        self.size += len(data)
        while len(self._buffer) >= (part := stream_part_size(self._sent, self._part_bytes)):
            self._send(bytes(self._buffer[:part]))
            del self._buffer[:part]

    def _send(self, body: bytes) -> None:
        if self._upload_id is None:
            self._upload_id = self._s3.create_multipart_upload(
                Bucket=self.bucket, Key=self.key, ContentType=self._content_type
            )["UploadId"]
        number = len(self._parts) + 1
        etag = self._s3.upload_part(
            Bucket=self.bucket, Key=self.key, UploadId=self._upload_id, PartNumber=number, Body=body
        )["ETag"]
        self._parts.append({"PartNumber": number, "ETag": etag})
        self._sent += len(body)

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if error is not None:
            if self._upload_id is not None:
                self._s3.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=self._upload_id)
            return
        if self._upload_id is None:
            self._s3.put_object(
                Bucket=self.bucket, Key=self.key, Body=bytes(self._buffer), ContentType=self._content_type
            )
            return
        if self._buffer:
            self._send(bytes(self._buffer))
            self._buffer.clear()
        self._s3.complete_multipart_upload(
            Bucket=self.bucket, Key=self.key, UploadId=self._upload_id, MultipartUpload={"Parts": self._parts}
        )


class LazyUpload:
    """A StreamingUpload opened on the first write: nothing written, no object. A file-like
    target (write, flush) for a writer that may have nothing to say, such as a shard's rejects."""

    def __init__(self, open_upload: Callable[[], StreamingUpload]) -> None:
        self._open = open_upload
        self._upload: StreamingUpload | None = None

    def __enter__(self) -> LazyUpload:
        return self

    def write(self, data: bytes) -> int:
        if self._upload is None:
            self._upload = self._open().__enter__()
        self._upload.write(bytes(data))
        return len(data)

    def flush(self) -> None:
        """Parts go out as they fill; there is nothing to flush before the end."""

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if self._upload is not None:
            self._upload.__exit__(kind, error, trace)
