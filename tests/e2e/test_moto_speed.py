"""mapload/emulator/moto_patches.py: the same backends and working clients, fewer locks and client builds."""

from __future__ import annotations

import pytest
from moto import mock_aws
from moto.core.base_backend import BackendDict
from moto.s3.models import s3_backends
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.utils import boto_client

from mapload.emulator import moto_patches

pytestmark = pytest.mark.e2e


def test_install_reuses_clients_and_uninstall_restores_moto() -> None:
    originals = (BackendDict.__getitem__, boto_client.boto_client_for, lambda_eval_utils.boto_client_for)
    with mock_aws():
        moto_patches.install(*moto_patches.SPEED)
        try:
            first = lambda_eval_utils.boto_client_for("eu-west-2", "s3")
            assert first is boto_client.boto_client_for("eu-west-2", "s3")
            assert first is not boto_client.boto_client_for("eu-west-2", "dynamodb")
            assert first is not boto_client.boto_client_for("us-east-1", "s3")
            # The reused client works against the mock like a new one.
            first.create_bucket(
                Bucket="mapload-speed-check", CreateBucketConfiguration={"LocationConstraint": "eu-west-2"}
            )
            assert [b["Name"] for b in first.list_buckets()["Buckets"]] == ["mapload-speed-check"]
        finally:
            moto_patches.uninstall(*moto_patches.SPEED)
    assert (
        BackendDict.__getitem__,
        boto_client.boto_client_for,
        lambda_eval_utils.boto_client_for,
    ) == originals


def test_the_lock_free_lookup_returns_moto_s_backend_and_still_creates_new_ones() -> None:
    with mock_aws():
        moto_patches.install(*moto_patches.SPEED)
        try:
            backend = s3_backends["123456789012"]
            assert s3_backends["123456789012"] is backend  # the lock-free path: the same object
            assert "210987654321" not in dict.keys(s3_backends)
            created = s3_backends["210987654321"]  # the locked path creates it, as moto does
            assert created is not backend and created is s3_backends["210987654321"]
            assert s3_backends in BackendDict._instances  # registered for moto's reset
        finally:
            moto_patches.uninstall(*moto_patches.SPEED)
