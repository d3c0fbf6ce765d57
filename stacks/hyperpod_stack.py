"""HyperPodStack: lifecycle scripts, execution role, dependencies chart, then the HyperPod cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Stack
from constructs import Construct

from infra.common import data_removal_policy, retention
from infra.config import AppConfig
from infra.eks import EksControlPlane
from infra.hyperpod.cluster import HyperPodCluster
from infra.hyperpod.dependencies_chart import HyperPodDependenciesChart
from infra.hyperpod.execution_role import HyperPodExecutionRole
from infra.hyperpod.lifecycle import LIFECYCLE_PREFIX, LifecycleScripts
from infra.network import HyperPodNetwork

ROOT = Path(__file__).resolve().parents[1]


class HyperPodStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        network: HyperPodNetwork,
        control_plane: EksControlPlane,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        hp = config.hyperpod
        removal = data_removal_policy(config.destroy_data_on_delete)
        scripts_dir = Path(hp.lifecycle_scripts_dir)
        self.lifecycle = LifecycleScripts(
            self,
            "LifecycleScripts",
            cluster_name=hp.cluster_name,
            scripts_dir=scripts_dir if scripts_dir.is_absolute() else ROOT / scripts_dir,
            on_create=hp.on_create_script,
            options=hp.lifecycle,
            removal_policy=removal,
        )
        subnets = {az: network.hyperpod_subnets[az].subnet_id for az in network.hyperpod_subnets}
        security_groups = [network.security_group.security_group_id]
        self.execution_role = HyperPodExecutionRole(
            self,
            "ExecutionRole",
            eks_cluster_arn=control_plane.cluster.cluster_arn,
            vpc_id=network.vpc.vpc_id,
            subnet_ids=list(subnets.values()),
            security_group_ids=security_groups,
            lifecycle_bucket_arn=self.lifecycle.bucket.bucket_arn,
            lifecycle_prefix=LIFECYCLE_PREFIX,
            permissions_boundary_arn=hp.permissions_boundary_arn,
        )
        self.dependencies_chart = HyperPodDependenciesChart(
            self,
            "DependenciesChart",
            cluster=control_plane.cluster,
            chart=hp.dependencies_chart,
            vpc=network.vpc,
            subnets=network.control_plane_subnets,
            cluster_security_group=network.security_group,
            log_retention=retention(config.eks.log_retention_days),
            removal_policy=removal,
        )
        self.cluster = HyperPodCluster(
            self,
            "HyperPod",
            config=hp,
            eks_cluster_arn=control_plane.cluster.cluster_arn,
            execution_role_arn=self.execution_role.role.role_arn,
            subnet_ids_by_az=subnets,
            security_group_ids=security_groups,
            lifecycle_s3_uri=self.lifecycle.source_s3_uri,
            depends_on=[self.dependencies_chart.release, self.lifecycle.deployment],
        )
