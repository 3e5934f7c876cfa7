"""Whether the Step Functions execution that holds a jobId is over (Plan takes the jobId over from
a run that ended without Finalize; `mapload release` frees it). Asked with DescribeExecution, which
the Plan role may call on this state machine's executions only (stacks/loader_functions.py).

"Over" means its Workers are over too: DescribeExecution reports ABORTED or TIMED_OUT as soon as
the execution stops, but Lambda invocations already running go on until the Worker's timeout. So
an execution counts as over only once its `stopDate` is older than the Worker timeout plus
SETTLE_MARGIN_SECONDS; before that the caller is refused in one line saying how long to wait.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final

from botocore.exceptions import ClientError

from logic.errors import JobAlreadyRunningError

# Beyond the Worker's timeout: an invocation's start after the stop, clocks.
SETTLE_MARGIN_SECONDS: Final = 60
# Lambda's longest timeout: the bound `mapload release` assumes (it does not know the Worker's).
LAMBDA_MAX_TIMEOUT_SECONDS: Final = 900


def _now() -> float:
    return time.time()


def execution_ended(
    client: Any, execution_arn: str, worker_timeout_seconds: int = LAMBDA_MAX_TIMEOUT_SECONDS
) -> bool:
    """True when the execution is no longer RUNNING and stopped more than the Worker timeout +
    SETTLE_MARGIN_SECONDS ago (or Step Functions no longer has it: executions are kept 90 days);
    False when it runs, or the id is no execution ARN (a local run's name). Raises
    JobAlreadyRunningError, saying how long to wait, when it stopped more recently than that."""
    if not execution_arn.startswith("arn:") or ":execution:" not in execution_arn:
        return False
    try:
        described = client.describe_execution(executionArn=execution_arn)
    except ClientError as error:
        if error.response["Error"]["Code"] == "ExecutionDoesNotExist":
            return True
        raise
    status = str(described["status"])
    if status == "RUNNING":
        return False
    stopped = described.get("stopDate")
    settle = worker_timeout_seconds + SETTLE_MARGIN_SECONDS
    wait = stopped.timestamp() + settle - _now() if stopped is not None else 0.0
    if wait > 0:
        raise JobAlreadyRunningError(
            f"execution {execution_arn} is {status} since {stopped:%Y-%m-%dT%H:%M:%S%z}, but Workers it "
            f"started may run for up to {settle} s after it stopped: try again in {math.ceil(wait)} s"
        )
    return True
