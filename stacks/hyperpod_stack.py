"""HyperPodStack: lifecycle scripts, execution role, dependencies chart, then the HyperPod cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Stack
from constructs import Construct

from infra.common import data_removal_policy, retention
from infra.config import AppConfig
from infra.eks import EksControlPlane
from infra.hyperpod.assembly import add_hyperpod
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
        scripts_dir = Path(config.hyperpod.lifecycle_scripts_dir)
        parts = add_hyperpod(
            self,
            config=config.hyperpod,
            eks_cluster=control_plane.cluster,  # type: ignore[arg-type]  # jsii stubs: Cluster lacks an ICluster member
            vpc=network.vpc,
            control_plane_subnets=network.control_plane_subnets,
            hyperpod_subnets=network.hyperpod_subnets,
            node_security_group=network.security_group,
            api_security_group=network.security_group,
            scripts_dir=scripts_dir if scripts_dir.is_absolute() else ROOT / scripts_dir,
            log_retention=retention(config.eks.log_retention_days),
            removal_policy=data_removal_policy(config.destroy_data_on_delete),
            fsx_lustre=config.storage.fsx_lustre.enabled,
        )
        self.lifecycle = parts.lifecycle
        self.execution_role = parts.execution_role
        self.dependencies_chart = parts.dependencies_chart
        self.cluster = parts.cluster
