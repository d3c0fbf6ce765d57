"""Each device plugin of the dependencies chart runs exactly on the instance groups whose type has its device.

The chart is rendered by helm (tests/contract/chart_render.py: the pinned top chart, the plugins' stored charts,
the installer's own helm) with the values the product sends; each plugin's DaemonSet is then matched against a
node of every instance type, labelled as HyperPod labels it (``node.kubernetes.io/instance-type``, the ``ml.``
name: the label AWS's own lists select on, aws/sagemaker-hyperpod-cli@a00b22d1:helm_chart/HyperPodHelmChart/
values.yaml lines 158 and 218-221). aws/sagemaker-hyperpod-cli#367 and #48 are the failures this guards against.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infra.config.device_plugins import (
    CHART_KEYS,
    DEVICES,
    INSTANCE_TYPE_LABEL,
    PINNED_NEURON_TYPES,
    Device,
    device_plugin_values,
    group_plugins,
    has_device,
    merge_values,
    sent_values,
)
from infra.facts.instances import CATALOG, listed_types
from tests.conftest import Synthesized
from tests.contract.chart_render import pod_spec, render, workloads

# Each plugin's DaemonSet as the chart names it (release hyperpod-dependencies): the NVIDIA and EFA charts name
# theirs after the release (their _helpers.tpl fullname), AWS's Neuron template fixes its name (line 5).
DAEMONSETS: dict[Device, str] = {
    "nvidia": "DaemonSet/hyperpod-dependencies-nvidia-device-plugin",
    "efa": "DaemonSet/hyperpod-dependencies-aws-efa-k8s-device-plugin",
    "neuron": "DaemonSet/neuron-device-plugin-daemonset",
}
# Every HyperPod type the catalog holds (each has the devices' counts, or the family that stands for them).
CATALOG_TYPES = sorted(t for t in CATALOG if t in listed_types())


def _expression_holds(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise AssertionError(f"operator {operator} not handled")


def schedules_on(daemonset: dict[str, Any], instance_type: str) -> bool:
    """Whether the DaemonSet's pods may run on a node of ``instance_type`` (Kubernetes' rules: every nodeSelector
    label, and one of the required node affinity's terms with all its expressions)."""
    labels = {INSTANCE_TYPE_LABEL: instance_type}
    spec = pod_spec(daemonset)
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(all(_expression_holds(e, labels) for e in term.get("matchExpressions") or [])
               for term in required["nodeSelectorTerms"])


def selection(manifests: list[dict[str, Any]], types: list[str]) -> dict[Device, set[str]]:
    """Per plugin, the types whose nodes its DaemonSet runs on (empty when the chart renders no DaemonSet)."""
    rendered = workloads(manifests)
    return {d: {t for t in types if DAEMONSETS[d] in rendered and schedules_on(rendered[DAEMONSETS[d]], t)}
            for d in DEVICES}


def expected(types: list[str]) -> dict[Device, set[str]]:
    """What the catalog says, with the one thing no value of the pinned chart can change: its Neuron plugin's own
    list (PINNED_NEURON_TYPES), which lacks ml.trn2.3xlarge."""
    chosen = {d: {t for t in types if has_device(t, d)} for d in DEVICES}
    chosen["neuron"] &= PINNED_NEURON_TYPES
    return chosen


def test_with_every_catalog_type_each_plugin_selects_exactly_the_types_with_its_device(helm: Path, chart_dir: Path):
    rendered = selection(render(helm, chart_dir, device_plugin_values(CATALOG_TYPES)), CATALOG_TYPES)
    assert rendered == expected(CATALOG_TYPES)
    # What that means, spelled out: GPU types of both kinds of catalog row, EFA only where counted, no CPU type.
    assert {"ml.g5.xlarge", "ml.g4dn.xlarge", "ml.p5.48xlarge"} <= rendered["nvidia"]
    assert "ml.g5.xlarge" not in rendered["efa"] and "ml.g5.8xlarge" in rendered["efa"]
    assert not any(t.startswith(("ml.c5.", "ml.m5.", "ml.t3.")) for d in DEVICES for t in rendered[d])


def test_aws_default_lists_miss_the_gpu_types_the_catalog_knows_only_by_family(helm: Path, chart_dir: Path):
    """Why the values are derived: with AWS's own lists (no values of ours), ml.g4dn and ml.g7 nodes get no NVIDIA
    plugin, so their GPUs are never offered to pods."""
    rendered = selection(render(helm, chart_dir, {}), CATALOG_TYPES)
    missing = expected(CATALOG_TYPES)["nvidia"] - rendered["nvidia"]
    assert missing and all(t.startswith(("ml.g4dn.", "ml.g7.")) for t in missing)


@pytest.mark.parametrize("types, running", [
    (["ml.c5.xlarge", "ml.m5.2xlarge"], set()),
    (["ml.g5.xlarge"], {"nvidia"}),
    (["ml.g5.8xlarge", "ml.c5.xlarge"], {"nvidia", "efa"}),
    (["ml.trn1.32xlarge"], {"efa", "neuron"}),
])
def test_a_plugin_no_group_needs_is_not_installed(helm: Path, chart_dir: Path, types: list[str], running: set[str]):
    manifests = render(helm, chart_dir, device_plugin_values(types))
    assert {d for d in DEVICES if DAEMONSETS[d] in workloads(manifests)} == running
    assert selection(manifests, types) == expected(types)


def test_the_neuron_plugin_list_is_the_pinned_templates(helm: Path, chart_dir: Path):
    """PINNED_NEURON_TYPES (what preflight reports) is what helm renders from the Neuron template."""
    neuron_like = sorted({*PINNED_NEURON_TYPES, *(t for t in CATALOG if has_device(t, "neuron"))})
    rendered = selection(render(helm, chart_dir, device_plugin_values(neuron_like)), neuron_like)
    assert rendered["neuron"] == set(PINNED_NEURON_TYPES)


def test_the_synthesized_release_sends_the_derived_values_under_the_configs(autoscaling_synth: Synthesized,
                                                                             helm: Path, chart_dir: Path):
    """The app's release carries device_plugin_values of every type its groups may run, fallbacks included, and
    helm renders them into plugins on exactly those groups."""
    config = autoscaling_synth.config
    (release,) = [r for r in autoscaling_synth.resources("hyperpod", "Custom::HyperPodHelmRelease").values()
                  if r["Properties"]["ReleaseName"] == "hyperpod-dependencies"]
    sent = json.loads(release["Properties"]["Values"])
    groups = config.hyperpod.instance_groups
    types = [t for g in groups for t in g.instance_types]
    assert "ml.g5.2xlarge" in types  # a fallback type: its nodes need the NVIDIA plugin too
    assert sent == merge_values(device_plugin_values(types), config.hyperpod.dependencies_chart.values)
    # The one function the construct, the pod-slot budget and the device-plugin check read the values from.
    assert sent == sent_values(types, config.hyperpod.dependencies_chart.values)
    rendered = selection(render(helm, chart_dir, sent), types)
    by_group = {g.name: tuple(d for d in DEVICES if any(t in rendered[d] for t in g.instance_types)) for g in groups}
    assert by_group == {p.group: p.plugins for p in group_plugins(groups, config.hyperpod.dependencies_chart.values)}


def test_a_value_set_in_the_config_wins():
    """An EFA type the catalog has no count for (ml.c6i.32xlarge) gets no EFA plugin unless the config says so."""
    group = SimpleNamespace(name="cpu-efa", instance_types=("ml.c6i.32xlarge",))
    (derived,) = group_plugins([group])
    assert derived.plugins == () and derived.unknown == ("ml.c6i.32xlarge",)
    own = {CHART_KEYS["efa"]: {"devicePlugin": {"enabled": True},
                               "supportedInstanceLabels": {"values": ["ml.c6i.32xlarge"]}}}
    (chosen,) = group_plugins([group], own)
    assert chosen.plugins == ("efa",) and chosen.unknown == ()
