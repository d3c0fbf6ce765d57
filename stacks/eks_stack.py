"""EksStack: the EKS control plane that the HyperPod cluster's instance groups join."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from infra.common import data_removal_policy
from infra.config import AppConfig, eks_cluster_name
from infra.eks import EksControlPlane
from infra.network import HyperPodNetwork


class EksStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: AppConfig, network: HyperPodNetwork, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.control_plane = EksControlPlane(
            self,
            "ControlPlane",
            config=config.eks,
            cluster_name=eks_cluster_name(config),
            vpc=network.vpc,
            subnets=network.control_plane_subnets,
            security_group=network.security_group,
            removal_policy=data_removal_policy(config.destroy_data_on_delete),
        )
