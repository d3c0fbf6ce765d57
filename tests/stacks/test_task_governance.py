"""HyperPod task governance: the add-on, the scheduler policy and the team quotas the config asks for, shaped
as the SageMaker API takes them, in the HyperPod stack after the cluster; nothing of it when off."""

from __future__ import annotations

import json

import botocore.session
import pytest
import regex  # the model's tag patterns use \p{L}, which re lacks (regex comes with cfn-lint)

from infra.config import compute_quota_name
from infra.guards.create_only import lookup, schema_create_only, schema_create_only_paths
from infra.guards.replacement import imported_exports
from tests.conftest import GOVERNANCE_CHANGES
from tests.template_graph import readiness_checks, waits_for

TEAMS = GOVERNANCE_CHANGES["addons"]["task_governance"]["teams"]
GOVERNANCE_TYPES = ("AWS::SageMaker::ComputeQuota", "AWS::SageMaker::ClusterSchedulerConfig")


def _model():
    return botocore.session.get_session().get_service_model("sagemaker")


def _cluster_id(synth):
    (logical_id,) = synth.resources("hyperpod", "AWS::SageMaker::Cluster")
    return logical_id


def _quotas(synth):
    return {q["Properties"]["ComputeQuotaTarget"]["TeamName"]: (logical_id, q)
            for logical_id, q in synth.resources("hyperpod", "AWS::SageMaker::ComputeQuota").items()}


def test_off_by_default_builds_nothing(default_synth, variant_synth):
    for synth in (default_synth, variant_synth):
        for template in synth.templates.values():
            types = {r["Type"] for r in template["Resources"].values()}
            assert not types & set(GOVERNANCE_TYPES)
            assert "amazon-sagemaker-hyperpod-taskgovernance" not in json.dumps(template)


def test_addon_after_the_hyperpod_cluster_and_policy_after_the_addon(governance_synth, variant_synth):
    resources = governance_synth.template("hyperpod")["Resources"]
    (addon_id, addon), = [(k, v) for k, v in resources.items() if v["Type"] == "AWS::EKS::Addon"]
    assert addon["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-taskgovernance"
    assert addon["Properties"]["AddonVersion"] == "v1.6.0-eksbuild.1"
    # The EKS cluster by construct reference, as every add-on of the HyperPod stack: an import the stack already
    # makes without the feature, so no export of the EKS stack appears or goes with it (docs/design.md).
    (imported,) = imported_exports(addon["Properties"]["ClusterName"])
    assert imported in imported_exports(variant_synth.template("hyperpod")["Resources"])
    assert addon["Properties"]["ResolveConflicts"] == "OVERWRITE"
    assert waits_for(resources, addon_id, _cluster_id(governance_synth))
    (policy_id, policy), = governance_synth.resources("hyperpod", "AWS::SageMaker::ClusterSchedulerConfig").items()
    # The policy after Kueue: the add-on ACTIVE and its controller available (AWS's module's wait_for_kueue_webhook).
    (kueue_ready_id,) = [k for k, r in resources.items() if r["Type"] == "Custom::HyperPodReadiness"
                         and r["Properties"]["What"] == addon["Properties"]["AddonName"]]
    assert kueue_ready_id in policy["DependsOn"] and addon_id in resources[kueue_ready_id]["DependsOn"]
    assert [(c["kind"], c.get("namespace"), c.get("name")) for c in readiness_checks(resources[kueue_ready_id])] == [
        ("addon", None, "amazon-sagemaker-hyperpod-taskgovernance"),
        ("deployment", "kueue-system", "kueue-controller-manager")]
    for _, quota in _quotas(governance_synth).values():
        assert policy_id in quota["DependsOn"]  # and so after the add-on


def test_scheduler_config_carries_the_policy(governance_synth):
    (policy,) = governance_synth.resources("hyperpod", "AWS::SageMaker::ClusterSchedulerConfig").values()
    props = policy["Properties"]
    assert props["Name"] == "hyperpod-dev"
    assert props["ClusterArn"] == {"Fn::GetAtt": [_cluster_id(governance_synth), "ClusterArn"]}
    assert props["SchedulerConfig"] == {
        "FairShare": "Disabled",
        "IdleResourceSharing": "Enabled",
        "PriorityClasses": [{"Name": "inference", "Weight": 100}, {"Name": "training", "Weight": 50}],
    }


def test_one_quota_per_team_as_configured(governance_synth):
    quotas = _quotas(governance_synth)
    assert set(quotas) == {"research", "product", "data"}
    cluster_arn = {"Fn::GetAtt": [_cluster_id(governance_synth), "ClusterArn"]}
    research = quotas["research"][1]["Properties"]
    assert research == {
        "Name": compute_quota_name("hyperpod-dev", "research"),
        "ClusterArn": cluster_arn,
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": [{"InstanceType": "ml.g5.8xlarge", "Count": 1}],
            "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 200},
            "PreemptTeamTasks": "LowerPriority",
        },
        "ComputeQuotaTarget": {"TeamName": "research", "FairShareWeight": 60},
        # A plain CfnResource: the config's tags are given by infra/composition.py, Tags.of cannot reach it.
        "Tags": [{"Key": "cost-center", "Value": "ml-platform"}, {"Key": "project", "Value": "hyperpod-dev"}],
    }
    product = quotas["product"][1]["Properties"]["ComputeQuotaConfig"]
    assert product["ResourceSharingConfig"] == {"Strategy": "Lend"}  # no limit: AWS's default applies
    assert product["PreemptTeamTasks"] == "Never"
    data = quotas["data"][1]["Properties"]
    assert data["ComputeQuotaConfig"]["ComputeQuotaResources"] == [{"InstanceType": "ml.m5.2xlarge", "Count": 1}]
    assert data["ComputeQuotaTarget"] == {"TeamName": "data", "FairShareWeight": 0}


def test_properties_satisfy_the_sagemaker_api(governance_synth):
    """Every field against botocore's CreateComputeQuota / CreateClusterSchedulerConfig: patterns, ranges, enums."""
    model = _model()

    def check(shape, value, path):
        if shape.type_name == "structure":
            assert set(value) <= set(shape.members), path
            assert set(shape.required_members) <= set(value), path
            for key, item in value.items():
                check(shape.members[key], item, f"{path}.{key}")
        elif shape.type_name == "list":
            meta = shape.metadata
            assert meta.get("min", 0) <= len(value) <= meta.get("max", len(value)), path
            for i, item in enumerate(value):
                check(shape.member, item, f"{path}.{i}")
        elif isinstance(value, dict):  # an intrinsic (the cluster ARN): resolved at deploy
            assert set(value) <= {"Fn::GetAtt", "Ref"}, path
        elif shape.type_name == "string":
            if shape.enum:
                assert value in shape.enum, path
            if "pattern" in shape.metadata:
                assert regex.fullmatch(shape.metadata["pattern"], value), path
            assert shape.metadata.get("min", 0) <= len(value) <= shape.metadata.get("max", len(value)), path
        else:
            assert shape.type_name == "integer" and isinstance(value, int), path
            assert shape.metadata.get("min", value) <= value <= shape.metadata.get("max", value), path

    quota_shape = model.operation_model("CreateComputeQuota").input_shape
    for _, quota in _quotas(governance_synth).values():
        check(quota_shape, quota["Properties"], "ComputeQuota")
    policy_shape = model.operation_model("CreateClusterSchedulerConfig").input_shape
    for policy in governance_synth.resources("hyperpod", "AWS::SageMaker::ClusterSchedulerConfig").values():
        check(policy_shape, policy["Properties"], "ClusterSchedulerConfig")


def test_logical_ids_follow_team_names_so_reordering_replaces_nothing(tmp_path_factory, governance_synth):
    from tests.conftest import governance_config_data, synthesize_variant

    data = governance_config_data()
    teams = data["addons"]["task_governance"]["teams"]
    teams.reverse()
    teams[0]["quota"]["count"] = 0  # a routine edit on the way
    teams[1]["fair_share_weight"] = 5
    reordered = synthesize_variant(tmp_path_factory, "task-governance-reordered", data)
    before = {team: logical_id for team, (logical_id, _) in _quotas(governance_synth).items()}
    after = {team: logical_id for team, (logical_id, _) in _quotas(reordered).items()}
    assert before == after
    # Count and weight are not create-only: CloudFormation updates the quota in place.
    create_only = schema_create_only_paths("AWS::SageMaker::ComputeQuota")
    for team, (_, quota) in _quotas(reordered).items():
        old = _quotas(governance_synth)[team][1]["Properties"]
        for path in create_only:
            assert lookup(quota["Properties"], path) == lookup(old, path), (team, path)


def test_create_only_fields_are_the_names_and_the_cluster(governance_synth):
    """What a change would replace, as the docs say: names, the cluster, the team name (no data in either)."""
    assert schema_create_only("AWS::SageMaker::ComputeQuota") == [
        "/properties/Name", "/properties/ClusterArn", "/properties/ComputeQuotaTarget/TeamName"]
    assert schema_create_only("AWS::SageMaker::ClusterSchedulerConfig") == [
        "/properties/Name", "/properties/ClusterArn"]


@pytest.mark.parametrize("part", ["network", "eks", "observability"])
def test_other_stacks_unchanged_by_the_feature(variant_synth, governance_synth, part):
    assert governance_synth.template(part) == variant_synth.template(part)
