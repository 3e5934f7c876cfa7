"""S3 URIs, `s3://bucket/key`: the pattern the input spec's models and `mapload upload` check, kept
apart from those models so that a command checking one URI does not build them (a fifth of a
second of `mapload upload`'s start-up)."""

from __future__ import annotations

import re

from logic.described import kind

# Bucket naming rules (3-63 characters of lowercase letters, digits, dots and hyphens, starting
# and ending with a letter or digit); the key is anything, including nothing (a prefix).
S3_URI_PATTERN = r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/([\s\S]*))?(?![\s\S])"
_S3_URI = re.compile(S3_URI_PATTERN)


def s3_parts(uri: object) -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key); raises ValueError. The key is a prefix when it is empty or
    ends with "/"."""
    match = _S3_URI.search(uri) if isinstance(uri, str) else None
    if match is None:
        raise ValueError(s3_uri_message(uri))
    return match.group(1), match.group(2) or ""


def s3_uri_message(value: object) -> str:
    """What is wrong with `value` as an S3 URI (the input's `source` and `mapload upload` say it)."""
    if not isinstance(value, str):
        return f"must be a string like s3://bucket/key, got {kind(value)}"
    if not value.startswith("s3://"):
        return f"must start with s3:// (s3://bucket/key or s3://bucket/prefix/), got {value!r}"
    bucket = value[5:].split("/", 1)[0]
    return (
        f"{bucket!r} is not a valid bucket name (3-63 lowercase letters, digits, dots and hyphens, "
        "starting and ending with a letter or digit)"
    )
