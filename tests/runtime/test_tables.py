"""Tables made outside CloudFormation (mapload/tables.py): a new table waited for until ACTIVE, and
its TTL turned on or, when it stays off, one line saying why (never silently)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from mapload.emulator import moto_patches
from mapload.tables import create_pk_sk_table, enable_ttl

pytestmark = [pytest.mark.runtime]


def test_a_created_table_is_active_and_usable_at_once_when_dynamodb_keeps_it_creating() -> None:
    # Given DynamoDB's behaviour (the emulator's patch): a new table is CREATING for a moment
    with mock_aws():
        moto_patches.TABLE_CREATING.install()
        try:
            db = boto3.client("dynamodb", region_name="us-east-1")
            # When the table is created
            create_pk_sk_table(db, "t")
            # Then it is ACTIVE and its items usable as soon as the call returns
            status = db.describe_table(TableName="t")["Table"]["TableStatus"]
            db.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "b"}})
        finally:
            moto_patches.TABLE_CREATING.uninstall()
    assert status == "ACTIVE"


def test_ttl_is_turned_on_once_and_a_repeat_asks_nothing_of_update_time_to_live() -> None:
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "t")

        first = enable_ttl(db, "t", "expiresAt")
        again = enable_ttl(Refusing(db), "t", "expiresAt")  # DynamoDB refuses a repeated update

        described = db.describe_time_to_live(TableName="t")["TimeToLiveDescription"]
    assert first is None and again is None
    assert described == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}


def test_ttl_on_another_attribute_is_said_not_swallowed() -> None:
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "t")
        db.update_time_to_live(
            TableName="t", TimeToLiveSpecification={"Enabled": True, "AttributeName": "other"}
        )

        said = enable_ttl(db, "t", "expiresAt")

    assert said == "table t has TTL on 'other', not 'expiresAt': its items will not expire"


def test_an_endpoint_that_refuses_ttl_is_said_with_its_error() -> None:
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(db, "t")

        said = enable_ttl(Refusing(db), "t", "expiresAt")

    assert said == (
        "table t: TTL on 'expiresAt' could not be turned on (ValidationException: TimeToLive is "
        "already enabled): its items will not expire"
    )


class Refusing:
    """A DynamoDB client whose UpdateTimeToLive is refused as DynamoDB refuses a repeated one."""

    def __init__(self, db: Any) -> None:
        self.db = db

    def describe_time_to_live(self, **kwargs: Any) -> Any:
        return self.db.describe_time_to_live(**kwargs)

    def update_time_to_live(self, **kwargs: Any) -> Any:
        error = {"Error": {"Code": "ValidationException", "Message": "TimeToLive is already enabled"}}
        raise ClientError(error, "UpdateTimeToLive")  # type: ignore[arg-type]
