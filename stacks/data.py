"""Stateful resources: source and staging buckets, the target table and the job ledger."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.config import DataConfig
from stacks.nag import acknowledge

# The ledger's generic key and TTL attribute are part of docs/CONTRACTS.md "Ledger items".
LEDGER_PARTITION_KEY = "pk"
LEDGER_SORT_KEY = "sk"
LEDGER_TTL_ATTRIBUTE = "expiresAt"
# Staged manifests, rejects and reports live under this prefix (CONTRACTS "Staging bucket layout").
STAGING_JOBS_PREFIX = "jobs/"
# Decompressed (gzip/zip) sources written by Prepare: prepared/<jobId>/<runId>/...
STAGING_PREPARED_PREFIX = "prepared/"

_ATTRIBUTE_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def existing_table(scope: Construct, construct_id: str, name_or_arn: str) -> dynamodb.ITable:
    """Reference a table this app does not own; its ARN holds no cross-stack token."""
    if name_or_arn.startswith("arn:"):
        return dynamodb.Table.from_table_arn(scope, construct_id, name_or_arn)
    return dynamodb.Table.from_table_name(scope, construct_id, name_or_arn)


@dataclass(frozen=True)
class SharedData:
    """The Data stack's resources as seen from a consuming stack (through explicit imports)."""

    source_bucket: s3.IBucket
    staging_bucket: s3.IBucket
    table: dynamodb.ITable
    ledger_table: dynamodb.ITable


class DataStore(Construct):
    """Buckets and tables a load reads from and writes to.

    Buckets use SSE-S3 rather than SSE-KMS: the access-log bucket must (S3 server access logging
    cannot deliver to a KMS-encrypted bucket); source files of many GB are read by thousands of
    concurrent ranged GETs, where SSE-KMS would add a KMS call per request (or Bucket Keys to
    manage), and the Neptune bulk loader's role would need key grants. Nothing here needs
    per-key access control beyond the bucket policies and IAM grants.
    Tables use the AWS-managed DynamoDB key: encryption at rest visible in the template and
    auditable in CloudTrail, without a customer key to rotate or grant.
    """

    def __init__(self, scope: Construct, construct_id: str, *, data_config: DataConfig) -> None:
        super().__init__(scope, construct_id)
        removal = cdk.RemovalPolicy.RETAIN if data_config.retain_data else cdk.RemovalPolicy.DESTROY
        abort_multipart = cdk.Duration.days(data_config.multipart_abort_days)
        secure_bucket: dict[str, Any] = {
            "encryption": s3.BucketEncryption.S3_MANAGED,
            "enforce_ssl": True,
            "minimum_tls_version": 1.2,
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            "removal_policy": removal,
        }

        self.access_logs_bucket = s3.Bucket(
            self,
            "AccessLogsBucket",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireAccessLogs",
                    expiration=cdk.Duration.days(data_config.access_log_expiry_days),
                    abort_incomplete_multipart_upload_after=abort_multipart,
                )
            ],
            **secure_bucket,
        )
        # The log sink cannot log to itself without a loop; AwsSolutions-S1 asks for exactly that.
        log_sink = self.access_logs_bucket.node.default_child
        assert isinstance(log_sink, cdk.CfnResource)
        acknowledge(
            log_sink,
            "AwsSolutions-S1",
            "This is the server access log destination of the source and staging buckets; "
            "logging its own deliveries would log the log deliveries recursively.",
        )

        # Versioned so an overwritten or deleted source file can be recovered (and a shard's
        # recorded ETag still names a readable version); old versions expire to bound cost.
        self.source_bucket = s3.Bucket(
            self,
            "SourceBucket",
            versioned=True,
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="source/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="AbortIncompleteMultipartUploads",
                    abort_incomplete_multipart_upload_after=abort_multipart,
                ),
                s3.LifecycleRule(
                    id="ExpireNoncurrentVersions",
                    noncurrent_version_expiration=cdk.Duration.days(
                        data_config.source_noncurrent_expiry_days
                    ),
                ),
            ],
            **secure_bucket,
        )

        # Not versioned: everything here is derived from a source file and a run, so a lost
        # object is re-created by running the job again, and versions would only add cost.
        self.staging_bucket = s3.Bucket(
            self,
            "StagingBucket",
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="staging/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="AbortIncompleteMultipartUploads",
                    abort_incomplete_multipart_upload_after=abort_multipart,
                ),
                s3.LifecycleRule(
                    id="ExpireJobs",
                    prefix=STAGING_JOBS_PREFIX,
                    expiration=cdk.Duration.days(data_config.staging_expiry_days),
                ),
                s3.LifecycleRule(
                    id="ExpirePrepared",
                    prefix=STAGING_PREPARED_PREFIX,
                    expiration=cdk.Duration.days(data_config.staging_expiry_days),
                ),
            ],
            **secure_bucket,
        )

        self.table_created = data_config.table_existing is None
        self.table: dynamodb.ITable = (
            self._table(
                "Table",
                data_config=data_config,
                partition_key=data_config.table_partition_key.name,
                partition_type=data_config.table_partition_key.type,
                sort_key=data_config.table_sort_key.name if data_config.table_sort_key else None,
                sort_type=data_config.table_sort_key.type if data_config.table_sort_key else None,
                capacity=_target_capacity(data_config),
            )
            if data_config.table_existing is None
            else existing_table(self, "ExistingTable", data_config.table_existing)
        )

        self.ledger_table = self._table(
            "LedgerTable",
            data_config=data_config,
            partition_key=LEDGER_PARTITION_KEY,
            partition_type="S",
            sort_key=LEDGER_SORT_KEY,
            sort_type="S",
            time_to_live_attribute=LEDGER_TTL_ATTRIBUTE,
        )

    def _table(
        self,
        construct_id: str,
        *,
        data_config: DataConfig,
        partition_key: str,
        partition_type: str,
        sort_key: str | None,
        sort_type: str | None,
        time_to_live_attribute: str | None = None,
        capacity: dict[str, Any] | None = None,
    ) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            construct_id,
            partition_key=dynamodb.Attribute(name=partition_key, type=_ATTRIBUTE_TYPES[partition_type]),
            sort_key=(
                dynamodb.Attribute(name=sort_key, type=_ATTRIBUTE_TYPES[sort_type])
                if sort_key and sort_type
                else None
            ),
            # On-demand by default: a load bursts from zero to thousands of writers and back.
            **(capacity or {"billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST}),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=time_to_live_attribute,
            deletion_protection=data_config.retain_data,
            removal_policy=(
                cdk.RemovalPolicy.RETAIN if data_config.retain_data else cdk.RemovalPolicy.DESTROY
            ),
        )


def _target_capacity(data_config: DataConfig) -> dict[str, Any]:
    """Billing of the target table: on demand (pre-warmed when asked) or provisioned."""
    warm = (
        dynamodb.WarmThroughput(write_units_per_second=data_config.table_warm_write_units)
        if data_config.table_warm_write_units is not None
        else None
    )
    if data_config.table_billing_mode == "provisioned":
        return {
            "billing_mode": dynamodb.BillingMode.PROVISIONED,
            "write_capacity": data_config.table_write_capacity,
            "read_capacity": data_config.table_read_capacity,
            "warm_throughput": warm,
        }
    return {"billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST, "warm_throughput": warm}


class DataStack(cdk.Stack):
    """The stateful half of an environment; retained in prod, disposable elsewhere.

    Consumers import its values through explicitly named exports (`<stack name>:<output id>`)
    rather than CDK's generated ones: the names stay readable and stable, and a consumer can
    state exactly which cross-stack values its IAM policies use (cdk-nag findings name them).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        data_config: DataConfig,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self._data_config = data_config
        self.store = DataStore(self, "Store", data_config=data_config)
        store = self.store

        # Outputs at stack level keep their logical ids equal to these names.
        self._output("SourceBucketName", store.source_bucket.bucket_name)
        self._output("SourceBucketArn", store.source_bucket.bucket_arn)
        self._output("StagingBucketName", store.staging_bucket.bucket_name)
        self._output("StagingBucketArn", store.staging_bucket.bucket_arn)
        self._output("AccessLogsBucketName", store.access_logs_bucket.bucket_name, export=False)
        self._output("TableName", store.table.table_name)
        self._output("TableArn", store.table.table_arn, export=False)
        self._output("LedgerTableName", store.ledger_table.table_name)
        self._output("LedgerTableArn", store.ledger_table.table_arn, export=False)

    def export_name(self, output_id: str) -> str:
        return f"{self.stack_name}:{output_id}"

    def _output(self, output_id: str, value: str, *, export: bool = True) -> None:
        cdk.CfnOutput(
            self,
            output_id,
            value=value,
            export_name=self.export_name(output_id) if export else None,
        )

    def share_with(self, consumer: Construct) -> SharedData:
        """Reference this stack's resources from `consumer` (another stack) via its exports.

        The consuming stack must be made to depend on this one: plain imports are invisible
        to CDK's dependency tracking.
        """

        def imported(output_id: str) -> str:
            return cdk.Fn.import_value(self.export_name(output_id))

        if self._data_config.table_existing is None:
            # By name: the ARN is then formatted in the consumer (partition/region/account of
            # its own stack), so nothing is parsed out of an imported ARN at deploy time.
            table = dynamodb.Table.from_table_name(consumer, "TableRef", imported("TableName"))
        else:
            table = existing_table(consumer, "TableRef", self._data_config.table_existing)
        return SharedData(
            source_bucket=s3.Bucket.from_bucket_attributes(
                consumer,
                "SourceBucketRef",
                bucket_name=imported("SourceBucketName"),
                bucket_arn=imported("SourceBucketArn"),
            ),
            staging_bucket=s3.Bucket.from_bucket_attributes(
                consumer,
                "StagingBucketRef",
                bucket_name=imported("StagingBucketName"),
                bucket_arn=imported("StagingBucketArn"),
            ),
            table=table,
            ledger_table=dynamodb.Table.from_table_name(
                consumer, "LedgerTableRef", imported("LedgerTableName")
            ),
        )
