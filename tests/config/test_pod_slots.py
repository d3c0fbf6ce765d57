"""Pod slots per node: a group whose nodes cannot hold the pods the config puts on each of them, plus one workload
pod, is refused at synth with one line naming the group, both numbers and what to turn off."""

from __future__ import annotations

import pytest

from infra.config import parse_config
from infra.config.pod_slots import budgets, node_pods
from infra.errors import ConfigError
from infra.facts import addons
from infra.facts.instances import CATALOG
from tests.conftest import default_config_data, mutate


def with_group(instance_type: str, **changes) -> dict:
    data = default_config_data()
    group = dict(data["hyperpod"]["instance_groups"][0], instance_type=instance_type, deep_health_checks=[])
    data["hyperpod"]["instance_groups"] = [group]
    data["addons"] = {"task_governance": {"enabled": False}}
    return mutate(changes, data)


def test_the_reported_figure_is_reproduced():
    # awslabs/ai-on-sagemaker-hyperpod#142: maxPods 14 on an ml.g5.xlarge HyperPod node.
    assert CATALOG["ml.g5.xlarge"].max_pods == 14
    assert CATALOG["ml.g5.xlarge"].source("max_pods") is not None
    assert CATALOG["ml.p6e-gb200.36xlarge"].max_pods is None  # no IPv4 figure, no pod figure


def test_a_gpu_node_counts_the_core_the_chart_and_container_insights():
    config = parse_config(with_group("ml.g5.8xlarge", observability={"container_insights": True}))
    names = [slot.pod.name for slot in node_pods(config, "ml.g5.8xlarge")]
    assert names[:3] == ["aws-node", "kube-proxy", "eks-pod-identity-agent"]
    assert {"cloudwatch-agent", "fluent-bit", "dcgm-exporter", "health-monitoring-agent", "nvidia-device-plugin",
            "aws-efa-k8s-device-plugin"} <= set(names)
    # Neuron-only pods stay off an NVIDIA node; the EFA plugin stays off a type without EFA.
    assert not {"neuron-monitor", "neuron-device-plugin-daemonset", "health-monitoring-agent-non-nvidia"} & set(names)
    assert "aws-efa-k8s-device-plugin" not in [s.pod.name for s in node_pods(config, "ml.g5.xlarge")]


def test_every_switch_adds_its_pods():
    base = parse_config(with_group("ml.g5.8xlarge"))
    full = parse_config(with_group(
        "ml.g5.8xlarge", storage={"fsx_lustre": {"enabled": True}},
        addons={"s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::my-bucket"]}}))
    def names(config):
        return {s.pod.name for s in node_pods(config, "ml.g5.8xlarge")}

    added = names(full) - names(base)
    assert added == {"fsx-csi-node", "s3-csi-node"}
    off = parse_config(with_group("ml.g5.8xlarge", hyperpod={"dependencies_chart": {"values": {
        "health-monitoring-agent": {"enabled": False}, "nvidia-device-plugin": {"devicePlugin": {"enabled": False}}}}}))
    names = {s.pod.name for s in node_pods(off, "ml.g5.8xlarge")}
    assert not {"health-monitoring-agent", "nvidia-device-plugin"} & names


def test_a_group_without_a_slot_for_a_workload_is_refused():
    # ml.t3.medium: 6 IPv4 per interface, 5 pods; the core add-ons and Container Insights take 5.
    data = with_group("ml.t3.medium", observability={"container_insights": True})
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    message = str(error.value)
    assert error.value.key == "hyperpod.instance_groups.0.instance_type"
    assert "group gpu-workers" in message and "accepts 5 pods" in message and "puts 5 on every node" in message
    assert "observability.container_insights (2 pods)" in message
    assert "\n" not in message
    # Turning Container Insights off leaves 3 pods and 2 slots: accepted.
    parse_config(with_group("ml.t3.medium", observability={"container_insights": False}))


def test_a_fallback_type_is_checked_too():
    data = with_group("ml.g5.8xlarge", observability={"container_insights": True})
    data["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = ["ml.t3.medium"]
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    assert error.value.key == "hyperpod.instance_groups.0.fallback_instance_types.0"


def test_the_shipped_configs_fit_and_every_budget_reads_the_catalog():
    config = parse_config(default_config_data())
    for budget in budgets(config):
        assert budget.fits
        assert budget.max_pods == CATALOG[budget.instance_type].max_pods
        assert str(budget.max_pods) in budget.line()


def test_every_node_pod_names_its_source():
    declared = [pod for addon in addons.ALL for pod in addon.node_pods]
    declared += [pod for _, pod in addons.DEPENDENCIES_CHART_NODE_PODS]
    assert declared and all(pod.source and pod.name and pod.namespace for pod in declared)
