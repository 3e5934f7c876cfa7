"""Whether the Step Functions execution that holds a jobId is over (Plan takes the jobId over from
a run that ended without Finalize; `mapload release` frees it). Asked with DescribeExecution, which
the Plan role may call on this state machine's executions only (stacks/loader_functions.py)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError


def execution_ended(client: Any, execution_arn: str) -> bool:
    """True when the execution is no longer RUNNING (or Step Functions no longer has it: executions
    are kept 90 days); False when it runs, or the id is no execution ARN (a local run's name)."""
    if not execution_arn.startswith("arn:") or ":execution:" not in execution_arn:
        return False
    try:
        status = client.describe_execution(executionArn=execution_arn)["status"]
    except ClientError as error:
        if error.response["Error"]["Code"] == "ExecutionDoesNotExist":
            return True
        raise
    return str(status) != "RUNNING"
