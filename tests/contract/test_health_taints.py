"""What each workload this product installs tolerates of HyperPod's node-health taint, checked where it is decided:
the dependencies chart as helm renders it with the values the app sends (tests/contract/chart_render.py), and the
configuration values the app sends each EKS add-on. The choices and their sources: infra/facts/health_taints.py;
the page that documents them: docs/resilience.md ("Health taints")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from infra.config.device_plugins import device_plugin_values, merge_values
from infra.facts import addons as addon_facts
from infra.facts.health_taints import (
    ADDONS,
    CHART_WORKLOADS,
    DEEP_HEALTH_CHECK_EFFECT,
    DEEP_HEALTH_CHECK_VALUE,
    HEALTH_STATUS_KEY,
    tolerance,
)
from infra.facts.instances import CATALOG, listed_types
from tests.conftest import ROOT, YAML_LOADER, Synthesized
from tests.contract.chart_render import SUBCHARTS, TOP_CHART, pod_spec, render, workloads

EXPECTED = {c.workload: c.tolerates for c in CHART_WORKLOADS}


def _sent_values(synth: Synthesized) -> dict[str, Any]:
    (release,) = [r for r in synth.resources("hyperpod", "Custom::HyperPodHelmRelease").values()
                  if r["Properties"]["ReleaseName"] == "hyperpod-dependencies"]
    values: dict[str, Any] = json.loads(release["Properties"]["Values"])
    return values


def _rendered_tolerance(manifests: list[dict[str, Any]]) -> dict[str, str]:
    return {name: tolerance(pod_spec(m).get("tolerations")) for name, m in workloads(manifests).items()}


def test_the_chart_as_the_app_sends_it_tolerates_as_aws_chose(all_features_synth: Synthesized, helm: Path,
                                                              chart_dir: Path):
    rendered = _rendered_tolerance(render(helm, chart_dir, _sent_values(all_features_synth)))
    assert rendered, "no workload rendered"
    assert rendered == {name: EXPECTED[name] for name in rendered}


def test_every_chart_workload_is_listed_with_every_plugin_on(helm: Path, chart_dir: Path):
    """With a group of every catalog type, every plugin is on: the list covers every workload the chart renders."""
    every_type = [t for t in CATALOG if t in listed_types()]
    assert _rendered_tolerance(render(helm, chart_dir, device_plugin_values(every_type))) == EXPECTED


def test_every_subchart_switched_on_is_rendered(all_features_synth: Synthesized):
    """The render leaves out only subcharts whose condition is off in the top chart's values, with the values the
    app sends and with every device plugin on."""
    metadata = yaml.load((TOP_CHART / "Chart.yaml").read_text(encoding="utf-8"), Loader=YAML_LOADER)
    top = yaml.load((TOP_CHART / "values.yaml").read_text(encoding="utf-8"), Loader=YAML_LOADER)

    def switched_on(values: dict[str, Any]) -> set[str]:
        def on(path: str) -> bool:
            node: Any = values
            for part in path.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            return bool(node)
        return {d["name"] for d in metadata["dependencies"] if on(d["condition"])}

    every_plugin = device_plugin_values([t for t in CATALOG if t in listed_types()])
    assert switched_on(merge_values(top, every_plugin)) == set(SUBCHARTS)
    assert switched_on(merge_values(top, _sent_values(all_features_synth))) <= set(SUBCHARTS)


def _tolerations_in(configuration: Any) -> list[list[dict[str, Any]]]:
    if isinstance(configuration, dict):
        found = [configuration["tolerations"]] if "tolerations" in configuration else []
        return found + [t for key, value in configuration.items() if key != "tolerations"
                        for t in _tolerations_in(value)]
    if isinstance(configuration, list):
        return [t for item in configuration for t in _tolerations_in(item)]
    return []


def test_each_addon_gets_the_tolerations_awss_module_sends(all_features_synth: Synthesized):
    assert {c.workload for c in ADDONS} == {a.name for a in addon_facts.ALL}
    choices = {c.workload: c.tolerates for c in ADDONS}
    seen = set()
    for template in all_features_synth.templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] != "AWS::EKS::Addon":
                continue
            name, configuration = resource["Properties"]["AddonName"], resource["Properties"].get("ConfigurationValues")
            seen.add(name)
            if choices[name] == "add-on default":
                # Nothing about tolerations is sent (a configuration with tokens is an Fn::Join: searched as text).
                assert "tolerations" not in json.dumps(configuration), name
            else:
                found = _tolerations_in(json.loads(configuration))
                assert found and {tolerance(t) for t in found} == {choices[name]}, name
    assert seen == set(choices), "config/all-features.yaml installs every add-on"


def test_the_classification_follows_kubernetes_matching():
    taint = {"key": HEALTH_STATUS_KEY, "operator": "Equal", "value": DEEP_HEALTH_CHECK_VALUE,
             "effect": DEEP_HEALTH_CHECK_EFFECT}
    assert tolerance([taint]) == "deep health checks"
    assert tolerance([{**taint, "value": "UnschedulablePendingReboot"}]) == "none"
    assert tolerance([{"key": HEALTH_STATUS_KEY, "operator": "Exists"}]) == "deep health checks"
    assert tolerance([{"operator": "Exists", "effect": "NoSchedule"}]) == "deep health checks"  # not NoExecute
    assert tolerance([{"operator": "Exists"}]) == "every taint"
    assert tolerance(None) == tolerance([{"key": "nvidia.com/gpu", "operator": "Exists"}]) == "none"


def test_the_resilience_page_documents_each_choice():
    text = (ROOT / "docs" / "resilience.md").read_text(encoding="utf-8")
    section = text.split("## Health taints", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+?) \| ([^|]+?) \| ([^|]+?) \|$", section, flags=re.MULTILINE)
    assert set(rows) == {(c.workload, c.installed_by, c.tolerates, c.source) for c in (*CHART_WORKLOADS, *ADDONS)}
