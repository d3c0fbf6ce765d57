"""Builds the whole app from one AppConfig: the stacks in creation order plus the nag plugins."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import AppConfig
from stacks.eks_stack import EksStack
from stacks.hyperpod_stack import HyperPodStack
from stacks.network_stack import NetworkStack


@dataclass(frozen=True)
class HyperPodApp:
    network: NetworkStack
    eks: EksStack
    hyperpod: HyperPodStack


def build_app(app: App, config: AppConfig, *, nag: bool = True) -> HyperPodApp:
    """Add the stacks for ``config`` to ``app``; stack names are ``<project>-<part>``."""
    env = Environment(account=config.account, region=config.region)
    network = NetworkStack(
        app, f"{config.project}-network", config=config, env=env,
        description="HyperPod on EKS: VPC, subnets by AZ ID, EFA security group, endpoints",
    )
    eks = EksStack(
        app, f"{config.project}-eks", config=config, network=network.network, env=env,
        description="HyperPod on EKS: EKS control plane, add-ons, access entries",
    )
    eks.add_stack_dependency(network)
    hyperpod = HyperPodStack(
        app, f"{config.project}-hyperpod", config=config, network=network.network,
        control_plane=eks.control_plane, env=env,
        description="HyperPod on EKS: lifecycle scripts, execution role, dependencies chart, HyperPod cluster",
    )
    hyperpod.add_stack_dependency(eks)
    for key, value in {"project": config.project, **config.tags}.items():
        Tags.of(app).add(key, value)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return HyperPodApp(network=network, eks=eks, hyperpod=hyperpod)
