"""S3's part checksums in `mapload serve`: an UploadPart whose x-amz-checksum-* header does not match
its bytes is refused (BadDigest), as S3 refuses it, and the checksum checked there is kept with
the part; CompleteMultipartUpload composes the object's checksum from the kept ones, as S3 does.
moto checked nothing on arrival and hashed every part again when completing, serially, on the
request that completes (0.35 s of a 512 MiB object's SHA-256 at the end of every upload).
ListParts names each part's kept checksum (`ChecksumCRC32`), as S3 does."""

from __future__ import annotations

import base64
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from mapload.emulator.moto_patch import Patch

# The algorithms moto computes as S3 does; for CRC32C and CRC64NVME it needs optional libraries
# and otherwise computes another checksum, so those stay as moto has them.
CHECKED = ("SHA256", "SHA1", "CRC32")
_UPLOAD_PART = "moto.s3.responses:S3Response.upload_part"
_COMPLETE = "moto.s3.models:FakeMultipart.complete"
_ADD_PART = "moto.s3.models:MultipartChecksumBuilder.addPart"
_LIST_PARTS = "moto.s3.responses:S3Response.list_parts"
_kept = threading.local()  # the completing request's kept part checksums, in part order


def _bad_digest(algorithm: str) -> Exception:
    from moto.s3.exceptions import S3ClientError

    return S3ClientError("BadDigest", f"The {algorithm} you specified did not match the calculated checksum.")


def _upload_part(self: Any, *args: Any, **kwargs: Any) -> Any:
    from moto.s3.utils import compute_checksum

    sent = [(a, self.headers.get(f"x-amz-checksum-{a.lower()}")) for a in CHECKED]
    algorithm, value = next(((a, v) for a, v in sent if v), ("", None))
    if value is not None and compute_checksum(self.body, algorithm).decode() != value:
        raise _bad_digest(algorithm)
    response = PART_CHECKSUMS.original(_UPLOAD_PART)(self, *args, **kwargs)
    if value is not None:
        upload = self.backend.get_bucket(self.bucket_name).multiparts[self._get_param("uploadId")]
        part = upload.parts[self._get_int_param("partNumber")]
        part.checksum_algorithm, part.checksum_value = algorithm, value
    return response


def _complete(self: Any, body: Iterable[tuple[int, str]]) -> Any:
    parts = list(body)
    algorithm = str(self.metadata.get("x-amz-checksum-algorithm") or "").upper()
    kept = [self.parts.get(number) for number, _ in parts]
    _kept.values = deque(
        p.checksum_value if p is not None and p.checksum_algorithm == algorithm else None for p in kept
    )
    try:
        return PART_CHECKSUMS.original(_COMPLETE)(self, iter(parts))
    finally:
        _kept.values = None


def _add_part(self: Any, part: bytes) -> None:
    kept: deque[str | None] | None = getattr(_kept, "values", None)
    value = kept.popleft() if kept else None
    if value is None or self.checksum_type != "COMPOSITE":
        PART_CHECKSUMS.original(_ADD_PART)(self, part)
        return
    self.checksum.extend(base64.b64decode(value))
    self.part_count += 1


def _list_parts(self: Any, *args: Any, **kwargs: Any) -> Any:
    """ListParts names each part's checksum, as S3 does for an upload created with a checksum
    algorithm (moto listed only ETag and size): what `mapload upload` compares parts by, since
    under SSE-KMS an ETag differs each time the same bytes are sent."""
    upload = self.backend.get_bucket(self.bucket_name).multiparts.get(self._get_param("uploadId"))
    serialized = self.serialized

    def with_checksums(action: Any) -> Any:
        for listed in action.result.get("Parts", []) if upload is not None else []:
            part = upload.parts.get(int(listed["PartNumber"]))
            if part is not None and getattr(part, "checksum_value", None) and part.checksum_algorithm:
                listed[f"Checksum{part.checksum_algorithm}"] = part.checksum_value
        return serialized(action)

    self.serialized = with_checksums
    try:
        return PART_CHECKSUMS.original(_LIST_PARTS)(self, *args, **kwargs)
    finally:
        del self.serialized


PART_CHECKSUMS = Patch(
    "part-checksums",
    (_UPLOAD_PART, _COMPLETE, _ADD_PART, _LIST_PARTS),
    (_upload_part, _complete, _add_part, _list_parts),
)
