"""Command-line arguments several mapload commands share, each said once."""

from __future__ import annotations

from typing import Any

REGION_HELP = "AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1)"
DEPLOYED_ENV_HELP = "the deployed environment (stacks Mapload-<env>-*)"
# A deployed environment is in one region: no fallback, a missing region is an error.
DEPLOYED_REGION_HELP = "AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's)"


def add_job_arguments(
    parser: Any, *, env_help: str, env_default: str | None = None, region_help: str = REGION_HELP
) -> None:
    """--env (required unless it has a default), --spec and --region of a command that runs a job."""
    if env_default is None:
        parser.add_argument("--env", required=True, help=env_help)
    else:
        parser.add_argument("--env", default=env_default, help=env_help)
    parser.add_argument("--spec", required=True, help="execution input as JSON, without 'source'")
    add_region_argument(parser, region_help)


def add_region_argument(parser: Any, region_help: str = REGION_HELP) -> None:
    parser.add_argument("--region", help=region_help)
