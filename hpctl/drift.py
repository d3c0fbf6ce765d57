"""`hpctl drift`: the deployed HyperPod cluster against the config, and what `cdk deploy` would do."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hpctl.cluster import deployed_instance_types
from infra.guards.create_only import refused_group_fields, refused_version_change
from infra.guards.replacement import REFUSE, group_removal

# Effects, from harmless to destructive.
UPDATE = "update"  # UpdateCluster in place
ADD = "add group"
REMOVE = "remove group"  # a group without nodes
# A group with nodes: HyperPod terminates them, and synth's replacement guard refuses it unless the group is
# acknowledged (infra.guards.replacement.group_removal, the rule synth applies).
REMOVE_NODES = "remove group: its nodes terminate"
REMOVE_REFUSED = "SYNTH REFUSES: its nodes would terminate"
REFUSED = "HYPERPOD REFUSES: new group"  # refused_group_fields (infra.guards.create_only): the deploy fails
BUSY = "HYPERPOD REFUSES: nodes run on it"  # a dropped type of a flexible group that still has nodes
CREATE = "create cluster"
EKS_REFUSES = "EKS REFUSES: more than one minor version"  # infra.guards.create_only.refused_version_change
# Dropping AutoScaling from the template is not known to disable it (unverified): UpdateCluster with
# AutoScaling Mode=Disable does (botocore's UpdateClusterRequest: "Use to enable or disable").
MANUAL = "not done by deploy: update-cluster --auto-scaling Mode=Disable"


@dataclass
class Change:
    group: str
    field: str
    deployed: Any
    config: Any
    effect: str
    note: str = ""  # why, when the effect needs it (the replacement guard's words for removing a group with nodes)


def _group_config(group: Any) -> dict[str, Any]:
    return {
        "instance_type": group.instance_type,
        "fallback_instance_types": list(group.fallback_instance_types),
        "instance_count": group.instance_count,
        "threads_per_core": group.threads_per_core,
        "deep_health_checks": sorted(group.deep_health_checks),
        "rolling_update": _scheduled_update(group.rolling_update.scheduled_update_config())
        if group.rolling_update else None,
        "image_id": group.image_id,
        "auto_patch": group.auto_patch,
    }


# Config field -> the fields of a group as a template writes it (and the replacement guard compares them) that
# carry it.
_TEMPLATE_FIELDS = {"instance_type": ("InstanceType", "InstanceRequirements"),
                    "fallback_instance_types": ("InstanceType", "InstanceRequirements"),
                    "threads_per_core": ("ThreadsPerCore",)}


def _group_deployed(group: dict[str, Any]) -> dict[str, Any]:
    types = deployed_instance_types(group)
    return {
        "instance_type": types[0] if types else None,
        "fallback_instance_types": types[1:],
        "instance_count": group.get("TargetCount", group.get("CurrentCount")),
        "threads_per_core": group.get("ThreadsPerCore"),
        "deep_health_checks": sorted(group.get("OnStartDeepHealthChecks") or []),
        # As the template writes it (ScheduledUpdateConfig), with the alarms in a stable order.
        "rolling_update": _scheduled_update(group.get("ScheduledUpdateConfig")),
        "image_id": group.get("DesiredImageId") or group.get("CurrentImageId"),
        "auto_patch": (group.get("AutoPatchConfig") or {}).get("PatchingStrategy"),
    }


def _scheduled_update(deployed: dict[str, Any] | None) -> dict[str, Any] | None:
    if not deployed:
        return None
    deployment = deployed.get("DeploymentConfig") or {}
    if "AutoRollbackConfiguration" in deployment:  # a set of alarms (insertionOrder false in the schema)
        alarms = sorted(deployment["AutoRollbackConfiguration"], key=lambda a: a["AlarmName"])
        deployment = {**deployment, "AutoRollbackConfiguration": alarms}
    return {**deployed, "DeploymentConfig": deployment} if deployment else dict(deployed)


def _flexible(live_group: dict[str, Any]) -> bool:
    """A described group with a list of types (botocore's ClusterInstanceGroupDetails: InstanceRequirements)."""
    return not live_group.get("InstanceType") and bool(live_group.get("InstanceRequirements"))


def _template_group_live(live_group: dict[str, Any]) -> dict[str, Any]:
    """The fields of _TEMPLATE_FIELDS of a described group as the template writes them: one InstanceType, or a
    list of types in InstanceRequirements (DescribeCluster reports it as DesiredInstanceTypes)."""
    types = deployed_instance_types(live_group)
    flexible = _flexible(live_group)
    return {"InstanceType": None if flexible else live_group.get("InstanceType"),
            "InstanceRequirements": {"InstanceTypes": types} if flexible else None,
            "ThreadsPerCore": live_group.get("ThreadsPerCore")}


def _template_group_config(group: Any) -> dict[str, Any]:
    """The same fields for a group of the config (infra/constructs/hyperpod/cluster.py writes a group with
    fallback types as InstanceRequirements and no InstanceType)."""
    flexible = bool(group.fallback_instance_types)
    return {"InstanceType": None if flexible else group.instance_type,
            "InstanceRequirements": {"InstanceTypes": list(group.instance_types)} if flexible else None,
            "ThreadsPerCore": group.threads_per_core}


def removed_types(deployed: dict[str, Any] | None, cfg: Any) -> dict[str, set[str]]:
    """Per group flexible on both sides, the deployed types the config's list drops."""
    if deployed is None:
        return {}
    live = {g["InstanceGroupName"]: g for g in deployed.get("InstanceGroups", [])}
    removed = {}
    for group in cfg.hyperpod.instance_groups:
        if group.name in live and group.fallback_instance_types and _flexible(live[group.name]):
            gone = set(deployed_instance_types(live[group.name])) - set(group.instance_types)
            if gone:
                removed[group.name] = gone
    return removed


def compare(deployed: dict[str, Any] | None, cfg: Any,
            running: dict[str, set[str]] | None = None, eks_version: str | None = None) -> list[Change]:
    """Changes `cdk deploy` would make to go from the deployed cluster to the config. ``running``: per group, the
    instance types its nodes run on (ListClusterNodes), for the groups of removed_types; HyperPod refuses to drop
    a type that has nodes. ``eks_version``: the Kubernetes version the orchestrating EKS cluster runs (its
    DescribeCluster), None when unknown; EKS may have moved it ("your cluster is auto-upgraded" when extended
    support ends, https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html)."""
    if deployed is None:
        return [Change("-", "cluster", None, cfg.hyperpod.cluster_name, CREATE)]
    changes: list[Change] = []
    if eks_version is not None and eks_version != cfg.eks.version:
        effect = EKS_REFUSES if refused_version_change(eks_version, cfg.eks.version) else UPDATE
        changes.append(Change("-", "eks.version", eks_version, cfg.eks.version, effect))
    live = {g["InstanceGroupName"]: g for g in deployed.get("InstanceGroups", [])}
    wanted = {g.name: g for g in cfg.hyperpod.instance_groups}
    removed = removed_types(deployed, cfg)
    # Karpenter sets the node count of the groups it scales; the config declares them at 0 and never resets them.
    karpenter_owned = set(cfg.hyperpod.autoscaling.instance_groups)
    for name, group in wanted.items():
        want = _group_config(group)
        if name in karpenter_owned:
            del want["instance_count"]
        if name not in live:
            changes.append(
                Change(name, "group", None, f"{group.instance_count} x {' or '.join(group.instance_types)}", ADD)
            )
            continue
        have = _group_deployed(live[name])
        # The replacement guard's rule for a deployed group (the same function), on the fields drift can see.
        refused_fields = set(refused_group_fields(_template_group_live(live[name]), _template_group_config(group)))
        for field, value in want.items():
            if have[field] is None and field == "threads_per_core":
                continue  # not reported by the API: nothing to compare
            if field == "image_id" and value in (None, "default"):
                continue  # the API reports the AMI HyperPod chose, the config names none
            if have[field] != value:
                fixed = bool(refused_fields & set(_TEMPLATE_FIELDS.get(field, ())))
                changes.append(Change(name, field, have[field], value, REFUSED if fixed else UPDATE))
        busy = sorted((running or {}).get(name, set()) & removed.get(name, set()))
        if busy:
            changes.append(Change(name, "removed types with nodes", busy, None, BUSY))
    for name, group in live.items():
        if name not in wanted:
            nodes = max(group.get("CurrentCount") or 0, group.get("TargetCount") or 0)
            effect, why = REMOVE, ""
            if nodes:
                severity, why = group_removal(name, nodes, cfg.hyperpod.acknowledge_group_removal)
                effect = REMOVE_REFUSED if severity == REFUSE else REMOVE_NODES
            shown = f"{group.get('TargetCount')} x {' or '.join(deployed_instance_types(group))}"
            changes.append(Change(name, "group", shown, None, effect, why))
    # DescribeCluster's AutoScaling.Mode (botocore's ClusterAutoScalingConfigOutput); no AutoScaling means never on.
    mode = (deployed.get("AutoScaling") or {}).get("Mode", "Disable")
    wanted_mode = "Enable" if cfg.hyperpod.autoscaling.enabled else "Disable"
    if mode != wanted_mode:
        changes.append(Change("-", "autoscaling", mode, wanted_mode, UPDATE if wanted_mode == "Enable" else MANUAL))
    recovery = deployed.get("NodeRecovery")
    if recovery and recovery != cfg.hyperpod.node_recovery:
        changes.append(Change("-", "node_recovery", recovery, cfg.hyperpod.node_recovery, UPDATE))
    return changes


def refused(changes: list[Change]) -> bool:
    """Whether a change is one HyperPod (or EKS, for the version) does not make (the deploy would fail)."""
    return any(c.effect in (REFUSED, BUSY, EKS_REFUSES, REMOVE_REFUSED) for c in changes)


def changes_json(changes: list[Change]) -> list[dict[str, Any]]:
    return [asdict(c) for c in changes]
