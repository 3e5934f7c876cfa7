"""`mapload serve`'s S3 checks each part against its checksum as S3 does (BadDigest), and composes
the object's checksum from the parts' checked ones instead of hashing every part again."""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from mapload.emulator.server import serving

pytestmark = [pytest.mark.runtime]

PART = 5 * 1024 * 1024  # S3's smallest part but the last


@pytest.fixture
def s3() -> Iterator[Any]:
    with serving(0) as endpoint:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        client.create_bucket(Bucket="sums")
        yield client


def _digest(data: bytes, algorithm: str) -> bytes:
    return hashlib.sha256(data).digest() if algorithm == "SHA256" else zlib.crc32(data).to_bytes(4, "big")


def _sum(data: bytes, algorithm: str) -> str:
    return base64.b64encode(_digest(data, algorithm)).decode()


ALGORITHMS = pytest.mark.parametrize("algorithm", ["SHA256", "CRC32"])  # CRC32: what mapload sends


@ALGORITHMS
def test_a_part_whose_bytes_differ_from_its_checksum_is_refused(s3: Any, algorithm: str) -> None:
    upload = s3.create_multipart_upload(Bucket="sums", Key="k", ChecksumAlgorithm=algorithm)["UploadId"]

    with pytest.raises(ClientError) as refused:
        s3.upload_part(
            Bucket="sums",
            Key="k",
            UploadId=upload,
            PartNumber=1,
            Body=b"abc",
            **{f"Checksum{algorithm}": _sum(b"abd", algorithm)},
        )

    assert refused.value.response["Error"]["Code"] == "BadDigest"
    assert s3.list_parts(Bucket="sums", Key="k", UploadId=upload).get("Parts", []) == []


@ALGORITHMS
def test_the_object_checksum_is_composed_from_the_checked_parts_without_hashing_them_again(
    s3: Any, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    import moto.s3.models

    parts = [bytes([i]) * PART for i in (1, 2)] + [b"end"]
    upload = s3.create_multipart_upload(Bucket="sums", Key="k", ChecksumAlgorithm=algorithm)["UploadId"]
    field = f"Checksum{algorithm}"
    done = [
        {
            "PartNumber": n,
            "ETag": s3.upload_part(
                Bucket="sums",
                Key="k",
                UploadId=upload,
                PartNumber=n,
                Body=data,
                **{field: _sum(data, algorithm)},
            )["ETag"],
            field: _sum(data, algorithm),
        }
        for n, data in enumerate(parts, 1)
    ]
    hashed: list[int] = []
    compute = moto.s3.models.compute_checksum

    def counted(body: bytes, algorithm: str, encode_base64: bool = True) -> bytes:
        hashed.append(len(body))
        return compute(body, algorithm, encode_base64=encode_base64)

    monkeypatch.setattr(moto.s3.models, "compute_checksum", counted)

    s3.complete_multipart_upload(Bucket="sums", Key="k", UploadId=upload, MultipartUpload={"Parts": done})

    digests = [_digest(data, algorithm) for data in parts]
    composite = _sum(b"".join(digests), algorithm)
    head = s3.head_object(Bucket="sums", Key="k", ChecksumMode="ENABLED")
    assert head[field].partition("-")[0] == composite  # S3 adds "-3"; moto, not always
    assert hashed == [len(b"".join(digests))]  # the digests only, not the parts' bytes
    assert s3.get_object(Bucket="sums", Key="k")["Body"].read() == b"".join(parts)
