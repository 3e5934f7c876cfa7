"""The pipeline's settings (stacks/pipeline.py): cdk.json's `mapload.pipeline`; what a promoted one needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Self

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from stacks.settings import (
    INTEGER,
    EnvironmentName,
    MaploadConfigError,
    Says,
    Section,
    Site,
    as_list,
    refusal,
    rule_error,
)

_CONNECTION_ARN = (
    r"arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:[0-9]{12}:connection/[A-Za-z0-9-]+"
)
_PIPELINE = "mapload.pipeline"
Stages = Annotated[
    tuple[EnvironmentName, ...],
    BeforeValidator(as_list),
    Says("a list of environment names", item="an environment name"),
]


class PipelineConfig(Section):
    """The `mapload.pipeline` block of cdk.json: where the pipeline lives and what it promotes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    account: Annotated[
        str,
        Field(
            pattern=r"^[0-9]{12}$",
            description="the AWS account the pipeline itself runs in (CodePipeline, CodeBuild, the "
            "artifact bucket)",
        ),
        Says("the 12-digit AWS account the pipeline runs in"),
    ]
    region: Annotated[
        str,
        Field(
            pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]+$",
            description="the AWS region the pipeline itself runs in (CodePipeline, CodeBuild, the "
            "artifact bucket)",
        ),
        Says("the AWS region the pipeline runs in, such as eu-west-2"),
    ]
    connection_arn: Annotated[
        str,
        Field(
            pattern=f"^{_CONNECTION_ARN}$",
            description="a CodeStar/CodeConnections connection (`arn:aws:codeconnections:…:connection/…`) "
            "that can read the repository",
        ),
        Says("the ARN of a CodeStar/CodeConnections connection to the repository host"),
    ]
    repository: Annotated[
        str,
        Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", description="the repository as `owner/name`"),
        Says("the repository as owner/name"),
    ]
    branch: Annotated[
        str,
        Field(pattern=r"^[A-Za-z0-9._/-]{1,255}$", description="the branch whose commits are promoted"),
        Says("the branch to deploy", required=True),
    ] = "main"
    stages: Annotated[
        Stages,
        Field(
            description="environments deployed, in this order (each once, each defined under `environments`)"
        ),
    ] = ("dev", "staging", "prod")
    smoke_test_after: Annotated[
        Stages,
        Field(
            description="after these stages deploy, a CodeBuild step runs `mapload start` on a sample and "
            "stops the promotion unless it SUCCEEDED and reconciles"
        ),
    ] = ("staging",)
    approval_before: Annotated[
        Stages,
        Field(description="these stages start with a manual approval (`PromoteTo<Env>`)"),
    ] = ("prod",)
    smoke_test_rows: Annotated[
        int,
        Field(
            ge=1,
            le=1_000_000,
            description="rows in the smoke test's generated sample (1..1,000,000)",
        ),
        INTEGER,
    ] = 2000

    @model_validator(mode="after")
    def _stages(self, info: ValidationInfo) -> Self:
        """Each listed name is an environment of cdk.json; smoke tests and approvals are of stages."""
        defined: Sequence[str] = (info.context or {}).get("environments", ())
        for field in ("stages", "smoke_test_after", "approval_before"):
            for name in getattr(self, field):
                if name not in defined:
                    raise rule_error(
                        field,
                        f"names {name!r}, which mapload.environments does not define ({', '.join(defined)})",
                    )
        if not self.stages or len(set(self.stages)) != len(self.stages):
            raise rule_error("stages", "must name at least one environment, each once")
        for field in ("smoke_test_after", "approval_before"):
            outside = [name for name in getattr(self, field) if name not in self.stages]
            if outside:
                raise rule_error(field, f"names {outside[0]!r}, which is not in stages")
        return self


def load_pipeline(context_block: Any, environment_names: Sequence[str]) -> PipelineConfig:
    """Parse `mapload.pipeline`; every error names the missing or wrong field."""
    block = context_block.get("pipeline") if isinstance(context_block, Mapping) else None
    if not isinstance(block, Mapping):
        raise MaploadConfigError(
            _PIPELINE,
            "is required with -c pipeline=true: an object with account, region, connection_arn "
            "(a CodeStar/CodeConnections connection), repository (owner/name) and branch",
        )
    known = sorted(PipelineConfig.model_fields)
    unknown = sorted(set(block) - set(known))
    if unknown:
        raise MaploadConfigError(f"{_PIPELINE}.{unknown[0]}", f"unknown setting; known: {', '.join(known)}")
    try:
        return PipelineConfig.model_validate(block, context={"environments": tuple(environment_names)})
    except ValidationError as error:
        field, message = refusal(PipelineConfig, error, block, required=" for the pipeline")
        raise MaploadConfigError(f"{_PIPELINE}.{field}", message) from None


def require_target(config: Site) -> tuple[str, str]:
    """A promoted environment must say where it goes: the pipeline deploys across accounts."""
    for field, value in (("account", config.account), ("region", config.region)):
        if not value:
            raise MaploadConfigError(
                f"mapload.environments.{config.name}.{field}",
                f"is required when the pipeline deploys {config.name!r} (-c pipeline=true)",
            )
    assert config.account and config.region
    return config.account, config.region
