"""dynamodb.engine bulkPutItems: StartBulkPut and PollBulkPut, the functions that hand a job's staged
items to DynamoDB's bulk put items operation and follow it (runtime/bulk_puts/), and what they,
Plan (a takeover cancels a running operation first) and Finalize (it reads the operation's
output) may do.

The IAM action names and the bulk operation's resource are NOT confirmed by the Service
Authorization Reference (not reachable from the sources searched; docs/BULK_PUT_ITEMS.md): they are
the API operations' names, on the target tables, as for DynamoDB's other APIs, and kept here once.
Where the documentation found does not say how the service reads the staged objects and writes
its output, it is assumed to use the caller's permissions, as ImportTable does: the role that
starts the operation may read the staged items, write the output and use the data key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_

from stacks.data import KEY_WRITE, STAGING_BULK_ITEMS, STAGING_BULK_OUTPUT, key_use
from stacks.nag import acknowledge_wildcards, default_policy, resource_finding

if TYPE_CHECKING:
    from stacks.loader_functions import LoaderFunctions

# Unverified (see the module docstring): starting an operation on a table, and following or
# cancelling one (its ARN is taken to lie under the table's, as an import's or export's does).
BULK_PUT_START_ACTIONS: Final[tuple[str, ...]] = ("dynamodb:StartBulkPutItems",)
BULK_OPERATION_ACTIONS: Final[tuple[str, ...]] = (
    "dynamodb:DescribeBulkOperation",
    "dynamodb:CancelBulkOperation",
)
BULK_OPERATION_RESOURCE: Final[str] = "/bulk-operation/*"
# cfn-lint's list of IAM actions (W3037) predates these actions: the statements granting them live
# in a policy of their own per role, and only that policy skips the check.
UNLISTED_ACTIONS_CHECK: Final[str] = "W3037"


def table_arns(owner: LoaderFunctions) -> list[str]:
    """Every table a job may name: the environment's and its `tables`."""
    return [owner.data.table.table_arn, *owner.other_table_arns]


def operation_arns(owner: LoaderFunctions) -> list[str]:
    """The bulk operations of those tables (unverified resource: see BULK_OPERATION_RESOURCE)."""
    return [f"{arn}{BULK_OPERATION_RESOURCE}" for arn in table_arns(owner)]


def bulk_put_functions(owner: LoaderFunctions) -> tuple[lambda_.Function, lambda_.Function]:
    """StartBulkPut and PollBulkPut, with their grants; Plan's and Finalize's part of the hand-off."""
    config, data = owner.config, owner.data
    control = {"memory_mib": config.control_memory_mib, "timeout_seconds": config.control_timeout_seconds}
    start = owner.function(
        "StartBulkPut",
        environment={
            "STAGING_BUCKET": data.staging_bucket.bucket_name,
            "LEDGER_TABLE": data.ledger_table.table_name,
            "LEDGER_TTL_DAYS": str(config.ledger_ttl_days),
            "TABLE_NAME": data.table.table_name,
            "BULK_PUT_TIMEOUT_MINUTES": str(config.bulk_put_timeout_minutes),
            # Empty without a data key (SSE-S3): the function reads it as unset.
            "DATA_KEY_ARN": data.data_key.key_arn if data.data_key is not None else "",
        },
        **control,
    )
    poll = owner.function("PollBulkPut", environment={}, **control)
    _grant_start(owner, start)
    operations = {
        resource_finding(owner.scope, arn): (
            "The bulk put items operations of a table a job may name (their ids are the service's): "
            "DescribeBulkOperation and CancelBulkOperation only."
        )
        for arn in operation_arns(owner)
    }
    _bulk_policy(owner, poll, list(BULK_OPERATION_ACTIONS), operations)
    # Plan: a job held by an ended run whose operation still runs is cancelled first (adapters/bulk_puts.py).
    _bulk_policy(owner, owner.plan_function, list(BULK_OPERATION_ACTIONS), operations)
    # Finalize lists the run's operation output (its reports and manifest; it reads them under jobs/*).
    _allow_list(owner, owner.finalize_function, STAGING_BULK_OUTPUT)
    _acknowledge(owner, start)
    return start, poll


def _bulk_policy(
    owner: LoaderFunctions,
    function: lambda_.Function,
    actions: list[str],
    reasons: dict[str, str],
    *,
    start: bool = False,
) -> None:
    """The function's bulk put items actions (unverified names: see the module docstring), in a
    policy of their own that alone skips cfn-lint's check of action names."""
    role = function.role
    assert isinstance(role, iam.Role)
    statements = [iam.PolicyStatement(actions=actions, resources=operation_arns(owner))]
    if start:
        tables = table_arns(owner)
        statements.insert(0, iam.PolicyStatement(actions=list(BULK_PUT_START_ACTIONS), resources=tables))
    policy = iam.Policy(function, "BulkOperations", roles=[role], statements=statements)
    function.node.add_dependency(policy)  # granted before the function can first run
    cfn_policy = policy.node.default_child
    assert isinstance(cfn_policy, cdk.CfnResource)
    cfn_policy.add_metadata("cfn-lint", {"config": {"ignore_checks": [UNLISTED_ACTIONS_CHECK]}})
    acknowledge_wildcards(policy, reasons)


def allow(function: lambda_.IFunction, actions: list[str], resources: list[str]) -> None:
    function.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=resources))


def _allow_list(owner: LoaderFunctions, function: lambda_.IFunction, prefix: str) -> None:
    """ListBucket on the staging bucket, for keys under `prefix` only."""
    function.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[owner.data.staging_bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [prefix]}},
        )
    )


def _grant_start(owner: LoaderFunctions, start: lambda_.Function) -> None:
    """Check the staged items (list, delete a crashed attempt's leftovers), start the operation and
    record it; and, assumed to be used by the service on its behalf, read the items, write the
    output, use the data key and the tables' keys."""
    data, staging = owner.data, owner.data.staging_bucket
    # Describe: a retried start finds the operation the first attempt recorded.
    _bulk_policy(owner, start, [BULK_OPERATION_ACTIONS[0]], _table_reasons(owner), start=True)
    _allow_list(owner, start, STAGING_BULK_ITEMS)
    allow(start, ["s3:GetObject", "s3:DeleteObject"], [staging.arn_for_objects(STAGING_BULK_ITEMS)])
    allow(start, ["s3:PutObject"], [staging.arn_for_objects(STAGING_BULK_OUTPUT)])
    # GetItem: the job (a recorded operation); Query: the shards' records; UpdateItem: the record.
    data.ledger_table.grant(start, "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem")
    if data.data_key is not None:
        for service in ("s3", "dynamodb"):
            start.add_to_role_policy(key_use(owner.scope, data.data_key, KEY_WRITE, service))
    for index, arn in enumerate(data.table_key_arns):
        key = kms.Key.from_key_arn(owner.scope, f"BulkPutTableKeyRef{index or ''}", arn)
        start.add_to_role_policy(key_use(owner.scope, key, KEY_WRITE, "dynamodb"))


def _table_reasons(owner: LoaderFunctions) -> dict[str, str]:
    """The wildcards of StartBulkPut's bulk put items policy, explained."""
    reasons = {
        resource_finding(owner.scope, arn): (
            "The bulk put items operations of a table a job may name (their ids are the service's): "
            "StartBulkPut describes only the one it started (a retried start)."
        )
        for arn in operation_arns(owner)
    }
    reasons.update(
        {
            resource_finding(owner.scope, arn): (
                "A `tables` prefix the environment's owner configured: StartBulkPut starts an operation "
                "only on the table Plan checked the job's name against it."
            )
            for arn in owner.other_table_arns
            if arn.endswith("*")
        }
    )
    return reasons


def _acknowledge(owner: LoaderFunctions, start: lambda_.Function) -> None:
    scope, staging = owner.scope, owner.data.staging_bucket
    acknowledge_wildcards(
        default_policy(start.role),
        {
            resource_finding(scope, staging.arn_for_objects(STAGING_BULK_ITEMS)): (
                "A plan's staged items only (jobs/<jobId>/<planId>/bulk/items/): StartBulkPut reads them "
                "(for the operation) and deletes those no shard recorded; job and plan ids are per run."
            ),
            resource_finding(scope, staging.arn_for_objects(STAGING_BULK_OUTPUT)): (
                "A run's bulk put items output only (jobs/<jobId>/<runId>/bulk-output/): the operation "
                "writes its reports there; job and run ids are per execution."
            ),
        },
    )
