"""`mapload serve`: where the embedded emulator's server listens, and how runs and tools reach it."""

from __future__ import annotations

DEFAULT_PORT = 5005
# What `run-local`, `upload --env local` and the user's own tools read to reach the server.
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_S3")


def exports(endpoint: str) -> list[str]:
    """The shell lines that point mapload (and the AWS CLI) at the server."""
    return [f"export {name}={endpoint}" for name in ENDPOINT_VARIABLES]
