"""hyperpod.autoscaling: off by default, and AWS's prerequisites refused by the key that breaks them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.config import (
    DEFAULT_CHART_AGENT_VERSION,
    MIN_AUTOSCALING_AGENT_VERSION,
    agent_image_override,
    agent_version,
    parse_config,
)
from infra.errors import ConfigError
from tests.conftest import default_config_data

BURST = {"name": "cpu-burst", "instance_type": "ml.c5.xlarge", "instance_count": 0, "az_id": "usw2-az2"}


def _autoscaled(**hyperpod: Any) -> dict[str, Any]:
    data = default_config_data()
    data["hyperpod"]["instance_groups"].append(copy.deepcopy(BURST))
    data["hyperpod"]["autoscaling"] = {"enabled": True, "instance_groups": ["cpu-burst"]}
    data["hyperpod"].update(hyperpod)
    return data


def _refusal(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, "test")
    return str(caught.value)


def test_off_by_default_and_on_with_a_group_at_zero():
    assert parse_config(default_config_data(), "test").hyperpod.autoscaling.enabled is False
    config = parse_config(_autoscaled(), "test")
    assert config.hyperpod.autoscaling.instance_groups == ["cpu-burst"]


@pytest.mark.parametrize(("change", "key", "words"), [
    (lambda d: d["hyperpod"].update(node_provisioning_mode=None), "hyperpod.node_provisioning_mode",
     "Continuous node provisioning"),
    (lambda d: d["hyperpod"].update(node_recovery="None"), "hyperpod.node_recovery", "Automatic node recovery"),
    (lambda d: d["hyperpod"]["instance_groups"][1].update(instance_count=2),
     "hyperpod.instance_groups.1.instance_count", "starts with 0 nodes"),
    (lambda d: d["hyperpod"]["instance_groups"][1].update(deep_health_checks=["InstanceStress"]),
     "hyperpod.instance_groups.1.deep_health_checks", "deep health checks"),
    (lambda d: d["hyperpod"]["instance_groups"][1].update(
        training_plan_arn="arn:aws:sagemaker:us-west-2:111122223333:training-plan/p"),
     "hyperpod.instance_groups.1.training_plan_arn", "training plan"),
    (lambda d: d["hyperpod"]["autoscaling"].update(instance_groups=["nope"]), "hyperpod.autoscaling.instance_groups.0",
     "no instance group of that name"),
    (lambda d: d["hyperpod"]["autoscaling"].update(instance_groups=[]), "hyperpod.autoscaling.instance_groups",
     "at least one"),
    (lambda d: d["hyperpod"]["autoscaling"].update(instance_groups=["cpu-burst", "cpu-burst"]),
     "hyperpod.autoscaling.instance_groups", "listed twice"),
    (lambda d: d["hyperpod"]["autoscaling"].update(enabled=False), "hyperpod.autoscaling.instance_groups",
     "enabled is false"),
    (lambda d: d["hyperpod"]["dependencies_chart"].update(
        values={"health-monitoring-agent": {"imageTag": "1.0.741.0_1.0.241.0"}}),
     "hyperpod.dependencies_chart.values.health-monitoring-agent.imageTag", MIN_AUTOSCALING_AGENT_VERSION),
    (lambda d: d["hyperpod"]["dependencies_chart"].update(values={"health-monitoring-agent": {"hmaimage": (
        "905418368575.dkr.ecr.us-west-2.amazonaws.com/hyperpod-health-monitoring-agent:1.0.742.0_1.0.240.0")}}),
     "hyperpod.dependencies_chart.values.health-monitoring-agent.hmaimage", MIN_AUTOSCALING_AGENT_VERSION),
    # The chart uses hmaimage whole when both are set: a new imageTag beside an old hmaimage is still old.
    (lambda d: d["hyperpod"]["dependencies_chart"].update(values={"health-monitoring-agent": {
        "imageTag": DEFAULT_CHART_AGENT_VERSION,
        "hmaimage": "registry.example.com:5000/hyperpod-health-monitoring-agent:1.0.700.0_1.0.241.0"}}),
     "hyperpod.dependencies_chart.values.health-monitoring-agent.hmaimage", MIN_AUTOSCALING_AGENT_VERSION),
    (lambda d: d["hyperpod"]["dependencies_chart"].update(
        values={"health-monitoring-agent": {"imageTag": "latest"}}),
     "hyperpod.dependencies_chart.values.health-monitoring-agent.imageTag", "numbered tag"),
    (lambda d: d["hyperpod"]["dependencies_chart"].update(values={"health-monitoring-agent": {
        "hmaimage": "registry.example.com/hyperpod-health-monitoring-agent@sha256:" + "0" * 64}}),
     "hyperpod.dependencies_chart.values.health-monitoring-agent.hmaimage", "numbered tag"),
    (lambda d: d["hyperpod"]["dependencies_chart"].update(values={"health-monitoring-agent": {"enabled": False}}),
     "hyperpod.dependencies_chart.values.health-monitoring-agent.enabled", "agent installed"),
    (lambda d: d["hyperpod"]["instance_groups"][1].update(
        taints=[{"key": "burst", "value": "true", "effect": "NoSchedule"}]),
     "hyperpod.instance_groups.1.taints", "NodePool would not carry them"),
])
def test_prerequisite_refused_naming_the_key(change, key, words):
    data = _autoscaled()
    change(data)
    message = _refusal(data)
    assert f"{key}: " in message and words in message


def test_an_uppercase_group_cannot_name_kubernetes_objects():
    data = _autoscaled()
    data["hyperpod"]["instance_groups"][1]["name"] = "CpuBurst"
    data["hyperpod"]["autoscaling"]["instance_groups"] = ["CpuBurst"]
    assert "hyperpod.autoscaling.instance_groups.0: " in _refusal(data)


def test_an_agent_at_or_after_the_minimum_passes():
    for tag in (MIN_AUTOSCALING_AGENT_VERSION, DEFAULT_CHART_AGENT_VERSION):
        data = _autoscaled()
        data["hyperpod"]["dependencies_chart"]["values"] = {"health-monitoring-agent": {"imageTag": tag}}
        assert parse_config(data, "test").hyperpod.autoscaling.enabled
    data = _autoscaled()
    data["hyperpod"]["dependencies_chart"]["values"] = {"health-monitoring-agent": {
        "enabled": True, "hmaimage": f"registry.example.com:5000/agent:{MIN_AUTOSCALING_AGENT_VERSION}"}}
    assert parse_config(data, "test").hyperpod.autoscaling.enabled


def test_the_agent_image_is_read_as_the_chart_reads_it():
    assert agent_image_override({}) is None
    assert agent_image_override({"health-monitoring-agent": {"imageTag": "1.2"}}) == (
        "health-monitoring-agent.imageTag", "1.2")
    assert agent_image_override({"health-monitoring-agent": {"imageTag": "1.2", "hmaimage": "r:5000/a:3.4"}}) == (
        "health-monitoring-agent.hmaimage", "3.4")
    assert agent_image_override({"health-monitoring-agent": {"hmaimage": "r:5000/a"}}) == (
        "health-monitoring-agent.hmaimage", "")


def test_agent_versions_compare_numerically():
    assert agent_version(DEFAULT_CHART_AGENT_VERSION) > agent_version(MIN_AUTOSCALING_AGENT_VERSION)
    assert agent_version("1.0.742.0_1.0.241.0") > agent_version("1.0.742.0_1.0.99.0")
