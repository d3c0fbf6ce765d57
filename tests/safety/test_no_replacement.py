"""Routine changes never replace the VPC, the EKS cluster, the HyperPod cluster or the lifecycle bucket.

For each pair (before, after) of synthesized apps: every protected resource keeps its stack, its logical
ID and the values of its create-only properties. The create-only lists come from the CloudFormation
resource schemas bundled with cfn-lint; the fields HyperPod keeps for an instance group's life are not in
that schema (infra/guards/create_only.py: refused_group_fields; a change fails the deploy rather than replacing the
cluster) and are checked for every group present on both sides. The comparison is generic over whatever
stacks both apps have, so new stacks are covered too.

Each variant is synthesized once per session; the pairs reuse the shared fixtures of tests/conftest.py and
add two synths of their own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.facts.intrinsics import render
from infra.guards.create_only import DATA_FILE, create_only_paths, from_cfn_lint, lookup, refused_group_fields
from infra.guards.replacement import group_refusals, replacement_reasons, snapshot
from tests.conftest import Synthesized, mutate, synthesize_variant

PROTECTED_TYPES = ("AWS::EC2::VPC", "AWS::EKS::Cluster", "AWS::SageMaker::Cluster", "AWS::S3::Bucket")

# Observability pieces switched off, complementing conftest's observability_minimal_synth (container
# insights, grafana and dashboard off): together every observability key is toggled once.
OBSERVABILITY_REST_OFF: dict[str, Any] = {
    "observability": {"prometheus": {"enabled": False}, "grafana": {"enabled": False}, "alerts": {"enabled": False}},
}
ADMIN_AND_RETENTION: dict[str, Any] = {
    "eks": {"admin_principal_arns": ["arn:aws:iam::111122223333:role/PlatformAdmin"], "log_retention_days": 90},
    "network": {"flow_logs_retention_days": 90},
}


@pytest.fixture(scope="session")
def observability_rest_off_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "observability-rest-off", mutate(OBSERVABILITY_REST_OFF))


@pytest.fixture(scope="session")
def admin_retention_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "admin-retention", mutate(ADMIN_AND_RETENTION))


# (what changes, before, after). A pair read backwards is the opposite change (count down, group removed).
PAIRS = [
    ("instance count up and a group added", "default_synth", "routine_synth"),
    ("instance count down and a group removed", "routine_synth", "default_synth"),
    ("a pinned group removed from a two-AZ cluster", "variant_synth", "group_removed_synth"),
    ("container insights, grafana and dashboard off", "default_synth", "observability_minimal_synth"),
    ("prometheus, grafana and alerts off", "default_synth", "observability_rest_off_synth"),
    ("prometheus, grafana and alerts back on", "observability_rest_off_synth", "default_synth"),
    ("admin principal added, log retention changed", "default_synth", "admin_retention_synth"),
    ("rolling update, custom image and automatic patching on", "default_synth", "rolling_update_synth"),
    ("rolling update, custom image and automatic patching off", "rolling_update_synth", "default_synth"),
]


def _is_protected(resource: dict[str, Any]) -> bool:
    if resource["Type"] != "AWS::S3::Bucket":
        return resource["Type"] in PROTECTED_TYPES
    # The lifecycle bucket: HyperPod's managed policy reads only sagemaker-* buckets, so it is named so.
    return render(resource.get("Properties", {}).get("BucketName", "")).startswith("sagemaker-")


def protected_resources(synth: Synthesized) -> dict[tuple[str, str], dict[str, Any]]:
    """(stack without the project prefix, logical ID) -> resource, for every protected resource."""
    prefix = f"{synth.config.project}-"
    return {
        (stack.removeprefix(prefix), logical_id): resource
        for stack, template in synth.templates.items()
        for logical_id, resource in template["Resources"].items()
        if _is_protected(resource)
    }


def replacement_causes(before: Synthesized, after: Synthesized) -> list[str]:
    causes = []
    after_resources = protected_resources(after)
    for (stack, logical_id), old in protected_resources(before).items():
        new = after_resources.get((stack, logical_id))
        if new is None:
            causes.append(f"{stack}/{logical_id} ({old['Type']}) is gone: its logical ID changed or it moved")
            continue
        for path in create_only_paths(old["Type"]):
            was, now = lookup(old.get("Properties", {}), path), lookup(new.get("Properties", {}), path)
            if was != now:
                causes.append(f"{stack}/{logical_id} create-only {'/'.join(path)}: {was!r} -> {now!r}")
        if old["Type"] == "AWS::SageMaker::Cluster":
            causes.extend(_instance_group_causes(stack, logical_id, old, new))
    return causes


def _instance_group_causes(stack: str, logical_id: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    def groups(resource: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {g["InstanceGroupName"]: g for g in resource["Properties"]["InstanceGroups"]}

    causes = []
    new_groups = groups(new)
    for name, was in groups(old).items():
        if name not in new_groups:
            continue  # removing a group is an update of the cluster, not a replacement
        for field in refused_group_fields(was, new_groups[name]):
            causes.append(f"{stack}/{logical_id} group {name} fixed {field}: "
                          f"{was.get(field)!r} -> {new_groups[name].get(field)!r}")
    return causes


def test_the_create_only_file_is_the_installed_cfn_lint_schemas():
    """infra/guards/create_only_properties.json is current: regenerate it with `python -m infra.guards.create_only`."""
    assert json.loads(DATA_FILE.read_text()) == from_cfn_lint()


def test_schemas_name_the_create_only_properties_we_rely_on():
    assert ("ClusterName",) in create_only_paths("AWS::SageMaker::Cluster")
    assert ("VpcConfig",) in create_only_paths("AWS::SageMaker::Cluster")
    assert ("Name",) in create_only_paths("AWS::EKS::Cluster")
    assert ("EncryptionConfig",) in create_only_paths("AWS::EKS::Cluster")
    assert ("CidrBlock",) in create_only_paths("AWS::EC2::VPC")
    assert ("BucketName",) in create_only_paths("AWS::S3::Bucket")
    # The group-level fields are not in the schema, hence HYPERPOD_GROUP_CREATE_ONLY.
    assert not [p for p in create_only_paths("AWS::SageMaker::Cluster") if p[0] == "InstanceGroups"]


def test_every_protected_kind_is_found_in_the_default_app(default_synth):
    kinds = [r["Type"] for r in protected_resources(default_synth).values()]
    assert sorted(kinds) == sorted(PROTECTED_TYPES), kinds


@pytest.mark.parametrize(("change", "before", "after"), PAIRS, ids=[p[0] for p in PAIRS])
def test_routine_change_replaces_nothing_protected(request, change, before, after):
    before_synth, after_synth = request.getfixturevalue(before), request.getfixturevalue(after)
    assert protected_resources(before_synth) != {}
    assert before_synth.templates != after_synth.templates, "the pair does not change anything"
    assert replacement_causes(before_synth, after_synth) == []
    # The replacement guard agrees: a routine change passes it without an acknowledgement.
    project = before_synth.config.project
    before_state, after_state = snapshot(before_synth.templates, project), snapshot(after_synth.templates, project)
    assert replacement_reasons(before_state, after_state) == []
    assert group_refusals(before_state, after_state) == []


def test_the_check_detects_a_replacement(default_synth):
    """A renamed HyperPod cluster and a changed instance type are both reported."""
    changed = json.loads(json.dumps(default_synth.templates))
    for template in changed.values():
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::SageMaker::Cluster":
                resource["Properties"]["ClusterName"] = "renamed"
                resource["Properties"]["InstanceGroups"][0]["InstanceType"] = "ml.p5.48xlarge"
    after = Synthesized(config=default_synth.config, app=default_synth.app, outdir=default_synth.outdir,
                        templates=changed)
    causes = replacement_causes(default_synth, after)
    assert any("create-only ClusterName" in c for c in causes), causes
    assert any("fixed InstanceType" in c for c in causes), causes
