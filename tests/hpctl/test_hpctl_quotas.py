"""quotas: each team's compute quota from ListComputeQuotas/DescribeComputeQuota, beside the cluster's instances."""

from __future__ import annotations

import datetime as dt

from hpctl_testkit import CLUSTER, CLUSTER_ARN, REGION, cluster_description, stubbed

from hpctl.commands.quotas import USAGE_NOT_SHOWN

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _quota(quota_id: str, team: str, count: int, **extra: object) -> dict:
    """A compute quota as ListComputeQuotas and DescribeComputeQuota return it (botocore's shapes)."""
    return {
        "ComputeQuotaArn": f"arn:aws:sagemaker:{REGION}:123456789012:compute-quota/{quota_id}",
        "ComputeQuotaId": quota_id,
        "Name": f"{CLUSTER}-{team}",
        "ComputeQuotaVersion": 1,
        "Status": "Created",
        "ClusterArn": CLUSTER_ARN,
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": [{"InstanceType": "ml.g5.8xlarge", "Count": count}],
            "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": 50},
            "PreemptTeamTasks": "LowerPriority",
        },
        "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": 10},
        "ActivationState": "Enabled",
        "CreationTime": T0,
        **extra,
    }


def _summary(quota: dict) -> dict:
    """The ListComputeQuotas entry of a described quota: the summary lacks FailureReason and the Created/By fields."""
    return {k: v for k, v in quota.items() if k not in ("FailureReason", "CreatedBy", "LastModifiedBy", "Description")}


def _stub_cluster_with(quotas: list[dict], pages: int = 1):
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description(), {"ClusterName": CLUSTER})
    size = max(1, -(-len(quotas) // pages))
    chunks = [quotas[i:i + size] for i in range(0, len(quotas), size)] or [[]]
    for n, chunk in enumerate(chunks):
        response: dict = {"ComputeQuotaSummaries": [_summary(q) for q in chunk]}
        request: dict = {"ClusterArn": CLUSTER_ARN, "MaxResults": 100}
        if n + 1 < len(chunks):
            response["NextToken"] = f"page-{n + 1}"
        if n:
            request["NextToken"] = f"page-{n}"
        stub.add_response("list_compute_quotas", response, request)
        for quota in chunk:
            if quota["Status"] != "Deleted":
                stub.add_response("describe_compute_quota", quota, {"ComputeQuotaId": quota["ComputeQuotaId"]})
    return client, stub


def test_quotas_json_lists_each_team_with_its_namespace_over_every_page(run) -> None:
    quotas = [
        _quota("aaaaaaaaaaa1", "research", 2),
        _quota("aaaaaaaaaaa2", "product", 1, ActivationState="Disabled"),
        _quota("aaaaaaaaaaa3", "old", 1, Status="Deleted"),
        _quota("aaaaaaaaaaa4", "data", 0, Status="CreateFailed", FailureReason="cluster policy missing"),
    ]
    client, stub = _stub_cluster_with(quotas, pages=2)
    code, data = run.json("quotas", "--cluster", CLUSTER, "--region", REGION, clients={"sagemaker": client})
    stub.assert_no_pending_responses()
    assert code == 0
    assert [t["team"] for t in data["teams"]] == ["data", "product", "research"]  # the deleted one left out
    research = data["teams"][2]
    assert research == {
        "team": "research", "namespace": "hyperpod-ns-research", "quota_name": f"{CLUSTER}-research",
        "status": "Created", "activation": "Enabled", "failure_reason": None,
        "resources": [{"instance_type": "ml.g5.8xlarge", "count": 2}],
        "fair_share_weight": 10, "sharing_strategy": "LendAndBorrow", "borrow_limit_percent": 50,
        "preempt_team_tasks": "LowerPriority",
    }
    assert data["teams"][0]["failure_reason"] == "cluster policy missing"
    # The disabled quota reserves nothing; the cluster has 3 current and 3 target instances of the type.
    assert data["instance_types"] == [{"instance_type": "ml.g5.8xlarge", "current": 3, "target": 3, "reserved": 2}]
    assert data["usage"] is None and data["usage_not_shown"] == USAGE_NOT_SHOWN


def test_quotas_table_says_what_it_does_not_show(run) -> None:
    client, stub = _stub_cluster_with([_quota("aaaaaaaaaaa1", "research", 2)])
    code, out, err = run("quotas", "--cluster", CLUSTER, "--region", REGION, clients={"sagemaker": client})
    assert code == 0
    assert "hyperpod-ns-research" in out and "2 x ml.g5.8xlarge" in out
    assert "per-team use is not shown" in err and "1 team quota(s)" in err


def test_quotas_of_a_cluster_without_task_governance(run) -> None:
    client, _ = _stub_cluster_with([])
    code, data = run.json("quotas", "--cluster", CLUSTER, "--region", REGION, clients={"sagemaker": client})
    assert code == 0
    assert data["teams"] == []
    assert data["instance_types"][0]["reserved"] == 0


def test_quotas_count_a_flexible_groups_nodes_per_type(run) -> None:
    # A flexible group (botocore's ClusterInstanceGroupDetails): no InstanceType, its nodes per type in
    # InstanceTypeDetails; its target covers all of its types, so no type's target counts it.
    flexible = {"InstanceGroupName": "flex", "CurrentCount": 3, "TargetCount": 4,
                "InstanceRequirements": {"CurrentInstanceTypes": ["ml.g5.8xlarge", "ml.g5.12xlarge"],
                                         "DesiredInstanceTypes": ["ml.g5.8xlarge", "ml.g5.12xlarge"]},
                "InstanceTypeDetails": [{"InstanceType": "ml.g5.8xlarge", "CurrentCount": 2},
                                        {"InstanceType": "ml.g5.12xlarge", "CurrentCount": 1}],
                "ExecutionRole": "arn:aws:iam::123456789012:role/exec",
                "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/scripts", "OnCreate": "on_create.sh"}}
    client, stub = stubbed("sagemaker")
    single = cluster_description()["InstanceGroups"]
    stub.add_response("describe_cluster", cluster_description(groups=[*single, flexible]), {"ClusterName": CLUSTER})
    stub.add_response("list_compute_quotas", {"ComputeQuotaSummaries": []},
                      {"ClusterArn": CLUSTER_ARN, "MaxResults": 100})
    code, data = run.json("quotas", "--cluster", CLUSTER, "--region", REGION, clients={"sagemaker": client})
    assert code == 0
    assert data["instance_types"] == [
        {"instance_type": "ml.g5.12xlarge", "current": 1, "target": 0, "reserved": 0},
        {"instance_type": "ml.g5.8xlarge", "current": 5, "target": 3, "reserved": 0},
    ]
