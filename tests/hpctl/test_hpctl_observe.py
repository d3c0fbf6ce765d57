"""status, nodes (pagination), wait (exit codes) and events."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY
from hpctl_testkit import CLUSTER, REGION, cluster_description, moto_cluster, stubbed
from moto import mock_aws

from hpctl import wait as waitmod

T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def _node(instance_id: str, group: str = "workers", status: str = "Running") -> dict:
    return {
        "InstanceGroupName": group,
        "InstanceId": instance_id,
        "InstanceType": "ml.g5.8xlarge",
        "LaunchTime": T0,
        "InstanceStatus": {"Status": status, "Message": "" if status == "Running" else "health check failed"},
    }


@mock_aws
def test_status_table_and_json_with_moto(run, config_file: Path) -> None:
    sm = boto3.client("sagemaker", region_name=REGION)
    moto_cluster(
        sm,
        [
            {"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "InstanceCount": 3},
            {"InstanceGroupName": "cpu", "InstanceType": "ml.m5.xlarge", "InstanceCount": 2},
        ],
    )
    code, out, _ = run("status", "--config", str(config_file))
    assert code == 0
    assert "InService" in out and "workers" in out and "ml.m5.xlarge" in out
    assert "Nodes: 5 (Running 5)" in out
    code, data = run.json("status", "--config", str(config_file))
    assert code == 0
    assert data["status"] == "InService"
    assert data["node_counts"] == {"Running": 5}
    assert {g["name"]: (g["target"], g["current"]) for g in data["instance_groups"]} == {
        "workers": (3, 3),
        "cpu": (2, 2),
    }


def test_status_shows_the_failure_message(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response(
        "describe_cluster",
        cluster_description("Failed", FailureMessage="Lifecycle script on_create.sh failed"),
    )
    stub.add_response(
        "list_cluster_nodes", {"ClusterNodeSummaries": [_node("i-0aaaaaaaaaaaaaaa1", status="Failure")]}
    )
    code, out, _ = run("status", "--cluster", CLUSTER, "--region", REGION, clients={"sagemaker": client})
    assert code == 0
    assert (
        "Failure   Lifecycle script on_create.sh failed" in out
        or "Lifecycle script on_create.sh failed" in out
    )
    assert "Failure 1" in out


@mock_aws
def test_nodes_filters_by_group_and_status_with_moto(run, config_file: Path) -> None:
    sm = boto3.client("sagemaker", region_name=REGION)
    moto_cluster(
        sm,
        [
            {"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "InstanceCount": 3},
            {"InstanceGroupName": "cpu", "InstanceType": "ml.m5.xlarge", "InstanceCount": 2},
        ],
    )
    code, data = run.json("nodes", "--config", str(config_file))
    assert code == 0 and len(data) == 5
    code, data = run.json("nodes", "--config", str(config_file), "--group", "cpu")
    assert sorted(n["instance_id"] for n in data) == ["cpu-0", "cpu-1"]
    assert data[0]["k8s_node"] == f"hyperpod-{data[0]['instance_id']}"
    code, data = run.json("nodes", "--config", str(config_file), "--status", "failure")
    assert data == []
    code, out, err = run("nodes", "--config", str(config_file), "--status", "Running")
    assert "workers-0" in out and "5 node(s)" in err


def test_nodes_follows_next_token_across_pages(run) -> None:
    client, stub = stubbed("sagemaker")
    first = [_node(f"i-{i:017x}") for i in range(100)]
    second = [_node(f"i-{i:017x}", status="Failure") for i in range(100, 130)]
    stub.add_response(
        "list_cluster_nodes",
        {"ClusterNodeSummaries": first, "NextToken": "page-2"},
        {"ClusterName": CLUSTER, "MaxResults": 100},
    )
    stub.add_response(
        "list_cluster_nodes",
        {"ClusterNodeSummaries": second},
        {"ClusterName": CLUSTER, "MaxResults": 100, "NextToken": "page-2"},
    )
    code, data = run.json("nodes", "--cluster", CLUSTER, "--region", REGION, clients={"sagemaker": client})
    assert code == 0
    assert len(data) == 130
    assert sum(n["status"] == "Failure" for n in data) == 30
    stub.assert_no_pending_responses()


# --- wait -----------------------------------------------------------------------------------------


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]
    monkeypatch.setattr(waitmod, "_now", lambda: now[0])
    monkeypatch.setattr(waitmod, "_sleep", lambda s: now.__setitem__(0, now[0] + s))
    return now


def _wait(run, statuses: list[str], *extra: str, **desc_extra: object) -> tuple[int, str, str]:
    client, stub = stubbed("sagemaker")
    for status in statuses:
        stub.add_response("describe_cluster", cluster_description(status, **desc_extra))
    result = run("wait", "--cluster", CLUSTER, "--region", REGION, *extra, clients={"sagemaker": client})
    stub.assert_no_pending_responses()
    return result


def test_wait_in_service_exits_0(run, fake_clock: list[float]) -> None:
    code, out, err = _wait(run, ["Creating", "Creating", "InService"], "--interval", "10s")
    assert code == 0
    assert "is InService" in out
    assert "Creating" in err  # progress on stderr
    assert fake_clock[0] == 20


def test_wait_failed_exits_1_with_the_failure_message(run, fake_clock: list[float]) -> None:
    code, _, err = _wait(run, ["Creating", "Failed"], FailureMessage="Insufficient capacity")
    assert code == 1
    assert "Insufficient capacity" in err


def test_wait_times_out_with_exit_4(run, fake_clock: list[float]) -> None:
    code, out, err = _wait(run, ["Creating"] * 4, "--timeout", "90s", "--interval", "30s", "--json")
    assert code == 4
    import json

    data = json.loads(out)
    assert data["timed_out"] is True and data["status"] == "Creating"


def test_wait_bad_duration_is_a_usage_error(run) -> None:
    code, _, err = run("wait", "--cluster", CLUSTER, "--region", REGION, "--timeout", "soon")
    assert code == 2 and "not a duration" in err


def test_wait_redraws_progress_on_a_terminal(fake_clock: list[float]) -> None:
    import io

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description("Updating"))
    stub.add_response("describe_cluster", cluster_description("InService"))
    stream = Tty()
    result = waitmod.wait_for_cluster(client, CLUSTER, timeout=600, interval=5, stream=stream)
    assert result.exit_code == 0
    assert "\r\033[K" in stream.getvalue() and "workers=3/3" in stream.getvalue()


# --- events ---------------------------------------------------------------------------------------


def _event(n: int, level: str) -> dict:
    return {
        "EventId": f"e{n}",
        "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123def456",
        "ClusterName": CLUSTER,
        "ResourceType": "Instance",
        "InstanceGroupName": "workers",
        "InstanceId": "i-0aaaaaaaaaaaaaaa1",
        "EventTime": T0 + dt.timedelta(minutes=n),
        "EventLevel": level,
        "Description": f"event {n}",
    }


def test_events_filters_by_level_and_time_over_pages(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response(
        "list_cluster_events",
        {"Events": [_event(9, "Info"), _event(8, "Error")], "NextToken": "t2"},
        {
            "ClusterName": CLUSTER,
            "SortBy": "EventTime",
            "SortOrder": "Descending",
            "MaxResults": 100,
            "EventTimeAfter": ANY,
        },
    )
    stub.add_response(
        "list_cluster_events",
        {"Events": [_event(7, "Warn"), _event(6, "Info")]},
        {
            "ClusterName": CLUSTER,
            "SortBy": "EventTime",
            "SortOrder": "Descending",
            "MaxResults": 100,
            "EventTimeAfter": ANY,
            "NextToken": "t2",
        },
    )
    code, data = run.json(
        "events",
        "--cluster",
        CLUSTER,
        "--region",
        REGION,
        "--level",
        "Warn",
        "--since",
        "2h",
        clients={"sagemaker": client},
    )
    assert code == 0
    assert [e["event_id"] for e in data] == ["e7", "e8"]  # oldest first
    assert {e["level"] for e in data} == {"Warn", "Error"}


def test_events_table_and_limit(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("list_cluster_events", {"Events": [_event(n, "Info") for n in range(5, 0, -1)]})
    code, out, _ = run(
        "events", "--cluster", CLUSTER, "--region", REGION, "--limit", "2", clients={"sagemaker": client}
    )
    assert code == 0
    assert "event 5" in out and "event 4" in out and "event 3" not in out
    assert out.index("event 4") < out.index("event 5")


def test_events_bad_time_is_a_usage_error(run) -> None:
    code, _, err = run("events", "--cluster", CLUSTER, "--region", REGION, "--since", "yesterday-ish")
    assert code == 2 and "not a time" in err


def test_status_names_every_type_of_a_flexible_group(run) -> None:
    # DescribeCluster reports a flexible group without InstanceType (botocore's ClusterInstanceGroupDetails).
    flexible = {"InstanceGroupName": "workers", "CurrentCount": 1, "TargetCount": 2, "Status": "InService",
                "InstanceRequirements": {"CurrentInstanceTypes": ["ml.g5.12xlarge"],
                                         "DesiredInstanceTypes": ["ml.g5.8xlarge", "ml.g5.12xlarge"]},
                "ExecutionRole": "arn:aws:iam::123456789012:role/exec",
                "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/scripts", "OnCreate": "on_create.sh"}}
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description(groups=[flexible]))
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [_node("i-0aaaaaaaaaaaaaaa1")]})
    code, data = run.json("status", "--cluster", CLUSTER, "--region", REGION, clients={"sagemaker": client})
    assert code == 0
    assert data["instance_groups"][0]["instance_type"] == "ml.g5.8xlarge or ml.g5.12xlarge"
