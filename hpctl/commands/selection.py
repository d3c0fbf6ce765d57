"""--group and --status: the repeatable options that pick instance groups and nodes, and their check against
the cluster (nodes, ssh-config, reboot/replace; update-software checks its groups the same way)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from hpctl import cluster as api
from hpctl import nodes as nodeops
from hpctl.errors import UsageError
from hpctl.target import Target


def add_selection(p: argparse.ArgumentParser, *, group: str, status: str | None = None) -> None:
    """Repeatable --group (and --status when its help is given), each a list that is empty by default."""
    p.add_argument("--group", action="append", default=[], help=group)
    if status is not None:
        p.add_argument("--status", action="append", default=[], help=status)


def check_groups(desc: dict[str, Any], groups: Sequence[str]) -> list[str]:
    """The cluster's instance group names; UsageError naming any of `groups` it lacks."""
    known = [g["InstanceGroupName"] for g in desc.get("InstanceGroups", [])]
    unknown = [g for g in groups if g not in known]
    if unknown:
        raise UsageError(
            f"no instance group {', '.join(unknown)} in {desc.get('ClusterName')} (have: {', '.join(known) or 'none'})"
        )
    return known


def check_statuses(statuses: Sequence[str]) -> list[str]:
    """--status values in botocore's spelling, matched without regard to case; UsageError for any other."""
    valid = {s.lower(): s for s in api.node_statuses()}
    unknown = [s for s in statuses if s.lower() not in valid]
    if unknown:
        raise UsageError(f"unknown --status {', '.join(unknown)} (valid: {', '.join(valid.values())})")
    return [valid[s.lower()] for s in statuses]


def selected_nodes(sm: Any, t: Target, groups: Sequence[str], statuses: Sequence[str]) -> list[dict[str, Any]]:
    """Nodes of the cluster in `groups` and `statuses` (all when empty), after checking both exist."""
    wanted = check_statuses(statuses)
    if groups:
        check_groups(api.describe_cluster(sm, t.cluster), groups)
    contains = groups[0] if len(groups) == 1 else None
    return nodeops.filter_nodes(api.iter_nodes(sm, t.cluster, contains), groups, wanted)
