"""Karpenter autoscaling: the cluster's AutoScaling and ClusterRole, the role as AWS documents it, the node pools
installed after the cluster, and nothing of it in the default templates."""

from __future__ import annotations

import json
import re
from typing import Any

import botocore.session
import pytest
import yaml
from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

from infra.config import parse_config
from infra.constructs.hyperpod.autoscaling import KMS_GRANT_OPERATIONS, NODE_POOLS_CHART_DIR
from infra.errors import ConfigError
from infra.guards.replacement import (
    autoscaling_refusals,
    guard_replacement,
    replacement_reasons,
    snapshot,
    write_atomically,
)
from tests.safety.test_iam_parliament import _findings, policy_documents


def _cluster(synth) -> tuple[str, dict[str, Any]]:
    ((logical_id, cluster),) = synth.resources("hyperpod", "AWS::SageMaker::Cluster").items()
    return logical_id, cluster


def _role(synth) -> tuple[str, dict[str, Any]]:
    roles = {k: v for k, v in synth.resources("hyperpod", "AWS::IAM::Role").items() if k.startswith("AutoscalingRole")}
    ((logical_id, role),) = roles.items()
    return logical_id, role


def test_cluster_enables_karpenter_with_the_role(autoscaling_synth):
    props = _cluster(autoscaling_synth)[1]["Properties"]
    role_id, _ = _role(autoscaling_synth)
    assert props["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": "Karpenter"}
    assert props["ClusterRole"] == {"Fn::GetAtt": [role_id, "Arn"]}
    groups = {g["InstanceGroupName"]: g for g in props["InstanceGroups"]}
    assert groups["cpu-burst"]["InstanceCount"] == 0 and groups["gpu-burst"]["InstanceCount"] == 0
    assert "OnStartDeepHealthChecks" not in groups["gpu-burst"]


def test_autoscaling_names_match_the_schema_and_the_api(autoscaling_synth):
    props = _cluster(autoscaling_synth)[1]["Properties"]
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", "AWS::SageMaker::Cluster").schema
    definition = schema["definitions"]["ClusterAutoScalingConfig"]["properties"]
    assert props["AutoScaling"]["Mode"] in definition["Mode"]["enum"]
    assert props["AutoScaling"]["AutoScalerType"] in definition["AutoScalerType"]["enum"]
    request = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateCluster").input_shape
    shape = request.members["AutoScaling"]
    assert props["AutoScaling"]["Mode"] in shape.members["Mode"].enum
    assert props["AutoScaling"]["AutoScalerType"] in shape.members["AutoScalerType"].enum
    assert request.members["ClusterRole"].name == "RoleArn"
    # Neither is create-only: turning autoscaling on updates the deployed cluster in place.
    assert not {"/properties/AutoScaling", "/properties/ClusterRole"} & set(schema["createOnlyProperties"])


def test_role_carries_what_aws_documents(autoscaling_synth):
    _, role = _role(autoscaling_synth)
    props = role["Properties"]
    (trust,) = props["AssumeRolePolicyDocument"]["Statement"]
    assert trust == {"Action": "sts:AssumeRole", "Effect": "Allow",
                     "Principal": {"Service": "hyperpod.sagemaker.amazonaws.com"}}
    (policy,) = props["Policies"]
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    nodes, grant, describe = (statements[sid] for sid in ("AddAndRemoveClusterNodes", "GrantOnNodeVolumeKeys",
                                                          "DescribeNodeVolumeKeys"))
    assert nodes["Action"] == ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"]
    assert nodes["Condition"] == {"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}}
    assert grant["Action"] == "kms:CreateGrant"
    assert grant["Condition"] == {
        "StringLike": {"kms:ViaService": "sagemaker.*.amazonaws.com"},
        "Bool": {"kms:GrantIsForAWSResource": "true"},
        "ForAllValues:StringEquals": {"kms:GrantOperations": KMS_GRANT_OPERATIONS},
    }
    # The grant condition keys are not in DescribeKey's request context: only kms:ViaService limits it.
    assert describe["Action"] == "kms:DescribeKey"
    assert describe["Condition"] == {"StringLike": {"kms:ViaService": "sagemaker.*.amazonaws.com"}}
    # Narrower than AWS's arn:aws:sagemaker:*:*:cluster/* and arn:aws:kms:*:*:key/*: this account and region.
    region = autoscaling_synth.config.region
    for statement, arn in ((nodes, f"arn:aws:sagemaker:{region}:<account>:cluster/*"),
                           (grant, f"arn:aws:kms:{region}:<account>:key/*"),
                           (describe, f"arn:aws:kms:{region}:<account>:key/*")):
        parts = statement["Resource"]["Fn::Join"][1]
        assert "".join("<account>" if p == {"Ref": "AWS::AccountId"} else p for p in parts) == arn
    assert set(statements) == {"AddAndRemoveClusterNodes", "GrantOnNodeVolumeKeys", "DescribeNodeVolumeKeys"}


# parliament's copy of the Service Authorization Reference predates the action (botocore's sagemaker model has
# the operation); every condition key is one the action's request carries.
PARLIAMENT_EXPECTED = {"UNKNOWN_ACTION: Unknown action sagemaker:BatchAddClusterNodes"}


def test_parliament_finds_only_the_gaps_of_its_reference_copy(autoscaling_synth):
    role_id, _ = _role(autoscaling_synth)
    (document,) = [d for _s, logical_id, _k, d in policy_documents(autoscaling_synth.templates)
                   if logical_id == role_id and "inline" in _k]
    assert set(_findings(document)) == PARLIAMENT_EXPECTED


def test_node_pools_are_installed_after_the_cluster_by_the_chart_installer(autoscaling_synth):
    cluster_id, _ = _cluster(autoscaling_synth)
    releases = autoscaling_synth.resources("hyperpod", "Custom::HyperPodHelmRelease")
    ((_, release),) = [(k, v) for k, v in releases.items() if k.startswith("KarpenterNodePools")]
    assert cluster_id in release["DependsOn"]
    assert json.loads(release["Properties"]["Values"]) == {"instanceGroups": ["cpu-burst", "gpu-burst"]}
    assert release["Properties"]["ServiceTimeout"] == "1200"  # CloudFormation gives up after 20 minutes
    # The installer waits (within limits) until HyperPod's Karpenter CRDs serve both kinds of the chart.
    assert json.loads(release["Properties"]["RequiredKinds"]) == [
        "karpenter.sagemaker.amazonaws.com/v1/HyperpodNodeClass", "karpenter.sh/v1/NodePool"]


def test_default_templates_carry_no_autoscaling(default_synth):
    props = _cluster(default_synth)[1]["Properties"]
    assert "AutoScaling" not in props and "ClusterRole" not in props
    text = json.dumps(default_synth.templates)
    assert "hyperpod.sagemaker.amazonaws.com" not in text and "karpenter" not in text.lower()


def test_turning_autoscaling_on_replaces_nothing(default_synth, autoscaling_synth):
    before = snapshot(default_synth.templates, default_synth.config.project)
    after = snapshot(autoscaling_synth.templates, autoscaling_synth.config.project)
    assert replacement_reasons(before, after) == []


def test_passes_both_nag_packs_with_one_finding_per_acknowledgment(autoscaling_synth):
    report = json.loads((autoscaling_synth.outdir / "validation-report.json").read_text())
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions", "HyperPod"}
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])
    role_path = "AutoscalingRole/Role"
    acknowledged = [f for p in report["pluginReports"] for f in p.get("suppressedViolations", [])
                    if any(role_path in c for c in json.dumps(f["violatingConstructs"]).split('"'))]
    assert len(acknowledged) == 2
    for finding in acknowledged:
        assert len(finding["violatingConstructs"]) == 1 and len(finding["reason"]) >= 30


def test_missing_deep_health_checks_are_acknowledged_only_on_the_autoscaled_accelerated_groups(autoscaling_synth):
    report = json.loads((autoscaling_synth.outdir / "validation-report.json").read_text())
    (pack,) = [p for p in report["pluginReports"] if p["pluginName"] == "HyperPod"]
    sm4 = [f for f in pack.get("suppressedViolations", []) if f["ruleName"].startswith("HyperPod-SM4")]
    assert sorted(f["acknowledgedId"] for f in sm4) == ["HyperPod::HyperPod-SM4[cpu-burst]",
                                                        "HyperPod::HyperPod-SM4[gpu-burst]"]
    assert "deep health checks" in sm4[0]["reason"]


# cfn-lint: config/all-features.yaml autoscales a group too, and tests/stacks/test_nag_and_lint.py lints it.


# --- the replacement guard: a group leaves Karpenter before it leaves the cluster; turning it off is deliberate


def _cluster_key(state: dict[str, Any]) -> str:
    (key,) = [k for k, e in state["resources"].items() if e["Type"] == "AWS::SageMaker::Cluster"]
    return str(key)


def _cluster_entry(state: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [e for e in state["resources"].values() if e["Type"] == "AWS::SageMaker::Cluster"]
    return entry


def test_the_lock_records_the_mode_and_the_groups_karpenter_scales(default_synth, autoscaling_synth):
    scaled = _cluster_entry(snapshot(autoscaling_synth.templates, "p"))["AutoScaling"]
    assert scaled == {"Mode": "Enable", "Groups": ["cpu-burst", "gpu-burst"]}
    assert "AutoScaling" not in _cluster_entry(snapshot(default_synth.templates, "p"))  # default lock unchanged


def test_unreadable_node_pool_values_are_refused_not_guessed(autoscaling_synth):
    templates = json.loads(json.dumps(autoscaling_synth.templates))
    for template in templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] == "Custom::HyperPodHelmRelease" and \
                    resource["Properties"]["ReleaseName"] == "hyperpod-karpenter-node-pools":
                resource["Properties"]["Values"] = {"Fn::Join": ["", ["{", "}"]]}
    with pytest.raises(ConfigError, match="cannot read the instance groups of the hyperpod-karpenter-node-pools"):
        snapshot(templates, "p")


def test_a_group_leaves_its_node_pool_before_it_leaves_the_cluster(autoscaling_synth):
    locked = snapshot(autoscaling_synth.templates, "p")
    current = json.loads(json.dumps(locked))
    entry = _cluster_entry(current)
    del entry["InstanceGroups"]["cpu-burst"]
    entry["AutoScaling"]["Groups"] = ["gpu-burst"]
    ((key, reason),) = autoscaling_refusals(locked, current, acknowledged_disable=False)
    assert key == "hyperpod.instance_groups[cpu-burst]"
    assert reason.startswith(f"{_cluster_key(locked)} (AWS::SageMaker::Cluster) hyperpod.instance_groups[cpu-burst] is "
                             "removed in the same deploy"), reason
    # Step one: the group stays in the cluster and leaves autoscaling.instance_groups. Nothing to refuse.
    entry["InstanceGroups"]["cpu-burst"] = _cluster_entry(locked)["InstanceGroups"]["cpu-burst"]
    assert autoscaling_refusals(locked, current, acknowledged_disable=False) == []


def test_turning_autoscaling_off_is_refused_until_acknowledged(tmp_path, autoscaling_synth):
    locked = snapshot(autoscaling_synth.templates, "p")
    current = json.loads(json.dumps(locked))
    del _cluster_entry(current)["AutoScaling"]
    ((key, reason),) = autoscaling_refusals(locked, current, acknowledged_disable=False)
    assert key == "hyperpod.autoscaling.enabled"
    assert "Mode=Disable" in reason and "hyperpod.autoscaling.acknowledge_disable: true" in reason
    assert autoscaling_refusals(locked, current, acknowledged_disable=True) == []
    # Disabled on the cluster and acknowledged: its groups may go in the same deploy (no NodeClass is in use).
    del _cluster_entry(current)["InstanceGroups"]["cpu-burst"]
    assert autoscaling_refusals(locked, current, acknowledged_disable=True) == []
    assert [key for key, _ in autoscaling_refusals(locked, current, acknowledged_disable=False)] == [
        "hyperpod.instance_groups[cpu-burst]", "hyperpod.autoscaling.enabled"]
    # Through the app's guard, with the deployed lock of the autoscaling config and the groups kept (at 0).
    project = autoscaling_synth.config.project
    write_atomically(tmp_path / f"{project}.lock.json", snapshot(autoscaling_synth.templates, project))
    data = json.loads(autoscaling_synth.config.model_dump_json(exclude_none=True))
    data["hyperpod"]["autoscaling"] = {"enabled": False}
    off = parse_config(data, "off.yaml")
    templates = json.loads(json.dumps(autoscaling_synth.templates))
    for template in templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::SageMaker::Cluster":
                resource["Properties"].pop("AutoScaling")
    with pytest.raises(ConfigError, match=r"hyperpod\.autoscaling\.enabled: \S+ \(AWS::SageMaker::Cluster\) "
                                          r"AutoScaling\.Mode changes from 'Enable' to null: turning autoscaling off"):
        guard_replacement(off, templates, tmp_path)
    data["hyperpod"]["autoscaling"]["acknowledge_disable"] = True
    guard_replacement(parse_config(data, "off.yaml"), templates, tmp_path)


def test_the_acknowledgment_is_refused_while_autoscaling_is_on(autoscaling_synth):
    data = json.loads(autoscaling_synth.config.model_dump_json(exclude_none=True))
    data["hyperpod"]["autoscaling"]["acknowledge_disable"] = True
    with pytest.raises(ConfigError, match="hyperpod.autoscaling.acknowledge_disable: "):
        parse_config(data, "ack.yaml")


# --- the chart, rendered in Python: its one template loops over the group names and quotes each ----------

_RANGE = re.compile(r"\{\{- range \.Values\.instanceGroups \}\}\n(?P<body>.*?)\{\{- end \}\}\n", re.S)


def render(groups: list[str]) -> list[dict[str, Any]]:
    text = (NODE_POOLS_CHART_DIR / "templates" / "node-pools.yaml").read_text()
    match = _RANGE.search(text)
    assert match, "node-pools.yaml is no longer one range over .Values.instanceGroups"
    body = "".join(match.group("body").replace("{{ . | quote }}", json.dumps(g)) for g in groups)
    rendered = text[: match.start()] + body + text[match.end():]
    assert "{{" not in rendered, "template syntax this test cannot render"
    return [d for d in yaml.safe_load_all(rendered) if d]


def test_chart_has_a_node_class_and_a_node_pool_per_group():
    objects = render(["cpu-burst", "gpu-burst"])
    assert [(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass", "cpu-burst"),
        ("karpenter.sh/v1", "NodePool", "cpu-burst"),
        ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass", "gpu-burst"),
        ("karpenter.sh/v1", "NodePool", "gpu-burst"),
    ]
    node_class, node_pool = objects[:2]
    assert node_class["spec"] == {"instanceGroups": ["cpu-burst"]}
    assert node_pool["spec"]["template"]["spec"] == {
        "nodeClassRef": {"group": "karpenter.sagemaker.amazonaws.com", "kind": "HyperpodNodeClass",
                         "name": "cpu-burst"},
        "expireAfter": "Never",
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "Exists"}],
    }


@pytest.mark.parametrize("groups", [[], ["only"]])
def test_chart_renders_nothing_else(groups):
    assert len(render(groups)) == 2 * len(groups)
