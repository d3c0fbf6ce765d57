"""Instance groups' rolling_update, image_id and auto_patch: the bounds AWS documents, refused naming the key."""

from __future__ import annotations

import botocore.session
import pytest
from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

from infra.config import RollingUpdate, parse_config
from infra.config.hyperpod import SCHEDULE_PATTERN
from infra.errors import ConfigError
from tests.conftest import default_config_data, mutate

KEY = "hyperpod.instance_groups.0"


def group(**changes):
    base = dict(default_config_data()["hyperpod"]["instance_groups"][0])
    base.update(changes)
    return {"hyperpod": {"instance_groups": [base]}}


REFUSALS = [
    # (case id, group changes, key the message must name, words the message must contain)
    ("schedule not cron", {"rolling_update": {"schedule": "rate(7 days)"}}, "rolling_update.schedule", "rate(7 days)"),
    ("schedule five fields", {"rolling_update": {"schedule": "cron(0 3 * * SUN)"}}, "rolling_update.schedule",
     "cron(0 3 * * SUN)"),
    ("schedule hour 24", {"rolling_update": {"schedule": "cron(0 24 ? * SUN *)"}}, "rolling_update.schedule",
     "cron(0 24"),
    ("percent above 100", {"rolling_update": {"batch": {"type": "percent", "value": 101}}},
     "rolling_update.batch.value", "at most 100"),
    ("percent zero", {"rolling_update": {"batch": {"type": "percent", "value": 0}}}, "rolling_update.batch.value",
     "greater than or equal to 1"),
    ("count zero", {"rolling_update": {"batch": {"type": "count", "value": 0}}}, "rolling_update.batch.value",
     "greater than or equal to 1"),
    ("batch type", {"rolling_update": {"batch": {"type": "nodes", "value": 2}}}, "rolling_update.batch.type",
     "'percent' or 'count'"),
    ("wait above 3600", {"rolling_update": {"wait_seconds": 3601}}, "rolling_update.wait_seconds", "3600"),
    ("wait negative", {"rolling_update": {"wait_seconds": -1}}, "rolling_update.wait_seconds", "0"),
    ("eleven alarms", {"rolling_update": {"rollback_alarms": [f"a{i}" for i in range(11)]}},
     "rolling_update.rollback_alarms", "at most 10"),
    ("blank alarm", {"rolling_update": {"rollback_alarms": ["  "]}}, "rolling_update.rollback_alarms.0", "at least 1"),
    ("long alarm", {"rolling_update": {"rollback_alarms": ["a" * 256]}}, "rolling_update.rollback_alarms.0",
     "at most 255"),
    ("rolling typo", {"rolling_update": {"batch_size": 2}}, "rolling_update.batch_size", "unknown key"),
    ("image not an ami", {"image_id": "img-0123456789abcdef0"}, "image_id", "img-0123456789abcdef0"),
    ("image too few digits", {"image_id": "ami-1234567"}, "image_id", "ami-1234567"),
    ("auto patch strategy", {"auto_patch": "DrainFirst"}, "auto_patch", "'WhenIdle' or 'WhenAllIdle'"),
]


@pytest.mark.parametrize(("changes", "key", "words"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_bad_group_software_is_refused_naming_the_key(changes, key, words):
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(group(**changes)), "bad.yaml")
    message = str(caught.value)
    assert f"{KEY}.{key}:" in message, message
    assert words in message, message
    assert "\n" not in message


@pytest.mark.parametrize("schedule", ["cron(0 3 ? * SUN *)", "cron(30 1 1 * ? *)", "cron(0 0 ? */2 2#1 2027)",
                                      "cron(5 23 ? 12 7L *)"])
def test_schedules_aws_accepts_are_accepted(schedule):
    assert parse_config(mutate(group(rolling_update={"schedule": schedule})), "ok.yaml")


def test_schedule_pattern_is_the_cloudformation_schemas():
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", "AWS::SageMaker::Cluster").schema
    expression = schema["definitions"]["ScheduledUpdateConfig"]["properties"]["ScheduleExpression"]
    assert expression["pattern"] == SCHEDULE_PATTERN


def test_bounds_are_the_apis():
    """The config's bounds are botocore's (and the schema's, where narrower) for the fields they become."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    deployment = model.shape_for("DeploymentConfiguration").members
    assert deployment["WaitIntervalInSeconds"].metadata == {"min": 0, "max": 3600}
    assert deployment["AutoRollbackConfiguration"].metadata == {"min": 1, "max": 10}
    assert deployment["AutoRollbackConfiguration"].member.members["AlarmName"].metadata["max"] == 255
    assert model.shape_for("CapacitySizeConfig").members["Value"].metadata == {"min": 1}
    image = model.shape_for("ClusterInstanceGroupSpecification").members["ImageId"].metadata
    assert (image["min"], image["max"], image["pattern"]) == (7, 21, "(ami-[0-9a-fA-F]{8,17}|default)")
    for name, field in RollingUpdate.model_fields.items():
        limits = {type(m).__name__: m for m in field.metadata}
        if name == "wait_seconds":
            assert (limits["Ge"].ge, limits["Le"].le) == (0, 3600)
        if name == "rollback_alarms":
            assert limits["MaxLen"].max_length == 10


def test_defaults_and_what_the_group_becomes():
    rolling = RollingUpdate(rollback_alarms=["gpu-errors"])
    assert rolling.scheduled_update_config() is None  # no schedule: nothing scheduled, hpctl still uses the batch
    assert rolling.deployment_config() == {
        "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "CAPACITY_PERCENTAGE", "Value": 10}},
        "WaitIntervalInSeconds": 300,
        "AutoRollbackConfiguration": [{"AlarmName": "gpu-errors"}],
    }
    counted = RollingUpdate(schedule="cron(0 3 ? * SUN *)", batch={"type": "count", "value": 2}, wait_seconds=0)
    assert counted.scheduled_update_config() == {
        "ScheduleExpression": "cron(0 3 ? * SUN *)",
        "DeploymentConfig": {"RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 2}},
                             "WaitIntervalInSeconds": 0},
    }
    default = parse_config(default_config_data(), "default.yaml").hyperpod.instance_groups[0]
    assert (default.image_id, default.rolling_update, default.auto_patch) == (None, None, None)
