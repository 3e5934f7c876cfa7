"""DescribeTable of a job's target table (Plan's check of a table the input names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError


def describe_table(client: Any, name: str) -> Mapping[str, Any] | None:
    """DescribeTable's `Table` of `name`; None when there is no such table (ResourceNotFound)."""
    try:
        return dict(client.describe_table(TableName=name)["Table"])
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise
