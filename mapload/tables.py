"""The pk/sk (string) on-demand table shape of the ledger and of the default target table, for
creating them outside CloudFormation: `mapload upload --env local`, the benchmark, tests."""

from __future__ import annotations

from typing import Any

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


def create_pk_sk_table(client: Any, name: str) -> str:
    """Create an on-demand table keyed by pk/sk strings; returns its name."""
    client.create_table(TableName=name, **PK_SK_TABLE)
    return name
