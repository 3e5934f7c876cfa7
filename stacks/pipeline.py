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

from stacks.config import EnvironmentConfig
from stacks.nag import acknowledge, acknowledge_wildcards, wildcard_findings
from stacks.pipeline_settings import PipelineConfig, require_target
from stacks.smoke_test import SMOKE_PREFIX, role_arn, smoke_build_role_name, smoke_role_name
from stacks.stage import MaploadStage, stage_id

PIPELINE_STACK_ID: Final[str] = "Mapload-Pipeline"
# The smoke test's buildspec: the tested environment's role ARN, and the profile assuming it.
SMOKE_ROLE_VARIABLE: Final[str] = "MAPLOAD_SMOKE_ROLE_ARN"
SMOKE_PROFILE: Final[str] = "mapload-smoke"
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
        smoke = name in self.config.smoke_test_after
        stage = MaploadStage(
            self, stage_id(name), config=config, smoke_test_from=self.config.account if smoke else None
        )
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
        if smoke:
            step = self._smoke_test(name, *target, source=source)
            self.smoke_tests[name] = step
            post.append(step)
        self.pipeline.add_stage(stage, pre=pre, post=post)

    def _smoke_test(
        self, env_name: str, account: str, region: str, *, source: pipelines.IFileSetProducer
    ) -> pipelines.CodeBuildStep:
        """Upload a small sample, run it with `mapload start`, fail unless SUCCEEDED and reconciled:
        as the role the tested stage created (stacks/smoke_test.py), whichever account it is in."""
        target = role_arn(self.partition, account, smoke_role_name(env_name, region))
        build_role = iam.Role(
            # Under the pipeline: its CDK-added grants get the pipeline's acknowledgements below.
            self.pipeline,
            f"SmokeTest{env_name.capitalize()}Role",
            # Fixed: the tested stage's role trusts exactly this ARN (stacks/smoke_test.py).
            role_name=smoke_build_role_name(env_name, region),
            assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description=f"mapload pipeline: the {env_name} smoke test's build (assumes {target})",
        )
        return pipelines.CodeBuildStep(
            f"SmokeTest{env_name.capitalize()}",
            # The repository at the deployed commit: the mapload command and the example spec.
            input=source,
            install_commands=[
                "python3 -m venv .venv",
                ".venv/bin/pip install --quiet -r runtime/requirements.txt -c constraints.txt",
                ".venv/bin/pip install --quiet --no-deps -e .",
            ],
            env={SMOKE_ROLE_VARIABLE: target},
            commands=[
                f".venv/bin/mapload sample smoke.csv --rows {self.config.smoke_test_rows}",
                # A profile that assumes the tested environment's role from CodeBuild's credentials
                # (the AWS SDKs refresh it; no keys in the build's environment or logs).
                f'aws configure set profile.{SMOKE_PROFILE}.role_arn "${SMOKE_ROLE_VARIABLE}"',
                f"aws configure set profile.{SMOKE_PROFILE}.credential_source EcsContainer",
                # Exits non-zero unless the execution SUCCEEDED and read == written + skipped + rejected.
                f"AWS_PROFILE={SMOKE_PROFILE} .venv/bin/mapload start --env {env_name} --region {region} "
                f"smoke.csv --key-prefix {SMOKE_PREFIX} --spec examples/postcodes.spec.json "
                "--report smoke-report.json --no-progress",
            ],
            role=build_role,
            role_policy_statements=[
                iam.PolicyStatement(sid="AssumeSmokeTestRole", actions=["sts:AssumeRole"], resources=[target])
            ],
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
    )
)
