"""Creating an S3 bucket in a region, kept when the caller already owns it (commands and emulator)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

# S3's own rule: a bucket in us-east-1 is created without a LocationConstraint, anywhere else with one.
S3_HOME_REGION = "us-east-1"


def create_bucket(s3: Any, name: str, region: str) -> None:
    """Create `name` in `region`; a bucket this caller already owns is kept, so re-runs, a kept
    endpoint and racing processes are fine."""
    where: dict[str, Any] = {}
    if region != S3_HOME_REGION:
        where["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(Bucket=name, **where)
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
