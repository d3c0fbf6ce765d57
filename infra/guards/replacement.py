"""The replacement engine: what a deploy would do to stateful resources, from two sets of templates.

CloudFormation replaces a resource when one of its create-only properties changes; for the HyperPod cluster
that terminates every node and every running job, for FSx it is a new, empty file system. ``snapshot`` records,
from a set of templates, the create-only properties (``infra.guards.create_only``) of the HyperPod and EKS
clusters and the FSx file system, and of every resource those properties point at, through ``Ref``,
``Fn::GetAtt``, ``Fn::Sub`` and cross-stack exports: subnets, security groups, the VPC, the roles. It also
records each instance group's create-only fields, the KMS key of its EBS volumes and its instance count, the
groups Karpenter scales and the EKS cluster's Kubernetes version. ``findings`` compares two snapshots, the
deployed one and the new one, and returns every finding with a severity (REFUSE or WARN) and a reason that
names the resource (``<stack>/<logical ID> (<type>)``) and the field.

Two callers, one engine:

- Every synth (``guard_replacement``, from app.py) compares its templates with the committed lock of the last
  deployed state, ``config/locks/<project>.lock.json`` (a snapshot, keyed by the project, so moving or renaming
  the config file changes nothing), and stops at the first rule with a refusal: a change HyperPod does not make
  to a deployed instance group (its type, execution role, threads per core, subnets or volume key: the deploy
  would fail) whatever the config says; a Kubernetes version step EKS does not make; an acknowledgement left
  over (recorded in the lock as used by its deploy) or matching nothing; a replacement unless its resource and
  field are listed in ``acknowledge_replacement`` (with ``deletes_data`` when data goes with it); a group
  Karpenter scales removed with its NodeClass, or autoscaling turned off unacknowledged; the removal or renaming
  of an instance group that had nodes unless the group is listed in ``hyperpod.acknowledge_group_removal``; an
  FSx growth with another change of its stack; an installed EKS add-on moved to another logical ID (the lock
  records each add-on's name and logical ID). What it accepts it prints as a warning. A synth writes nothing
  to the lock: it leaves its candidate in ``cdk.out/replacement-lock.json`` (with the acknowledgements it
  accepted), and ``make deploy`` promotes it only after ``cdk deploy`` succeeded (``scripts/promote_lock.py``),
  so the lock always describes what was deployed. Writes are atomic. Without a lock (a first deploy) nothing
  is compared.
- ``hpctl preflight`` snapshots the templates CloudFormation holds for every deployed stack of the project and
  the synthesized ones in cdk.out, and reports the same findings with the same reasons, plus the one rule that
  needs a field the lock does not record (the EKS cluster's subnets, ``eks_subnet_findings``: a warning).

``hpctl drift`` compares the live cluster with the config rather than templates, with the same per-group and
per-version rules (``infra.guards.create_only``: ``refused_group_fields``, ``refused_version_change``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infra.config import REMOVED_FIELD, AppConfig, ReplacementAcknowledgement
from infra.errors import ConfigError
from infra.facts.names import NODE_POOLS_RELEASE_NAME
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
    edges: dict[str, set[str]] = {}
    pending: list[tuple[str, str, str | None]] = [
        (stack, logical_id, None)
        for stack, template in templates.items()
        for logical_id, resource in (template.get("Resources") or {}).items()
        if resource.get("Type") in PROTECTED_TYPES
    ]
    while pending:
        stack, logical_id, referrer = pending.pop()
        key = f"{stack}/{logical_id}"
        resource = (templates[stack].get("Resources") or {}).get(logical_id)
        if resource is None or resource.get("Type") not in RESOURCE_TYPES:
            continue
        if referrer is not None:
            edges.setdefault(referrer, set()).add(key)
        if key in recorded:
            continue
        entry: dict[str, Any] = {"Type": resource["Type"], "CreateOnly": _create_only_values(resource),
                                 "Retained": resource.get("DeletionPolicy") == "Retain",
                                 "ReplaceRetained": resource.get("UpdateReplacePolicy") == "Retain"}
        followed: list[Any] = list(entry["CreateOnly"].values())
        version = (resource.get("Properties") or {}).get("Version")
        if resource["Type"] == "AWS::EKS::Cluster" and isinstance(version, str):
            entry["Version"] = version  # what version_refusals compares
        capacity = (resource.get("Properties") or {}).get("StorageCapacity")
        if resource["Type"] == "AWS::FSx::FileSystem" and isinstance(capacity, int):
            entry["StorageCapacity"] = capacity  # what _growths compares
            entry["StackDigest"] = _stack_digest(templates[stack], logical_id)
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
                    pending.append((where, name, key))
                elif name in exports:
                    queue.append(exports[name])
    for key, entry in recorded.items():
        protects = sorted(root for root, root_entry in recorded.items()
                          if root_entry["Type"] in PROTECTED_TYPES and root != key and key in _reach(edges, root))
        if protects:
            entry["Protects"] = protects  # the protected resources replaced with it (their fields point at it)
    snap: dict[str, Any] = {"version": LOCK_VERSION, "project": project, "resources": dict(sorted(recorded.items()))}
    addons = _addon_keys(templates)
    if addons:
        snap["addons"] = addons
    return snap


def _addon_keys(templates: Templates) -> dict[str, str]:
    """EKS add-on name -> ``<stack>/<logical ID>`` of the AWS::EKS::Addon that installs it (what ADDON_MOVE
    compares). A lock written before this was recorded has none, and nothing is compared for it."""
    keys = {}
    for stack, template in templates.items():
        for logical_id, resource in (template.get("Resources") or {}).items():
            name = (resource.get("Properties") or {}).get("AddonName")
            if resource.get("Type") == "AWS::EKS::Addon" and isinstance(name, str):
                keys[name] = f"{stack}/{logical_id}"
    return dict(sorted(keys.items()))


def _reach(edges: dict[str, set[str]], start: str) -> set[str]:
    """Every resource the create-only properties of ``start`` lead to, directly or through others."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        for target in edges.get(stack.pop(), ()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def _stack_digest(template: dict[str, Any], file_system: str) -> str:
    """A digest of everything in the file system's stack that CloudFormation would update, but the file system's
    StorageCapacity: when it differs between two snapshots, a growth is not the only change of its deploy.
    Metadata and the CDK's own AWS::CDK::Metadata resource are left out: they update nothing that can fail."""
    resources = {}
    for logical_id, resource in (template.get("Resources") or {}).items():
        if resource.get("Type") == "AWS::CDK::Metadata":
            continue
        kept = {name: value for name, value in resource.items() if name != "Metadata"}
        if logical_id == file_system:
            kept["Properties"] = {name: value for name, value in (kept.get("Properties") or {}).items()
                                  if name != "StorageCapacity"}
        resources[logical_id] = kept
    return hashlib.sha256(json.dumps(resources, sort_keys=True, default=str).encode()).hexdigest()


def _show(value: Any) -> str:
    """A value in at most _SHOWN characters; a longer one keeps both ends, where two references differ (an import's
    export name ends with the hash of the logical ID it exports)."""
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    if len(text) <= _SHOWN:
        return text
    keep = (_SHOWN - 3) // 2
    return text[:keep] + "..." + text[-keep:]


def _volume_key(value: Any) -> str:
    return _show(value) if value is not None else "AWS's own key"


# --- The findings of two snapshots -------------------------------------------------------------------------

REFUSE, WARN = "refuse", "warn"
# The rules, in the order synth's guard reports them (it stops at the first rule with a refusal).
GROUP, VERSION, ACKNOWLEDGEMENT, REPLACEMENT, AUTOSCALING, REMOVAL, FSX_GROWTH, ADDON_MOVE, EKS_SUBNETS = (
    "group", "version", "acknowledgement", "replacement", "autoscaling", "removal", "fsx-growth", "addon-move",
    "eks-subnets")
ACKNOWLEDGE_KEY = "acknowledge_replacement"


@dataclass(frozen=True)
class Finding:
    """One thing deploying the new templates would do to a deployed resource."""

    rule: str  # one of the rules above
    severity: str  # REFUSE: the synth stops and preflight fails; WARN: both report it and go on
    resource: str  # ``<stack>/<logical ID>`` of the deployed resource
    key: str  # the config key a refusal is reported under
    reason: str  # names the resource (``<stack>/<logical ID> (<type>)``) and the field, with both values
    value: Any = None  # what the ConfigError shows: the new Kubernetes version; a removed group's name
    field: str | None = None  # REPLACEMENT: the create-only field that changes, or REMOVED_FIELD
    deletes_data: bool = False  # REPLACEMENT: the replacement deletes a data-bearing resource's data

    @property
    def stack(self) -> str:
        return self.resource.split("/", 1)[0]


def _pairs(locked: dict[str, Any], current: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(key, deployed entry, new entry or None) for every resource of the deployed snapshot."""
    now = current.get("resources", {})
    for key, before in locked.get("resources", {}).items():
        yield key, before, now.get(key)


def _named(key: str, entry: dict[str, Any]) -> str:
    return f"{key} ({entry['Type']})"


# What replacing each protected type means: (what it is, what a new one costs). docs/safety.md ("The replacement
# guard") states each.
_PROTECTED_COST = {
    "AWS::SageMaker::Cluster": ("HyperPod cluster", "every node is terminated with the jobs it runs"),
    "AWS::EKS::Cluster": ("EKS cluster", "every Kubernetes object on it is lost: workloads, secrets, what the charts "
                                         "and add-ons installed"),
    "AWS::FSx::FileSystem": ("file system", "it starts empty"),
}
# The data a replaced resource of these types takes with it unless CloudFormation keeps the old one
# (UpdateReplacePolicy Retain): "By default, CloudFormation then deletes the old resource"
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-updatereplacepolicy.html); a file
# system's automatic backups go with it (docs/safety.md, "What cdk destroy removes").
DATA_BEARING = {"AWS::FSx::FileSystem": "every file on it and its automatic backups"}


def _kept_on_replacement(entry: dict[str, Any]) -> bool:
    """Whether CloudFormation keeps the old resource when it replaces it. A lock written before
    UpdateReplacePolicy was recorded has only DeletionPolicy, which the app sets to the same value
    (aws-cdk-lib's ``apply_removal_policy`` sets both)."""
    return bool(entry.get("ReplaceRetained", entry.get("Retained")))


def _data_lost(key: str, entry: dict[str, Any], current: dict[str, Any] | None,
               resources: dict[str, Any]) -> list[str]:
    """What data replacing ``key`` deletes: for itself and each protected resource replaced with it, a data-bearing
    resource that the deployed or the new template does not keep on replacement."""
    lost = []
    for name in [key, *entry.get("Protects", [])]:
        deployed = resources.get(name) if name != key else entry
        if deployed is None or deployed["Type"] not in DATA_BEARING:
            continue
        # Which template's policy CloudFormation applies is not documented: kept only when both keep it.
        new = (current or {}).get(name)
        if _kept_on_replacement(deployed) and (new is None or _kept_on_replacement(new)):
            continue
        lost.append(f"{name} is deleted with {DATA_BEARING[deployed['Type']]}")
    return lost


def _cost(entry: dict[str, Any]) -> str:
    noun, cost = _PROTECTED_COST.get(entry["Type"], (entry["Type"], ""))
    return f"a new {noun}" + (f" ({cost})" if cost else "")


def _destroys(key: str, entry: dict[str, Any], resources: dict[str, Any], removed: bool) -> str:
    """What replacing (or, ``removed``, deleting) the deployed resource ``key`` destroys, with every protected
    resource replaced with it."""
    also = [f"{name}, {_cost(resources[name])}" for name in entry.get("Protects", []) if name in resources]
    if removed and entry["Type"] not in PROTECTED_TYPES:
        return f"what pointed at it is replaced: {'; '.join(also)}" if also else "what pointed at it changes"
    own = "CloudFormation deletes it" if removed else _cost(entry)
    return own + (f"; so replaced too: {'; '.join(also)}" if also else "")


_TO_ACCEPT = ". To accept, list "


def _acknowledgement(key: str, field: str, deletes_data: bool) -> str:
    extra = ", deletes_data: true" if deletes_data else ""
    return f"{{resource: {key}, field: {field}{extra}}}"


def _replacements(locked: dict[str, Any], current: dict[str, Any]) -> list[Finding]:
    found = []
    resources, now = locked.get("resources", {}), current.get("resources", {})
    for key, before, after in _pairs(locked, current):
        lost = _data_lost(key, before, now, resources)
        if after is None:
            if before["Type"] not in PROTECTED_TYPES:
                change = f"{_named(key, before)} is no longer what the protected resources point at"
            elif not before.get("Retained"):
                change = f"{_named(key, before)} disappears"
                lost = [f"{key} is deleted with {DATA_BEARING[before['Type']]}"] if before["Type"] in DATA_BEARING \
                    else []
            else:
                continue
            changes = [(REMOVED_FIELD, change)]
        else:
            changes = []
            for path in sorted(set(before["CreateOnly"]) | set(after["CreateOnly"])):
                was, will = before["CreateOnly"].get(path), after["CreateOnly"].get(path)
                if was != will:
                    changes.append((path, f"{_named(key, before)} {path} changes from {_show(was)} to {_show(will)}"))
        for field, change in changes:
            destroys = _destroys(key, before, resources, after is None) + "".join(f"; {loss}" for loss in lost)
            reason = f"{change}: {destroys}{_TO_ACCEPT}{_acknowledgement(key, field, bool(lost))} in {ACKNOWLEDGE_KEY}"
            found.append(Finding(REPLACEMENT, REFUSE, key, ACKNOWLEDGE_KEY, reason, field=field,
                                 deletes_data=bool(lost)))
    return found


def replacement_reasons(locked: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What in ``current`` would replace (or delete) a resource recorded in ``locked``; empty when nothing."""
    return [finding.reason for finding in _replacements(locked, current)]


def _acknowledged(
    replacements: list[Finding], acknowledgements: list[ReplacementAcknowledgement], locked: dict[str, Any],
) -> list[Finding]:
    """The replacements with the config's acknowledgements applied, then a refusal for each acknowledgement that is
    left over: recorded in the lock as acknowledged by the deploy it describes, or matching no replacement."""
    given = {a.names: a for a in acknowledgements}
    found = []
    for finding in replacements:
        names = (finding.resource, finding.field or "")
        acknowledgement = given.get(names)
        if acknowledgement is None:
            found.append(finding)
        elif finding.deletes_data and not acknowledgement.deletes_data:
            found.append(replace(finding, reason=finding.reason.partition(_TO_ACCEPT)[0] + ". It deletes data, which "
                                 f"needs its own acknowledgement: add deletes_data: true to its entry in "
                                 f"{ACKNOWLEDGE_KEY}"))
        else:
            found.append(replace(finding, severity=WARN, reason=finding.reason.partition(_TO_ACCEPT)[0]
                                 + f" (acknowledged in {ACKNOWLEDGE_KEY})"))
    deployed = {(a.get("resource"), a.get("field")) for a in _recorded(locked)}
    matched = {(f.resource, f.field) for f in replacements}
    for i, acknowledgement in enumerate(acknowledgements):
        where = f"{ACKNOWLEDGE_KEY}.{i}"
        shown = "/".join(acknowledgement.names)
        if acknowledgement.names in deployed:
            found.append(Finding(ACKNOWLEDGEMENT, REFUSE, acknowledgement.resource, where,
                                 f"{shown} was acknowledged for the deploy the lock records, which made that "
                                 "replacement: remove the entry (to replace the same field again, deploy once "
                                 "without it, then acknowledge anew)", value=shown))
        elif acknowledgement.names not in matched:
            found.append(Finding(ACKNOWLEDGEMENT, REFUSE, acknowledgement.resource, where,
                                 f"{shown} acknowledges no replacement this change makes: remove the entry, or name "
                                 "the resource and field as the refusal writes them", value=shown))
    return found


def accepted_acknowledgements(found: list[Finding]) -> list[dict[str, Any]]:
    """The acknowledgements a synth's findings accepted, as the lock records them once that synth is deployed."""
    return [{"resource": f.resource, "field": f.field, "deletes_data": f.deletes_data}
            for f in found if f.rule == REPLACEMENT and f.severity == WARN]


def _growths(locked: dict[str, Any], current: dict[str, Any]) -> list[Finding]:
    """A file system grown in the same deploy as any other change of its stack (storage.fsx_lustre.capacity_gib).

    FSx only grows: for a PERSISTENT_2 SSD file system UpdateFileSystem's StorageCapacity "must be greater than the
    current storage capacity" (botocore's fsx 2018-03-01 model, UpdateFileSystemRequest; the "Increase only"
    consideration of https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-storage-capacity.html), so a
    rollback that would shrink it fails. Any other update of the stack may fail after the growth and roll the stack
    back into that shrink (UPDATE_ROLLBACK_FAILED). The growth cannot be ordered after the rest instead: the data
    repository association and the storage chart's release read the file system's ID, so CloudFormation updates
    the file system before them. A lock written before the capacity was recorded has none, and a replaced file
    system is a new one: neither is compared."""
    found = []
    for key, before, after in _pairs(locked, current):
        if after is None or before.get("Type") != "AWS::FSx::FileSystem" or before["CreateOnly"] != after["CreateOnly"]:
            continue
        was, will = before.get("StorageCapacity"), after.get("StorageCapacity")
        if isinstance(was, int) and isinstance(will, int) and will > was and \
                before.get("StackDigest") != after.get("StackDigest"):
            found.append(Finding(
                FSX_GROWTH, REFUSE, key, "storage.fsx_lustre.capacity_gib",
                f"{_named(key, before)} StorageCapacity grows from {was} to {will} in the same deploy as other "
                f"changes to stack {key.split('/', 1)[0]}: a failure after the growth would roll it back into a "
                f"shrink, which FSx refuses (UPDATE_ROLLBACK_FAILED). Deploy the other changes with capacity_gib "
                f"{was} first, then the growth alone", value=will))
    return found


def _versions(locked: dict[str, Any], current: dict[str, Any]) -> list[Finding]:
    found = []
    for key, before, after in _pairs(locked, current):
        if after is None or before.get("Type") != "AWS::EKS::Cluster" or before["CreateOnly"] != after["CreateOnly"]:
            continue
        was, will = before.get("Version"), after.get("Version")
        step = refused_version_change(was, will)
        if step is not None:
            reason = f"{_named(key, before)} Version changes from {_show(was)} to {_show(will)}: {step}"
            found.append(Finding(VERSION, REFUSE, key, "eks.version", reason, value=will))
    return found


def version_refusals(locked: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, str]]:
    """Kubernetes version changes EKS does not make to the deployed EKS cluster, as (new version, reason)
    (infra.guards.create_only.refused_version_change). A lock written before the version was recorded has none,
    and a cluster whose create-only properties change is a new cluster: neither is compared."""
    return [(finding.value, finding.reason) for finding in _versions(locked, current)]


def _group_changes(locked: dict[str, Any], current: dict[str, Any]) -> list[Finding]:
    found = []
    for key, before, after in _pairs(locked, current):
        if after is None or before["CreateOnly"] != after["CreateOnly"]:
            continue
        groups_after = after.get("InstanceGroups", {})
        for name, group in before.get("InstanceGroups", {}).items():
            if name not in groups_after:
                continue
            where = f"{_named(key, before)} hyperpod.instance_groups[{name}]"
            reasons = [
                f"{where} {field} changes from {_show(group.get(field))} to {_show(groups_after[name].get(field))}"
                for field in refused_group_fields(group, groups_after[name])
            ]
            # A lock written before the key was recorded has none: the group was created with AWS's key.
            was, will = group.get(GROUP_VOLUME_KEY), groups_after[name].get(GROUP_VOLUME_KEY)
            if was != will:
                reasons.append(
                    f"{where} the KMS key of its EBS volumes changes from {_volume_key(was)} to {_volume_key(will)} "
                    f"(set the group's volume_encryption to {'customer_managed' if was else 'aws_managed'} to keep it)"
                )
            found += [Finding(GROUP, REFUSE, key, "hyperpod.instance_groups", reason) for reason in reasons]
    return found


def group_refusals(locked: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Changes to a deployed instance group that HyperPod does not make (``infra.guards.create_only``: the fields of
    HYPERPOD_GROUP_CREATE_ONLY and the group's volume key), on a cluster that stays: CloudFormation updates the
    cluster in place and HyperPod's UpdateCluster refuses them, so the deploy fails. A cluster whose own
    create-only properties change is replaced with new groups: replacement_reasons reports that instead."""
    return [finding.reason for finding in _group_changes(locked, current)]


def _removed(locked: dict[str, Any], current: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str, int]]:
    """(key, deployed entry, group name, node count) of each group recorded with nodes that ``current`` lacks."""
    for key, before, after in _pairs(locked, current):
        kept = (after or {}).get("InstanceGroups", {})
        for name, group in before.get("InstanceGroups", {}).items():
            if name not in kept and (group.get("InstanceCount") or 0) > 0:
                yield key, before, name, group["InstanceCount"]


def removed_groups(locked: dict[str, Any], current: dict[str, Any]) -> dict[str, int]:
    """Instance groups recorded with nodes that ``current`` no longer has (removed or renamed): name -> count."""
    return {name: count for _, _, name, count in _removed(locked, current)}


def group_removal(name: str, nodes: int, acknowledged: Sequence[str]) -> tuple[str, str]:
    """What the guard does with removing (or renaming) instance group ``name`` that has ``nodes`` nodes, and why:
    HyperPod terminates them, so it is refused unless the config lists the group in
    ``hyperpod.acknowledge_group_removal`` (``acknowledged``), then a warning. Synth's guard and `hpctl drift` (on
    the deployed cluster's own counts) both ask this."""
    if name in acknowledged:
        return WARN, "its nodes are terminated; listed in hyperpod.acknowledge_group_removal"
    return REFUSE, (f"its {nodes} node(s) would be terminated: synth refuses it unless "
                    "hyperpod.acknowledge_group_removal lists the group")


def _removals(locked: dict[str, Any], current: dict[str, Any], acknowledged: Sequence[str]) -> list[Finding]:
    found = []
    for key, before, name, count in _removed(locked, current):
        severity, why = group_removal(name, count, acknowledged)
        reason = f"{_named(key, before)} hyperpod.instance_groups[{name}] with {count} nodes is removed or renamed"
        found.append(Finding(REMOVAL, severity, key, "hyperpod.instance_groups",
                             f"{reason} ({why})" if severity == WARN else reason, value=name))
    return found


def _autoscaling(locked: dict[str, Any], current: dict[str, Any], acknowledged_disable: bool) -> list[Finding]:
    found = []
    for key, before, after in _pairs(locked, current):
        scaled = before.get("AutoScaling") or {}
        if scaled.get("Mode") != "Enable":
            continue
        after = after or {}
        mode = (after.get("AutoScaling") or {}).get("Mode")
        if mode != "Enable" and acknowledged_disable:
            continue  # disabled on the cluster already: Karpenter no longer uses the NodeClasses
        for name in scaled.get("Groups", []):
            if name not in after.get("InstanceGroups", {}):
                found.append(Finding(
                    AUTOSCALING, REFUSE, key, f"hyperpod.instance_groups[{name}]",
                    f"{_named(key, before)} hyperpod.instance_groups[{name}] is removed in the same deploy as its "
                    "NodeClass and NodePool: first take it out of hyperpod.autoscaling.instance_groups (give it an "
                    "instance_count) and deploy, then remove the group"))
        if mode != "Enable":
            found.append(Finding(
                AUTOSCALING, REFUSE, key, "hyperpod.autoscaling.enabled",
                f"{_named(key, before)} AutoScaling.Mode changes from 'Enable' to {_show(mode)}: turning autoscaling "
                "off removes the cluster's AutoScaling setting, the node pools and the role Karpenter scales down "
                "through in one deploy. Disable it on the cluster first (aws sagemaker update-cluster --cluster-name "
                "<name> --auto-scaling Mode=Disable,AutoScalerType=Karpenter), then set "
                "hyperpod.autoscaling.acknowledge_disable: true"))
    return found


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
    return [(finding.key, finding.reason) for finding in _autoscaling(locked, current, acknowledged_disable)]


# The EKS cluster's subnets are updated in place (not among the resource schema's createOnlyProperties), but "All
# subnets that you add must be in the same set of AZs as originally provided when you created the cluster"
# (https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html, "VPC requirements and considerations").
# The lock does not record them (they are not create-only), so only hpctl preflight, which holds the deployed
# templates, reports a change: a warning, since a change within the same AZs is allowed.
# Where the config decides which construct installs an add-on, the key that keeps it where it is.
_ADDON_OWNER_KEYS = {"cert-manager": ("addons.cert_manager_owner", {
    "TrainingOperatorCertManager": "training_operator", "InferenceOperatorCertManager": "inference_operator"})}


def _addon_moves(locked: dict[str, Any], current: dict[str, Any], config: AppConfig) -> list[Finding]:
    """A refusal for each installed EKS add-on whose AWS::EKS::Addon moves to another logical ID: CloudFormation
    creates the resource of the new ID before it deletes the old one (it deletes in the cleanup phase), and EKS
    refuses a second add-on of a name the cluster has (CreateAddon lists ResourceInUseException in botocore's EKS
    model; that a taken name raises it is not stated there), so the deploy fails and rolls back."""
    before, after = locked.get("addons") or {}, current.get("addons") or {}
    found = []
    for name, was in before.items():
        will = after.get(name)
        if will is None or will == was:
            continue
        key, hint = "addons", "keep the construct that installs it"
        if name in _ADDON_OWNER_KEYS:
            key, owners = _ADDON_OWNER_KEYS[name]
            logical_id = was.split("/", 1)[1]
            owner = next((o for prefix, o in owners.items() if logical_id.startswith(prefix)), None)
            if owner is not None and getattr(config.addons, owner).enabled:
                hint = f"set {key}: {owner} to keep it where it is"
            elif owner is not None:
                hint = (f"keep addons.{owner} on while the other operator uses the cert-manager it installed, or "
                        "turn both operators off in one deploy and on again in the next")
        found.append(Finding(
            ADDON_MOVE, REFUSE, was, key,
            f"EKS add-on {name} would move from {was} to {will}: CloudFormation creates the new resource before it "
            f"deletes the old one and EKS refuses a second add-on of one name, so the deploy would fail; {hint}"))
    return found


EKS_SUBNETS_PATH = ("ResourcesVpcConfig", "SubnetIds")


def eks_subnet_findings(deployed: Templates, templates: Templates) -> list[Finding]:
    """A warning for each deployed EKS cluster that stays (same create-only properties) whose subnets change."""
    found = []
    for stack, template in deployed.items():
        for logical_id, before in (template.get("Resources") or {}).items():
            after = ((templates.get(stack) or {}).get("Resources") or {}).get(logical_id)
            if before.get("Type") != "AWS::EKS::Cluster" or not isinstance(after, dict) or \
                    after.get("Type") != before["Type"] or _create_only_values(before) != _create_only_values(after):
                continue
            was = lookup(before.get("Properties") or {}, EKS_SUBNETS_PATH)
            will = lookup(after.get("Properties") or {}, EKS_SUBNETS_PATH)
            if was != will:
                key = f"{stack}/{logical_id}"
                found.append(Finding(
                    EKS_SUBNETS, WARN, key, "network",
                    f"{_named(key, before)} {'/'.join(EKS_SUBNETS_PATH)} changes from {_show(was)} to {_show(will)}: "
                    "EKS updates them in place only to subnets in the Availability Zones the cluster was created with"))
    return found


def _accepted(finding: Finding, why: str) -> Finding:
    return replace(finding, severity=WARN, reason=f"{finding.reason} ({why})")


def findings(
    locked: dict[str, Any], current: dict[str, Any], config: AppConfig,
    *, templates: tuple[Templates, Templates] | None = None,
) -> list[Finding]:
    """Every finding of deploying the state ``current`` over the deployed state ``locked`` (two ``snapshot``s), in
    the order of the rules (GROUP, VERSION, ACKNOWLEDGEMENT, REPLACEMENT, AUTOSCALING, REMOVAL, FSX_GROWTH,
    ADDON_MOVE, EKS_SUBNETS). Refused whatever the config says: group changes HyperPod does not make, Kubernetes
    version steps EKS does not make, left-over acknowledgements (``locked``'s ``acknowledged``, or matching
    nothing), groups taken from Karpenter unsafely, an FSx growth with another change of its stack, an installed
    EKS add-on moved to another logical ID. Refused unless the config
    accepts them, else warnings that say what accepted them: a replacement (its resource and field in
    ``acknowledge_replacement``, and ``deletes_data`` when data goes with it), a group with nodes removed
    (``hyperpod.acknowledge_group_removal``).

    ``templates``: the deployed and the new templates themselves, (deployed, new), when at hand (hpctl preflight
    reads them; a lock holds only the snapshot): adds the EKS subnet warnings (eks_subnet_findings).
    """
    hyperpod = config.hyperpod
    found = _group_changes(locked, current) + _versions(locked, current)
    replacements = _acknowledged(_replacements(locked, current), config.acknowledge_replacement, locked)
    found += sorted(replacements, key=lambda f: f.rule != ACKNOWLEDGEMENT)  # stable: left-over acknowledgements first
    found += _autoscaling(locked, current, hyperpod.autoscaling.acknowledge_disable)
    found += _removals(locked, current, hyperpod.acknowledge_group_removal)
    found += _growths(locked, current)
    found += _addon_moves(locked, current, config)
    if templates is not None:
        found += eks_subnet_findings(*templates)
    return found


# How synth's guard words the refusal of each rule: (before the reasons, after them).
_REFUSALS = {
    GROUP: ("HyperPod does not change these on an existing instance group, so the deploy would fail: ",
            ". Add a new instance group with the new values instead (compared with {lock})"),
    VERSION: ("", " (compared with {lock}; if the cluster's version was changed outside CloudFormation, by an "
                  "upgrade, a rollback or EKS at the end of support, write the version it runs as the EKS cluster's "
                  "Version there)"),
    ACKNOWLEDGEMENT: ("", " (compared with {lock})"),
    REPLACEMENT: ("this change would REPLACE deployed resources: ", " (compared with {lock})"),
    AUTOSCALING: ("", " (compared with {lock})"),
    REMOVAL: ("removing or renaming a group terminates its nodes: ",
              ". List the group names in hyperpod.acknowledge_group_removal to confirm (compared with {lock})"),
    FSX_GROWTH: ("", " (compared with {lock})"),
    ADDON_MOVE: ("", " (compared with {lock})"),
}


def refusal(refused: list[Finding], lock: Path) -> ConfigError:
    """One ConfigError for the refusals of the first rule that has any (``refused`` in findings' order)."""
    first = refused[0]
    same = [f for f in refused if f.rule == first.rule]
    # Under one key: the reasons joined; under several (autoscaling), each later one says its key.
    reasons = "; ".join(f.reason if f.key == first.key else f"also {f.key}: {f.reason}" for f in same)
    before, after = _REFUSALS[first.rule]
    return ConfigError(first.key, first.value if first.rule == VERSION else None,
                       before + reasons + after.format(lock=lock))


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


def deployed_acknowledgements(path: Path) -> list[dict[str, Any]]:
    """The acknowledgements the lock at ``path`` records as used by the deploy it describes; none without a lock
    or in a lock written before they were recorded."""
    return _recorded(read_lock(path) or {})


def _recorded(locked: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``acknowledged`` entries of a snapshot or lock (see ``guard_replacement``)."""
    recorded = locked.get("acknowledged")
    return [a for a in recorded if isinstance(a, dict)] if isinstance(recorded, list) else []


def _print_warning(reason: str) -> None:
    print(f"warning: {reason}", file=sys.stderr)


def guard_replacement(
    config: AppConfig, templates: Templates, lock_dir: Path, *, warn: Callable[[str], None] = _print_warning,
) -> dict[str, Any]:
    """Compare synthesized templates with the deployed state recorded in ``<lock_dir>/<project>.lock.json``:
    raise the ConfigError of the first rule with a refusal (``findings``), pass each warning to ``warn`` (by
    default a ``warning:`` line on stderr), and return the templates' snapshot, the candidate lock. Writes
    nothing; without a lock compares nothing.
    """
    current = snapshot(templates, config.project)
    path = lock_path(lock_dir, config.project)
    locked = read_lock(path)
    if locked is None:
        return current
    found = findings(locked, current, config)
    for finding in found:
        if finding.severity == WARN:
            warn(finding.reason)
    refused = [finding for finding in found if finding.severity == REFUSE]
    if refused:
        raise refusal(refused, path)
    accepted = accepted_acknowledgements(found)
    if accepted:
        current["acknowledged"] = accepted  # promoted with the lock: a later synth refuses them as left over
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
