"""clusters, wait --for nodes, update-software --wait, events --follow, node selection, --debug, retry notes,
and hpctl without the CDK."""

from __future__ import annotations

import datetime as dt
import json
import logging
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from hpctl_testkit import CLUSTER, CLUSTER_ARN, REGION, cluster_description, moto_cluster, stubbed
from moto import mock_aws

from hpctl import wait as waitmod
from hpctl.aws import MAX_RETRIES, Clients

BASE = ("--cluster", CLUSTER, "--region", REGION)
T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]
    monkeypatch.setattr(waitmod, "_now", lambda: now[0])
    monkeypatch.setattr(waitmod, "_sleep", lambda s: now.__setitem__(0, now[0] + s))
    return now


def _group(current: int, target: int, **extra: object) -> dict:
    return {"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "CurrentCount": current,
            "TargetCount": target, **extra}


@mock_aws
def test_clusters_lists_every_cluster_with_orchestrator_and_node_counts(run) -> None:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    moto_cluster(sagemaker, name="alpha")
    moto_cluster(sagemaker, name="beta",
                 groups=[{"InstanceGroupName": "cpu", "InstanceType": "ml.m5.xlarge", "InstanceCount": 2}])
    code, data = run.json("clusters", "--region", REGION)
    assert code == 0
    by_name = {c["cluster"]: c for c in data}
    assert set(by_name) == {"alpha", "beta"}
    assert by_name["alpha"]["nodes_target"] == 3 and sum(by_name["alpha"]["node_counts"].values()) == 3
    assert by_name["beta"]["nodes_target"] == 2
    code, out, err = run("clusters", "--region", REGION)
    assert code == 0 and "alpha" in out and "ORCHESTRATOR" in out and f"2 HyperPod cluster(s) in {REGION}" in err


def test_clusters_shows_the_eks_orchestrator(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("list_clusters", {"ClusterSummaries": [
        {"ClusterArn": CLUSTER_ARN, "ClusterName": CLUSTER, "CreationTime": T0, "ClusterStatus": "InService"}]})
    stub.add_response("describe_cluster", cluster_description(
        Orchestrator={"Eks": {"ClusterArn": "arn:aws:eks:us-west-2:123456789012:cluster/e"}}))
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []})
    code, data = run.json("clusters", "--region", REGION, clients={"sagemaker": client})
    assert code == 0 and data[0]["orchestrator"] == "Eks"


def test_wait_for_nodes_waits_past_in_service_until_every_group_is_full(run, fake_clock) -> None:
    client, stub = stubbed("sagemaker")
    for current in (1, 2, 3):
        stub.add_response("describe_cluster", cluster_description("InService", groups=[_group(current, 3)]))
    code, out, err = run("wait", *BASE, "--for", "nodes", "--interval", "10s", clients={"sagemaker": client})
    stub.assert_no_pending_responses()
    assert code == 0 and fake_clock[0] == 20
    assert "workers=1/3" in err and "at its target count" in out


def test_update_software_wait_follows_the_groups_update_status(run, fake_clock) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response("update_cluster_software", {"ClusterArn": CLUSTER_ARN})
    for state in ("Pending", "InProgress", "Succeeded"):
        stub.add_response("describe_cluster", cluster_description(
            "SystemUpdating" if state != "Succeeded" else "InService",
            groups=[_group(3, 3, SoftwareUpdateStatus=state)]))
    code, out, _ = run("update-software", *BASE, "--batch-size", "1", "--wait", "--yes",
                       clients={"sagemaker": client})
    stub.assert_no_pending_responses()
    assert code == 0 and "succeeded" in out


def test_update_software_wait_exits_1_on_rollback(run, fake_clock) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response("update_cluster_software", {"ClusterArn": CLUSTER_ARN})
    stub.add_response("describe_cluster", cluster_description(
        groups=[_group(3, 3, SoftwareUpdateStatus="RollbackComplete")]))
    code, _, err = run("update-software", *BASE, "--wait", "--yes", clients={"sagemaker": client})
    assert code == 1 and "workers: RollbackComplete" in err


def _event(n: int) -> dict:
    return {"EventId": f"e{n}", "ClusterArn": CLUSTER_ARN, "ClusterName": CLUSTER, "ResourceType": "Cluster",
            "EventTime": T0 + dt.timedelta(minutes=n), "EventLevel": "Info", "Description": f"event {n}"}


def test_events_follow_prints_each_event_once_until_interrupted(run, monkeypatch) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("list_cluster_events", {"Events": [_event(2), _event(1)]})
    stub.add_response("list_cluster_events", {"Events": [_event(3), _event(2)]})  # EventTimeAfter is inclusive
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt  # Ctrl-C during the second wait

    monkeypatch.setattr(waitmod, "_sleep", sleep)
    code, out, _ = run("events", *BASE, "--follow", "--interval", "10s", "--json", clients={"sagemaker": client})
    assert code == 130 and sleeps == [10, 10]
    assert [json.loads(line)["event_id"] for line in out.splitlines()] == ["e1", "e2", "e3"]


def test_events_follow_takes_no_until(run) -> None:
    code, _, err = run("events", *BASE, "--follow", "--until", "1h")
    assert code == 2 and "--until" in err


def _nodes(*spec: tuple[str, str, str]) -> dict:
    return {"ClusterNodeSummaries": [
        {"InstanceGroupName": g, "InstanceId": i, "InstanceType": "ml.g5.8xlarge", "LaunchTime": T0,
         "InstanceStatus": {"Status": s}} for i, g, s in spec]}


def test_reboot_by_group_and_status_sends_only_the_selected_nodes(run) -> None:
    client, stub = stubbed("sagemaker")
    a, b, c = "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2", "i-0aaaaaaaaaaaaaaa3"
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response("list_cluster_nodes", _nodes((a, "workers", "Failure"), (b, "workers", "Running"),
                                                   (c, "workers", "Failure")))
    stub.add_response("batch_reboot_cluster_nodes", {"Successful": [a, c]}, {"ClusterName": CLUSTER, "NodeIds": [a, c]})
    code, data = run.json("reboot", *BASE, "--group", "workers", "--status", "Failure", "--yes",
                          clients={"sagemaker": client})
    stub.assert_no_pending_responses()
    assert code == 0 and [r["node"] for r in data] == [a, c]


def test_reboot_needs_nodes_or_a_selection(run) -> None:
    code, _, err = run("reboot", *BASE, "--yes")
    assert code == 2 and "--group" in err


def test_debug_logs_botocore_on_stderr(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []})
    logger = logging.getLogger("botocore")
    before = list(logger.handlers), logger.level
    try:
        code, _, err = run("status", *BASE, "--debug", clients={"sagemaker": client})
    finally:
        logger.handlers[:], _ = before
        logger.setLevel(before[1])
    assert code == 0 and "botocore" in err and "DEBUG" in err


def test_a_connection_retry_is_announced_on_stderr(capsys) -> None:
    client = Clients(REGION)("sagemaker")
    error = EndpointConnectionError(endpoint_url="https://api.sagemaker.us-west-2.amazonaws.com/")
    operation = client.meta.service_model.operation_model("DescribeCluster")
    client.meta.events.emit(
        "needs-retry.sagemaker.DescribeCluster", response=None, endpoint=None, operation=operation, attempts=1,
        caught_exception=error, request_dict={"context": {}},
    )
    err = capsys.readouterr().err
    assert "cannot reach the endpoint" in err and f"retry 1 of {MAX_RETRIES}" in err


def test_hpctl_runs_without_the_cdk(tmp_path: Path) -> None:
    """A lightweight install (no aws-cdk-lib) works: nothing hpctl imports needs it."""
    root = Path(__file__).resolve().parents[2]
    probe = (
        "import sys; from hpctl import cli; cli.main(['render-examples', '--config', 'config/default.yaml']); "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii', 'constructs', 'cdk_nag')); "
        "sys.stderr.write(repr(bad))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=root, timeout=60)
    assert result.returncode == 0 and "MPIJob" in result.stdout
    assert result.stderr.endswith("[]"), result.stderr
