"""Tables created outside CloudFormation (the embedded run, `mapload upload --env local`, the
benchmark, tests): the pk/sk (string) on-demand shape of the ledger and of the default target
table, waiting for a new table to be ACTIVE, and turning its TTL on."""

from __future__ import annotations

import math
from typing import Any, Final

from botocore.exceptions import ClientError

PK_SK_TABLE: dict[str, Any] = {
    "KeySchema": [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ],
    "BillingMode": "PAY_PER_REQUEST",
}
# The ledger's TTL attribute (stacks/data.py's LEDGER_TTL_ATTRIBUTE, which this module does not
# import: it would load the CDK into `mapload upload`; tests/contract/test_contract.py holds them equal).
LEDGER_TTL_ATTRIBUTE: Final = "expiresAt"
# How often DescribeTable is asked while a new table is CREATING, and for how long at most. The
# tables made here are on local endpoints (the emulator's is CREATING for limits.CREATING_SECONDS):
# a short poll keeps a run from waiting whole seconds for a table that is already ACTIVE.
POLL_SECONDS: Final = 0.1
ACTIVE_WITHIN_SECONDS: Final = 120.0


def wait_until_active(client: Any, name: str, *, poll_seconds: float = POLL_SECONDS) -> None:
    """Return once DescribeTable says the table is ACTIVE (the SDK's `table_exists` waiter):
    DynamoDB keeps a new table CREATING for seconds and answers requests on its items
    ResourceNotFoundException meanwhile. botocore's WaiterError past ACTIVE_WITHIN_SECONDS."""
    attempts = max(1, math.ceil(ACTIVE_WITHIN_SECONDS / poll_seconds))
    client.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": poll_seconds, "MaxAttempts": attempts}
    )


def create_pk_sk_table(client: Any, name: str, *, poll_seconds: float = POLL_SECONDS) -> str:
    """Create an on-demand table keyed by pk/sk strings and wait until it is ACTIVE; its name."""
    client.create_table(TableName=name, **PK_SK_TABLE)
    wait_until_active(client, name, poll_seconds=poll_seconds)
    return name


def enable_ttl(client: Any, name: str, attribute: str) -> str | None:
    """Turn table `name`'s TTL on for `attribute`. None when it is on (it was, or is now); else
    one line saying why it stays off. The caller says it: TTL only decides how long a local
    endpoint keeps ledger items, never what a run writes or reports, so it fails no run. On is
    read first (DescribeTimeToLive): DynamoDB refuses an UpdateTimeToLive that repeats the
    setting (ValidationException), which the old code swallowed with every other error."""
    try:
        current = client.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        if current.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
            if current.get("AttributeName") == attribute:
                return None
            return (
                f"table {name} has TTL on {current.get('AttributeName')!r}, not {attribute!r}: "
                "its items will not expire"
            )
        client.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute}
        )
    except ClientError as error:
        found = error.response.get("Error", {})
        return (
            f"table {name}: TTL on {attribute!r} could not be turned on "
            f"({found.get('Code', 'error')}: {found.get('Message', error)}): its items will not expire"
        )
    return None
