"""drift and preflight with Karpenter autoscaling: the counts Karpenter sets are not drift, the autoscaling mode
is; preflight checks the health monitoring agent and the deployed autoscaler."""

from __future__ import annotations

from typing import Any

from hpctl_testkit import config_data

from hpctl.drift import MANUAL, UPDATE, compare
from hpctl.preflight import FAIL, PASS, WARN, check_autoscaling
from infra.config import MIN_AUTOSCALING_AGENT_VERSION, parse_config

BURST = {"name": "burst", "instance_type": "ml.c5.xlarge", "instance_count": 0, "az_id": "usw2-az2"}


def _config(autoscaling: bool) -> Any:
    data = config_data()
    data["hyperpod"]["instance_groups"].append(dict(BURST))
    if autoscaling:
        data["hyperpod"]["autoscaling"] = {"enabled": True, "instance_groups": ["burst"]}
    return parse_config(data, "test")


def _deployed(burst_count: int, mode: str | None) -> dict[str, Any]:
    """DescribeCluster's answer (botocore's DescribeClusterResponse members)."""
    groups = [
        {"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "TargetCount": 3, "CurrentCount": 3,
         "ThreadsPerCore": 1, "OnStartDeepHealthChecks": ["InstanceStress"]},
        {"InstanceGroupName": "burst", "InstanceType": "ml.c5.xlarge", "TargetCount": burst_count,
         "CurrentCount": burst_count, "ThreadsPerCore": 1},
    ]
    described: dict[str, Any] = {"InstanceGroups": groups, "NodeRecovery": "Automatic"}
    if mode:
        described["AutoScaling"] = {"Mode": mode, "AutoScalerType": "Karpenter", "Status": "InService"}
    return described


def test_counts_karpenter_set_are_not_drift():
    assert compare(_deployed(7, "Enable"), _config(autoscaling=True)) == []


def test_the_same_count_is_drift_without_autoscaling():
    changes = compare(_deployed(7, None), _config(autoscaling=False))
    assert [(c.group, c.field, c.deployed, c.config, c.effect) for c in changes] == [
        ("burst", "instance_count", 7, 0, UPDATE)]


def test_turning_autoscaling_on_is_an_update_and_off_is_manual():
    (on,) = compare(_deployed(0, None), _config(autoscaling=True))
    assert (on.field, on.deployed, on.config, on.effect) == ("autoscaling", "Disable", "Enable", UPDATE)
    off = [c for c in compare(_deployed(0, "Enable"), _config(autoscaling=False)) if c.field == "autoscaling"]
    assert [(c.deployed, c.config, c.effect) for c in off] == [("Enable", "Disable", MANUAL)]


# --- preflight --------------------------------------------------------------------------------------


def test_preflight_knows_the_default_charts_agent_and_warns_for_another_revision():
    config = _config(autoscaling=True)
    assert [(c.name, c.verdict) for c in check_autoscaling(config, None)] == [("autoscaling-agent", PASS)]
    data = config.model_dump(mode="json")
    data["hyperpod"]["dependencies_chart"]["revision"] = "0" * 40
    data["hyperpod"]["dependencies_chart"]["source_sha256"] = "0" * 64
    other = parse_config(data, "test")
    ((name, verdict, reason),) = [(c.name, c.verdict, c.reason) for c in check_autoscaling(other, None)]
    assert verdict == WARN and MIN_AUTOSCALING_AGENT_VERSION in reason
    assert check_autoscaling(_config(autoscaling=False), None) == []


def test_preflight_fails_on_a_failed_autoscaler():
    deployed = _deployed(0, "Enable")
    deployed["AutoScaling"].update(Status="Failed", FailureMessage="role cannot be assumed")
    failed = [c for c in check_autoscaling(_config(autoscaling=True), deployed) if c.verdict == FAIL]
    assert [c.name for c in failed] == ["autoscaling-status"] and "role cannot be assumed" in failed[0].reason
