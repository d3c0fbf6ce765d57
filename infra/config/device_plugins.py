"""Which device plugins of the HyperPod dependencies chart run on which instance groups, and the chart values that
make each plugin select exactly the groups whose instance type has its device (the instance catalog's counts).

The chart (aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart, the
pinned ``DEPENDENCIES_CHART_REVISION``) installs three device plugins, each a subchart with a condition
(its Chart.yaml, ``dependencies``) and each a DaemonSet that selects nodes by the label
``node.kubernetes.io/instance-type`` (AWS's lists hold ``ml.`` names: its values.yaml lines 148-269):

- ``nvidia-device-plugin`` (chart 0.16.1, read at NVIDIA/k8s-device-plugin@cb6e45ec, tag v0.16.1): its
  ``affinity`` value, which AWS's values.yaml (lines 153-201) sets to a ``nodeAffinity`` on the instance-type
  label; NVIDIA's template (deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml lines
  258-260) writes ``.Values.affinity`` whole;
- ``aws-efa-k8s-device-plugin`` (chart 0.5.20, read at aws/eks-charts@de5fdc1d): ``supportedInstanceLabels.values``
  (AWS's values.yaml lines 218-259), which its template (stable/aws-efa-k8s-device-plugin/templates/daemonset.yaml
  lines 49-63) turns into ``node.kubernetes.io/instance-type In <values>``;
- ``neuron-device-plugin`` (a subchart of AWS's chart): its template (charts/neuron-device-plugin/templates/
  k8s-neuron-device-plugin.yaml lines 37-63) lists the instance types itself and reads no value for them: only
  the condition ``neuron-device-plugin.devicePlugin.enabled`` can change where it runs.

Issues aws/sagemaker-hyperpod-cli#367 (the EFA plugin's list held types without EFA; its pods crash-looped) and #48
(the NVIDIA plugin scheduled on every node, CrashLoopBackOff), and its open pull request #447 (the g7 types missing
from the NVIDIA and EFA lists, so no plugin ran on them), are why these lists are derived here from the config's
groups and the catalog instead of taken from AWS's chart. ``tests/contract/test_device_plugins.py`` renders the
pinned chart's plugins with helm and checks the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from infra.facts.instances import accelerator_kind, lookup

Device = Literal["nvidia", "efa", "neuron"]
DEVICES: tuple[Device, ...] = ("nvidia", "efa", "neuron")
# The subchart (its values key in AWS's chart) of each plugin: aws/sagemaker-hyperpod-cli@a00b22d1:
# helm_chart/HyperPodHelmChart/Chart.yaml, dependencies (condition <key>.devicePlugin.enabled for all three).
CHART_KEYS: Mapping[Device, str] = {
    "nvidia": "nvidia-device-plugin", "efa": "aws-efa-k8s-device-plugin", "neuron": "neuron-device-plugin",
}
# The node label every plugin selects on, holding the HyperPod instance type with its "ml." prefix (AWS's
# values.yaml lines 158 and 219-221, the Neuron template line 42).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# The instance types the pinned chart's Neuron plugin selects: its template lists them and no value changes them
# (aws/sagemaker-hyperpod-cli@a00b22d1:helm_chart/HyperPodHelmChart/charts/neuron-device-plugin/templates/
# k8s-neuron-device-plugin.yaml lines 45-63; the "ml." ones only, HyperPod nodes carry no other).
# tests/contract/test_device_plugins.py checks this against helm's render of that template.
# ml.trn2.3xlarge, a Neuron type of the catalog, is not among them: aws/sagemaker-hyperpod-cli pull request #444
# ("add trn2.3xlarge to neuron-device-plugin.yaml", open when read) adds it; hpctl preflight fails such a group.
PINNED_NEURON_TYPES = frozenset({
    "ml.inf2.xlarge", "ml.inf2.8xlarge", "ml.inf2.24xlarge", "ml.inf2.48xlarge", "ml.trn1.2xlarge",
    "ml.trn1.32xlarge", "ml.trn1n.32xlarge", "ml.trn2.48xlarge",
})


def has_device(instance_type: str, device: Device) -> bool | None:
    """Whether ``instance_type`` has ``device``, per the instance catalog: its count of GPUs, EFA devices or Neuron
    devices above 0. Where the catalog has no count, GPUs and Neuron devices follow the type's accelerator family
    (the catalog's ``accelerator_kind``: ml.g4dn and ml.g7 are NVIDIA types without a count); an EFA count the
    catalog lacks is unknown: None."""
    known = lookup(instance_type)
    count = None if known is None else {"nvidia": known.gpus, "efa": known.efa, "neuron": known.neuron}[device]
    if count is not None:
        return count > 0
    if device == "efa":
        return None
    return accelerator_kind(instance_type) == device


def device_types(instance_types: Iterable[str], device: Device) -> list[str]:
    """The types of ``instance_types`` that have ``device`` for certain, sorted, each once."""
    return sorted({t for t in instance_types if has_device(t, device)})


def device_plugin_values(instance_types: Iterable[str]) -> dict[str, Any]:
    """The dependencies chart's values for its three device plugins, from the types the instance groups may run.

    A plugin no type needs is switched off (its subchart's condition): an ``In`` selector with no value is
    refused by the API server. The NVIDIA plugin's ``affinity`` and the EFA plugin's ``supportedInstanceLabels``
    list exactly the types with the device; lists replace AWS's whole when helm merges values. The Neuron plugin
    can only be on or off (see the module's docstring).
    """
    types = list(instance_types)
    nvidia, efa = device_types(types, "nvidia"), device_types(types, "efa")
    values: dict[str, Any] = {
        CHART_KEYS["nvidia"]: {"devicePlugin": {"enabled": bool(nvidia)}},
        CHART_KEYS["efa"]: {"devicePlugin": {"enabled": bool(efa)}},
        CHART_KEYS["neuron"]: {"devicePlugin": {"enabled": bool(device_types(types, "neuron"))}},
    }
    if nvidia:
        term = {"matchExpressions": [{"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": nvidia}]}
        values[CHART_KEYS["nvidia"]]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    if efa:
        values[CHART_KEYS["efa"]]["supportedInstanceLabels"] = {"keys": [INSTANCE_TYPE_LABEL], "values": efa}
    return values


def merge_values(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base`` as helm merges values files: maps key by key, anything else replaced whole."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = value
    return merged


def sent_values(instance_types: Iterable[str], values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The values this product sends the dependencies chart: ``device_plugin_values`` for the types the groups may
    run, under the config's own ``values`` (which win); the config's alone when there is no type. What the
    construct installs with, and what the pod-slot budget and the device-plugin check read."""
    types = list(instance_types)
    return merge_values(device_plugin_values(types), values or {}) if types else dict(values or {})


@dataclass(frozen=True)
class GroupPlugins:
    """For one instance group: the plugins that will run on its nodes, and what is wrong or unknown."""

    group: str
    instance_types: tuple[str, ...]
    plugins: tuple[Device, ...]
    problems: tuple[str, ...]  # a device a type has whose plugin will not run there
    unknown: tuple[str, ...]  # a type whose EFA count the catalog lacks (no EFA plugin there)


def group_plugins(groups: Sequence[Any], values: Mapping[str, Any] | None = None,
                  pinned_chart: bool = True) -> list[GroupPlugins]:
    """Per group (``InstanceGroupConfig``: ``name``, ``instance_types``), which plugins the chart runs on its nodes
    with the values this product sends (``device_plugin_values`` under the config's own ``values``).

    ``pinned_chart``: the chart is the pinned revision, whose Neuron template is known (``PINNED_NEURON_TYPES``);
    for another, the Neuron plugin is taken to follow the catalog."""
    every_type = [t for g in groups for t in g.instance_types]
    sent = sent_values(every_type, values)
    selected = {device: _selected(sent, device, pinned_chart) for device in DEVICES}
    result = []
    for group in groups:
        types = tuple(group.instance_types)
        plugins = tuple(d for d in DEVICES if any(selected[d](t) for t in types))
        problems = tuple(f"{t} has {d} devices but the {CHART_KEYS[d]} will not run there"
                         for d in DEVICES for t in types if has_device(t, d) and not selected[d](t))
        unknown = tuple(t for t in types if has_device(t, "efa") is None and not selected["efa"](t))
        result.append(GroupPlugins(group.name, types, plugins, problems, unknown))
    return result


def _selected(values: Mapping[str, Any], device: Device, pinned_chart: bool) -> Any:
    """A predicate: does the plugin, with ``values``, select a node of this instance type."""
    plugin = values.get(CHART_KEYS[device]) or {}
    if not (plugin.get("devicePlugin") or {}).get("enabled", True):
        return lambda instance_type: False
    if device == "neuron":
        return (lambda t: t in PINNED_NEURON_TYPES) if pinned_chart else (lambda t: bool(has_device(t, "neuron")))
    if device == "efa":
        listed = set((plugin.get("supportedInstanceLabels") or {}).get("values") or [])
        return lambda t: t in listed
    terms = (((plugin.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    listed = {v for term in terms for e in term.get("matchExpressions") or []
              if e.get("key") == INSTANCE_TYPE_LABEL and e.get("operator") == "In" for v in e.get("values") or []}
    return lambda t: t in listed
