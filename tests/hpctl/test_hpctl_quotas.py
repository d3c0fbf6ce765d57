"""quotas: each team's compute quota from ListComputeQuotas/DescribeComputeQuota, beside the cluster's instances."""

from __future__ import annotations

import datetime as dt
import json

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


# --- --usage: each team's ClusterQueue, read with kubectl ------------------------------------------------------

# A team's namespace and ClusterQueue as task governance creates them, in the shapes AWS's HyperPod CLI reads
# (aws/sagemaker-hyperpod-cli@011ca927: test/unit_tests/test_cluster.py, _generate_get_cluster_queue_response).
NAMESPACES = {"kind": "NamespaceList", "items": [
    {"metadata": {"name": "hyperpod-ns-research", "labels": {
        "sagemaker.amazonaws.com/sagemaker-managed-queue": "true",
        "sagemaker.amazonaws.com/quota-allocation-id": "research"}}},
    {"metadata": {"name": "hyperpod-ns-product", "labels": {
        "sagemaker.amazonaws.com/sagemaker-managed-queue": "true",
        "sagemaker.amazonaws.com/quota-allocation-id": "product"}}},
]}
CLUSTER_QUEUES = {"kind": "ClusterQueueList", "items": [
    {"kind": "ClusterQueue", "metadata": {"name": "hyperpod-ns-research-clusterqueue"},
     "spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
         {"name": "ml.g5.8xlarge", "resources": [{"name": "cpu", "nominalQuota": 64},
                                                 {"name": "memory", "nominalQuota": "256Gi"},
                                                 {"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]},
     "status": {"flavorsUsage": [{"name": "ml.g5.8xlarge", "resources": [
         {"name": "cpu", "total": 40, "borrowed": 0}, {"name": "memory", "total": "120Gi", "borrowed": "0"},
         {"name": "nvidia.com/gpu", "total": 3, "borrowed": 1}]}]}},
    {"kind": "ClusterQueue", "metadata": {"name": "someone-elses-queue"}, "spec": {}},
]}


EKS_HOST = "0123456789ABCDEF0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"


def _fake_kubectl(tmp_path, monkeypatch, *, exit_code: int = 0, stderr: str = "", server: dict | None = None,
                  failing: str = "") -> list:
    """A kubectl on PATH that answers the two reads from files and logs its arguments; with exit_code, every call
    fails, or only those whose first argument is `failing`."""
    import json
    import sys

    (tmp_path / "namespaces.json").write_text(json.dumps(NAMESPACES))
    (tmp_path / "queues.json").write_text(json.dumps(CLUSTER_QUEUES))
    (tmp_path / "kubeconfig.json").write_text(json.dumps(server or {"clusters": [{"name": "x", "cluster": {
        "server": f"https://{EKS_HOST}"}}]}))
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "bin" / "kubectl"
    script.parent.mkdir()
    script.write_text(f"""#!{sys.executable}
import json, sys
with open({str(log)!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if {exit_code} and sys.argv[1] == ({failing!r} or sys.argv[1]):
    sys.stderr.write({stderr!r})
    sys.exit({exit_code})
if sys.argv[1] == "config":
    name = "kubeconfig.json"
else:
    name = "namespaces.json" if sys.argv[2] == "namespaces" else "queues.json"
sys.stdout.write(open({str(tmp_path)!r} + "/" + name).read())
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    return [log]


def test_usage_reads_each_teams_cluster_queue(run, tmp_path, monkeypatch) -> None:
    import json

    (log,) = _fake_kubectl(tmp_path, monkeypatch)
    client, stub = _stub_cluster_with([_quota("aaaaaaaaaaa1", "research", 2)])
    code, data = run.json("quotas", "--cluster", CLUSTER, "--region", REGION, "--usage", "--kube-context", "hp",
                          clients={"sagemaker": client})
    assert code == 0
    assert data["usage"]["hyperpod-ns-research"] == [
        {"instance_type": "ml.g5.8xlarge", "resource": "cpu", "quota": 64, "used": 40, "borrowed": 0},
        {"instance_type": "ml.g5.8xlarge", "resource": "memory", "quota": "256Gi", "used": "120Gi", "borrowed": 0},
        {"instance_type": "ml.g5.8xlarge", "resource": "nvidia.com/gpu", "quota": 2, "used": 3, "borrowed": 1},
    ]
    assert data["usage"]["hyperpod-ns-product"] == []  # a namespace whose ClusterQueue is not there (yet)
    assert "usage_not_shown" not in data
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [
        ["config", "view", "--minify", "-o", "json", "--context", "hp"],  # the context exists
        ["get", "namespaces", "-l", "sagemaker.amazonaws.com/sagemaker-managed-queue=true", "-o", "json",
         "--context", "hp"],
        ["get", "clusterqueues.kueue.x-k8s.io", "-o", "json", "--context", "hp"],  # the server's preferred version
    ]


def test_usage_reads_a_v1beta2_queue_that_leaves_out_empty_fields(run, tmp_path, monkeypatch) -> None:
    """Kueue from 0.15 serves ClusterQueue as v1beta2 too (the version kubectl prefers), whose empty fields are
    left out (kubernetes-sigs/kueue apis/kueue/v1beta2/clusterqueue_types.go, omitempty): a quota of 0 and nothing
    borrowed read as 0."""
    import json

    v1beta2 = {"kind": "ClusterQueueList", "apiVersion": "kueue.x-k8s.io/v1beta2", "items": [
        {"kind": "ClusterQueue", "metadata": {"name": "hyperpod-ns-research-clusterqueue"},
         "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
             {"name": "ml.g5.8xlarge", "resources": [{"name": "nvidia.com/gpu"}]}]}]},
         "status": {"flavorsUsage": [{"name": "ml.g5.8xlarge", "resources": [{"name": "nvidia.com/gpu",
                                                                             "total": 2}]}]}}]}
    monkeypatch.setitem(globals(), "CLUSTER_QUEUES", v1beta2)
    _fake_kubectl(tmp_path, monkeypatch)
    client, _ = _stub_cluster_with([_quota("aaaaaaaaaaa1", "research", 2)])
    code, data = run.json("quotas", "--cluster", CLUSTER, "--region", REGION, "--usage", "--kube-context", "hp",
                          clients={"sagemaker": client})
    assert code == 0, json.dumps(data)
    assert data["usage"]["hyperpod-ns-research"] == [
        {"instance_type": "ml.g5.8xlarge", "resource": "nvidia.com/gpu", "quota": 0, "used": 2, "borrowed": 0}]


def test_usage_table_shows_use_and_borrowing(run, tmp_path, monkeypatch) -> None:
    _fake_kubectl(tmp_path, monkeypatch)
    client, _ = _stub_cluster_with([_quota("aaaaaaaaaaa1", "research", 2)])
    code, out, err = run("quotas", "--cluster", CLUSTER, "--region", REGION, "--usage",
                         clients={"sagemaker": client})
    assert code == 0
    gpu = next(line for line in out.splitlines() if "nvidia.com/gpu" in line).split()
    assert gpu == ["hyperpod-ns-research", "ml.g5.8xlarge", "nvidia.com/gpu", "2", "3", "1"]
    assert "no ClusterQueue" in next(line for line in out.splitlines() if "hyperpod-ns-product" in line)
    assert "not shown" not in err


def test_usage_when_kubectl_cannot_reach_the_cluster_is_one_line(run, tmp_path, monkeypatch) -> None:
    _fake_kubectl(tmp_path, monkeypatch, exit_code=1, failing="get",
                  stderr="E1203 reflector\nUnable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout\n")
    client, _ = _stub_cluster_with([_quota("aaaaaaaaaaa1", "research", 2)])
    code, out, err = run("quotas", "--cluster", CLUSTER, "--region", REGION, "--usage",
                         clients={"sagemaker": client})
    assert code == 1
    assert err.strip().splitlines() == [
        "hpctl: kubectl get namespaces -l sagemaker.amazonaws.com/sagemaker-managed-queue=true failed: "
        "Unable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout"]


def test_usage_without_kubectl_says_what_it_needs(run, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    client, _ = _stub_cluster_with([_quota("aaaaaaaaaaa1", "research", 2)])
    code, out, err = run("quotas", "--cluster", CLUSTER, "--region", REGION, "--usage",
                         clients={"sagemaker": client})
    assert code == 1 and "needs kubectl on PATH" in err


def _stub_orchestrated(eks_host: str):
    """DescribeCluster with its EKS orchestrator, and EKS's DescribeCluster of it (botocore's shapes)."""
    eks_arn = f"arn:aws:eks:{REGION}:123456789012:cluster/hp-eks"
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description(Orchestrator={"Eks": {"ClusterArn": eks_arn}}),
                      {"ClusterName": CLUSTER})
    stub.add_response("list_compute_quotas", {"ComputeQuotaSummaries": []},
                      {"ClusterArn": CLUSTER_ARN, "MaxResults": 100})
    eks, eks_stub = stubbed("eks")
    eks_stub.add_response("describe_cluster", {"cluster": {"name": "hp-eks", "arn": eks_arn,
                                                           "endpoint": f"https://{eks_host}"}}, {"name": "hp-eks"})
    return {"sagemaker": client, "eks": eks}


def test_usage_refuses_a_context_of_another_cluster(run, tmp_path, monkeypatch) -> None:
    _fake_kubectl(tmp_path, monkeypatch, server={"clusters": [{"name": "other", "cluster": {
        "server": "https://FFFF.gr7.us-west-2.eks.amazonaws.com"}}]})
    code, out, err = run("quotas", "--cluster", CLUSTER, "--region", REGION, "--usage", "--kube-context", "other",
                         clients=_stub_orchestrated(EKS_HOST))
    assert code == 1
    assert "the kube context other points at https://FFFF.gr7" in err and "not the EKS cluster hp-eks" in err


def test_usage_accepts_the_clusters_endpoint_or_a_forwarded_port_to_it(run, tmp_path, monkeypatch) -> None:
    for n, server in enumerate(({"server": f"https://{EKS_HOST}"},
                                {"server": "https://localhost:8443", "tls-server-name": EKS_HOST})):
        here = tmp_path / str(n)
        here.mkdir()
        with monkeypatch.context() as patch:
            _fake_kubectl(here, patch, server={"clusters": [{"name": "c", "cluster": server}]})
            code, out, err = run("quotas", "--cluster", CLUSTER, "--region", REGION, "--usage", "--json",
                                 clients=_stub_orchestrated(EKS_HOST))
        assert code == 0, err
        assert "hyperpod-ns-research" in json.loads(out)["usage"]


def test_usage_without_a_kube_context_is_one_clear_line(run, tmp_path, monkeypatch) -> None:
    """kubectl with no current context would talk to localhost:8080; the kubeconfig view says there is none."""
    _fake_kubectl(tmp_path, monkeypatch, exit_code=1, stderr="error: current-context must exist in order to minify\n")
    client, _ = _stub_cluster_with([_quota("aaaaaaaaaaa1", "research", 2)])
    code, out, err = run("quotas", "--cluster", CLUSTER, "--region", REGION, "--usage",
                         clients={"sagemaker": client})
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        "hpctl: --usage reads the cluster with kubectl and needs a kube context (none is current): write one with "
        "`hpctl kubeconfig`, or pass --kube-context"]
