"""Compressed S3 objects as streams: gzip read front to back, zip members read through a
seekable view of the object (ranged GETs), both without holding the object in memory."""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

from logic.compression import member_name, skip_member
from logic.errors import CorruptSourceError

READ_BYTES = 1024 * 1024


class S3RangeReader(io.RawIOBase):
    """A read-only, seekable file over one S3 object version (If-Match its ETag). Sequential
    reads share one streaming GET; a seek elsewhere starts a new ranged GET."""

    def __init__(self, client: Any, bucket: str, key: str, size: int, etag: str) -> None:
        super().__init__()
        self._s3 = client
        self._bucket = bucket
        self._key = key
        self._size = size
        self._etag = etag
        self._pos = 0
        self._body: Any = None
        self._body_pos = -1

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        if self._pos >= self._size:
            return 0
        if self._body is None or self._body_pos != self._pos:
            self._drop()
            self._body = self._s3.get_object(
                Bucket=self._bucket, Key=self._key, Range=f"bytes={self._pos}-", IfMatch=self._etag
            )["Body"]
            self._body_pos = self._pos
        data = self._body.read(min(len(buffer), self._size - self._pos))
        if not data:
            return 0
        view = memoryview(buffer).cast("B")
        view[: len(data)] = data
        self._pos += len(data)
        self._body_pos = self._pos
        return len(data)

    def _drop(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None

    def close(self) -> None:
        self._drop()
        super().close()


def zip_members(reader: S3RangeReader, where: str) -> Iterator[tuple[str, Iterator[bytes]]]:
    """(safe member name, its decompressed chunks) for every file member of a zip object.
    The chunks of one member must be consumed before asking for the next."""
    try:
        archive = zipfile.ZipFile(io.BufferedReader(reader, buffer_size=READ_BYTES))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise CorruptSourceError(
            f"{where}: not a readable zip archive (corrupt or truncated: {error})"
        ) from None
    with archive:
        members = [i for i in archive.infolist() if not skip_member(i.filename, i.is_dir())]
        if not members:
            raise CorruptSourceError(f"{where}: the zip archive holds no files")
        for info in members:
            yield member_name(info.filename), _member_chunks(archive, info, where)


def _member_chunks(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> Iterator[bytes]:
    label = f"{where} member {info.filename}"
    try:
        with archive.open(info) as member:
            while chunk := member.read(READ_BYTES):
                yield chunk
    except NotImplementedError as error:  # e.g. Deflate64 or another method zipfile cannot read
        raise CorruptSourceError(f"{label}: unsupported compression ({error}); re-zip with deflate") from None
    except RuntimeError as error:  # an encrypted member
        raise CorruptSourceError(f"{label}: cannot be read ({error})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        raise CorruptSourceError(f"{label}: corrupt or truncated ({error})") from None
