"""Task governance (read-only): quotas shows each team's compute quota beside the cluster's instances."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from typing import Any

from hpctl import cluster as api
from hpctl.commands.options import add_command
from hpctl.errors import EXIT_OK, HpctlError
from hpctl.kube import eks_endpoint, same_endpoint
from hpctl.output import print_json, print_table
from hpctl.target import Target

# What AWS's API does not give: a team's use is in Kueue's ClusterQueue objects inside the cluster (no SageMaker
# or EKS API returns it). --usage reads them with kubectl, as AWS's HyperPod CLI does
# (aws/sagemaker-hyperpod-cli@011ca927: src/sagemaker/hyperpod/cli/commands/cluster.py, _get_cluster_queue_*;
# constants/command_constants.py and kueue_constants.py): task governance labels each team's namespace
# sagemaker.amazonaws.com/sagemaker-managed-queue=true and sagemaker.amazonaws.com/quota-allocation-id=<id>, the
# team's ClusterQueue is hyperpod-ns-<id>-clusterqueue, its flavors are instance types,
# spec.resourceGroups[].flavors[].resources[].nominalQuota the quota, status.flavorsUsage[].resources[].total the
# use and .borrowed what is borrowed.
# The resource is named without a version, so kubectl reads the version the API server prefers ("the version that comes
# first in term of priority is used by kubectl as the default version to access objects", kubernetes.io docs,
# tasks/extend-kubernetes/custom-resources/custom-resource-definition-versioning; v1beta2 sorts before v1beta1 there):
# v1beta1 up to Kueue 0.14, v1beta2 from 0.15, the only one from 0.20, which no longer serves v1beta1
# (kubernetes-sigs/kueue@2a66aa2b:CHANGELOG/CHANGELOG-0.15.md, v0.15.0: "Expose the v1beta2 API for CRD serving";
# kubernetes-sigs/kueue@144402ad:CHANGELOG/CHANGELOG-0.20.md, "Kueue no longer serves kueue.x-k8s.io/v1beta1", #14558).
# AWS's CLI still asks for v1beta1 (aws/sagemaker-hyperpod-cli@011ca927: constants/kueue_constants.py). The fields read
# here have the same paths in both versions (kubernetes-sigs/kueue@013c8f25:apis/kueue/v1beta2/clusterqueue_types.go and
# @00b014c1:apis/kueue/v1beta1/clusterqueue_types.go); a missing one counts as zero (defensive: nominalQuota is
# required). Which Kueue each task governance add-on version installs is published only for v1.6.0-eksbuild.1, Kueue
# v0.19.2 (AWS docs, sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade); for v1.3.x to v1.5.x it is
# unverified.
USAGE_NOT_SHOWN = ("per-team use is not shown without --usage (it reads Kueue's ClusterQueues in the cluster "
                   "with kubectl)")
MANAGED_QUEUE_LABEL = "sagemaker.amazonaws.com/sagemaker-managed-queue"
QUOTA_ALLOCATION_LABEL = "sagemaker.amazonaws.com/quota-allocation-id"
CLUSTER_QUEUES = "clusterqueues.kueue.x-k8s.io"
KUBECTL_SECONDS = 60


def cluster_queue_name(quota_allocation_id: str) -> str:
    return f"hyperpod-ns-{quota_allocation_id}-clusterqueue"


def kubectl_json(args: list[str], context: str | None) -> dict[str, Any]:
    """``kubectl <args> -o json`` on the current (or the given) context, parsed; one-line errors."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise HpctlError("--usage needs kubectl on PATH and a context for the EKS cluster (hpctl kubeconfig)")
    command = [kubectl, *args, "-o", "json", *(["--context", context] if context else [])]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=KUBECTL_SECONDS, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        raise HpctlError(f"kubectl {' '.join(args)} did not answer in {KUBECTL_SECONDS} s "
                         "(is the EKS endpoint reachable from here?)") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise HpctlError(f"kubectl {' '.join(args)} failed: {last}")
    try:
        parsed = json.loads(result.stdout)
    except ValueError:
        raise HpctlError(f"kubectl {' '.join(args)} printed something that is not JSON") from None
    return parsed if isinstance(parsed, dict) else {}


def _quantity(value: Any) -> Any:
    """A Kubernetes quantity as a number when it is a plain one (GPUs, CPUs), else as given (10Gi)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


# What kubectl says when the kubeconfig has no current context, or names one it lacks (kubernetes/client-go,
# tools/clientcmd/api/helpers.go: MinifyConfig); without a context kubectl would otherwise talk to localhost:8080.
_NO_CONTEXT = ("current-context must exist", "cannot locate context")


def context_cluster(context: str | None) -> dict[str, Any]:
    """The kubeconfig's cluster entry of the context (the current one when None); one line saying how to get one
    when there is none."""
    try:
        view = kubectl_json(["config", "view", "--minify"], context)
    except HpctlError as error:
        if not any(text in str(error) for text in _NO_CONTEXT):
            raise
        view = {}
    cluster = ((view.get("clusters") or [{}])[0] or {}).get("cluster", {})
    if not cluster.get("server"):
        which = f"the kube context {context}" if context else "a kube context (none is current)"
        raise HpctlError(f"--usage reads the cluster with kubectl and needs {which}: write one with `hpctl "
                         "kubeconfig`, or pass --kube-context")
    return dict(cluster)


def check_context(desc: dict[str, Any], clients: Any, context: str | None) -> None:
    """Refuse a missing kube context, and one whose API server is not this HyperPod cluster's EKS endpoint (or, for
    a forwarded port, whose tls-server-name is not): the quotas would be read from another cluster."""
    cluster = context_cluster(context)
    found = eks_endpoint(desc, clients)
    if found is None:
        return
    eks_name, endpoint = found
    server = str(cluster.get("server", ""))
    if not same_endpoint(endpoint, server, cluster.get("tls-server-name")):
        raise HpctlError(f"the kube context {context or '(current)'} points at {server or 'no server'}, not the EKS "
                         f"cluster {eks_name} ({endpoint}): pass --kube-context, or write one with hpctl kubeconfig")


def team_usage(context: str | None) -> dict[str, list[dict[str, Any]]]:
    """Per team namespace: each instance type and resource of its ClusterQueue with quota, use and borrowed."""
    namespaces = kubectl_json(["get", "namespaces", "-l", f"{MANAGED_QUEUE_LABEL}=true"], context)
    queues = {q.get("metadata", {}).get("name"): q for q in kubectl_json(["get", CLUSTER_QUEUES], context)
              .get("items", [])}
    usage: dict[str, list[dict[str, Any]]] = {}
    for namespace in namespaces.get("items", []):
        metadata = namespace.get("metadata", {})
        queue = queues.get(cluster_queue_name(metadata.get("labels", {}).get(QUOTA_ALLOCATION_LABEL, "")))
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for group in (queue or {}).get("spec", {}).get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                for resource in flavor.get("resources", []):
                    rows[(flavor.get("name"), resource.get("name"))] = {
                        "instance_type": flavor.get("name"), "resource": resource.get("name"),
                        "quota": _quantity(resource.get("nominalQuota", 0)), "used": 0, "borrowed": 0}
        for flavor in (queue or {}).get("status", {}).get("flavorsUsage", []):
            for resource in flavor.get("resources", []):
                row = rows.setdefault((flavor.get("name"), resource.get("name")), {
                    "instance_type": flavor.get("name"), "resource": resource.get("name"), "quota": None})
                row["used"] = _quantity(resource.get("total", 0))
                row["borrowed"] = _quantity(resource.get("borrowed", 0))
        usage[metadata.get("name", "?")] = [rows[k] for k in sorted(rows, key=str)] if queue else []
    return usage


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
    usage = None
    if args.usage:
        check_context(desc, clients, args.kube_context)
        usage = team_usage(args.kube_context)
    if args.json:
        print_json({"cluster": desc.get("ClusterName"), "arn": desc["ClusterArn"], "teams": teams,
                    "instance_types": types, "usage": usage,
                    **({} if usage is not None else {"usage_not_shown": USAGE_NOT_SHOWN})})
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
    if usage is not None:
        print()
        print_table(["NAMESPACE", "TYPE", "RESOURCE", "QUOTA", "USED", "BORROWED"],
                    [[namespace, row["instance_type"], row["resource"], row["quota"], row["used"], row["borrowed"]]
                     for namespace, rows in sorted(usage.items()) for row in rows]
                    + [[namespace, "-", "-", "-", "-", "no ClusterQueue"]
                       for namespace, rows in sorted(usage.items()) if not rows])
    for r in teams:
        if r["failure_reason"]:
            print(f"{r['team']}: {r['failure_reason']}", file=sys.stderr)
    print(f"{len(teams)} team quota(s)" + ("" if usage is not None else f"; {USAGE_NOT_SHOWN}"), file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "quotas",
        cmd_quotas,
        "task governance: each team's compute quota, sharing and status, and the instances reserved per type; "
        "with --usage each team's use (Kueue's ClusterQueues, read with kubectl)",
        "hpctl quotas --usage --kube-context hyperpod-dev",
    )
    p.add_argument("--usage", action="store_true",
                   help="also show each team's quota, use and borrowing per instance type and resource, from the "
                        "cluster's Kueue ClusterQueues (needs kubectl and access to the EKS endpoint)")
    p.add_argument("--kube-context", metavar="CONTEXT",
                   help="the kubeconfig context of the EKS cluster for --usage (default: the current context)")
