"""Instance-group capacity (Spot, minimum count), the EBS volume key and managed tiered checkpointing."""

from __future__ import annotations

import json

import pytest

from infra.config import parse_config
from infra.errors import ConfigError
from infra.guards.replacement import group_refusals, replacement_reasons, snapshot
from tests.conftest import GROUP_FEATURES, mutate


def _volume_keys(synth) -> dict:
    """The HyperPod stack's KMS keys but its logs key (infra/constructs/logs_key.py): the volume key, if any."""
    return {k: r for k, r in synth.resources("hyperpod", "AWS::KMS::Key").items() if not k.startswith("LogsKey")}

def _cluster(synth):
    (cluster,) = synth.resources("hyperpod", "AWS::SageMaker::Cluster").values()
    return cluster["Properties"]


def _groups(synth):
    return {g["InstanceGroupName"]: g for g in _cluster(synth)["InstanceGroups"]}


def test_spot_group_with_a_minimum(group_features_synth):
    groups = _groups(group_features_synth)
    assert groups["gpu-workers"]["CapacityRequirements"] == {"Spot": {}}
    assert groups["gpu-workers"]["MinInstanceCount"] == 1
    assert "CapacityRequirements" not in groups["cpu-aws-key"] and "MinInstanceCount" not in groups["cpu-aws-key"]


def test_tiered_checkpointing_is_enabled_with_the_configured_share(group_features_synth):
    assert _cluster(group_features_synth)["TieredStorageConfig"] == {
        "Mode": "Enable", "InstanceMemoryAllocationPercentage": 30}


def test_default_writes_none_of_the_new_fields(default_synth):
    props = _cluster(default_synth)
    assert "TieredStorageConfig" not in props
    for group in props["InstanceGroups"]:
        assert not {"CapacityRequirements", "MinInstanceCount"} & set(group)
        assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert _volume_keys(default_synth) == {}


def test_customer_managed_group_encrypts_root_and_secondary_volume_with_the_retained_key(group_features_synth):
    (key_id, key), = _volume_keys(group_features_synth).items()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain" and key["UpdateReplacePolicy"] == "Retain"
    groups = _groups(group_features_synth)
    assert groups["gpu-workers"]["InstanceStorageConfigs"] == [
        {"EbsVolumeConfig": {"VolumeSizeInGB": 500, "VolumeKmsKeyId": {"Ref": key_id}}},
        {"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": {"Ref": key_id}}},
    ]
    assert groups["cpu-aws-key"]["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]


def test_key_policy_lets_the_execution_role_create_grants_without_encryption_context(group_features_synth):
    (key,) = _volume_keys(group_features_synth).values()
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    (hyperpod,) = [s for s in statements if s.get("Sid") == "HyperPodExecutionRoleCreatesGrants"]
    (role_id,) = group_features_synth.resources("hyperpod", "AWS::IAM::Role").keys() & {
        r for r, v in group_features_synth.resources("hyperpod", "AWS::IAM::Role").items()
        if "sagemaker.amazonaws.com" in json.dumps(v["Properties"]["AssumeRolePolicyDocument"])}
    (describe,) = [s for s in statements if s.get("Sid") == "HyperPodExecutionRoleDescribesKey"]
    # AWS's key policy (smcluster-cmk.html): both actions for the execution role, only through SageMaker in
    # this region, and grants only for AWS resources.
    via = {"kms:ViaService": f"sagemaker.{group_features_synth.config.region}.amazonaws.com"}
    for statement in (hyperpod, describe):
        assert statement["Principal"] == {"AWS": {"Fn::GetAtt": [role_id, "Arn"]}}
        assert statement["Effect"] == "Allow" and statement["Resource"] == "*"
    assert hyperpod["Action"] == "kms:CreateGrant"
    assert hyperpod["Condition"] == {"StringEquals": via, "Bool": {"kms:GrantIsForAWSResource": "true"}}
    assert describe["Action"] == "kms:DescribeKey"
    assert describe["Condition"] == {"StringEquals": via}
    # AWS: HyperPod passes no encryption context, so no statement may be conditioned on one.
    assert "kms:EncryptionContext" not in json.dumps(statements)


def test_feature_variant_passes_both_nag_packs(group_features_synth):
    report = json.loads((group_features_synth.outdir / "validation-report.json").read_text())
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions"}
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])


def test_guard_refuses_a_new_key_on_a_deployed_group_and_accepts_it_on_a_new_group(default_synth,
                                                                                  group_features_synth):
    deployed = snapshot(default_synth.templates, "hyperpod-dev")
    after = snapshot(group_features_synth.templates, "hyperpod-dev")
    assert replacement_reasons(deployed, after) == []
    reasons = group_refusals(deployed, after)
    assert len(reasons) == 1, reasons
    cluster = next(k for k in deployed["resources"] if "HyperPodCluster" in k)
    assert reasons[0].startswith(f"{cluster} (AWS::SageMaker::Cluster) hyperpod.instance_groups[gpu-workers] the KMS "
                                 "key of its EBS volumes changes from AWS's own key to "), reasons
    # Once deployed with the key, the same templates are no change at all (the new group included).
    keyed = snapshot(group_features_synth.templates, "hyperpod-dev")
    assert replacement_reasons(keyed, keyed) == [] and group_refusals(keyed, keyed) == []
    assert "VolumeKmsKeyId" not in keyed["resources"][next(k for k in keyed["resources"] if "HyperPodCluster" in k)][
        "InstanceGroups"]["cpu-aws-key"]


@pytest.mark.parametrize(("changes", "key", "words"), [
    ({"instance_groups": [{"min_instance_count": 3}]}, "hyperpod.instance_groups.0.min_instance_count",
     "must not exceed instance_count (1)"),
    ({"instance_groups": [{"capacity": "spot", "training_plan_arn":
        "arn:aws:sagemaker:us-west-2:111122223333:training-plan/plan-1"}]},
     "hyperpod.instance_groups.0.capacity", "reserved capacity"),
    ({"instance_groups": [{"capacity": "reserved"}]}, "hyperpod.instance_groups.0.capacity", "on_demand"),
    ({"tiered_checkpointing": {"enabled": True, "memory_percent": 19}},
     "hyperpod.tiered_checkpointing.memory_percent", "20"),
    ({"tiered_checkpointing": {"enabled": True, "memory_percent": 101}},
     "hyperpod.tiered_checkpointing.memory_percent", "100"),
    ({"volume_encryption": "customer_managed", "node_provisioning_mode": None},
     "hyperpod.volume_encryption", "Continuous"),
    ({"instance_groups": [{"volume_encryption": "customer_managed"}], "node_provisioning_mode": None},
     "hyperpod.instance_groups.0.volume_encryption", "Continuous"),
])
def test_refusals_name_the_key(changes, key, words):
    data = mutate({})
    hyperpod = data["hyperpod"]
    for name, value in changes.items():
        if name == "instance_groups":
            hyperpod["instance_groups"][0].update(value[0])
        elif value is None:
            hyperpod.pop(name)
            hyperpod[name] = None
        else:
            hyperpod[name] = value
    with pytest.raises(ConfigError) as caught:
        parse_config(data, "test.yaml")
    message = str(caught.value)
    assert key in message and words in message, message


def test_feature_config_is_the_documented_one():
    config = parse_config(mutate(GROUP_FEATURES), "test.yaml")
    hp = config.hyperpod
    assert [hp.group_volume_encryption(g) for g in hp.instance_groups] == ["customer_managed", "aws_managed"]


def test_the_execution_roles_own_policy_holds_the_key_actions_before_the_cluster_exists(group_features_synth):
    """AWS's page asks for kms:CreateGrant and kms:DescribeKey in the execution role's policy as well; here on this
    key only, in the policy the HyperPod cluster waits for."""
    (key_id,) = _volume_keys(group_features_synth)
    policies = group_features_synth.resources("hyperpod", "AWS::IAM::Policy")
    holding = {pid: s for pid, p in policies.items() for s in p["Properties"]["PolicyDocument"]["Statement"]
               if s.get("Sid") == "HyperPodVolumeKey"}
    ((policy_id, statement),) = holding.items()
    assert statement == {"Sid": "HyperPodVolumeKey", "Effect": "Allow", "Resource": {"Fn::GetAtt": [key_id, "Arn"]},
                         "Action": ["kms:CreateGrant", "kms:DescribeKey"]}
    (cluster,) = group_features_synth.resources("hyperpod", "AWS::SageMaker::Cluster").values()
    assert policy_id in cluster["DependsOn"]
    role_ref = policies[policy_id]["Properties"]["Roles"][0]["Ref"]
    assert cluster["Properties"]["InstanceGroups"][0]["ExecutionRole"] == {"Fn::GetAtt": [role_ref, "Arn"]}
