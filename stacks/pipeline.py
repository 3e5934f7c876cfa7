"""Promotion: a CDK Pipeline deploying the same MaploadStage to each environment in order.

dev → staging → smoke test (a real execution on a small sample) → manual approval → prod.
Built only when the app is synthesized with `-c pipeline=true`; without it app.py builds one
environment's stage as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import pipelines
from constructs import Construct

from stacks.config import DATA_KEY_CREATE, EnvironmentConfig, PipelineConfig, require_target
from stacks.data import KEY_WRITE
from stacks.nag import acknowledge, acknowledge_wildcards, wildcard_findings
from stacks.stage import DATA_STACK_ID, LOADER_STACK_ID, MaploadStage, stage_id

PIPELINE_STACK_ID: Final[str] = "Mapload-Pipeline"
# Where the smoke test uploads its sample in the source bucket (its S3 grant is this prefix).
SMOKE_PREFIX: Final[str] = "smoke/"
# CloudFormation names a stack's bucket `<stack name>-<logical id>-<suffix>` (lowercased) and
# its state machine `<logical id>-<suffix>`: the smoke test's grants match those prefixes.
STATE_MACHINE_LOGICAL_PREFIX: Final[str] = "ShardedLoaderStateMachine"
BUILD_IMAGE: Final[codebuild.IBuildImage] = codebuild.LinuxBuildImage.STANDARD_7_0


class PipelineStack(cdk.Stack):
    """The promotion pipeline (self-mutating CDK Pipelines, CodePipeline V2)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline_config: PipelineConfig,
        environments: Sequence[EnvironmentConfig],
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            env=cdk.Environment(account=pipeline_config.account, region=pipeline_config.region),
            termination_protection=True,
            description="mapload: promotion pipeline (dev -> staging -> smoke test -> approval -> prod)",
            **kwargs,
        )
        self.config = pipeline_config
        by_name = {env.name: env for env in environments}
        targets = {name: require_target(by_name[name]) for name in pipeline_config.stages}
        cross_account = any(account != pipeline_config.account for account, _ in targets.values())

        source = pipelines.CodePipelineSource.connection(
            pipeline_config.repository,
            pipeline_config.branch,
            connection_arn=pipeline_config.connection_arn,
        )
        self.synth_step = _synth_step(source)
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            synth=self.synth_step,
            cross_account_keys=cross_account,
            enable_key_rotation=cross_account,
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(build_image=BUILD_IMAGE)
            ),
        )
        self.stages: dict[str, MaploadStage] = {}
        self.smoke_tests: dict[str, pipelines.CodeBuildStep] = {}
        self.approvals: dict[str, pipelines.ManualApprovalStep] = {}
        for name in pipeline_config.stages:
            self._add_stage(by_name[name], targets[name], source)
        # Build the pipeline now so its constructs exist for the acknowledgements below.
        self.pipeline.build_pipeline()
        self._acknowledge_findings()

    def _add_stage(
        self, config: EnvironmentConfig, target: tuple[str, str], source: pipelines.IFileSetProducer
    ) -> None:
        """One environment's stage, behind its approval and followed by its smoke test if asked."""
        name = config.name
        stage = MaploadStage(self, stage_id(name), config=config)
        self.stages[name] = stage
        pre: list[pipelines.Step] = []
        post: list[pipelines.Step] = []
        if name in self.config.approval_before:
            approval = pipelines.ManualApprovalStep(
                f"PromoteTo{name.capitalize()}",
                comment=f"Deploy mapload to {name} ({config.account}/{config.region})?",
            )
            self.approvals[name] = approval
            pre.append(approval)
        if name in self.config.smoke_test_after:
            smoke = self._smoke_test(name, *target, source=source, data_key=config.data.data_key)
            self.smoke_tests[name] = smoke
            post.append(smoke)
        self.pipeline.add_stage(stage, pre=pre, post=post)

    def _smoke_test(
        self,
        env_name: str,
        account: str,
        region: str,
        *,
        source: pipelines.IFileSetProducer,
        data_key: str | None = None,
    ) -> pipelines.CodeBuildStep:
        """Upload a small sample, run it with `mapload start`, fail unless SUCCEEDED and reconciled."""
        statements = _smoke_test_statements(f"arn:{self.partition}", env_name, account, region, data_key)
        return pipelines.CodeBuildStep(
            f"SmokeTest{env_name.capitalize()}",
            # The repository at the deployed commit: the mapload command and the example spec.
            input=source,
            install_commands=[
                "python3 -m venv .venv",
                ".venv/bin/pip install --quiet -r runtime/requirements.txt -c constraints.txt",
                ".venv/bin/pip install --quiet --no-deps -e .",
            ],
            commands=[
                f".venv/bin/mapload sample smoke.csv --rows {self.config.smoke_test_rows}",
                # Exits non-zero unless the execution SUCCEEDED and read == written + skipped + rejected.
                f".venv/bin/mapload start --env {env_name} --region {region} smoke.csv "
                f"--key-prefix {SMOKE_PREFIX} --spec examples/postcodes.spec.json "
                "--report smoke-report.json --no-progress",
            ],
            role_policy_statements=statements,
            build_environment=codebuild.BuildEnvironment(build_image=BUILD_IMAGE),
            timeout=cdk.Duration.minutes(30),
        )

    # -- cdk-nag -----------------------------------------------------------------------------

    def _acknowledge_findings(self) -> None:
        """Each finding on the construct that has it, with the reason it is by design.

        IAM5 findings are matched one by one against the patterns in `_WILDCARD_REASONS`; a
        wildcard nobody explained stays unacknowledged and fails the synth.
        """
        pipeline = self.pipeline.pipeline
        bucket = pipeline.artifact_bucket.node.default_child
        assert isinstance(bucket, cdk.CfnResource)
        acknowledge(
            bucket,
            "AwsSolutions-S1",
            "Pipeline artifact bucket, written and read only by this pipeline's roles; CloudTrail "
            "records its API calls. Server access logs would duplicate that for build artifacts.",
        )
        for construct in self.pipeline.node.find_all():
            if isinstance(construct, codebuild.CfnProject):
                acknowledge(
                    construct,
                    "AwsSolutions-CB4",
                    "Build artifacts go to the pipeline's artifact bucket (encrypted, with the "
                    "pipeline's KMS key when it deploys across accounts); a per-project key adds "
                    "nothing for synthesized templates and a generated sample file.",
                )
            elif isinstance(construct, iam.Policy):
                findings = wildcard_findings(construct)
                reasons = {
                    finding: reason
                    for finding in findings
                    for pattern, reason in _WILDCARD_REASONS
                    if pattern.fullmatch(finding)
                }
                acknowledge_wildcards(construct, reasons)


def _synth_step(source: pipelines.IFileSetProducer) -> pipelines.ShellStep:
    """The CodeBuild synth: the CLI bundles every stage's Lambda package from PyPI wheels for the
    Lambda platform (stacks/bundling.py), as a manual deploy does: no Docker, no QEMU."""
    return pipelines.ShellStep(
        "Synth",
        input=source,
        install_commands=[
            "npm ci --no-audit --no-fund --loglevel=error",
            "python3 -m venv .venv",
            ".venv/bin/pip install --quiet -r requirements.txt -c constraints.txt",
        ],
        commands=["node_modules/.bin/cdk synth -c pipeline=true"],
        primary_output_directory="cdk.out",
    )


def _smoke_test_statements(
    arn: str, env_name: str, account: str, region: str, data_key: str | None
) -> list[iam.PolicyStatement]:
    """What the smoke test does in the tested environment: read its stacks' outputs, upload a
    sample, start and watch an execution, read its report (through the data key if one is set)."""
    stack_prefix = stage_id(env_name)
    bucket_prefix = f"{stack_prefix}-{DATA_STACK_ID}-".lower()
    machine = f"{STATE_MACHINE_LOGICAL_PREFIX}*"
    statements = [
        iam.PolicyStatement(
            sid="ReadStackOutputs",
            actions=["cloudformation:DescribeStacks"],
            resources=[
                f"{arn}:cloudformation:{region}:{account}:stack/{stack_prefix}-{stack_id}/*"
                for stack_id in (DATA_STACK_ID, LOADER_STACK_ID)
            ],
        ),
        iam.PolicyStatement(
            sid="UploadSample",
            actions=["s3:PutObject"],
            resources=[f"{arn}:s3:::{bucket_prefix}*/{SMOKE_PREFIX}*"],
        ),
        iam.PolicyStatement(
            sid="ReadReport",
            actions=["s3:GetObject"],
            resources=[f"{arn}:s3:::{bucket_prefix}*/jobs/*"],
        ),
        iam.PolicyStatement(
            sid="StartExecution",
            actions=["states:StartExecution"],
            resources=[f"{arn}:states:{region}:{account}:stateMachine:{machine}"],
        ),
        iam.PolicyStatement(
            sid="WatchExecution",
            actions=["states:DescribeExecution", "states:ListMapRuns"],
            resources=[f"{arn}:states:{region}:{account}:execution:{machine}:*"],
        ),
        iam.PolicyStatement(
            sid="WatchMapRun",
            actions=["states:DescribeMapRun"],
            resources=[f"{arn}:states:{region}:{account}:mapRun:{machine}/*"],
        ),
    ]
    if data_key is not None:
        # The sample and the report are SSE-KMS objects under the environment's data key. A key
        # the Data stack creates has a generated id: any key of the account and region, but only
        # through S3 and only for the environment's buckets (the encryption context names them).
        key = data_key if data_key != DATA_KEY_CREATE else f"{arn}:kms:{region}:{account}:key/*"
        statements.append(
            iam.PolicyStatement(
                sid="UseDataKey",
                actions=list(KEY_WRITE),
                resources=[key],
                conditions={
                    "StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"},
                    "StringLike": {"kms:EncryptionContext:aws:s3:arn": f"{arn}:s3:::{bucket_prefix}*"},
                },
            )
        )
    return statements


_ACCOUNT_ARN = r"Resource::arn:[a-z*-]+:{service}:[a-z0-9-]*:\d{{12}}:"
_WILDCARD_REASONS: Final[tuple[tuple[re.Pattern[str], str], ...]] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        (
            r"Action::(s3:(Abort|DeleteObject|GetBucket|GetObject|List)\*|kms:(GenerateDataKey|ReEncrypt)\*)",
            "CDK Pipelines grants its roles read/write on the pipeline's own artifact bucket (and "
            "its key when cross-account); the actions are scoped to that bucket and key.",
        ),
        (
            r"Resource::<PipelineArtifactsBucket[0-9A-F]{8}\.Arn>/\*",
            "Objects of this pipeline's artifact bucket: artifact keys are generated per execution.",
        ),
        (
            _ACCOUNT_ARN.format(service="logs") + r"log-group:/aws/codebuild/(<[A-Za-z0-9]+>|\*)(:\*)?",
            "CodeBuild log groups are /aws/codebuild/<project>; the log streams under them are "
            "named per build (the asset role covers the asset projects CDK creates by name later).",
        ),
        (
            _ACCOUNT_ARN.format(service="codebuild") + r"report-group/(<[A-Za-z0-9]+>-)?\*",
            "CodeBuild report groups are created per build, named after the project.",
        ),
        (
            _ACCOUNT_ARN.format(service="iam") + r"role/\*",
            "Self-mutation assumes the CDK bootstrap roles only: the statement is conditioned on "
            "iam:ResourceTag/aws-cdk:bootstrap-role (deploy, file- and image-publishing).",
        ),
        (
            r"Resource::\*",
            "cloudformation:DescribeStacks and s3:ListBucket (self-mutation) and codebuild "
            "StartBuild/BatchGetBuilds/StopBuild (asset publishing) as CDK Pipelines grants them; "
            "the publishing projects are created after the role, so it cannot name them.",
        ),
        (
            _ACCOUNT_ARN.format(service="cloudformation") + r"stack/Mapload-[a-z0-9]+-(Data|Loader)/\*",
            "Smoke test: DescribeStacks on the tested environment's two stacks (any stack id).",
        ),
        (
            r"Resource::arn:[a-z-]+:s3:::mapload-[a-z0-9]+-data-\*/(smoke|jobs)/\*",
            "Smoke test: PutObject of its sample under smoke/ and GetObject of its report under "
            "jobs/, in the buckets CloudFormation names after the environment's Data stack.",
        ),
        (
            _ACCOUNT_ARN.format(service="kms") + r"key/\*",
            "Smoke test: the environment's data key when the Data stack creates it (its id is "
            "generated), only via S3 and only for the environment's buckets (kms:EncryptionContext).",
        ),
        (
            _ACCOUNT_ARN.format(service="states")
            + r"(stateMachine:ShardedLoaderStateMachine\*|execution:ShardedLoaderStateMachine\*:\*"
            + r"|mapRun:ShardedLoaderStateMachine\*/\*)",
            "Smoke test: start and watch executions (and their map runs) of the loader's state "
            "machine, whose name CloudFormation generates from its logical id.",
        ),
    )
)
