"""ObservabilityStack: Container Insights, Managed Prometheus and Grafana, alerts and dashboard, after HyperPod."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from infra.common import data_removal_policy, retention
from infra.config import AppConfig, eks_cluster_name
from infra.observability import HyperPodObservability


class ObservabilityStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # Names, not cross-stack references: switching a piece on or off never touches another stack.
        cluster_name = eks_cluster_name(config)
        cluster_arn = self.format_arn(service="eks", resource="cluster", resource_name=cluster_name)
        self.observability = HyperPodObservability(
            self,
            "Observability",
            config=config.observability,
            name=config.hyperpod.cluster_name,
            eks_cluster_name=cluster_name,
            eks_cluster_arn=cluster_arn,
            hyperpod_cluster_name=config.hyperpod.cluster_name,
            log_retention=retention(config.eks.log_retention_days),
            removal_policy=data_removal_policy(config.destroy_data_on_delete),
        )
