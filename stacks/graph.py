"""The graph target: a VPC, the Neptune cluster, its bulk-loader role, and who may reach port 8182."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_neptune as neptune
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from stacks.data import KEY_READ, STAGING_JOBS_PREFIX, DataStack, key_use
from stacks.graph_settings import GRAPH_MIN_AZS, GraphConfig
from stacks.nag import acknowledge, acknowledge_wildcards, default_policy, resource_finding

NEPTUNE_PORT: Final[int] = 8182
# The cluster's subnets (and a second instance, when configured) span this many AZs unless
# `graph_availability_zones` names them.
GRAPH_AZS: Final[int] = GRAPH_MIN_AZS
# Workers stage N-Quads under jobs/<jobId>/<planId>/graph/ (runtime/logic/layout.py).
GRAPH_OBJECTS: Final[str] = f"{STAGING_JOBS_PREFIX}*/graph/*"
S3_PREFIX_LIST_FIELD: Final[str] = "PrefixLists.0.PrefixListId"


@dataclass(frozen=True)
class GraphTarget:
    """What the loader-control functions need from the Graph stack."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_group: ec2.ISecurityGroup
    endpoint: str
    port: str
    cluster_resource_id: str
    loader_role_arn: str


def s3_prefix_list_id(scope: Construct, log_group: logs.ILogGroup) -> str:
    """The id of the AWS-managed prefix list `com.amazonaws.<region>.s3`, looked up when
    CloudFormation deploys the stack.

    The id differs per region and CloudFormation exposes it nowhere (AWS::EC2::VPCEndpoint has no
    such attribute; cloudformation-coverage-roadmap#453). A context lookup (`PrefixList.from_lookup`)
    needs credentials at synth and a committed cdk.context.json per account and region; a table of
    ids per region goes stale and fails in regions it lacks. A DescribeManagedPrefixLists call at
    deploy time works in every region with nothing at synth; it is one read-only call.
    """
    # An explicit role (not AWSLambdaBasicExecutionRole, which may write every log group) that
    # writes only the lookup's own log group.
    role = iam.Role(
        scope,
        "S3PrefixListLookupRole",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description="mapload Graph: look up the S3 prefix list id at deploy time",
    )
    log_group.grant_write(role)
    lookup = cr.AwsCustomResource(
        scope,
        "S3PrefixListLookup",
        on_update=cr.AwsSdkCall(
            service="EC2",
            action="describeManagedPrefixLists",
            parameters={
                "Filters": [{"Name": "prefix-list-name", "Values": [f"com.amazonaws.{cdk.Aws.REGION}.s3"]}]
            },
            physical_resource_id=cr.PhysicalResourceId.of(f"com.amazonaws.{cdk.Aws.REGION}.s3"),
            output_paths=[S3_PREFIX_LIST_FIELD],
        ),
        # DescribeManagedPrefixLists takes no resource-level permission.
        policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=cr.AwsCustomResourcePolicy.ANY_RESOURCE),
        # The SDK bundled with the Lambda runtime has this call: no install from npm at deploy time.
        install_latest_aws_sdk=False,
        role=role,
        log_group=log_group,
    )
    policy = lookup.node.find_child("CustomResourcePolicy").node.default_child
    assert isinstance(policy, cdk.CfnResource)
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        "ec2:DescribeManagedPrefixLists supports no resource-level permission; the lookup is read-only.",
    )
    return lookup.get_response_field(S3_PREFIX_LIST_FIELD)


class GraphDatabase(Construct):
    """Neptune in isolated subnets of two AZs, IAM-authenticated and encrypted, with its loader role.

    The only way in is port 8182 from the loader-control security group; the cluster reads the
    staging bucket through the VPC's S3 gateway endpoint with a role that can read only the
    staged graph files.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        graph_config: GraphConfig,
        staging_bucket: s3.IBucket,
        log_retention: logs.RetentionDays,
        data_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._config = graph_config
        self._removal = cdk.RemovalPolicy.RETAIN if graph_config.retain else cdk.RemovalPolicy.DESTROY
        self._log_retention = log_retention
        self._data_key = data_key
        self.vpc = self._vpc()
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        self.database_security_group, self.loader_control_security_group = self._security_groups()
        self.loader_role = self._loader_role(staging_bucket)
        self.cluster = self._cluster()
        self.instances = self._instances()
        self._acknowledge(staging_bucket)

    def _log_group(self, construct_id: str) -> logs.LogGroup:
        return logs.LogGroup(
            self,
            construct_id,
            retention=self._log_retention,
            removal_policy=self._removal,
            encryption_key=self._data_key,
        )

    def _vpc(self) -> ec2.Vpc:
        """Isolated subnets in two AZs, gateway endpoints to S3 and DynamoDB, rejected flows logged."""
        vpc = ec2.Vpc(
            self,
            "Vpc",
            # The stack's availability_zones: the configured ones, else the region's first two.
            max_azs=len(self._config.availability_zones) or GRAPH_AZS,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                )
            ],
            gateway_endpoints={
                # The Neptune loader reads the staged files through it; the functions too.
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
                # The loader-control functions record the load id in the ledger.
                "DynamoDb": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.DYNAMODB),
            },
            # CDK would restrict the default security group through a custom-resource Lambda;
            # nothing here uses the default group (every resource has its own), so no extra function.
            restrict_default_security_group=False,
        )
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(self._log_group("FlowLogs")),
            traffic_type=ec2.FlowLogTrafficType.REJECT,
        )
        return vpc

    def _security_groups(self) -> tuple[ec2.SecurityGroup, ec2.SecurityGroup]:
        """The cluster's group and the loader-control functions' group: 8182 between them, 443 out."""
        database = ec2.SecurityGroup(
            self,
            "DatabaseSecurityGroup",
            vpc=self.vpc,
            description="mapload Neptune cluster: port 8182 from the loader-control functions only",
            allow_all_outbound=False,
        )
        control = ec2.SecurityGroup(
            self,
            "LoaderControlSecurityGroup",
            vpc=self.vpc,
            description="mapload StartGraphLoad/PollGraphLoad: to Neptune 8182 and HTTPS (gateway endpoints)",
            allow_all_outbound=False,
        )
        database.add_ingress_rule(
            control, ec2.Port.tcp(NEPTUNE_PORT), "Neptune loader API from the loader-control functions"
        )
        control.add_egress_rule(database, ec2.Port.tcp(NEPTUNE_PORT), "Neptune loader API")
        lookup_logs = self._log_group("S3PrefixListLookupLogs")
        # The bulk loader reads the staged files from the cluster's own network interfaces through
        # the S3 gateway endpoint: HTTPS to S3's prefix list, nothing else.
        database.add_egress_rule(
            ec2.Peer.prefix_list(s3_prefix_list_id(self, lookup_logs)),
            ec2.Port.tcp(443),
            "Neptune bulk loader to S3 through the gateway endpoint",
        )
        # Isolated subnets have no route to the internet: 443 reaches only the S3 and DynamoDB
        # gateway endpoints (their prefix lists are not exposed to CloudFormation by name).
        control.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "S3 and DynamoDB through the gateway endpoints"
        )
        return database, control

    def _loader_role(self, staging_bucket: s3.IBucket) -> iam.Role:
        """The role the Neptune cluster assumes to read the staged files: it lists the bucket and reads
        only the graph prefix."""
        role = iam.Role(
            self,
            "LoaderRole",
            assumed_by=iam.ServicePrincipal("rds.amazonaws.com"),
            description="mapload Neptune bulk loader: read the staged graph files",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[staging_bucket.arn_for_objects(GRAPH_OBJECTS)]
            )
        )
        # Neptune documents "Read and List access to the bucket" and s3:ListBucket as "required to
        # verify bucket existence and list contents": the existence check (HeadBucket) lists with
        # no prefix, so an s3:prefix condition would fail the load. Key names only; no
        # s3:GetBucketLocation, which no Neptune page asks for (docs/NEPTUNE.md, dated there).
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[staging_bucket.bucket_arn])
        )
        if self._data_key is not None:
            # Staged files are SSE-KMS objects under the data key: the loader decrypts them via S3.
            role.add_to_policy(key_use(self, self._data_key, KEY_READ, "s3"))
        return role

    def _cluster(self) -> neptune.CfnDBCluster:
        """IAM-authenticated, encrypted, audit-logged; a final snapshot when a retained one goes."""
        config = self._config
        subnet_group = neptune.CfnDBSubnetGroup(
            self,
            "SubnetGroup",
            db_subnet_group_description="mapload Neptune: isolated subnets in the VPC's AZs",
            subnet_ids=self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED).subnet_ids,
        )
        parameters = neptune.CfnDBClusterParameterGroup(
            self,
            "ClusterParameters",
            description="mapload Neptune: audit log on",
            family=config.parameter_group_family,
            parameters={"neptune_enable_audit_log": 1},
        )
        cluster = neptune.CfnDBCluster(
            self,
            "Cluster",
            engine_version=config.engine_version,
            iam_auth_enabled=True,
            storage_encrypted=True,
            # With `data_key`, the cluster's storage (and its snapshots) is under it too; without,
            # Neptune's AWS managed key. Changing it replaces the cluster (docs/DEPLOY.md).
            kms_key_id=self._data_key.key_arn if self._data_key is not None else None,
            backup_retention_period=config.backup_retention_days,
            preferred_backup_window="02:00-03:00",
            preferred_maintenance_window="sun:04:00-sun:05:00",
            copy_tags_to_snapshot=True,
            enable_cloudwatch_logs_exports=["audit"],
            deletion_protection=config.retain,
            db_cluster_parameter_group_name=parameters.ref,
            db_subnet_group_name=subnet_group.ref,
            vpc_security_group_ids=[self.database_security_group.security_group_id],
            db_port=NEPTUNE_PORT,
            associated_roles=[neptune.CfnDBCluster.DBClusterRoleProperty(role_arn=self.loader_role.role_arn)],
            serverless_scaling_configuration=(
                neptune.CfnDBCluster.ServerlessScalingConfigurationProperty(
                    min_capacity=config.serverless_min_capacity,
                    max_capacity=config.serverless_max_capacity,
                )
                if config.serverless
                else None
            ),
        )
        # Retained clusters leave a final snapshot when their stack goes; others are disposable.
        cluster.apply_removal_policy(cdk.RemovalPolicy.SNAPSHOT if config.retain else self._removal)
        return cluster

    def _instances(self) -> list[neptune.CfnDBInstance]:
        """`graph_instances` instances; with fewer than two, the single-AZ finding acknowledged."""
        instances = []
        for index in range(self._config.instances):
            instance = neptune.CfnDBInstance(
                self,
                f"Instance{index + 1}",
                db_instance_class=self._config.instance_class,
                db_cluster_identifier=self.cluster.ref,
                auto_minor_version_upgrade=True,
                # No AZ pinned: Neptune places instances across the subnet group's two AZs.
            )
            instance.apply_removal_policy(self._removal)
            instances.append(instance)
        if self._config.instances < 2:
            acknowledge(
                self.cluster,
                "AwsSolutions-N1",
                "Single-instance cluster by configuration (graph_instances = 1, dev/staging): storage is "
                "replicated across three AZs anyway; prod runs a second instance in the other AZ.",
            )
        return instances

    def _acknowledge(self, staging_bucket: s3.IBucket) -> None:
        acknowledge_wildcards(
            default_policy(self.loader_role),
            {
                resource_finding(self, staging_bucket.arn_for_objects(GRAPH_OBJECTS)): (
                    "The Neptune loader reads every staged graph file of a load: keys are "
                    "jobs/<jobId>/<planId>/graph/<shard>.nq, created per run; read-only."
                )
            },
        )


class GraphStack(cdk.Stack):
    """The Neptune side of an environment; its cluster keeps a final snapshot in prod."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        graph_config: GraphConfig,
        data: DataStack,
        log_retention: logs.RetentionDays,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self._zones = graph_config.availability_zones
        staging = s3.Bucket.from_bucket_attributes(
            self,
            "StagingBucketRef",
            bucket_name=data.output_value("StagingBucketName"),
            bucket_arn=data.output_value("StagingBucketArn"),
        )
        self.add_stack_dependency(data, "reads the Data stack's outputs")
        self.database = GraphDatabase(
            self,
            "GraphDatabase",
            graph_config=graph_config,
            staging_bucket=staging,
            log_retention=log_retention,
            data_key=data.shared_key(self),
        )
        cluster = self.database.cluster
        self._output("GraphClusterEndpoint", cluster.attr_endpoint)
        self._output("GraphClusterPort", cluster.attr_port)
        self._output("GraphClusterResourceId", cluster.attr_cluster_resource_id)
        self._output("GraphLoaderRoleArn", self.database.loader_role.role_arn)
        cdk.CfnOutput(self, "GraphVpcId", value=self.database.vpc.vpc_id)

    @property
    def availability_zones(self) -> list[str]:
        """`graph_availability_zones`, else the region's first two AZs, picked at deploy time
        (Fn::GetAZs). With account and region set, CDK would otherwise look them up at synth, which
        needs AWS credentials."""
        if self._zones:
            return list(self._zones)
        return [cdk.Fn.select(index, cdk.Fn.get_azs()) for index in range(GRAPH_AZS)]

    def export_name(self, output_id: str) -> str:
        return f"{self.stack_name}:{output_id}"

    def _output(self, output_id: str, value: str) -> None:
        cdk.CfnOutput(self, output_id, value=value, export_name=self.export_name(output_id))

    def share_with(self, consumer: cdk.Stack) -> GraphTarget:
        """The cluster as `consumer` sees it: named output reads for the values its IAM policies and
        environment use (readable, and cdk-nag findings name them); the VPC, subnets and
        security group by CDK's own references."""
        consumer.add_stack_dependency(self, "reads the Graph stack's outputs")
        database = self.database

        def imported(output_id: str) -> str:
            # Fn::GetStackOutput, not an import: a replaced cluster or role may change it.
            return cdk.Fn.get_stack_output(self.stack_name, output_id)

        return GraphTarget(
            vpc=database.vpc,
            subnets=database.subnets,
            security_group=database.loader_control_security_group,
            endpoint=imported("GraphClusterEndpoint"),
            port=imported("GraphClusterPort"),
            cluster_resource_id=imported("GraphClusterResourceId"),
            loader_role_arn=imported("GraphLoaderRoleArn"),
        )
