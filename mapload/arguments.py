"""Command-line arguments several mapload commands share, each said once."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mapload import ROOT

REGION_HELP = "AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1)"
DEPLOYED_ENV_HELP = "the deployed environment (stacks Mapload-<env>-*)"
# A deployed environment is in one region: no fallback, a missing region is an error.
DEPLOYED_REGION_HELP = "AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's)"


def known_environments() -> tuple[str, ...]:
    """The environments cdk.json defines (context `mapload.environments`); () when unreadable."""
    try:
        context = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
        return tuple(context["mapload"]["environments"])
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def environment(value: str) -> str:
    """--env: one of cdk.json's environments, else a one-line usage error naming them."""
    known = known_environments()
    if known and value not in known:
        raise argparse.ArgumentTypeError(
            f"unknown environment {value!r}; cdk.json defines {', '.join(known)}"
        )
    return value


def environment_or_local(value: str) -> str:
    """upload's --env: `local` (the AWS_ENDPOINT_URL* endpoints) or one of cdk.json's environments."""
    return value if value == "local" else environment(value)


def add_env_argument(parser: Any, env_help: str, env_default: str | None = None) -> None:
    """--env, checked against cdk.json (required unless it has a default)."""
    if env_default is None:
        parser.add_argument("--env", required=True, type=environment, help=env_help)
    else:
        parser.add_argument("--env", default=env_default, type=environment, help=env_help)


def add_job_arguments(
    parser: Any, *, env_help: str, env_default: str | None = None, region_help: str = REGION_HELP
) -> None:
    """--env (required unless it has a default), --spec and --region of a command that runs a job."""
    add_env_argument(parser, env_help, env_default)
    parser.add_argument("--spec", required=True, help="execution input as JSON, without 'source'")
    add_region_argument(parser, region_help)


def add_region_argument(parser: Any, region_help: str = REGION_HELP) -> None:
    parser.add_argument("--region", help=region_help)
