"""Create-only properties: the template fields whose change makes CloudFormation replace the resource.

One source for the replacement engine (``infra.guards.replacement``, which synth's guard and ``hpctl preflight``
run), ``hpctl drift`` and the tests. The resource-level lists are the ``createOnlyProperties`` of the
CloudFormation resource schemas bundled with cfn-lint, copied into ``create_only_properties.json`` so that the
library needs no cfn-lint at run time; ``python -m infra.guards.create_only`` rewrites the file from the installed
cfn-lint and ``tests/safety/test_no_replacement.py`` fails when the two differ.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).with_name("create_only_properties.json")
# The schemas are per region; createOnlyProperties do not vary by region, one is read.
SCHEMA_REGION = "us-east-1"

# The resource types the JSON file covers: the stateful resources the guard protects and every type a
# create-only property of theirs can point at (subnets, security groups, the VPC, roles).
RESOURCE_TYPES = (
    "AWS::SageMaker::Cluster",
    "AWS::EKS::Cluster",
    "AWS::FSx::FileSystem",
    "AWS::EC2::VPC",
    "AWS::EC2::VPCCidrBlock",
    "AWS::EC2::Subnet",
    "AWS::EC2::SecurityGroup",
    "AWS::IAM::Role",
    "AWS::S3::Bucket",
)

# Fixed inside an existing HyperPod instance group. CloudFormation does not replace the cluster for them: its
# template reference marks every ClusterInstanceGroup property "Update requires: No interruption"
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-sagemaker-cluster-clusterinstancegroup.html,
# read as c2hans/aws-docs@2b828ab1), and the schema's createOnlyProperties name no group path. It sends
# UpdateCluster, and HyperPod's "Updating SageMaker HyperPod cluster configuration" page
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-cli-command-update-cluster.html,
# c2hans/aws-docs@63cf41d6) says what that call keeps: "To update an existing instance group, you must match the
# instance type you initially specified to the group"; "You also cannot switch between `InstanceType` and
# `InstanceRequirements`"; for ExecutionRole "keep using the same IAM role you attached during cluster
# creation"; for ThreadsPerCore "keep using the same value". A change to one of these is taken to fail the deploy
# (how HyperPod answers it is not documented, nor observed here): infra.guards.replacement.group_refusals refuses it at
# synth instead. The same page allows adding or removing types
# of an InstanceRequirements list, except "an instance type that has active nodes running on it": a flexible
# group that stays flexible may have its list edited (refused_group_fields); `hpctl drift` names the removed types
# that still run nodes, which the synth cannot see. InstanceGroupName
# is how a group is matched, so it never differs for a matched group: a new name is a new group and the old one
# is removed. OverrideVpcConfig (a group's subnets and security groups): that page says nothing, but HyperPod's
# prerequisites page, "Setting up SageMaker HyperPod clusters across multiple AZs"
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html#sagemaker-hyperpod-prerequisites-multiple-availability-zones,
# read in a stored copy on 2026-12-04), says the field "Cannot be modified after the instance group is created";
# another AZ is "a new instance group". Whether adding it to or removing it from an existing group counts as a
# modification is not spelled out; both are refused here, as a change of the field.
HYPERPOD_GROUP_CREATE_ONLY = ("InstanceGroupName", "InstanceType", "InstanceRequirements", "ExecutionRole",
                              "ThreadsPerCore", "OverrideVpcConfig")



def refused_group_fields(before: Any, after: Any) -> list[str]:
    """The fields of HYPERPOD_GROUP_CREATE_ONLY that differ between two versions of one deployed instance group
    (as a template writes it) in a way HyperPod's UpdateCluster does not take: any of them, except the list of
    types of a group that is flexible before and after (see HYPERPOD_GROUP_CREATE_ONLY)."""
    refused = []
    for field in HYPERPOD_GROUP_CREATE_ONLY:
        was, will = before.get(field), after.get(field)
        if was == will or (field == "InstanceRequirements" and was is not None and will is not None):
            continue
        refused.append(field)
    return refused


# The KMS key of a group's EBS volumes cannot change either: "KMS key transition isn't currently supported [...] To
# use a different key, create a new instance group" (https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html).
# It sits inside InstanceStorageConfigs, whose volume size is not create-only, so the lock records it on its own.
GROUP_VOLUME_KEY = "VolumeKmsKeyId"


def _minor(version: Any) -> tuple[int, int] | None:
    """``"1.33"`` as (1, 33); None for anything else (a token, a value this code does not know)."""
    parts = version.split(".") if isinstance(version, str) else []
    return (int(parts[0]), int(parts[1])) if len(parts) == 2 and all(p.isdecimal() for p in parts) else None


def refused_version_change(before: Any, after: Any) -> str | None:
    """Why EKS does not move a deployed cluster (that stays) from Kubernetes ``before`` to ``after``; None when it
    may, or when either is not a plain "1.NN" of the same major version.

    The version updates in place (it is not among the resource schema's createOnlyProperties, above), but "control
    plane version upgrades must be done for one minor version at a time"
    (https://docs.aws.amazon.com/eks/latest/eksctl/cluster-upgrade.html), and a rollback reverts "to the previous
    minor version within 7 days of an in-place upgrade"
    (https://docs.aws.amazon.com/eks/latest/best-practices/rollback-cluster-upgrades.html). A step of more than one
    minor version either way is taken to fail the deploy (EKS's answer is not on those pages, nor observed here);
    one minor version down is left to EKS (whether CloudFormation's update performs that rollback is unverified).
    """
    was, will = _minor(before), _minor(after)
    if was is None or will is None or was[0] != will[0] or abs(will[1] - was[1]) <= 1:
        return None
    if will > was:
        return (f"the deployed cluster runs Kubernetes {before} and EKS upgrades a control plane one minor version "
                f"at a time: deploy {was[0]}.{was[1] + 1} first, then {after}")
    return (f"the deployed cluster runs Kubernetes {before} and EKS rolls a control plane back only to the previous "
            f"minor version, within 7 days of the upgrade: {after} cannot be reached")


def group_volume_key(group: Any) -> Any:
    """The KMS key of an instance group's EBS volumes as a template writes it; None is AWS's own key."""
    for storage in (group.get("InstanceStorageConfigs") or []) if isinstance(group, dict) else []:
        key = lookup(storage, ("EbsVolumeConfig", GROUP_VOLUME_KEY))
        if key is not None:
            return key
    return None


@cache
def _table() -> dict[str, list[str]]:
    data: dict[str, list[str]] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return data


def create_only_paths(resource_type: str) -> tuple[tuple[str, ...], ...]:
    """The create-only property paths of ``resource_type`` (e.g. ``("Orchestrator", "Eks")``)."""
    return tuple(tuple(p.split("/")[2:]) for p in _table()[resource_type])


def lookup(properties: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in a resource's properties, or None when any step is missing."""
    value = properties
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def schema_create_only(resource_type: str) -> list[str]:
    """createOnlyProperties of any ``resource_type`` as the installed cfn-lint's schemas give them (a dev
    dependency: tests and the regeneration below; the app reads the table written from them)."""
    from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(SCHEMA_REGION, resource_type).schema
    return list(schema.get("createOnlyProperties", []))


def schema_create_only_paths(resource_type: str) -> tuple[tuple[str, ...], ...]:
    """The same as ``create_only_paths``, for any type cfn-lint has a schema of."""
    return tuple(tuple(p.split("/")[2:]) for p in schema_create_only(resource_type))


def from_cfn_lint() -> dict[str, list[str]]:
    """createOnlyProperties of RESOURCE_TYPES as the installed cfn-lint's schemas give them."""
    return {t: schema_create_only(t) for t in RESOURCE_TYPES}


if __name__ == "__main__":
    DATA_FILE.write_text(json.dumps(from_cfn_lint(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {DATA_FILE}")
