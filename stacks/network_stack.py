"""NetworkStack: the VPC, subnets, EFA security group, endpoints and flow logs."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from infra.common import data_removal_policy
from infra.config import AppConfig
from infra.network import HyperPodNetwork


class NetworkStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.network = HyperPodNetwork(
            self,
            "Network",
            config=config.network,
            removal_policy=data_removal_policy(config.destroy_data_on_delete),
        )
