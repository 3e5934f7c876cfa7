"""An in-memory S3 client that answers every request after a fixed latency, counting the requests
and the most in flight at once: S3's round trip, which moto (answering in-process) does not have.

What it serves is what the adapters ask of S3 (ranged GETs with Content-Range, a listing in pages
of 1,000, multipart uploads), so `adapters.s3.S3Store` runs unchanged over it; the time a caller
takes over it is its requests' latency as it overlaps them."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

from botocore.exceptions import ClientError
from botocore.response import StreamingBody

LIST_PAGE = 1000  # ListObjectsV2's page


class SlowS3:
    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.objects: dict[tuple[str, str], bytes] = {}
        self.requests: dict[str, int] = {}
        self.in_flight = 0
        self.most_in_flight = 0
        self._uploads: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()

    def _wait(self, operation: str) -> None:
        with self._lock:
            self.requests[operation] = self.requests.get(operation, 0) + 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self.latency)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _object(self, bucket: str, key: str) -> bytes:
        if (bucket, key) not in self.objects:
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": key}}, "GetObject")
        return self.objects[(bucket, key)]

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, **_: Any) -> dict[str, Any]:
        self._wait("PutObject")
        self.objects[(Bucket, Key)] = bytes(Body)
        return {"ETag": f'"{len(Body)}"'}

    def head_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        self._wait("HeadObject")
        data = self._object(Bucket, Key)
        return {"ContentLength": len(data), "ETag": f'"{len(data)}"'}

    def get_object(self, *, Bucket: str, Key: str, Range: str | None = None, **_: Any) -> dict[str, Any]:
        self._wait("GetObject")
        data = self._object(Bucket, Key)
        if Range is None:
            return {"Body": StreamingBody(io.BytesIO(data), len(data))}
        first_text, _, last_text = Range.removeprefix("bytes=").partition("-")
        first = int(first_text)
        if first >= len(data):
            raise ClientError({"Error": {"Code": "InvalidRange", "Message": Range}}, "GetObject")
        last = min(int(last_text) if last_text else len(data) - 1, len(data) - 1)
        part = data[first : last + 1]
        return {
            "Body": StreamingBody(io.BytesIO(part), len(part)),
            "ContentRange": f"bytes {first}-{last}/{len(data)}",
        }

    def get_paginator(self, _: str) -> Any:
        client = self

        class Pages:
            def paginate(self, *, Bucket: str, Prefix: str) -> Any:
                keys = sorted(k for b, k in client.objects if b == Bucket and k.startswith(Prefix))
                for start in range(0, max(1, len(keys)), LIST_PAGE):
                    client._wait("ListObjectsV2")
                    page = keys[start : start + LIST_PAGE]
                    yield {
                        "Contents": [
                            {
                                "Key": k,
                                "Size": len(client.objects[(Bucket, k)]),
                                "ETag": f'"{len(client.objects[(Bucket, k)])}"',
                            }
                            for k in page
                        ]
                    }

        return Pages()

    def create_multipart_upload(self, *, Bucket: str, Key: str, **_: Any) -> dict[str, str]:
        self._wait("CreateMultipartUpload")
        upload = f"{Bucket}/{Key}"
        self._uploads[upload] = []
        return {"UploadId": upload}

    def upload_part(self, *, UploadId: str, Body: bytes, **_: Any) -> dict[str, str]:
        self._wait("UploadPart")
        self._uploads[UploadId].append(bytes(Body))
        return {"ETag": f'"{len(self._uploads[UploadId])}"'}

    def complete_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str, **_: Any) -> None:
        self._wait("CompleteMultipartUpload")
        self.objects[(Bucket, Key)] = b"".join(self._uploads.pop(UploadId))

    def abort_multipart_upload(self, *, UploadId: str, **_: Any) -> None:
        self._uploads.pop(UploadId, None)
