"""The Data stack's settings (stacks/data.py): the table's shape and capacity, lifecycles, the data key."""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal, Self, get_args

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from stacks.settings import (
    INTEGER,
    KMS_KEY_ARN,
    NULLABLE,
    Days,
    MaploadConfigError,
    Says,
    Site,
    as_list,
    from_json,
    once,
    rule_error,
)

KeyType = Literal["S", "N", "B"]
BillingMode = Literal["on_demand", "provisioned"]
KEY_TYPES: Final[tuple[str, ...]] = get_args(KeyType)
TABLE_BILLING_MODES: Final[tuple[str, ...]] = get_args(BillingMode)
# `data_key: "create"`: the Data stack creates the customer managed key (else a key ARN or null).
DATA_KEY_CREATE: Final[str] = "create"
# An on-demand table starts warm at 4,000 write units/s; warm throughput can only raise that.
MIN_WARM_WRITE_UNITS: Final[int] = 4000
# DynamoDB's default per-table quota is 40,000 units/s; the bound only catches a misplaced digit.
MAX_TABLE_UNITS: Final[int] = 10_000_000
_TABLE_NAME = r"[A-Za-z0-9_.-]{3,255}"
_TABLE_ARN = re.compile(rf"^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{{12}}:table/(?P<name>{_TABLE_NAME})$")
# A `tables` entry: a table name, a name prefix ending in `*` (`*` alone: any table), or either as
# the ARN of the environment's own account and region.
_TABLE_ENTRY_NAME = r"(?:[A-Za-z0-9_.-]{3,255}|[A-Za-z0-9_.-]{0,254}\*)"
_TABLE_ENTRY_ARN = r"arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/"
_TABLE_ENTRY = re.compile(rf"^(?:{_TABLE_ENTRY_ARN})?(?P<name>{_TABLE_ENTRY_NAME})$")
TableEntry = Annotated[str, Field(pattern=rf"^(?:{_TABLE_ENTRY_ARN})?{_TABLE_ENTRY_NAME}$")]
KmsKeyArn = Annotated[str, Field(pattern=rf"^{KMS_KEY_ARN}$")]
TableUnits = Annotated[int | None, Field(ge=1, le=MAX_TABLE_UNITS), INTEGER, NULLABLE]


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class KeyAttribute:
    """One DynamoDB key attribute (name and scalar type S, N or B)."""

    name: Annotated[str, Field(min_length=1, max_length=255), Says("1 to 255 characters")]
    type: KeyType


KEY_SHAPE: Final[Says] = Says('{"name": ..., "type": "S"|"N"|"B"}')


class DataConfig(Site):
    """What the Data stack reads: the target table's shape and capacity, lifecycles, the data key."""

    table_partition_key: Annotated[
        KeyAttribute,
        BeforeValidator(from_json),
        KEY_SHAPE,
        Field(alias="partition_key", description="the target table's partition key (`S`, `N` or `B`)"),
    ] = KeyAttribute("pk", "S")
    table_sort_key: Annotated[
        KeyAttribute | None,
        BeforeValidator(from_json),
        KEY_SHAPE,
        Field(alias="sort_key", description="the target table's sort key, or `null` for none"),
    ] = KeyAttribute("sk", "S")
    table_existing: Annotated[
        str | None,
        Field(
            alias="existing_table",
            pattern=rf"^({_TABLE_ARN.pattern[1:-1].replace('?P<name>', '')}|{_TABLE_NAME})$",
            description="load into this existing table (name or ARN) instead of creating one; IAM grants "
            "exactly that table. Its key must match `partition_key`/`sort_key`. An ARN must be of the "
            "environment's own account and region (synth fails otherwise, comparing with `account`/"
            "`region`, or with the CLI's when they are null): the functions write with the table's name in "
            "their own account and region, and a numeric add's TransactWriteItems cannot span accounts "
            "or regions. To load a table elsewhere, deploy an environment to its account and region",
        ),
        NULLABLE,
        Says("a DynamoDB table name or table ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)"),
    ] = None
    table_existing_key: Annotated[
        str | None,
        Field(
            alias="existing_table_key",
            pattern=f"^{KMS_KEY_ARN}$",
            description="the customer managed KMS key an `existing_table` is encrypted with, if its owner "
            "chose one (`aws dynamodb describe-table` shows it as `SSEDescription.KMSMasterKeyArn`); null "
            "when the table uses an AWS owned or AWS managed key. DynamoDB uses a table's customer "
            "managed key with the caller's own KMS permissions, so the Worker is granted this key "
            "through DynamoDB as it is the data key (`kms:Decrypt`, `kms:GenerateDataKey`); without it "
            "every write to such a table is refused (AccessDenied). Only with `existing_table`; a key "
            "in the environment's region. Its key policy must let this account's IAM policies grant it",
        ),
        NULLABLE,
        Says("null or a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"),
    ] = None
    tables: Annotated[
        tuple[TableEntry, ...],
        BeforeValidator(as_list),
        AfterValidator(once("table")),
        Field(
            description="the tables, besides the environment's own (always allowed), that a job may name "
            "as its target (`dynamodb.table`): names, or prefixes ending in `*` (`catalog-*`; `*` alone: "
            "any table), each a name or the ARN of a table of the environment's own account and region "
            "(synth fails otherwise, as for `existing_table`). IAM grants the Worker its writes and Plan "
            "`dynamodb:DescribeTable` on exactly these tables (a prefix: its ARN pattern, which may also "
            "match the ledger's name: Plan never loads the ledger), besides Plan's DescribeTable on the "
            "environment's own (a `bulkPutItems` job's checks); Plan refuses any other name. Empty: only "
            "the environment's own table",
        ),
        Says(
            "a list of table names, prefixes ending in *, or table ARNs", item="a table name, prefix* or ARN"
        ),
    ] = ()
    table_keys: Annotated[
        tuple[KmsKeyArn, ...],
        BeforeValidator(as_list),
        AfterValidator(once("key")),
        Field(
            description="the customer managed KMS keys the `tables` are encrypted with, where their owners "
            "chose one; granted to the Worker through DynamoDB exactly as `existing_table_key` is. Keys "
            "in the environment's region",
        ),
        Says("a list of KMS key ARNs", item="a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"),
    ] = ()
    table_billing_mode: Annotated[
        BillingMode,
        Field(
            description="the target table's capacity: `on_demand` or `provisioned` (a created table only; "
            "an `existing_table` keeps its own)"
        ),
    ] = "on_demand"
    table_warm_write_units: Annotated[
        int | None,
        Field(
            ge=MIN_WARM_WRITE_UNITS,
            le=MAX_TABLE_UNITS,
            description="pre-warm the target table to this many write units/s (warm throughput, at least "
            "4000 — a new on-demand table starts at 4,000/s), so a large load does not wait for DynamoDB "
            "to scale up",
        ),
        INTEGER,
        NULLABLE,
    ] = None
    table_write_capacity: Annotated[
        TableUnits,
        Field(
            description="provisioned write units/s; required with `table_billing_mode: provisioned`, "
            "refused with `on_demand`"
        ),
    ] = None
    table_read_capacity: Annotated[
        TableUnits,
        Field(
            description="provisioned read units/s; required with `table_billing_mode: provisioned`, "
            "refused with `on_demand`"
        ),
    ] = None
    staging_expiry_days: Annotated[
        Days,
        Field(
            description="how long manifests, rejects and reports under `jobs/`, and decompressed sources "
            "under `prepared/`, are kept"
        ),
    ] = 14
    source_noncurrent_expiry_days: Annotated[
        Days,
        Field(
            description="how long replaced versions of source objects are kept (the source bucket is "
            "versioned)"
        ),
    ] = 7
    multipart_abort_days: Annotated[
        int,
        Field(
            ge=1,
            le=365,
            description="incomplete multipart uploads are aborted after this many days, in both buckets",
        ),
        INTEGER,
    ] = 1
    access_log_expiry_days: Annotated[Days, Field(description="S3 server access logs")] = 90
    data_key: Annotated[
        str | None,
        Field(
            pattern=f"^({DATA_KEY_CREATE}|{KMS_KEY_ARN})$",
            description="a customer managed KMS key for the data at rest: `null` (SSE-S3 buckets, the AWS "
            f'managed DynamoDB key, CloudWatch Logs\' own encryption), `"{DATA_KEY_CREATE}"` (the Data '
            "stack creates one key with yearly rotation, kept with the data under `retain_data`; no "
            "alias) or the ARN of an existing key in the environment's region "
            "(`arn:aws:kms:REGION:ACCOUNT:key/ID`). With a key, the source and staging buckets use "
            "SSE-KMS with S3 Bucket Keys, the created target table and the ledger use it as their "
            "customer managed key, so does the Neptune cluster's storage (set, changed or dropped on a "
            "deployed cluster, it replaces the cluster: `make deploy` refuses that), and so do the log "
            "groups of the functions, the state machine and the VPC flow logs; the access-log bucket "
            "stays SSE-S3 (S3 server access logging cannot deliver "
            'to an SSE-KMS bucket). See "The data key" below',
        ),
        NULLABLE,
        Says(
            f'null, "{DATA_KEY_CREATE}" (the Data stack creates a key) or a KMS key ARN '
            "(arn:aws:kms:REGION:ACCOUNT:key/ID)"
        ),
    ] = None

    @model_validator(mode="after")
    def _keys_and_capacity(self) -> Self:
        if self.table_sort_key and self.table_sort_key.name == self.table_partition_key.name:
            raise rule_error("sort_key.name", "must differ from partition_key.name")
        units = {
            "table_write_capacity": self.table_write_capacity,
            "table_read_capacity": self.table_read_capacity,
        }
        for field, value in units.items():
            if self.table_billing_mode == "provisioned" and value is None:
                raise rule_error(field, "required when table_billing_mode is provisioned (units per second)")
            if self.table_billing_mode == "on_demand" and value is not None:
                raise rule_error(
                    field,
                    "only for table_billing_mode provisioned; an on-demand table is pre-warmed "
                    "with table_warm_write_units instead",
                )
        return self

    @model_validator(mode="after")
    def _key_in_region(self) -> Self:
        # S3, DynamoDB and CloudWatch Logs only use a key in their own region.
        keys = (
            ("data_key", self.data_key_arn),
            ("existing_table_key", self.table_existing_key),
            *(("table_keys", key) for key in self.table_keys),
        )
        for setting, key in keys:
            if key is not None and self.region is not None and key.split(":")[3] != self.region:
                raise rule_error(
                    setting, f"must be a key in the environment's region {self.region}, got {key!r}"
                )
        if self.table_existing_key is not None and self.table_existing is None:
            raise rule_error(
                "existing_table_key",
                "only with existing_table (a created table uses data_key, or the AWS managed key)",
            )
        return self

    @model_validator(mode="after")
    def _table_in_environment(self) -> Self:
        refused = existing_table_refusal(self, self.account, self.region)
        if refused:
            raise rule_error("existing_table", refused)
        refused = tables_refusal(self, self.account, self.region)
        if refused:
            raise rule_error("tables", refused)
        return self

    @property
    def table_names(self) -> tuple[str, ...]:
        """The `tables` by name or prefix (an ARN's name part), as Plan compares a job's table."""
        return tuple(_entry_name(entry) for entry in self.tables)

    @property
    def table_key_arns(self) -> tuple[str, ...]:
        """Every customer managed key of a table the Worker writes: `existing_table_key`, `table_keys`."""
        return (*((self.table_existing_key,) if self.table_existing_key else ()), *self.table_keys)

    @property
    def data_key_arn(self) -> str | None:
        """The configured existing key's ARN (None when the key is created, or there is none)."""
        return None if self.data_key in (None, DATA_KEY_CREATE) else self.data_key

    @property
    def table_key(self) -> dict[str, str]:
        """Key schema as the runtime reads it: partition key first."""
        key: dict[str, str] = {self.table_partition_key.name: self.table_partition_key.type}
        if self.table_sort_key is not None:
            key[self.table_sort_key.name] = self.table_sort_key.type
        return key

    @property
    def table_existing_name(self) -> str | None:
        """The configured existing table's name (parsed from the ARN when one was given)."""
        if self.table_existing is None:
            return None
        match = _TABLE_ARN.match(self.table_existing)
        return match.group("name") if match else self.table_existing


def _entry_name(entry: str) -> str:
    match = _TABLE_ENTRY.match(entry)
    return match.group("name") if match else entry


def existing_table_refusal(config: DataConfig, account: str | None, region: str | None) -> str | None:
    """Why an `existing_table` ARN cannot be loaded from the `account` and `region` the environment
    deploys to (either None: unknown, not compared); None when it can."""
    match = _TABLE_ARN.match(config.table_existing or "")
    if match is None:
        return None
    return _elsewhere(match.group(0), account, region)


def tables_refusal(config: DataConfig, account: str | None, region: str | None) -> str | None:
    """Why a `tables` entry's ARN cannot be loaded from the environment's `account` and `region`
    (either None: not compared); None when every entry can."""
    for entry in config.tables:
        if entry.startswith("arn:"):
            refused = _elsewhere(entry, account, region)
            if refused:
                return f"{entry}: {refused}"
    return None


def _elsewhere(arn: str, account: str | None, region: str | None) -> str | None:
    """Why the table of `arn` is not of the environment's account and region; None when it is."""
    table_region, table_account = arn.split(":")[3:5]
    for what, table_value, own in (("account", table_account, account), ("region", table_region, region)):
        if own is not None and table_value != own:
            return (
                f"names a table in {what} {table_value}, but the environment deploys to {what} {own}: "
                "the functions write to a table of their own account and region (a numeric add's "
                "TransactWriteItems cannot span accounts or regions); deploy an environment to the "
                "table's account and region"
            )
    return None


def check_existing_table(config: DataConfig, cli_account: str | None, cli_region: str | None) -> None:
    """At synth: an environment whose `account`/`region` is null deploys to the CLI's; its
    `existing_table` and `tables` ARNs must be of that account and region."""
    account, region = config.account or cli_account, config.region or cli_region
    refused = existing_table_refusal(config, account, region)
    if refused:
        raise MaploadConfigError(f"mapload.environments.{config.name}.existing_table", refused)
    refused = tables_refusal(config, account, region)
    if refused:
        raise MaploadConfigError(f"mapload.environments.{config.name}.tables", refused)
