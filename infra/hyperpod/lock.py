"""The replacement guard: a committed lock file of the HyperPod cluster's create-only fields.

AWS::SageMaker::Cluster replaces the WHOLE cluster (every node, every running job) when a create-only
field changes: the cluster name, VpcConfig, the orchestrator, and inside an existing instance group its
type, threads per core, execution role or subnet. ``<config>.lock.json`` next to the config file records
those fields as first synthesized. Synth compares the config with it and refuses a change that would
replace the cluster unless ``hyperpod.allow_cluster_replacement`` is true. Groups that are added or
removed are simply recorded: those are in-place updates. Commit the lock file with the config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infra.config import AppConfig, eks_cluster_name
from infra.errors import ConfigError

LOCK_VERSION = 1


def lock_path_for(config_path: str | Path) -> Path:
    path = Path(config_path)
    return path.with_name(f"{path.stem}.lock.json")


def create_only_fields(config: AppConfig) -> dict[str, Any]:
    subnets = [s.subnet_id or str(s.cidr) for s in config.network.hyperpod_subnets]
    return {
        "version": LOCK_VERSION,
        "cluster_name": config.hyperpod.cluster_name,
        "eks_cluster": eks_cluster_name(config),
        "hyperpod_subnets": subnets,
        "instance_groups": config.create_only_fingerprint,
    }


def replacement_reasons(locked: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What in ``current`` would replace the cluster recorded in ``locked``; empty when nothing would."""
    reasons = []
    for key, label in (("cluster_name", "hyperpod.cluster_name"), ("eks_cluster", "project (EKS cluster name)"),
                       ("hyperpod_subnets", "network.hyperpod_subnets (the cluster's VpcConfig)")):
        if locked.get(key) != current.get(key):
            reasons.append(f"{label} changes from {locked.get(key)!r} to {current.get(key)!r}")
    for name, fields in current["instance_groups"].items():
        before = locked.get("instance_groups", {}).get(name)
        if before is None:
            continue
        for field, value in fields.items():
            if before.get(field) != value:
                reasons.append(
                    f"hyperpod.instance_groups[{name}].{field} changes from {before.get(field)!r} to {value!r}"
                )
    return reasons


def guard_replacement(config: AppConfig, lock_path: Path) -> bool:
    """Refuse a config that would replace the HyperPod cluster, then record it; True if the lock changed."""
    current = create_only_fields(config)
    if lock_path.is_file():
        locked = json.loads(lock_path.read_text(encoding="utf-8"))
        reasons = replacement_reasons(locked, current)
        if reasons and not config.hyperpod.allow_cluster_replacement:
            raise ConfigError(
                "hyperpod",
                None,
                "this change would REPLACE the whole HyperPod cluster, terminating every node ("
                + "; ".join(reasons)
                + f"). Create a new instance group instead, or set hyperpod.allow_cluster_replacement: true "
                f"to accept the replacement (compared with {lock_path})",
            )
        if locked == current:
            return False
    lock_path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return True
