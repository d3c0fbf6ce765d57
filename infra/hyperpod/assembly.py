"""The HyperPod part wired together: lifecycle scripts, execution role, dependencies chart, then the cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import HyperPodConfig
from infra.hyperpod.cluster import HyperPodCluster
from infra.hyperpod.dependencies_chart import HyperPodDependenciesChart
from infra.hyperpod.execution_role import HyperPodExecutionRole
from infra.hyperpod.lifecycle import LIFECYCLE_PREFIX, LifecycleScripts


@dataclass(frozen=True)
class HyperPodParts:
    lifecycle: LifecycleScripts
    execution_role: HyperPodExecutionRole
    dependencies_chart: HyperPodDependenciesChart
    cluster: HyperPodCluster


def add_hyperpod(
    scope: Construct,
    *,
    config: HyperPodConfig,
    eks_cluster: eks.ICluster,
    vpc: ec2.IVpc,
    control_plane_subnets: Sequence[ec2.ISubnet],
    hyperpod_subnets: Mapping[str, ec2.ISubnet],
    node_security_group: ec2.ISecurityGroup,
    api_security_group: ec2.ISecurityGroup,
    scripts_dir: Path,
    log_retention: logs.RetentionDays,
    removal_policy: RemovalPolicy,
    lifecycle_bucket: s3.IBucket | None = None,
    execution_role: iam.IRole | None = None,
    fsx_lustre: bool = False,
) -> HyperPodParts:
    """Add the HyperPod constructs directly under ``scope`` (IDs LifecycleScripts, ExecutionRole,
    DependenciesChart, HyperPod), the cluster depending on the chart release and the uploaded scripts.

    ``fsx_lustre``: the cluster mounts FSx for Lustre, so the lifecycle script installs the Lustre client
    whatever ``config.lifecycle.fsx_lustre_client`` says."""
    options = config.lifecycle.model_copy(update={"fsx_lustre_client": True}) if fsx_lustre else config.lifecycle
    lifecycle = LifecycleScripts(
        scope, "LifecycleScripts", cluster_name=config.cluster_name, scripts_dir=scripts_dir,
        on_create=config.on_create_script, options=options, bucket=lifecycle_bucket,
        log_retention=log_retention, removal_policy=removal_policy,
    )
    subnets = {az: subnet.subnet_id for az, subnet in hyperpod_subnets.items()}
    security_groups = [node_security_group.security_group_id]
    role = HyperPodExecutionRole(
        scope, "ExecutionRole", eks_cluster_arn=eks_cluster.cluster_arn, vpc_id=vpc.vpc_id,
        subnet_ids=list(subnets.values()), security_group_ids=security_groups,
        lifecycle_bucket_arn=lifecycle.bucket.bucket_arn, lifecycle_prefix=LIFECYCLE_PREFIX,
        permissions_boundary_arn=config.permissions_boundary_arn, role=execution_role,
    )
    chart = HyperPodDependenciesChart(
        scope, "DependenciesChart", cluster=eks_cluster, chart=config.dependencies_chart, vpc=vpc,
        subnets=control_plane_subnets, cluster_security_group=api_security_group,
        log_retention=log_retention, removal_policy=removal_policy,
    )
    cluster = HyperPodCluster(
        scope, "HyperPod", config=config, eks_cluster_arn=eks_cluster.cluster_arn,
        execution_role_arn=role.role.role_arn, subnet_ids_by_az=subnets, security_group_ids=security_groups,
        lifecycle_s3_uri=lifecycle.source_s3_uri,
        # HyperPod validates the execution role's permissions when it creates the cluster: the role's inline
        # policy must exist by then, not only the role (CloudFormation creates them as separate resources).
        depends_on=[chart.release, lifecycle.deployment, *([role.policy] if role.policy else [])],
    )
    return HyperPodParts(lifecycle=lifecycle, execution_role=role, dependencies_chart=chart, cluster=cluster)
