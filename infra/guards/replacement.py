"""The replacement guard: a committed lock of the create-only state that was last DEPLOYED.

CloudFormation replaces a resource when one of its create-only properties changes; for the HyperPod cluster
that terminates every node and every running job, for FSx it is a new, empty file system. The lock records,
from the synthesized templates, the create-only properties (``infra.guards.create_only``) of the HyperPod and EKS
clusters and the FSx file system, and of every resource those properties point at, through ``Ref``,
``Fn::GetAtt``, ``Fn::Sub`` and cross-stack exports: subnets, security groups, the VPC and its CIDRs, the
execution role. It also records each instance group's create-only fields, the KMS key of its EBS volumes and its
instance count.

- Every synth compares its templates with ``config/locks/<project>.lock.json`` (keyed by the project, so
  moving or renaming the config file changes nothing) and refuses a replacement unless
  ``hyperpod.allow_cluster_replacement`` is true; a change HyperPod does not make to a deployed instance group
  (its type, execution role, threads per core, subnets or volume key: the deploy would fail), whatever the
  config says; and the removal or renaming of an instance group that had nodes unless the group is listed in
  ``hyperpod.acknowledge_group_removal``. A synth writes nothing to the
  lock: it leaves its candidate in ``cdk.out/replacement-lock.json``.
- ``make deploy`` promotes the candidate to the lock only after ``cdk deploy`` succeeded
  (``scripts/promote_lock.py``), so the lock always describes what was deployed. Writes are atomic.
- Without a lock (a first deploy) nothing is compared; ``hpctl preflight`` compares the same create-only
  properties with the deployed stacks' templates when credentials are at hand.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from infra.config import AppConfig
from infra.errors import ConfigError
from infra.guards.create_only import (
    GROUP_VOLUME_KEY,
    HYPERPOD_GROUP_CREATE_ONLY,
    RESOURCE_TYPES,
    create_only_paths,
    group_volume_key,
    lookup,
    refused_group_fields,
    refused_version_change,
)

LOCK_VERSION = 2
LOCK_DIR = Path("config") / "locks"
CANDIDATE_NAME = "replacement-lock.json"
# The stateful resources the guard starts from; what their create-only properties reference is guarded too.
PROTECTED_TYPES = ("AWS::SageMaker::Cluster", "AWS::EKS::Cluster", "AWS::FSx::FileSystem")
# The Helm release of the HyperpodNodeClass and NodePool of each autoscaled group
# (infra/constructs/hyperpod/autoscaling.py); its values name the groups Karpenter scales, which the lock records
# with the cluster.
NODE_POOLS_RELEASE_NAME = "hyperpod-karpenter-node-pools"
_SUB_REFERENCE = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")
_SHOWN = 80  # characters of a value shown in a message

Templates = dict[str, dict[str, Any]]


def lock_path(lock_dir: Path, project: str) -> Path:
    return Path(lock_dir) / f"{project}.lock.json"


def _references(value: Any) -> Iterator[tuple[str, str]]:
    """('resource', logical ID) and ('export', name) for every reference inside a property value."""
    if isinstance(value, dict):
        if set(value) == {"Ref"} and isinstance(value["Ref"], str):
            yield "resource", value["Ref"]
            return
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            name = target[0] if isinstance(target, list) else str(target).split(".")[0]
            yield "resource", str(name)
            return
        if set(value) == {"Fn::ImportValue"} and isinstance(value["Fn::ImportValue"], str):
            yield "export", value["Fn::ImportValue"]
            return
        if set(value) == {"Fn::Sub"}:
            text = value["Fn::Sub"][0] if isinstance(value["Fn::Sub"], list) else value["Fn::Sub"]
            for name in _SUB_REFERENCE.findall(str(text)):
                yield "resource", name
        for child in value.values():
            yield from _references(child)
    elif isinstance(value, list):
        for child in value:
            yield from _references(child)


def imported_exports(value: Any) -> set[str]:
    """The export names a template fragment (a resource, a template's Resources) reads with ``Fn::ImportValue``."""
    return {name for kind, name in _references(value) if kind == "export"}


def _create_only_values(resource: dict[str, Any]) -> dict[str, Any]:
    properties = resource.get("Properties") or {}
    values = {"/".join(path): lookup(properties, path) for path in create_only_paths(resource["Type"])}
    return {path: value for path, value in values.items() if value is not None}


def _groups(resource: dict[str, Any]) -> dict[str, dict[str, Any]]:
    groups = (resource.get("Properties") or {}).get("InstanceGroups") or []
    return {
        g["InstanceGroupName"]: {
            **{f: g.get(f) for f in HYPERPOD_GROUP_CREATE_ONLY if g.get(f) is not None},
            **({GROUP_VOLUME_KEY: group_volume_key(g)} if group_volume_key(g) is not None else {}),
            "InstanceCount": g.get("InstanceCount"),
        }
        for g in groups
        if isinstance(g, dict) and isinstance(g.get("InstanceGroupName"), str)
    }


def _autoscaled_groups(templates: Templates) -> list[str]:
    """The groups the node pools release gives a NodeClass and NodePool (its ``instanceGroups`` value)."""
    for template in templates.values():
        for resource in (template.get("Resources") or {}).values():
            properties = resource.get("Properties") or {}
            if resource.get("Type") == "Custom::HyperPodHelmRelease" and \
                    properties.get("ReleaseName") == NODE_POOLS_RELEASE_NAME:
                values = properties.get("Values")
                try:
                    parsed = json.loads(values) if isinstance(values, str) else values
                except ValueError:
                    parsed = None
                groups = parsed.get("instanceGroups") if isinstance(parsed, dict) else None
                if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
                    # The guard would lose track of the groups Karpenter scales: never guess.
                    raise ConfigError("replacement lock", str(values)[:80],
                                      f"cannot read the instance groups of the {NODE_POOLS_RELEASE_NAME} release")
                return sorted(groups)
    return []


def snapshot(templates: Templates, project: str) -> dict[str, Any]:
    """The create-only state of synthesized (or deployed) templates, keyed ``<stack>/<logical ID>``.

    The HyperPod cluster's entry also has its instance groups and, when Karpenter scales some of them, its
    ``AutoScaling`` mode with those groups: what makes removing a group or turning autoscaling off unsafe. The EKS
    cluster's entry has its Kubernetes ``Version``, which EKS moves one minor version up at a time.
    """
    exports: dict[str, tuple[str, Any]] = {}
    for stack, template in templates.items():
        for output in (template.get("Outputs") or {}).values():
            name = (output.get("Export") or {}).get("Name")
            if isinstance(name, str):
                exports[name] = (stack, output.get("Value"))
    recorded: dict[str, Any] = {}
    pending = [
        (stack, logical_id)
        for stack, template in templates.items()
        for logical_id, resource in (template.get("Resources") or {}).items()
        if resource.get("Type") in PROTECTED_TYPES
    ]
    while pending:
        stack, logical_id = pending.pop()
        key = f"{stack}/{logical_id}"
        resource = (templates[stack].get("Resources") or {}).get(logical_id)
        if key in recorded or resource is None or resource.get("Type") not in RESOURCE_TYPES:
            continue
        entry: dict[str, Any] = {"Type": resource["Type"], "CreateOnly": _create_only_values(resource),
                                 "Retained": resource.get("DeletionPolicy") == "Retain"}
        followed: list[Any] = list(entry["CreateOnly"].values())
        version = (resource.get("Properties") or {}).get("Version")
        if resource["Type"] == "AWS::EKS::Cluster" and isinstance(version, str):
            entry["Version"] = version  # what version_refusals compares
        if resource["Type"] == "AWS::SageMaker::Cluster":
            entry["InstanceGroups"] = _groups(resource)
            followed += list(entry["InstanceGroups"].values())
            autoscaling = (resource.get("Properties") or {}).get("AutoScaling")
            if isinstance(autoscaling, dict):
                entry["AutoScaling"] = {"Mode": autoscaling.get("Mode"), "Groups": _autoscaled_groups(templates)}
        recorded[key] = entry
        queue = [(stack, value) for value in followed]
        while queue:
            where, value = queue.pop()
            for kind, name in _references(value):
                if kind == "resource":
                    pending.append((where, name))
                elif name in exports:
                    queue.append(exports[name])
    return {"version": LOCK_VERSION, "project": project, "resources": dict(sorted(recorded.items()))}


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _volume_key(value: Any) -> str:
    return _show(value) if value is not None else "AWS's own key"


def replacement_reasons(locked: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What in ``current`` would replace (or delete) a resource recorded in ``locked``; empty when nothing."""
    reasons = []
    now = current.get("resources", {})
    for key, before in locked.get("resources", {}).items():
        after = now.get(key)
        if after is None:
            if before["Type"] not in PROTECTED_TYPES:
                reasons.append(f"{key} ({before['Type']}) is no longer what the protected resources point at")
            elif not before.get("Retained"):
                reasons.append(f"{key} ({before['Type']}) disappears: CloudFormation deletes it")
            continue
        for path in sorted(set(before["CreateOnly"]) | set(after["CreateOnly"])):
            was, will = before["CreateOnly"].get(path), after["CreateOnly"].get(path)
            if was != will:
                reasons.append(f"{key} ({before['Type']}) {path} changes from {_show(was)} to {_show(will)}")
    return reasons


def version_refusals(locked: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, str]]:
    """Kubernetes version changes EKS does not make to the deployed EKS cluster, as (new version, reason)
    (infra.guards.create_only.refused_version_change). A lock written before the version was recorded has none, and a
    cluster whose create-only properties change is a new cluster: neither is compared."""
    refusals = []
    now = current.get("resources", {})
    for key, before in locked.get("resources", {}).items():
        after = now.get(key)
        if after is None or before.get("Type") != "AWS::EKS::Cluster" or before["CreateOnly"] != after["CreateOnly"]:
            continue
        reason = refused_version_change(before.get("Version"), after.get("Version"))
        if reason is not None:
            refusals.append((after["Version"], reason))
    return refusals


def group_refusals(locked: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Changes to a deployed instance group that HyperPod does not make (``infra.guards.create_only``: the fields of
    HYPERPOD_GROUP_CREATE_ONLY and the group's volume key), on a cluster that stays: CloudFormation updates the
    cluster in place and HyperPod's UpdateCluster refuses them, so the deploy fails. A cluster whose own
    create-only properties change is replaced with new groups: replacement_reasons reports that instead."""
    refusals = []
    now = current.get("resources", {})
    for key, before in locked.get("resources", {}).items():
        after = now.get(key)
        if after is None or before["CreateOnly"] != after["CreateOnly"]:
            continue
        groups_after = after.get("InstanceGroups", {})
        for name, group in before.get("InstanceGroups", {}).items():
            if name not in groups_after:
                continue
            for field in refused_group_fields(group, groups_after[name]):
                refusals.append(
                    f"hyperpod.instance_groups[{name}] {field} changes from {_show(group.get(field))} "
                    f"to {_show(groups_after[name].get(field))}"
                )
            # A lock written before the key was recorded has none: the group was created with AWS's key.
            was, will = group.get(GROUP_VOLUME_KEY), groups_after[name].get(GROUP_VOLUME_KEY)
            if was != will:
                refusals.append(
                    f"hyperpod.instance_groups[{name}] the KMS key of its EBS volumes changes from {_volume_key(was)} "
                    f"to {_volume_key(will)} (set the group's volume_encryption to "
                    f"{'customer_managed' if was else 'aws_managed'} to keep it)"
                )
    return refusals


def removed_groups(locked: dict[str, Any], current: dict[str, Any]) -> dict[str, int]:
    """Instance groups recorded with nodes that ``current`` no longer has (removed or renamed): name -> count."""
    gone: dict[str, int] = {}
    now = current.get("resources", {})
    for key, before in locked.get("resources", {}).items():
        after = now.get(key, {}).get("InstanceGroups", {})
        for name, group in before.get("InstanceGroups", {}).items():
            if name not in after and (group.get("InstanceCount") or 0) > 0:
                gone[name] = group["InstanceCount"]
    return gone


def autoscaling_refusals(
    locked: dict[str, Any], current: dict[str, Any], acknowledged_disable: bool,
) -> list[tuple[str, str]]:
    """(key, reason) for what in ``current`` would take groups or the cluster away from Karpenter unsafely.

    - A group Karpenter scaled is removed from the cluster in the same deploy as its NodeClass: AWS recommends
      "removing it from your NodeClass before deleting it from your HyperPod cluster" (else the NodeClass is
      not Ready), https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html.
      Here the release that holds the NodeClass is updated after the cluster, so it takes two deploys.
    - Autoscaling is turned off without ``acknowledge_disable``: one deploy would drop the cluster setting, the
      node pools and the role Karpenter removes nodes through, in an order AWS does not document.
    """
    refusals = []
    now = current.get("resources", {})
    for key, before in locked.get("resources", {}).items():
        scaled = before.get("AutoScaling") or {}
        if scaled.get("Mode") != "Enable":
            continue
        after = now.get(key, {})
        turning_off = (after.get("AutoScaling") or {}).get("Mode") != "Enable"
        if turning_off and acknowledged_disable:
            continue  # disabled on the cluster already: Karpenter no longer uses the NodeClasses
        for name in scaled.get("Groups", []):
            if name not in after.get("InstanceGroups", {}):
                refusals.append((
                    f"hyperpod.instance_groups[{name}]",
                    "removed in the same deploy as its NodeClass and NodePool: first take it out of "
                    "hyperpod.autoscaling.instance_groups (give it an instance_count) and deploy, then remove "
                    "the group"))
        if turning_off:
            refusals.append((
                "hyperpod.autoscaling.enabled",
                "turning autoscaling off removes the cluster's AutoScaling setting, the node pools and the role "
                "Karpenter scales down through in one deploy. Disable it on the cluster first (aws sagemaker "
                "update-cluster --cluster-name <name> --auto-scaling Mode=Disable,AutoScalerType=Karpenter), then "
                "set hyperpod.autoscaling.acknowledge_disable: true"))
    return refusals


def read_lock(path: Path) -> dict[str, Any] | None:
    """The lock at ``path``, None when there is none; a lock of another format is refused, never ignored."""
    if not path.is_file():
        return None
    try:
        locked = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ConfigError("replacement lock", str(path), f"not valid JSON ({error}); restore it from git") from None
    if not isinstance(locked, dict) or locked.get("version") != LOCK_VERSION:
        raise ConfigError(
            "replacement lock", str(path),
            f"not a version {LOCK_VERSION} lock; rebuild it from the deployed stacks (docs/safety.md) or restore it",
        )
    return locked


def guard_replacement(config: AppConfig, templates: Templates, lock_dir: Path) -> dict[str, Any]:
    """Refuse templates that change what HyperPod keeps in a deployed group (group_refusals, whatever the config
    says), move the deployed EKS cluster's Kubernetes version in a way EKS does not (version_refusals), replace a
    protected resource (unless allowed) or drop a group with nodes; return the snapshot.

    Compares with the deployed state recorded in ``<lock_dir>/<project>.lock.json``; writes nothing.
    """
    current = snapshot(templates, config.project)
    path = lock_path(lock_dir, config.project)
    locked = read_lock(path)
    if locked is None:
        return current
    fixed = group_refusals(locked, current)
    if fixed:
        raise ConfigError(
            "hyperpod.instance_groups", None,
            "HyperPod does not change these on an existing instance group, so the deploy would fail: "
            + "; ".join(fixed)
            + f". Add a new instance group with the new values instead (compared with {path})",
        )
    versions = version_refusals(locked, current)
    if versions:
        (version, reason), *_ = versions  # one EKS cluster per app
        raise ConfigError(
            "eks.version", version,
            f"{reason} (compared with {path}; if the cluster's version was changed outside CloudFormation, by an "
            "upgrade, a rollback or EKS at the end of support, write the version it runs as the EKS cluster's "
            "Version there)",
        )
    reasons = replacement_reasons(locked, current)
    if reasons and not config.hyperpod.allow_cluster_replacement:
        raise ConfigError(
            "hyperpod", None,
            "this change would REPLACE deployed resources (a new HyperPod cluster terminates every node): "
            + "; ".join(reasons)
            + f". Set hyperpod.allow_cluster_replacement: true to accept the replacement (compared with {path})",
        )
    refusals = autoscaling_refusals(locked, current, config.hyperpod.autoscaling.acknowledge_disable)
    if refusals:
        (key, reason), *others = refusals
        also = "".join(f"; also {other_key}: {other}" for other_key, other in others)
        raise ConfigError(key, None, f"{reason}{also} (compared with {path})")
    acknowledged = set(config.hyperpod.acknowledge_group_removal)
    unacknowledged = {n: c for n, c in removed_groups(locked, current).items() if n not in acknowledged}
    if unacknowledged:
        listed = ", ".join(f"{name} ({count} nodes)" for name, count in sorted(unacknowledged.items()))
        raise ConfigError(
            "hyperpod.instance_groups", None,
            f"removing or renaming a group terminates its nodes: {listed}. List the group names in "
            f"hyperpod.acknowledge_group_removal to confirm (compared with {path})",
        )
    return current


def write_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write JSON to a temporary file beside ``path``, flush it to disk, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def promote(cdk_out: Path, lock_dir: Path) -> Path:
    """After a successful deploy: make the candidate that synth left in ``cdk_out`` the project's lock."""
    candidate = Path(cdk_out) / CANDIDATE_NAME
    if not candidate.is_file():
        raise ConfigError("replacement lock", str(candidate), "no candidate: run cdk synth or cdk deploy first")
    data = json.loads(candidate.read_text(encoding="utf-8"))
    path = lock_path(lock_dir, data["project"])
    write_atomically(path, data)
    return path
