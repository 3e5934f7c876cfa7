"""The role the pipeline's smoke test assumes in the environment it tests: its own least privilege.

CloudFormation and Step Functions have no resource policies, so a CodeBuild role of the pipeline
account cannot read another account's stacks or start its executions: the tested environment's
stage creates this role, trusting only the pipeline's smoke-test build role (by ARN, through a
condition on the pipeline account: no principal that must exist first, no cross-stage token).
Both names are fixed and derived from the environment, so each side can name the other.
"""

from __future__ import annotations

from typing import Final

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.data import KEY_WRITE, STAGING_REPORTS, key_use
from stacks.nag import acknowledge_wildcards, default_policy, resource_finding

# Where the smoke test uploads its sample in the source bucket (its S3 grant is this prefix).
SMOKE_PREFIX: Final[str] = "smoke/"


def smoke_role_name(env_name: str, region: str) -> str:
    """The role the smoke test assumes in the tested environment's account (IAM names are global
    to the account: the region keeps two regions' environments of one name apart)."""
    return f"mapload-{env_name}-{region}-smoke"


def smoke_build_role_name(env_name: str, region: str) -> str:
    """The smoke test's CodeBuild role in the pipeline account."""
    return f"{smoke_role_name(env_name, region)}-build"


def role_arn(partition: str, account: str, name: str) -> str:
    return f"arn:{partition}:iam::{account}:role/{name}"


class SmokeTestAccess(Construct):
    """`role`: what `mapload start` does with the sample: read this environment's stack outputs,
    upload under smoke/, start and watch this state machine's executions, read the report."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env_name: str,
        region: str,
        pipeline_account: str,
        stack_names: tuple[str, ...],
        source_bucket: s3.IBucket,
        staging_bucket: s3.IBucket,
        state_machine: sfn.StateMachine,
        data_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        build_role = role_arn(stack.partition, pipeline_account, smoke_build_role_name(env_name, region))
        self.role = iam.Role(
            self,
            "Role",
            # A fixed name: the pipeline's buildspec names it (there is no token across accounts).
            role_name=smoke_role_name(env_name, region),
            assumed_by=iam.AccountPrincipal(pipeline_account).with_conditions(
                {"ArnEquals": {"aws:PrincipalArn": build_role}}
            ),
            max_session_duration=cdk.Duration.hours(1),
            description=f"mapload {env_name}: the pipeline's smoke test (mapload start on a sample)",
        )
        reasons = self._grant(stack_names, source_bucket, staging_bucket, state_machine)
        if data_key is not None:
            # The sample and the report are SSE-KMS objects under the environment's data key.
            self.role.add_to_policy(key_use(self, data_key, KEY_WRITE, "s3"))
        acknowledge_wildcards(default_policy(self.role), reasons)

    def _grant(
        self,
        stack_names: tuple[str, ...],
        source_bucket: s3.IBucket,
        staging_bucket: s3.IBucket,
        state_machine: sfn.StateMachine,
    ) -> dict[str, str]:
        """The role's statements, each by Sid; the reasons for the wildcards they hold."""
        stack = cdk.Stack.of(self)
        machine = state_machine.state_machine_name

        def states_arn(resource: str, name: str) -> str:
            return stack.format_arn(
                service="states",
                resource=resource,
                resource_name=name,
                arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            )

        executions = states_arn("execution", f"{machine}:*")
        map_runs = states_arn("mapRun", f"{machine}/*")
        stacks = [
            stack.format_arn(service="cloudformation", resource="stack", resource_name=f"{name}/*")
            for name in stack_names
        ]
        uploads = source_bucket.arn_for_objects(f"{SMOKE_PREFIX}*")
        reports = staging_bucket.arn_for_objects(STAGING_REPORTS)
        for sid, actions, resources in (
            ("ReadStackOutputs", ["cloudformation:DescribeStacks"], stacks),
            ("UploadSample", ["s3:PutObject"], [uploads]),
            ("ReadReport", ["s3:GetObject"], [reports]),
            ("StartExecution", ["states:StartExecution"], [state_machine.state_machine_arn]),
            ("WatchExecution", ["states:DescribeExecution", "states:ListMapRuns"], [executions]),
            ("WatchMapRun", ["states:DescribeMapRun"], [map_runs]),
        ):
            self.role.add_to_policy(iam.PolicyStatement(sid=sid, actions=actions, resources=resources))
        return {
            **{
                resource_finding(self, arn): "Smoke test: DescribeStacks on this environment's stacks "
                "(a stack ARN ends in its generated id)."
                for arn in stacks
            },
            resource_finding(self, uploads): "Smoke test: its sample is uploaded under smoke/ of the "
            "source bucket; nothing else there is writable.",
            resource_finding(self, reports): "Smoke test: the run's report (jobs/<jobId>/<runId>/"
            "report.json) of the staging bucket; the ids are generated per run.",
            resource_finding(self, executions): "Smoke test: DescribeExecution/ListMapRuns on this state "
            "machine's executions (their names are generated per run).",
            resource_finding(self, map_runs): "Smoke test: DescribeMapRun on this state machine's map "
            "runs (their ids are generated).",
        }
