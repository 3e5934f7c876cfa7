"""The deployed environment's names: its stack outputs, read with CloudFormation DescribeStacks.

Names come from the environment's stack outputs (`Mapload-<env>-Data` and `Mapload-<env>-Loader`),
so no command needs the console. Every client is a plain boto3 client: AWS_PROFILE, AWS_REGION,
AWS_ENDPOINT_URL(_<SERVICE>) and the other standard settings decide which account or emulator is
used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from mapload import region as regions

# The stage's stack names (stacks/stage.py stage_id + stack ids; tests/infra checks they agree).
# Not imported from stacks/: that would start the CDK's jsii runtime for a status query.
STACK_IDS = ("Data", "Loader")
REQUIRED_OUTPUTS = ("StateMachineArn", "SourceBucketName", "StagingBucketName", "TableKey")


class OpsError(Exception):
    """The command cannot do what was asked; the message says what was wrong."""


def stack_name(env: str, stack_id: str) -> str:
    return f"Mapload-{env}-{stack_id}"


@dataclass(frozen=True)
class Environment:
    """A deployed environment, as its stack outputs describe it."""

    name: str
    outputs: Mapping[str, str]

    @property
    def state_machine_arn(self) -> str:
        return self.outputs["StateMachineArn"]

    @property
    def source_bucket(self) -> str:
        return self.outputs["SourceBucketName"]

    @property
    def staging_bucket(self) -> str:
        return self.outputs["StagingBucketName"]

    def execution_arn(self, execution: str) -> str:
        """An execution's ARN from its name (or the ARN itself)."""
        if execution.startswith("arn:"):
            return execution
        prefix, machine = self.state_machine_arn.split(":stateMachine:", 1)
        return f"{prefix}:execution:{machine}:{execution}"


class Clients:
    """The boto3 clients the commands use, made once from the standard AWS settings."""

    def __init__(self, region: str | None = None) -> None:
        # --region, AWS_REGION (what Lambda and most SDKs set), AWS_DEFAULT_REGION, the profile's;
        # never a guess: a deployed environment is in one region.
        name, self.region_source = regions.explain(region)
        if self.region_source == regions.DEFAULTED:
            raise OpsError("no AWS region: pass --region or set AWS_REGION / AWS_DEFAULT_REGION")
        session = boto3.session.Session(region_name=name)
        self.region = str(session.region_name)
        self.cloudformation = session.client("cloudformation")
        self.s3 = session.client("s3")
        self.sfn = session.client("stepfunctions")
        self.dynamodb = session.client("dynamodb")


NO_CREDENTIALS = (
    "no AWS credentials ({cause}): set AWS_PROFILE (after `aws configure` or `aws sso login`) or "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
)
# ClientError codes that say the credentials themselves are wrong, not the stack.
_BAD_CREDENTIALS = frozenset(
    ("ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException")
)


def credentials_problem(error: BaseException) -> str | None:
    """One line naming a credentials problem (none found, expired, not valid) and how to set them;
    None when `error` is another one."""
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return NO_CREDENTIALS.format(cause=str(error))
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        if code in _BAD_CREDENTIALS:
            message = error.response.get("Error", {}).get("Message", code)
            return f"the AWS credentials were refused ({code}: {message}): renew or set them " + (
                "(AWS_PROFILE after `aws configure` or `aws sso login`, or AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY)"
            )
    return None


def describe_environment(clients: Clients, env: str) -> Environment:
    outputs: dict[str, str] = {}
    for stack_id in STACK_IDS:
        name = stack_name(env, stack_id)
        try:
            stacks = clients.cloudformation.describe_stacks(StackName=name)["Stacks"]
        except (ClientError, BotoCoreError) as error:
            # ClientError: the stack is missing or access is denied; BotoCoreError: no
            # credentials, or the endpoint cannot be reached.
            problem = credentials_problem(error)
            if problem is not None:
                raise OpsError(problem) from error
            message = (
                error.response.get("Error", {}).get("Message", str(error))
                if isinstance(error, ClientError)
                else str(error)
            )
            raise OpsError(
                f"cannot read stack {name} in {clients.region} ({message}); deploy the environment "
                f"first (cdk deploy -c env={env} 'Mapload-{env}/*') or check --env / --region"
            ) from error
        outputs.update({o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])})
    missing = [name for name in REQUIRED_OUTPUTS if not outputs.get(name)]
    if missing:
        raise OpsError(f"the stacks of {env!r} have no output {', '.join(missing)}: redeploy them")
    return Environment(env, outputs)


def target_key(environment: Environment) -> dict[str, str]:
    """The target table's key attributes and types, partition key first: the Loader stack's
    TableKey output, the very TABLE_KEY the Plan function validates against."""
    key = json.loads(environment.outputs["TableKey"])
    assert isinstance(key, dict)
    return {str(name): str(kind) for name, kind in key.items()}
