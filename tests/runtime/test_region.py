"""The region every command works in: --region, AWS_REGION, AWS_DEFAULT_REGION, the profile's, us-east-1."""

from __future__ import annotations

import pytest

from mapload import region

pytestmark = pytest.mark.runtime


@pytest.mark.parametrize(
    ("explicit", "variables", "expected"),
    [
        ("ap-south-1", {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-2"}, "ap-south-1"),
        (None, {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-2"}, "eu-west-1"),
        (None, {"AWS_DEFAULT_REGION": "eu-west-2"}, "eu-west-2"),
        (None, {}, "us-east-1"),
    ],
)
def test_the_region_comes_from_the_option_then_the_standard_variables(
    monkeypatch: pytest.MonkeyPatch, explicit: str | None, variables: dict[str, str], expected: str
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert region.resolve(explicit) == expected
