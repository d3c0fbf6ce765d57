"""update-software starts from the groups' rolling_update and image_id in the config; drift compares them.
The fakes are botocore Stubbers, so requests and responses follow the SageMaker model's shapes."""

from __future__ import annotations

import copy
from typing import Any

from hpctl_testkit import CLUSTER, CLUSTER_ARN, REGION, ROLE, cluster_description, config_data, stubbed

ROLLING = {"schedule": "cron(0 3 ? * SUN *)", "batch": {"type": "count", "value": 2}, "wait_seconds": 600,
           "rollback_alarms": ["workers-not-ready"]}
CONFIG_DEPLOYMENT = {
    "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 2}},
    "WaitIntervalInSeconds": 600,
    "AutoRollbackConfiguration": [{"AlarmName": "workers-not-ready"}],
}


def _config(write_config, *groups: dict[str, Any]):
    data = config_data()
    base = data["hyperpod"]["instance_groups"][0]
    data["hyperpod"]["instance_groups"] = [copy.deepcopy({**base, **g}) for g in groups]
    return str(write_config(data))


def _deployed(*names: str) -> list[dict[str, Any]]:
    return [{"InstanceGroupName": n, "InstanceType": "ml.g5.8xlarge", "CurrentCount": 3, "TargetCount": 3,
             "ThreadsPerCore": 1, "OnStartDeepHealthChecks": ["InstanceStress"], "ExecutionRole": ROLE} for n in names]


def _update(run, config: str, *options: str, expected: dict[str, Any] | None, groups=("workers",)):
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description(groups=_deployed(*groups)), {"ClusterName": CLUSTER})
    if expected is not None:
        stub.add_response("update_cluster_software", {"ClusterArn": CLUSTER_ARN}, expected)
    result = run("update-software", "--config", config, *options, "--yes", clients={"sagemaker": client})
    stub.assert_no_pending_responses()
    return result


def test_the_groups_rolling_update_and_image_are_sent(run, write_config) -> None:
    config = _config(write_config, {"rolling_update": ROLLING, "image_id": "ami-0123456789abcdef0"})
    expected = {"ClusterName": CLUSTER, "DeploymentConfig": CONFIG_DEPLOYMENT, "ImageId": "ami-0123456789abcdef0"}
    code, out, _ = _update(run, config, expected=expected)
    assert code == 0 and "software update started" in out


def test_options_override_the_config_part_by_part(run, write_config) -> None:
    config = _config(write_config, {"rolling_update": ROLLING, "image_id": "ami-0123456789abcdef0"})
    expected = {
        "ClusterName": CLUSTER,
        "InstanceGroups": [{"InstanceGroupName": "workers"}],
        "DeploymentConfig": {
            "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "CAPACITY_PERCENTAGE", "Value": 25},
                                    "RollbackMaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1}},
            "WaitIntervalInSeconds": 600,  # not overridden: the config's
            "AutoRollbackConfiguration": [{"AlarmName": "other-alarm"}],
        },
        "ImageId": "ami-0fedcba9876543210",
    }
    code, _, _ = _update(run, config, "--group", "workers", "--batch-percent", "25", "--rollback-batch-size", "1",
                         "--alarm", "other-alarm", "--image-id", "ami-0fedcba9876543210", expected=expected)
    assert code == 0


def test_a_group_without_rolling_update_is_patched_at_once_as_before(run, write_config) -> None:
    config = _config(write_config, {})
    code, out, _ = _update(run, config, "--dry-run", expected=None)
    assert code == 0 and "patched at once" in out


def test_groups_that_disagree_are_refused_before_anything_is_sent(run, write_config) -> None:
    config = _config(write_config, {"rolling_update": ROLLING},
                     {"name": "other", "rolling_update": {**ROLLING, "wait_seconds": 0}})
    code, _, err = _update(run, config, expected=None, groups=("workers", "other"))
    assert code == 2 and "different rolling_update settings" in err and "--group" in err


def test_a_group_with_a_custom_image_and_one_without_are_refused(run, write_config) -> None:
    config = _config(write_config, {"image_id": "ami-0123456789abcdef0"}, {"name": "other"})
    code, _, err = _update(run, config, expected=None, groups=("workers", "other"))
    assert code == 2 and "different image_id settings" in err


def test_one_group_of_two_takes_its_own_settings(run, write_config) -> None:
    config = _config(write_config, {"rolling_update": ROLLING}, {"name": "other"})
    expected = {"ClusterName": CLUSTER, "InstanceGroups": [{"InstanceGroupName": "workers"}],
                "DeploymentConfig": CONFIG_DEPLOYMENT}
    code, _, _ = _update(run, config, "--group", "workers", expected=expected, groups=("workers", "other"))
    assert code == 0


def test_a_config_of_another_cluster_gives_nothing(run, write_config) -> None:
    config = _config(write_config, {"rolling_update": ROLLING})
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description(groups=_deployed("workers")), {"ClusterName": "other"})
    stub.add_response("update_cluster_software", {"ClusterArn": CLUSTER_ARN}, {"ClusterName": "other"})
    code, _, _ = run("update-software", "--config", config, "--cluster", "other", "--region", REGION, "--yes",
                     clients={"sagemaker": client})
    assert code == 0
    stub.assert_no_pending_responses()


# --- drift ----------------------------------------------------------------------------------------


def _drift(run, config: str, deployed_group: dict[str, Any]):
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description(groups=[{**_deployed("workers")[0], **deployed_group}]),
                      {"ClusterName": CLUSTER})
    code, result = run.json("drift", "--config", config, clients={"sagemaker": client})
    return code, {c["field"]: (c["deployed"], c["config"], c["effect"]) for c in result["changes"]}


DEPLOYED = {
    "ScheduledUpdateConfig": {"ScheduleExpression": "cron(0 3 ? * SUN *)", "DeploymentConfig": CONFIG_DEPLOYMENT},
    "CurrentImageId": "ami-0123456789abcdef0",
    "DesiredImageId": "ami-0123456789abcdef0",
    "AutoPatchConfig": {"PatchingStrategy": "WhenIdle"},
}


def test_drift_finds_nothing_when_the_cluster_has_what_the_config_says(run, write_config) -> None:
    config = _config(write_config, {"rolling_update": ROLLING, "image_id": "ami-0123456789abcdef0",
                                    "auto_patch": "WhenIdle"})
    assert _drift(run, config, DEPLOYED) == (0, {})


def test_drift_names_each_changed_software_field_as_an_update(run, write_config) -> None:
    config = _config(write_config, {"rolling_update": {**ROLLING, "wait_seconds": 60},
                                    "image_id": "ami-0fedcba9876543210", "auto_patch": "WhenAllIdle"})
    code, changes = _drift(run, config, DEPLOYED)
    assert code == 1
    assert changes["image_id"] == ("ami-0123456789abcdef0", "ami-0fedcba9876543210", "update")
    assert changes["auto_patch"] == ("WhenIdle", "WhenAllIdle", "update")
    deployed, wanted, effect = changes["rolling_update"]
    assert effect == "update"
    waits = [side["DeploymentConfig"]["WaitIntervalInSeconds"] for side in (deployed, wanted)]
    assert waits == [600, 60]


def test_drift_sees_a_schedule_the_config_no_longer_has(run, write_config) -> None:
    config = _config(write_config, {"rolling_update": {**ROLLING, "schedule": None}})
    code, changes = _drift(run, config, {"ScheduledUpdateConfig": DEPLOYED["ScheduledUpdateConfig"]})
    assert code == 1 and changes["rolling_update"][1:] == (None, "update")


def test_drift_ignores_the_image_when_the_config_names_none_and_the_alarm_order(run, write_config) -> None:
    alarms = {**ROLLING, "rollback_alarms": ["b-alarm", "a-alarm"]}
    config = _config(write_config, {"rolling_update": alarms})
    deployed = {**CONFIG_DEPLOYMENT, "AutoRollbackConfiguration": [{"AlarmName": "a-alarm"}, {"AlarmName": "b-alarm"}]}
    code, changes = _drift(run, config, {
        "ScheduledUpdateConfig": {"ScheduleExpression": "cron(0 3 ? * SUN *)", "DeploymentConfig": deployed},
        "CurrentImageId": "ami-0aaaaaaaaaaaaaaaa"})
    assert (code, changes) == (0, {})
