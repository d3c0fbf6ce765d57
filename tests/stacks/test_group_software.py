"""Rolling software updates, custom images and automatic patching of instance groups in the template."""

from __future__ import annotations

import json

from infra.config import parse_config
from tests.conftest import rolling_update_config_data


def _groups(synth):
    (cluster,) = synth.resources("hyperpod", "AWS::SageMaker::Cluster").values()
    return {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}


def test_groups_carry_exactly_what_the_config_says(rolling_update_synth):
    config = parse_config(rolling_update_config_data(), "rolling-update")
    wanted = {g.name: g for g in config.hyperpod.instance_groups}
    groups = _groups(rolling_update_synth)
    gpu, cpu = groups["gpu-workers"], groups["cpu-workers"]
    # The template's ScheduledUpdateConfig is the one DeploymentConfig hpctl update-software sends too.
    assert gpu["ScheduledUpdateConfig"] == wanted["gpu-workers"].rolling_update.scheduled_update_config() == {
        "ScheduleExpression": "cron(0 3 ? * SUN *)",
        "DeploymentConfig": {
            "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1}},
            "WaitIntervalInSeconds": 600,
            "AutoRollbackConfiguration": [{"AlarmName": "gpu-workers-xid-errors"},
                                          {"AlarmName": "gpu-workers-not-ready"}],
        },
    }
    assert gpu["ImageId"] == "ami-0123456789abcdef0"
    assert "AutoPatchConfig" not in gpu
    # No schedule: nothing is scheduled (ScheduleExpression is required); the batch serves hpctl only.
    assert "ScheduledUpdateConfig" not in cpu and "ImageId" not in cpu
    assert cpu["AutoPatchConfig"] == {"PatchingStrategy": "WhenIdle"}


def test_off_by_default(default_synth):
    for group in _groups(default_synth).values():
        assert not {"ScheduledUpdateConfig", "ImageId", "AutoPatchConfig"} & set(group)


def test_only_the_instance_groups_change(default_synth, rolling_update_synth):
    """The feature touches the cluster's groups and nothing else: no other resource, no other stack."""
    for part in ("network", "eks", "observability"):
        assert rolling_update_synth.template(part) == default_synth.template(part)
    on, off = rolling_update_synth.template("hyperpod"), default_synth.template("hyperpod")
    assert set(on["Resources"]) == set(off["Resources"])
    changed = [r for r in on["Resources"] if json.dumps(on["Resources"][r]) != json.dumps(off["Resources"][r])]
    assert [on["Resources"][r]["Type"] for r in changed] == ["AWS::SageMaker::Cluster"]


def test_rolling_update_variant_passes_every_nag_pack(rolling_update_synth):
    report = json.loads((rolling_update_synth.outdir / "validation-report.json").read_text())
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions", "HyperPod"}
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])
