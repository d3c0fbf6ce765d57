"""Task governance (read-only): quotas shows each team's compute quota beside the cluster's instances."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hpctl import cluster as api
from hpctl.commands.options import add_command
from hpctl.errors import EXIT_OK
from hpctl.output import print_json, print_table
from hpctl.target import Target

# What AWS's API does not give: a team's tasks and the instances they hold are Kueue's ClusterQueue and
# Workload objects inside the cluster (no SageMaker or EKS API returns them), and task governance metrics go to
# Prometheus through the HyperPod observability add-on (its taskGovernanceMetrics family).
USAGE_NOT_SHOWN = ("per-team use is not shown: no AWS API returns it; see Kueue's ClusterQueues in the cluster "
                   "(kubectl get clusterqueues) or the task governance metrics of the observability add-on")


def _iter_quotas(sagemaker: Any, cluster_arn: str) -> list[dict[str, Any]]:
    """The cluster's compute quotas (ListComputeQuotas, every page), described, without deleted ones."""
    quotas = []
    for page in sagemaker.get_paginator("list_compute_quotas").paginate(
        ClusterArn=cluster_arn, PaginationConfig={"PageSize": api.PAGE_SIZE}
    ):
        for summary in page.get("ComputeQuotaSummaries", []):
            if summary.get("Status") == "Deleted":
                continue
            # DescribeComputeQuota adds the failure reason of a quota that did not apply.
            quotas.append(sagemaker.describe_compute_quota(ComputeQuotaId=summary["ComputeQuotaId"]))
    return quotas


def _team_record(quota: dict[str, Any]) -> dict[str, Any]:
    from infra.config import team_namespace

    target = quota.get("ComputeQuotaTarget") or {}
    config = quota.get("ComputeQuotaConfig") or {}
    sharing = config.get("ResourceSharingConfig") or {}
    return {
        "team": target.get("TeamName"),
        "namespace": team_namespace(target["TeamName"]) if target.get("TeamName") else None,
        "quota_name": quota.get("Name"),
        "status": quota.get("Status"),
        "activation": quota.get("ActivationState"),
        "failure_reason": quota.get("FailureReason") or None,
        "resources": [
            {key: value for key, value in {
                "instance_type": r.get("InstanceType"), "count": r.get("Count"), "accelerators": r.get("Accelerators"),
                "vcpu": r.get("VCpu"), "memory_gib": r.get("MemoryInGiB"),
            }.items() if value is not None}
            for r in config.get("ComputeQuotaResources", [])
        ],
        "fair_share_weight": target.get("FairShareWeight"),
        "sharing_strategy": sharing.get("Strategy"),
        "borrow_limit_percent": sharing.get("BorrowLimit"),
        "preempt_team_tasks": config.get("PreemptTeamTasks"),
    }


def _by_instance_type(groups: list[dict[str, Any]], teams: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per instance type: the instances the cluster has (current/target) and the whole instances the teams reserve."""
    rows: dict[str, dict[str, Any]] = {}

    def row_of(instance_type: str) -> dict[str, Any]:
        return rows.setdefault(instance_type, {"instance_type": instance_type, "current": 0, "target": 0,
                                               "reserved": 0})

    for group in groups:
        if group.get("InstanceType"):
            row = row_of(group["InstanceType"])
            row["current"] += group.get("CurrentCount", 0)
            row["target"] += group.get("TargetCount", 0)
            continue
        # A flexible group: DescribeCluster counts its nodes per type (InstanceTypeDetails); its target is one
        # number for all of its types, so it is left out of the per-type targets.
        for detail in group.get("InstanceTypeDetails") or []:
            row_of(detail["InstanceType"])["current"] += detail.get("CurrentCount", 0)
    for team in teams:
        if team["activation"] == "Disabled":
            continue
        for resource in team["resources"]:
            row_of(resource["instance_type"])["reserved"] += resource.get("count", 0)
    return sorted(rows.values(), key=lambda r: r["instance_type"])


def cmd_quotas(args: argparse.Namespace, t: Target, clients: Any) -> int:
    sm = clients("sagemaker")
    desc = api.describe_cluster(sm, t.cluster)
    teams = sorted((_team_record(q) for q in _iter_quotas(sm, desc["ClusterArn"])), key=lambda r: r["team"] or "")
    types = _by_instance_type(desc.get("InstanceGroups", []), teams)
    if args.json:
        print_json({"cluster": desc.get("ClusterName"), "arn": desc["ClusterArn"], "teams": teams,
                    "instance_types": types, "usage": None, "usage_not_shown": USAGE_NOT_SHOWN})
        return EXIT_OK
    print_table(
        ["TEAM", "NAMESPACE", "QUOTA", "WEIGHT", "SHARING", "BORROW%", "PREEMPT", "STATUS"],
        [
            [
                r["team"], r["namespace"],
                ", ".join(f"{x.get('count', '-')} x {x['instance_type']}" for x in r["resources"]) or "-",
                r["fair_share_weight"], r["sharing_strategy"], r["borrow_limit_percent"], r["preempt_team_tasks"],
                r["status"] if r["activation"] != "Disabled" else f"{r['status']} (disabled)",
            ]
            for r in teams
        ],
    )
    print()
    print_table(["TYPE", "CURRENT", "TARGET", "RESERVED"],
                [[r["instance_type"], r["current"], r["target"], r["reserved"]] for r in types])
    for r in teams:
        if r["failure_reason"]:
            print(f"{r['team']}: {r['failure_reason']}", file=sys.stderr)
    print(f"{len(teams)} team quota(s); {USAGE_NOT_SHOWN}", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    add_command(
        sub,
        "quotas",
        cmd_quotas,
        "task governance: each team's compute quota, sharing and status, and the instances reserved per type",
        "hpctl quotas --json",
    )
