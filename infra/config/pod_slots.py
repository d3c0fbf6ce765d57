"""Pod slots per node: the pods the config puts on every node of each instance group, against the pods a node of
its type accepts.

The kubelet refuses a pod beyond its ``maxPods`` ("Too many pods"), and it counts every pod, the DaemonSets' too.
On an ml.g5.xlarge HyperPod node maxPods is 14, and add-on pods stayed Pending there
(https://github.com/awslabs/ai-on-sagemaker-hyperpod/issues/142). The pods per node come from the add-ons'
declarations (``infra.facts.addons``: ``AddonFacts.node_pods`` and ``DEPENDENCIES_CHART_NODE_PODS``), the pods a node
accepts from the instance catalog (``InstanceType.max_pods``). ``require_pod_slots`` refuses at synth a group whose
nodes could not hold them and one workload pod; ``hpctl preflight`` prints ``budgets`` per group.

Deployments (controllers, CoreDNS) run once per cluster on some node and are not counted per node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.config.device_plugins import sent_values
from infra.errors import ConfigError
from infra.facts import addons as facts
from infra.facts.instances import accelerator_kind, lookup

# The config is typed Any here, as in infra/config/regions.py: app.py calls these from its validator, and a typed
# import of AppConfig would be an import cycle.

# Pods a node must keep free for the workloads: at least one, or the group runs nothing.
WORKLOAD_PODS = 1

CHART_VALUES_KEY = "hyperpod.dependencies_chart.values"


@dataclass(frozen=True)
class PodSlot:
    """One pod on every node of a group: the DaemonSet, the add-on it belongs to, and the config key that turns it
    off (``None``: every cluster has it)."""

    addon: str
    pod: facts.NodePod
    off_key: str | None


@dataclass(frozen=True)
class NodeBudget:
    """One instance type of one group: the pods a node accepts (None: not known for the type) and those the config
    puts on it."""

    group_index: int
    group: str
    type_key: str  # the config key of the type: instance_type or fallback_instance_types.N
    instance_type: str
    max_pods: int | None
    pods: tuple[PodSlot, ...]

    @property
    def free(self) -> int | None:
        """Slots left for workload pods."""
        return None if self.max_pods is None else self.max_pods - len(self.pods)

    @property
    def fits(self) -> bool:
        return self.free is None or self.free >= WORKLOAD_PODS

    def line(self) -> str:
        """The budget in one line, as preflight prints it."""
        names = ", ".join(slot.pod.name for slot in self.pods)
        if self.max_pods is None:
            return (f"group {self.group} ({self.instance_type}): {len(self.pods)} pods per node ({names}); the pods a "
                    "node accepts are not known for this type")
        return (f"group {self.group} ({self.instance_type}): {len(self.pods)} of {self.max_pods} pod slots per node "
                f"taken ({names}), {self.free} left for workloads")


def _runs_on(kind: facts.NodeKind, instance_type: str) -> bool:
    """Whether a DaemonSet placed on ``kind`` nodes puts a pod on a node of ``instance_type``; a type whose device
    count the catalog lacks is counted as having the device (the budget errs on the full side)."""
    if kind == "every":
        return True
    if kind in ("nvidia", "neuron"):
        return accelerator_kind(instance_type) == kind
    known = lookup(instance_type)
    return known is None or known.efa is None or known.efa > 0


def _chart_value_on(values: Mapping[str, Any], toggle: str) -> bool:
    """A boolean of the chart's values by its dotted path; the pinned chart has every toggle used here on."""
    node: Any = values
    for part in toggle.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return True
        node = node[part]
    return node is not False


def node_pods(config: Any, instance_type: str) -> tuple[PodSlot, ...]:
    """Every pod the config's add-ons and chart put on one node of ``instance_type``."""
    declared: list[tuple[facts.AddonFacts, str | None]] = [(addon, None) for addon in facts.CORE]
    if config.observability.container_insights:
        declared.append((facts.CONTAINER_INSIGHTS, "observability.container_insights"))
    if config.observability.prometheus.enabled:
        declared.append((facts.HYPERPOD_OBSERVABILITY, "observability.prometheus.enabled"))
    if config.storage.fsx_lustre.enabled:
        declared.append((facts.FSX_CSI, "storage.fsx_lustre.enabled"))
    if config.addons.s3_csi.enabled:
        declared.append((facts.S3_CSI, "addons.s3_csi.enabled"))
    if (installer := config.addons.cert_manager_installer()) is not None:
        declared.append((facts.CERT_MANAGER, f"addons.{installer}.enabled"))
    if config.addons.training_operator.enabled:
        declared.append((facts.TRAINING_OPERATOR, "addons.training_operator.enabled"))
    if config.addons.task_governance.enabled:
        declared.append((facts.TASK_GOVERNANCE, "addons.task_governance.enabled"))
    slots = [PodSlot(addon.name, pod, key) for addon, key in declared
             for pod in addon.node_pods if _runs_on(pod.runs_on, instance_type)]
    # The values the chart is installed with: a device plugin no group needs is off there.
    hp = config.hyperpod
    values = sent_values([t for g in hp.instance_groups for t in g.instance_types], hp.dependencies_chart.values)
    slots += [PodSlot("dependencies chart", pod, f"{CHART_VALUES_KEY}.{toggle}")
              for toggle, pod in facts.DEPENDENCIES_CHART_NODE_PODS
              if _chart_value_on(values, toggle) and _runs_on(pod.runs_on, instance_type)]
    return tuple(slots)


def budgets(config: Any) -> list[NodeBudget]:
    """The pod budget of every instance type of every group (a flexible group's fallbacks included)."""
    result = []
    for index, group in enumerate(config.hyperpod.instance_groups):
        keys = ["instance_type", *(f"fallback_instance_types.{j}" for j in range(len(group.fallback_instance_types)))]
        for key, instance_type in zip(keys, group.instance_types, strict=True):
            known = lookup(instance_type)
            result.append(NodeBudget(index, group.name, key, instance_type,
                                     None if known is None else known.max_pods, node_pods(config, instance_type)))
    return result


def require_pod_slots(config: Any) -> None:
    """Refuse the first group whose nodes of one of its types cannot hold the config's pods and one workload pod."""
    for budget in budgets(config):
        if budget.fits:
            continue
        switches: dict[str, int] = {}
        for slot in budget.pods:
            if slot.off_key is not None:
                switches[slot.off_key] = switches.get(slot.off_key, 0) + 1
        off = ", ".join(f"{key} ({n} pod{'s' if n > 1 else ''})" for key, n in switches.items())
        fix = f"turn off {off}, or use an instance type with more pod slots" if off \
            else "use an instance type with more pod slots"
        raise ConfigError(
            f"hyperpod.instance_groups.{budget.group_index}.{budget.type_key}", budget.instance_type,
            f"group {budget.group}: an {budget.instance_type} node accepts {budget.max_pods} pods and this config puts "
            f"{len(budget.pods)} on every node, leaving no slot for a workload pod; {fix}")
