"""config/all-features.yaml: every optional feature on at once synthesizes into templates that carry each one.

Both nag packs, cfn-lint and botocore's CreateCluster model run over the same synth through the variant lists of
tests/stacks/test_nag_and_lint.py, tests/stacks/test_hyperpod.py and tests/library/test_design.py, parliament
through tests/safety/test_iam_parliament.py; `make lint` adds checkov.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from infra.config import AppConfig


def _switches(model: BaseModel, path: str = "") -> dict[str, bool]:
    """Every ``enabled`` field in the config tree, by its dotted key."""
    found: dict[str, bool] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        key = f"{path}{name}"
        if name == "enabled" and isinstance(value, bool):
            found[key] = value
        elif isinstance(value, BaseModel):
            found |= _switches(value, f"{key}.")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    found |= _switches(item, f"{key}.{i}.")
    return found


def test_every_switch_of_the_config_is_on(all_features_synth):
    """A feature added later with an ``enabled`` switch must be turned on here too, or this fails."""
    switches = _switches(all_features_synth.config)
    assert {"hyperpod.autoscaling.enabled", "hyperpod.tiered_checkpointing.enabled", "addons.task_governance.enabled",
            "addons.training_operator.enabled", "addons.s3_csi.enabled", "storage.fsx_lustre.enabled",
            "observability.prometheus.enabled", "observability.grafana.enabled",
            "observability.alerts.enabled"} <= set(switches), switches
    assert [key for key, on in switches.items() if not on] == []


def test_every_group_and_cluster_feature_is_used(all_features_synth):
    config: AppConfig = all_features_synth.config
    hp = config.hyperpod
    groups = hp.instance_groups
    assert hp.volume_encryption == "customer_managed"
    assert {g.volume_encryption for g in groups} == {None, "aws_managed"}  # the cluster default and an override
    assert {g.capacity for g in groups} == {"on_demand", "spot"}
    assert any(g.min_instance_count for g in groups)
    assert any(g.image_id for g in groups)
    assert any(g.rolling_update and g.rolling_update.schedule for g in groups)
    assert any(g.rolling_update and g.rolling_update.rollback_alarms for g in groups)
    assert any(g.auto_patch for g in groups)
    assert any(g.fallback_instance_types for g in groups)
    assert hp.autoscaling.instance_groups
    assert config.addons.task_governance.teams and config.addons.task_governance.priority_classes
    assert config.addons.s3_csi.bucket_arns
    metrics = config.observability.prometheus.metrics
    assert all(getattr(metrics, name).level != "DISABLED" for name in type(metrics).model_fields)


def _cluster(synth) -> dict[str, Any]:
    (cluster,) = synth.resources("hyperpod", "AWS::SageMaker::Cluster").values()
    return cluster["Properties"]


def test_the_hyperpod_cluster_carries_every_feature(all_features_synth):
    props = _cluster(all_features_synth)
    assert props["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": "Karpenter"}
    assert "ClusterRole" in props
    assert props["TieredStorageConfig"] == {"Mode": "Enable", "InstanceMemoryAllocationPercentage": 30}
    groups = {g["InstanceGroupName"]: g for g in props["InstanceGroups"]}
    gpu, spot, burst = groups["gpu-workers"], groups["spot-workers"], groups["cpu-burst"]
    assert gpu["ImageId"] == "ami-0123456789abcdef0" and gpu["MinInstanceCount"] == 1
    assert gpu["ScheduledUpdateConfig"]["ScheduleExpression"] == "cron(0 3 ? * SUN *)"
    assert spot["CapacityRequirements"] == {"Spot": {}} and spot["AutoPatchConfig"]
    assert burst["InstanceCount"] == 0 and "OnStartDeepHealthChecks" not in burst
    # A flexible group: its types in priority order, and no InstanceType beside them (mutually exclusive).
    assert burst["InstanceRequirements"] == {"InstanceTypes": ["ml.c5.xlarge", "ml.c5.2xlarge", "ml.m5.xlarge"]}
    assert "InstanceType" not in burst and gpu["InstanceType"] == "ml.g5.8xlarge" and "InstanceRequirements" not in gpu
    # The app's key on the groups that use the cluster default, AWS's key on the override.
    keyed = {name for name, g in groups.items()
             if any("VolumeKmsKeyId" in c["EbsVolumeConfig"] for c in g["InstanceStorageConfigs"])}
    assert keyed == {"gpu-workers", "cpu-burst"}


def test_every_feature_builds_its_resources(all_features_synth):
    synth = all_features_synth
    addons = {r["Properties"]["AddonName"] for part in ("eks", "hyperpod", "observability", "storage")
              for r in synth.resources(part, "AWS::EKS::Addon").values()}
    assert {"eks-pod-identity-agent", "cert-manager", "amazon-sagemaker-hyperpod-training-operator",
            "aws-mountpoint-s3-csi-driver", "amazon-sagemaker-hyperpod-taskgovernance",
            "amazon-cloudwatch-observability", "amazon-sagemaker-hyperpod-observability",
            "aws-fsx-csi-driver"} <= addons
    assert len(synth.resources("hyperpod", "AWS::SageMaker::ClusterSchedulerConfig")) == 1
    assert len(synth.resources("hyperpod", "AWS::SageMaker::ComputeQuota")) == 2
    releases = {r["Properties"]["ReleaseName"] for r in
                synth.resources("hyperpod", "Custom::HyperPodHelmRelease").values()}
    assert "hyperpod-karpenter-node-pools" in releases
    for part, cfn_type in (("storage", "AWS::FSx::FileSystem"), ("observability", "AWS::APS::Workspace"),
                           ("observability", "AWS::Grafana::Workspace"), ("observability", "AWS::SNS::Topic"),
                           ("observability", "AWS::CloudWatch::Dashboard"), ("hyperpod", "AWS::KMS::Key")):
        assert synth.resources(part, cfn_type), (part, cfn_type)
