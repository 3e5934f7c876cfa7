"""Compressed sources: detection by content (magic bytes), streaming gunzip, prepared-object names."""

from __future__ import annotations

import posixpath
import zlib
from collections.abc import Iterable, Iterator

from logic.errors import CorruptSourceError

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; an empty archive's end record
MAGIC_BYTES = 4
PREPARED_PREFIX = "prepared/"


def detect(head: bytes) -> str | None:
    """'gzip', 'zip' or None (plain) from an object's first bytes; the name plays no part."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZIP_MAGICS):
        return "zip"
    return None


def gunzip(chunks: Iterable[bytes], where: str) -> Iterator[bytes]:
    """Decompress a gzip stream (several concatenated members too, as `cat a.gz b.gz` makes)
    chunk by chunk; CRC-32 and length of every member are checked by zlib.
    Raises CorruptSourceError for bad data and for a stream that ends mid-member."""
    decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    consumed = 0
    in_member = False
    for chunk in chunks:
        data = chunk
        while data:
            try:
                out = decoder.decompress(data)
            except zlib.error as error:
                raise CorruptSourceError(
                    f"{where}: not a valid gzip stream (near compressed byte {consumed:,}): {error}"
                ) from None
            in_member = True
            if out:
                yield out
            if decoder.eof:
                rest = decoder.unused_data
                consumed += len(data) - len(rest)
                decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                in_member = False
                data = rest
                if rest and not rest.startswith(GZIP_MAGIC[:1]) and not rest.strip(b"\x00"):
                    data = b""  # zero padding after the last member (tape-style) is allowed
            else:
                consumed += len(data)
                data = b""
    if in_member:
        tail = decoder.flush()
        if tail:
            yield tail
        raise CorruptSourceError(
            f"{where}: truncated gzip stream: it ends after {consumed:,} compressed bytes, before the "
            "member's end (upload the whole file again)"
        )
    if consumed == 0:
        raise CorruptSourceError(f"{where}: empty gzip stream")


def plain_name(key: str, kind: str) -> str:
    """The prepared object's file name: `data.csv.gz` -> `data.csv`; a zip member keeps its own."""
    base = posixpath.basename(key)
    if kind == "gzip":
        for suffix in (".gz", ".gzip"):
            if base.lower().endswith(suffix) and len(base) > len(suffix):
                return base[: -len(suffix)]
    return base or "object"


def member_name(name: str) -> str:
    """A zip member's path made safe as part of an S3 key (no leading '/', no '..' segments)."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or "member"


def skip_member(name: str, is_dir: bool) -> bool:
    """Folders, and the resource forks macOS's Archive Utility adds, hold no records."""
    return is_dir or name.startswith("__MACOSX/") or posixpath.basename(name) == ".DS_Store"


def prepared_key(job_id: str, run_id: str, index: int, name: str) -> str:
    return f"{PREPARED_PREFIX}{job_id}/{run_id}/{index:05d}/{name}"


def prepared_list_key(job_id: str, run_id: str) -> str:
    return f"{PREPARED_PREFIX}{job_id}/{run_id}/objects.json"
