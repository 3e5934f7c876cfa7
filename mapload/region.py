"""The AWS region a command works in, and creating a bucket there (the one region-specific call)."""

from __future__ import annotations

import os

import boto3

# Where S3 and DynamoDB are when nothing names a region (boto3 itself would refuse to pick one).
DEFAULT_REGION = "us-east-1"
# The AWS CLI and SDKs read AWS_REGION before AWS_DEFAULT_REGION; botocore reads only the latter.
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
DEFAULTED = "the default: no --region, AWS_REGION, AWS_DEFAULT_REGION or profile region"


def resolve(explicit: str | None = None) -> str:
    """--region, else AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region, else us-east-1."""
    return explain(explicit)[0]


def explain(explicit: str | None = None) -> tuple[str, str]:
    """The region `resolve` picks and where it comes from (DEFAULTED when nothing named one: a
    command on a deployed environment refuses that instead of guessing)."""
    if explicit:
        return explicit, "--region"
    for name in REGION_VARIABLES:
        if os.environ.get(name):
            return os.environ[name], name
    profile = boto3.Session().region_name
    if profile:
        return profile, "the AWS profile"
    return DEFAULT_REGION, DEFAULTED


def region_line(command: str, region: str, source: str) -> str:
    """What every command prints first: the region it works in, and why that one."""
    return f"mapload {command}: region {region} ({source})"
