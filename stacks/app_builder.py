"""Builds the whole app from one AppConfig: the stacks in creation order plus the nag plugins."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import App, Environment, Tags, Validations
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from infra.config import AppConfig
from infra.nag_pack import HyperPodChecks
from stacks.eks_stack import EksStack
from stacks.hyperpod_stack import HyperPodStack
from stacks.network_stack import NetworkStack
from stacks.observability_stack import ObservabilityStack
from stacks.storage_stack import StorageStack


@dataclass(frozen=True)
class HyperPodApp:
    network: NetworkStack
    eks: EksStack
    hyperpod: HyperPodStack
    observability: ObservabilityStack | None = None
    storage: StorageStack | None = None


def build_app(app: App, config: AppConfig, *, nag: bool = True) -> HyperPodApp:
    """Add the stacks for ``config`` to ``app``; stack names are ``<project>-<part>``."""
    env = Environment(account=config.account, region=config.region)
    # The network stack holds only flow logs (retained anyway) and cannot go while the others stand. `cdk deploy`
    # switches the deployed stack's protection when this changes (aws-cdk CLI 2.1148.1, lib/index.js:
    # updateTerminationProtection), so `termination_protection: false` then `cdk destroy` works.
    protect = config.termination_protection
    network = NetworkStack(
        app, f"{config.project}-network", config=config, env=env,
        description="HyperPod on EKS: VPC, subnets by AZ ID, EFA security group, endpoints",
    )
    eks = EksStack(
        app, f"{config.project}-eks", config=config, network=network.network, env=env,
        termination_protection=protect,
        description="HyperPod on EKS: EKS control plane, add-ons, access entries",
    )
    eks.add_stack_dependency(network)
    hyperpod = HyperPodStack(
        app, f"{config.project}-hyperpod", config=config, network=network.network,
        control_plane=eks.control_plane, env=env, termination_protection=protect,
        description="HyperPod on EKS: lifecycle scripts, execution role, dependencies chart, HyperPod cluster",
    )
    hyperpod.add_stack_dependency(eks)
    observability = None
    if config.observability.any_enabled:
        observability = ObservabilityStack(
            app, f"{config.project}-observability", config=config, env=env, termination_protection=protect,
            description="HyperPod on EKS: Container Insights, Managed Prometheus and Grafana, alerts, dashboard",
        )
        # The add-ons need running HyperPod nodes: create them after the cluster.
        observability.add_stack_dependency(hyperpod)
    storage = None
    if config.storage.fsx_lustre.enabled:
        storage = StorageStack(
            app, f"{config.project}-storage", config=config, network=network.network,
            control_plane=eks.control_plane, env=env, termination_protection=protect,
            description="HyperPod on EKS: FSx for Lustre, its CSI driver, the training volume and claim",
        )
        # The CSI driver add-on needs running HyperPod nodes: create it after the cluster.
        storage.add_stack_dependency(hyperpod)
    for key, value in {"project": config.project, **config.tags}.items():
        Tags.of(app).add(key, value)
    if config.permissions_boundary_arn:
        for stack in (network, eks, hyperpod, observability, storage):
            if stack is not None:
                boundary = iam.ManagedPolicy.from_managed_policy_arn(
                    stack, "PermissionsBoundary", config.permissions_boundary_arn)
                iam.PermissionsBoundary.of(stack).apply(boundary)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
        Validations.of(app).add_plugins(HyperPodChecks(app))
    return HyperPodApp(network=network, eks=eks, hyperpod=hyperpod, observability=observability,
                       storage=storage)

