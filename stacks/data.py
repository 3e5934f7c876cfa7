"""Stateful resources: source and staging buckets, the target table and the job ledger."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.data_settings import DATA_KEY_CREATE, DataConfig
from stacks.nag import acknowledge

# The ledger's generic key and TTL attribute are part of docs/CONTRACTS.md "Ledger items".
LEDGER_PARTITION_KEY = "pk"
LEDGER_SORT_KEY = "sk"
LEDGER_TTL_ATTRIBUTE = "expiresAt"
# Staged manifests, rejects and reports live under this prefix (CONTRACTS "Staging bucket layout").
STAGING_JOBS_PREFIX = "jobs/"
# writeMode sync: a shard's staged items (runtime/logic/layout.py sync_shard_key:
# jobs/<jobId>/<planId>/sync/shard-<index>.jsonl.gz), which the Sync Map's Workers read.
STAGING_SYNC_SHARD_FILES = f"{STAGING_JOBS_PREFIX}*/*/sync/*"
# writeMode sync: each sync's merged buckets, the dataset's baseline once the sync succeeds
# (layout.py sync_prefix: datasets/<table>/<dataset>/<against>/<jobId>/<planId>/); not under jobs/, whose
# objects expire: a baseline lasts until a later sync replaces it.
STAGING_DATASETS_PREFIX = "datasets/"
# Decompressed (gzip/zip) sources written by Prepare: prepared/<jobId>/<runId>/...
STAGING_PREPARED_PREFIX = "prepared/"
# What StartGraphLoad's edge endpoint check reads under jobs/<jobId>/<planId>/ (runtime/logic/
# layout.py graph_ids_keys: graph-ids/<shard>.vertices.gz, .endpoints.gz; property_graph_keys'
# edge file: graph/edges/<shard>.csv[.gz]), and nothing else there: not the rejects (source
# records), manifests, reports or vertex files. tests/infra/test_graph.py matches them against
# the keys layout.py makes.
STAGING_GRAPH_ID_FILES = f"{STAGING_JOBS_PREFIX}*/*/graph-ids/*"
STAGING_GRAPH_EDGE_FILES = f"{STAGING_JOBS_PREFIX}*/*/graph/edges/*"
# A run's report (layout.py report_key: jobs/<jobId>/<runId>/report.json), which PollGraphLoad
# rewrites with the graph load's outcome.
STAGING_REPORTS = f"{STAGING_JOBS_PREFIX}*/*/report.json"
# dynamodb.engine bulkPutItems: a plan's staged items (jobs/<jobId>/<planId>/bulk/items/, the
# operation's input; runtime/logic/layout.py) and a run's operation output
# (jobs/<jobId>/<runId>/bulk-output/).
STAGING_BULK_ITEMS = f"{STAGING_JOBS_PREFIX}*/*/bulk/items/*"
STAGING_BULK_OUTPUT = f"{STAGING_JOBS_PREFIX}*/*/bulk-output/*"

# What a principal needs of the data key, through S3 or DynamoDB (kms:ViaService): readers only
# decrypt; writers also generate data keys (an S3 multipart upload decrypts its parts' keys too).
KEY_READ: Final[tuple[str, ...]] = ("kms:Decrypt",)
KEY_WRITE: Final[tuple[str, ...]] = ("kms:Decrypt", "kms:GenerateDataKey")

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


def key_use(scope: Construct, key: kms.IKey, actions: Sequence[str], service: str) -> iam.PolicyStatement:
    """Use of the data key on a principal's behalf by one service (`s3`, `dynamodb`) only."""
    region = cdk.Stack.of(scope).region
    return iam.PolicyStatement(
        actions=list(actions),
        resources=[key.key_arn],
        conditions={"StringEquals": {"kms:ViaService": f"{service}.{region}.amazonaws.com"}},
    )


@dataclass(frozen=True)
class SharedData:
    """The Data stack's resources as seen from a consuming stack (through its outputs)."""

    source_bucket: s3.IBucket
    staging_bucket: s3.IBucket
    table: dynamodb.ITable
    ledger_table: dynamodb.ITable
    # The customer managed key of the buckets, tables and log groups (None: `data_key` unset).
    key: kms.IKey | None = None
    # The customer managed keys of the tables the Worker writes (`existing_table_key`, `table_keys`).
    table_key_arns: tuple[str, ...] = ()
    # The other tables a job may name (`tables`: names, prefixes ending in `*`, or their ARNs).
    tables: tuple[str, ...] = ()


class DataStore(Construct):
    """Buckets and tables a load reads from and writes to.

    By default (`data_key` null) buckets use SSE-S3 and tables the AWS managed DynamoDB key:
    encryption at rest visible in the template and auditable in CloudTrail, without a customer
    key to rotate, grant and pay for per request. With `data_key` set, the source and staging
    buckets use SSE-KMS with that key and S3 Bucket Keys (thousands of concurrent ranged GETs
    then cost KMS calls per bucket key, not per request), the created tables use it as their
    customer managed key, and so do the environment's log groups; every principal that reads
    or writes them is granted the key through S3 or DynamoDB only. The access-log bucket stays
    SSE-S3 either way: S3 server access logging cannot deliver to an SSE-KMS bucket.
    """

    def __init__(self, scope: Construct, construct_id: str, *, data_config: DataConfig) -> None:
        super().__init__(scope, construct_id)
        removal = cdk.RemovalPolicy.RETAIN if data_config.retain_data else cdk.RemovalPolicy.DESTROY
        self.key = self._data_key(data_config, removal)
        secure_bucket: dict[str, Any] = {
            "encryption": s3.BucketEncryption.S3_MANAGED,
            "enforce_ssl": True,
            "minimum_tls_version": 1.2,
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            "removal_policy": removal,
            # Not retained (dev, staging): `cdk destroy` empties the bucket first (a CDK custom
            # resource), or CloudFormation could not delete one that still holds objects.
            "auto_delete_objects": not data_config.retain_data,
        }
        self.access_logs_bucket = self._access_logs_bucket(data_config, secure_bucket)
        # Source and staging: the customer key when one is configured (the log sink keeps
        # SSE-S3, the only encryption S3 server access logging delivers to).
        data_bucket: dict[str, Any] = {**secure_bucket}
        if self.key is not None:
            data_bucket.update(
                encryption=s3.BucketEncryption.KMS,
                encryption_key=self.key,
                bucket_key_enabled=True,
            )
        self.source_bucket = self._source_bucket(data_config, data_bucket)
        self.staging_bucket = self._staging_bucket(data_config, data_bucket)

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

    def _access_logs_bucket(self, data_config: DataConfig, secure_bucket: dict[str, Any]) -> s3.Bucket:
        """Where S3 delivers the source and staging buckets' server access logs."""
        bucket = s3.Bucket(
            self,
            "AccessLogsBucket",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireAccessLogs",
                    expiration=cdk.Duration.days(data_config.access_log_expiry_days),
                    abort_incomplete_multipart_upload_after=_abort_multipart(data_config),
                )
            ],
            **secure_bucket,
        )
        # The log sink cannot log to itself without a loop; AwsSolutions-S1 asks for exactly that.
        log_sink = bucket.node.default_child
        assert isinstance(log_sink, cdk.CfnResource)
        acknowledge(
            log_sink,
            "AwsSolutions-S1",
            "This is the server access log destination of the source and staging buckets; "
            "logging its own deliveries would log the log deliveries recursively.",
        )
        return bucket

    def _source_bucket(self, data_config: DataConfig, data_bucket: dict[str, Any]) -> s3.Bucket:
        """Versioned so an overwritten or deleted source file can be recovered (and a shard's
        recorded ETag still names a readable version); old versions expire to bound cost."""
        return s3.Bucket(
            self,
            "SourceBucket",
            versioned=True,
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="source/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="AbortIncompleteMultipartUploads",
                    abort_incomplete_multipart_upload_after=_abort_multipart(data_config),
                ),
                s3.LifecycleRule(
                    id="ExpireNoncurrentVersions",
                    noncurrent_version_expiration=cdk.Duration.days(
                        data_config.source_noncurrent_expiry_days
                    ),
                ),
            ],
            **data_bucket,
        )

    def _staging_bucket(self, data_config: DataConfig, data_bucket: dict[str, Any]) -> s3.Bucket:
        """Not versioned: everything here is derived from a source file and a run, so a lost
        object is re-created by running the job again, and versions would only add cost."""
        expiry = cdk.Duration.days(data_config.staging_expiry_days)
        return s3.Bucket(
            self,
            "StagingBucket",
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="staging/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="AbortIncompleteMultipartUploads",
                    abort_incomplete_multipart_upload_after=_abort_multipart(data_config),
                ),
                s3.LifecycleRule(id="ExpireJobs", prefix=STAGING_JOBS_PREFIX, expiration=expiry),
                s3.LifecycleRule(id="ExpirePrepared", prefix=STAGING_PREPARED_PREFIX, expiration=expiry),
            ],
            **data_bucket,
        )

    def _data_key(self, data_config: DataConfig, removal: cdk.RemovalPolicy) -> kms.IKey | None:
        """The configured customer managed key: none, created here, or an existing one by ARN."""
        if data_config.data_key is None:
            return None
        if data_config.data_key != DATA_KEY_CREATE:
            # Its key policy is the owner's: it must let this account's IAM policies grant the key
            # and CloudWatch Logs use it (docs/SETTINGS.md `data_key`).
            return kms.Key.from_key_arn(self, "DataKeyRef", data_config.data_key)
        stack = cdk.Stack.of(self)
        key = kms.Key(
            self,
            "DataKey",
            description=f"mapload {stack.stack_name}: source/staging buckets, tables, log groups",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        # CloudWatch Logs encrypts the log groups that name this key; only for log groups of this
        # account and region (the encryption context names the log group), as AWS documents it.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsLogGroupsOfThisAccount",
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="*",
                            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )
        return key

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
            **(
                {"encryption": dynamodb.TableEncryption.AWS_MANAGED}
                if self.key is None
                else {"encryption": dynamodb.TableEncryption.CUSTOMER_MANAGED, "encryption_key": self.key}
            ),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=time_to_live_attribute,
            deletion_protection=data_config.retain_data,
            removal_policy=(
                cdk.RemovalPolicy.RETAIN if data_config.retain_data else cdk.RemovalPolicy.DESTROY
            ),
        )


def _abort_multipart(data_config: DataConfig) -> cdk.Duration:
    """How long an incomplete multipart upload may linger before S3 aborts it."""
    return cdk.Duration.days(data_config.multipart_abort_days)


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

    Consumers read its values with `Fn::GetStackOutput` of its named outputs (`output_value`):
    readable, and a consumer states exactly which cross-stack values its IAM policies use
    (cdk-nag findings name them), while the values stay free to change. The outputs keep their
    exports (`<stack name>:<output id>`) so that an environment deployed when consumers imported
    them can update: its Loader stops importing only after Data has deployed.
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
        if store.key is not None:
            self._output("DataKeyArn", store.key.key_arn)

    def export_name(self, output_id: str) -> str:
        return f"{self.stack_name}:{output_id}"

    def output_value(self, output_id: str) -> str:
        """One of this stack's outputs as a consuming stack reads it: `Fn::GetStackOutput`, read
        at the consumer's deploy, never an import. An export in use can neither change nor go
        away ("Export ... cannot be updated as it is in use"), and a new table key, a switch to
        `existing_table` or dropping `data_key` all change or remove one (tests/infra/test_exports.py)."""
        return cdk.Fn.get_stack_output(self.stack_name, output_id)

    def _output(self, output_id: str, value: str, *, export: bool = True) -> None:
        cdk.CfnOutput(
            self,
            output_id,
            value=value,
            export_name=self.export_name(output_id) if export else None,
        )

    def shared_key(self, consumer: Construct) -> kms.IKey | None:
        """The data key as `consumer` sees it: a created key through its named export; an
        existing key by its configured ARN, which then may change without an export in use."""
        configured = self._data_config.data_key
        if configured is None:
            return None
        arn = self.output_value("DataKeyArn") if configured == DATA_KEY_CREATE else configured
        return kms.Key.from_key_arn(consumer, "DataKeyRef", arn)

    def share_with(self, consumer: Construct) -> SharedData:
        """Reference this stack's resources from `consumer` (another stack) via its outputs.

        The consuming stack must be made to depend on this one: explicit output reads are invisible
        to CDK's dependency tracking.
        """

        imported = self.output_value

        if self._data_config.table_existing is None:
            # By name: the ARN is then formatted in the consumer (partition/region/account of
            # its own stack), so nothing is parsed out of an imported ARN at deploy time.
            table = dynamodb.Table.from_table_name(consumer, "TableRef", imported("TableName"))
        else:
            table = existing_table(consumer, "TableRef", self._data_config.table_existing)
        return SharedData(
            key=self.shared_key(consumer),
            table_key_arns=self._data_config.table_key_arns,
            tables=self._data_config.tables,
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
