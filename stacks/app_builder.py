"""The app: one stack per component, in creation order, built by the library's one composition, plus the nag
plugins. Stack names are ``<project>-<component>``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Environment, Stack, Stage, Validations
from cdk_nag import AwsSolutionsChecks

from infra.composition import HyperPodParts, Placement, compose
from infra.config import AppConfig, require_network
from infra.facts.names import STACK_DESCRIPTION_PREFIX
from infra.guards.nag_pack import HyperPodChecks

ROOT = Path(__file__).resolve().parents[1]

DESCRIPTIONS = {
    "network": f"{STACK_DESCRIPTION_PREFIX}VPC, subnets by AZ ID, EFA security group, endpoints",
    "eks": f"{STACK_DESCRIPTION_PREFIX}EKS control plane, add-ons, access entries",
    "hyperpod": f"{STACK_DESCRIPTION_PREFIX}lifecycle scripts, execution role, dependencies chart, HyperPod cluster",
    "observability": f"{STACK_DESCRIPTION_PREFIX}Container Insights, Managed Prometheus and Grafana, alerts, dashboard",
    "storage": f"{STACK_DESCRIPTION_PREFIX}FSx for Lustre, its CSI driver, the training volume and claim",
}


@dataclass(frozen=True)
class HyperPodApp:
    network: Stack
    eks: Stack
    hyperpod: Stack
    parts: HyperPodParts
    observability: Stack | None = None
    storage: Stack | None = None

    @property
    def stacks(self) -> list[Stack]:
        """The app's stacks in creation order."""
        return [s for s in (self.network, self.eks, self.hyperpod, self.observability, self.storage) if s is not None]


def register_nag(app: Stage) -> None:
    """The nag packs, AWS Solutions and this product's, over every template of ``app``."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    Validations.of(app).add_plugins(HyperPodChecks(app))


def build_app(app: Stage, config: AppConfig, *, nag: bool = True) -> HyperPodApp:
    """Add the stacks for ``config`` to ``app``: the App, or a stage of the delivery pipeline (stacks/pipeline.py).

    The stack name is set, not derived: a stack of a nested stage would otherwise be named
    ``<stage>-<project>-<component>``, and hpctl, the guard and a deployment made from a laptop know it as
    ``<project>-<component>`` (at the top level the derived name is the ID, so the App's stacks do not change)."""
    require_network(config, "the app's network stack")
    env = Environment(account=config.account, region=config.region)

    def stack(component: str, *, protect: bool = config.termination_protection) -> Stack:
        name = f"{config.project}-{component}"
        return Stack(app, name, stack_name=name, env=env, termination_protection=protect,
                     description=DESCRIPTIONS[component])

    # The network stack holds only flow logs (retained anyway) and cannot go while the others stand. `cdk deploy`
    # switches the deployed stack's protection when this changes (aws-cdk CLI 2.1148.1, lib/index.js:
    # updateTerminationProtection), so `termination_protection: false` then `cdk destroy` works.
    network, eks, hyperpod = stack("network", protect=False), stack("eks"), stack("hyperpod")
    eks.add_stack_dependency(network)
    hyperpod.add_stack_dependency(eks)
    # Observability's and storage's add-ons need running HyperPod nodes: their stacks come after HyperPod's.
    observability = stack("observability") if config.observability.any_enabled else None
    storage = stack("storage") if config.storage.fsx_lustre.enabled else None
    for later in (observability, storage):
        if later is not None:
            later.add_stack_dependency(hyperpod)
    scripts_dir = Path(config.hyperpod.lifecycle_scripts_dir)
    parts = compose(
        config,
        Placement(network=network, eks=eks, hyperpod=hyperpod, observability=observability, storage=storage),
        scripts_dir=scripts_dir if scripts_dir.is_absolute() else ROOT / scripts_dir,
    )
    if nag:
        register_nag(app)
    return HyperPodApp(network=network, eks=eks, hyperpod=hyperpod, parts=parts, observability=observability,
                       storage=storage)
