"""Node access (connect, ssh-config), reboot/replace batching and prompts, update-software, kubeconfig."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import boto3
import pytest
import yaml
from hpctl_testkit import CLUSTER, CLUSTER_ARN, REGION, cluster_description, moto_cluster, stubbed
from moto import mock_aws

from hpctl import cluster as api
from hpctl.commands import access, terminal

IDS = [f"i-{n:017x}" for n in range(60)]
BASE = ("--cluster", CLUSTER, "--region", REGION)


def test_ssm_target_format() -> None:
    assert api.cluster_id(CLUSTER_ARN) == "abc123def456"
    assert (
        api.ssm_target(CLUSTER_ARN, "workers", "i-0123456789abcdef0")
        == "sagemaker-cluster:abc123def456_workers-i-0123456789abcdef0"
    )
    assert api.normalize_node_id("hyperpod-i-0123456789abcdef0") == "i-0123456789abcdef0"
    assert api.normalize_node_id("i-0123456789abcdef0") == "i-0123456789abcdef0"


def _connect_stub(node: str = "i-0123456789abcdef0"):
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response(
        "describe_cluster_node",
        {"NodeDetails": {"InstanceGroupName": "workers", "InstanceId": node}},
        {"ClusterName": CLUSTER, "NodeId": node},
    )
    return client


TARGET = "sagemaker-cluster:abc123def456_workers-i-0123456789abcdef0"


def test_connect_without_the_tools_prints_the_command_and_exits_1(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(access.shutil, "which", lambda tool: None)
    called = []
    monkeypatch.setattr(access.subprocess, "call", lambda *a, **k: called.append(a) or 0)
    code, out, err = run(
        "connect", "hyperpod-i-0123456789abcdef0", *BASE, clients={"sagemaker": _connect_stub()}
    )
    assert code == 1  # no session was opened: a script must not think it was
    assert out.strip() == f"aws ssm start-session --target {TARGET} --region {REGION}"
    assert "no session opened" in err and "session-manager-plugin" in err
    assert called == []


def test_connect_print_exits_0(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(access.shutil, "which", lambda tool: None)
    code, out, _ = run("connect", "i-0123456789abcdef0", *BASE, "--print", clients={"sagemaker": _connect_stub()})
    assert code == 0 and out.startswith("aws ssm start-session")


def test_connect_starts_the_session_when_tools_are_there(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(access.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    called = []
    monkeypatch.setattr(access.subprocess, "call", lambda argv: called.append(argv) or 0)
    code, _, _ = run("connect", "i-0123456789abcdef0", *BASE, clients={"sagemaker": _connect_stub()})
    assert code == 0
    assert called == [["aws", "ssm", "start-session", "--target", TARGET, "--region", REGION]]


def test_connect_json(run) -> None:
    code, data = run.json("connect", "i-0123456789abcdef0", *BASE, clients={"sagemaker": _connect_stub()})
    assert code == 0 and data["target"] == TARGET


def test_ssh_config_has_a_host_per_node(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    nodes = [
        {
            "InstanceGroupName": "workers",
            "InstanceId": i,
            "InstanceType": "ml.g5.8xlarge",
            "LaunchTime": "2025-01-01T00:00:00Z",
            "InstanceStatus": {"Status": "Running"},
        }
        for i in IDS[:3]
    ]
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": nodes})
    code, out, _ = run("ssh-config", *BASE, "--user", "ubuntu", clients={"sagemaker": client})
    assert code == 0
    assert out.count("\nHost ") == 3
    assert f"Host hyperpod-{IDS[0]} {IDS[0]}" in out
    assert "  User ubuntu" in out
    assert (
        f"ProxyCommand aws ssm start-session --target sagemaker-cluster:abc123def456_workers-{IDS[1]} "
        "--document-name AWS-StartSSHSession --parameters portNumber=%p --region us-west-2"
    ) in out


@mock_aws
def test_ssh_config_json_with_moto(run, config_file: Path) -> None:
    arn = moto_cluster(boto3.client("sagemaker", region_name=REGION))
    code, data = run.json("ssh-config", "--config", str(config_file))
    assert code == 0 and len(data) == 3
    assert data[0]["target"] == f"sagemaker-cluster:{arn.rsplit('/', 1)[1]}_workers-{data[0]['instance_id']}"


# --- reboot / replace -----------------------------------------------------------------------------


@pytest.fixture
def tty(monkeypatch: pytest.MonkeyPatch):
    """Pretend stdin is a terminal; returns a function setting the answer to the prompt."""
    answers: list[str] = []
    monkeypatch.setattr(terminal, "_stdin_is_terminal", lambda: True)
    monkeypatch.setattr(terminal, "_ask", lambda prompt: answers.pop(0))
    return answers.append


@pytest.mark.parametrize(
    ("action", "operation"),
    [("reboot", "batch_reboot_cluster_nodes"), ("replace", "batch_replace_cluster_nodes")],
)
def test_sixty_nodes_go_in_three_calls_of_25_25_10(run, action: str, operation: str) -> None:
    client, stub = stubbed("sagemaker")
    for chunk in (IDS[:25], IDS[25:50], IDS[50:]):
        stub.add_response(operation, {"Successful": chunk}, {"ClusterName": CLUSTER, "NodeIds": chunk})
    code, data = run.json(action, *IDS, *BASE, "--yes", clients={"sagemaker": client})
    stub.assert_no_pending_responses()
    assert code == 0
    assert len(data) == 60 and {r["result"] for r in data} == {"ok"}


def test_node_names_are_accepted_and_deduplicated(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response(
        "batch_reboot_cluster_nodes", {"Successful": IDS[:2]}, {"ClusterName": CLUSTER, "NodeIds": IDS[:2]}
    )
    code, _, _ = run(
        "reboot", f"hyperpod-{IDS[0]}", IDS[0], IDS[1], *BASE, "--yes", clients={"sagemaker": client}
    )
    assert code == 0
    stub.assert_no_pending_responses()


def test_answering_no_calls_nothing(run, tty) -> None:
    client, stub = stubbed("sagemaker")  # no responses queued: any call would fail the test
    tty("n")
    code, out, err = run("replace", *IDS[:3], *BASE, clients={"sagemaker": client})
    assert code == 1
    assert "aborted, nothing sent" in err
    stub.assert_no_pending_responses()


def test_answering_yes_sends(run, tty) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("batch_reboot_cluster_nodes", {"Successful": IDS[:1]})
    tty("y")
    code, _, _ = run("reboot", IDS[0], *BASE, clients={"sagemaker": client})
    assert code == 0
    stub.assert_no_pending_responses()


def test_without_a_terminal_and_without_yes_it_refuses(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal, "_stdin_is_terminal", lambda: False)
    client, _ = stubbed("sagemaker")
    code, _, err = run("reboot", IDS[0], *BASE, clients={"sagemaker": client})
    assert code == 2
    assert "pass --yes" in err


def _node(instance_id: str, group: str = "workers", status: str = "Running") -> dict:
    return {
        "InstanceGroupName": group,
        "InstanceId": instance_id,
        "InstanceType": "ml.g5.8xlarge",
        "LaunchTime": "2025-01-01T00:00:00Z",
        "InstanceStatus": {"Status": status},
    }


def _cluster_with_nodes(nodes: list[dict], stub, times: int = 1) -> None:
    for _ in range(times):
        stub.add_response("describe_cluster", cluster_description())
        stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": nodes})


def test_dry_run_checks_the_nodes_and_changes_nothing(run) -> None:
    client, stub = stubbed("sagemaker")  # no batch call queued: one would fail the test
    _cluster_with_nodes([_node(i) for i in IDS], stub, times=2)
    code, out, _ = run("replace", *IDS, *BASE, "--dry-run", clients={"sagemaker": client})
    assert code == 0
    assert "would replace 60 node(s)" in out and "call 3:" in out
    assert f"{IDS[0]} (workers, Running): would be replaced" in out
    assert "root and secondary volumes" in out
    code, data = run.json("replace", *IDS, *BASE, "--dry-run", clients={"sagemaker": client})
    assert [len(b) for b in data["batches"]] == [25, 25, 10]
    assert data["nodes"][0] == {"node": IDS[0], "group": "workers", "status": "Running"}
    stub.assert_no_pending_responses()


def test_dry_run_refuses_a_node_the_cluster_does_not_have(run) -> None:
    client, stub = stubbed("sagemaker")
    _cluster_with_nodes([_node(IDS[0])], stub)
    code, out, err = run("reboot", IDS[0], IDS[1], *BASE, "--dry-run", clients={"sagemaker": client})
    assert code == 2 and out == ""
    assert f"not a node of {CLUSTER} ({REGION}): {IDS[1]}" in err


def test_per_node_failures_are_reported_with_exit_1(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response(
        "batch_replace_cluster_nodes",
        {
            "Successful": [IDS[0]],
            "Failed": [
                {"NodeId": IDS[1], "ErrorCode": "InvalidInstanceStatus", "Message": "node is rebooting"}
            ],
        },
    )
    code, out, err = run("replace", IDS[0], IDS[1], *BASE, "--yes", clients={"sagemaker": client})
    assert code == 1
    assert "InvalidInstanceStatus" in out and "node is rebooting" in out
    assert "1 of 2 node(s) failed" in err


def test_an_aws_error_stops_the_batches_and_exits_3(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("batch_reboot_cluster_nodes", {"Successful": IDS[:25]})
    stub.add_client_error("batch_reboot_cluster_nodes", "AccessDeniedException", "not allowed")
    code, data = run.json("reboot", *IDS, *BASE, "--yes", clients={"sagemaker": client})
    assert code == 3
    results = [r["result"] for r in data]
    assert results.count("ok") == 25 and results.count("failed") == 25 and results.count("skipped") == 10


def test_a_bad_node_id_is_a_usage_error(run) -> None:
    code, _, err = run("reboot", "node-7", *BASE, "--yes")
    assert code == 2 and "not an instance ID" in err


# --- update-software ------------------------------------------------------------------------------


def test_update_software_request_shape(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    expected = {
        "ClusterName": CLUSTER,
        "InstanceGroups": [{"InstanceGroupName": "workers"}],
        "DeploymentConfig": {
            "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "CAPACITY_PERCENTAGE", "Value": 25}},
            "WaitIntervalInSeconds": 300,
        },
    }
    stub.add_response("update_cluster_software", {"ClusterArn": CLUSTER_ARN}, expected)
    code, out, _ = run(
        "update-software",
        *BASE,
        "--group",
        "workers",
        "--batch-percent",
        "25",
        "--wait-interval",
        "300",
        "--yes",
        clients={"sagemaker": client},
    )
    assert code == 0, out
    assert "software update started" in out
    stub.assert_no_pending_responses()


def test_update_software_all_groups_with_instance_count_batches(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response(
        "update_cluster_software",
        {"ClusterArn": CLUSTER_ARN},
        {
            "ClusterName": CLUSTER,
            "DeploymentConfig": {
                "RollingUpdatePolicy": {
                    "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 2},
                    "RollbackMaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                },
                "AutoRollbackConfiguration": [{"AlarmName": "gpu-errors"}],
            },
        },
    )
    code, data = run.json(
        "update-software",
        *BASE,
        "--batch-size",
        "2",
        "--rollback-batch-size",
        "1",
        "--alarm",
        "gpu-errors",
        "--yes",
        clients={"sagemaker": client},
    )
    assert code == 0 and data["cluster_arn"] == CLUSTER_ARN


@pytest.mark.parametrize(
    ("option", "error"), [("--interval=1s", "--interval 1s is too short"), ("--timeout=soon", "not a duration")]
)
def test_update_software_wait_checks_its_durations_before_sending_anything(run, option: str, error: str) -> None:
    client, _ = stubbed("sagemaker")  # no response queued: any call would end the command with exit 3
    code, out, err = run("update-software", *BASE, "--wait", option, "--yes", clients={"sagemaker": client})
    assert (code, out) == (2, "")
    assert error in err and len(err.splitlines()) == 1


def test_update_software_unknown_group_is_refused(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    code, _, err = run("update-software", *BASE, "--group", "nope", "--yes", clients={"sagemaker": client})
    assert code == 2 and "no instance group nope" in err


def test_update_software_dry_run_and_prompt(run, tty) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    code, out, _ = run("update-software", *BASE, "--dry-run", "--json", clients={"sagemaker": client})
    assert code == 0 and json.loads(out) == {"ClusterName": CLUSTER}
    stub.add_response("describe_cluster", cluster_description())
    tty("no")
    code, _, err = run("update-software", *BASE, clients={"sagemaker": client})
    assert code == 1 and "aborted" in err
    stub.assert_no_pending_responses()


def test_update_software_batch_options_exclude_each_other(run) -> None:
    code, _, err = run("update-software", *BASE, "--batch-size", "1", "--batch-percent", "10")
    assert code == 2 and "not allowed with" in err


# --- kubeconfig -----------------------------------------------------------------------------------

EKS = {
    "name": "hp-eks",
    "arn": "arn:aws:eks:us-west-2:123456789012:cluster/hp-eks",
    "endpoint": "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com",
    "certificateAuthority": {"data": "Q0VSVA=="},
}


def _eks():
    client, stub = stubbed("eks")
    stub.add_response("describe_cluster", {"cluster": EKS}, {"name": "hp-eks"})
    return client


def test_kubeconfig_print_uses_exec_auth(run, config_file: Path) -> None:
    code, out, _ = run("kubeconfig", "--config", str(config_file), "--print", clients={"eks": _eks()})
    assert code == 0
    doc = yaml.safe_load(out)
    user = doc["users"][0]["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"] == [
        "--region",
        REGION,
        "eks",
        "get-token",
        "--cluster-name",
        "hp-eks",
        "--output",
        "json",
    ]
    assert doc["clusters"][0]["cluster"]["server"] == EKS["endpoint"]
    assert doc["current-context"] == EKS["arn"]


def test_kubeconfig_merge_keeps_other_entries(run, config_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "kube" / "config"
    path.parent.mkdir()
    other = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "other", "cluster": {"server": "https://other"}},
            {"name": EKS["arn"], "cluster": {}},
        ],
        "users": [{"name": "other", "user": {"token": "x"}}],
        "contexts": [{"name": "other", "context": {"cluster": "other", "user": "other"}}],
        "current-context": "other",
    }
    path.write_text(yaml.safe_dump(other))
    code, out, _ = run("kubeconfig", "--config", str(config_file), "--alias", "hp", clients={"eks": _eks()})
    assert code == 0 and str(path) in out
    merged = yaml.safe_load(path.read_text())
    assert [c["name"] for c in merged["clusters"]] == ["other", EKS["arn"]]
    assert merged["clusters"][1]["cluster"]["server"] == EKS["endpoint"]
    assert {u["name"] for u in merged["users"]} == {"other", EKS["arn"]}
    assert {c["name"] for c in merged["contexts"]} == {"other", "hp"}
    assert merged["current-context"] == "hp"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_kubeconfig_refuses_to_touch_a_broken_file(run, config_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "custom-kubeconfig"
    path.write_text("clusters: [unclosed\n")
    code, _, err = run(
        "kubeconfig", "--config", str(config_file), "--kubeconfig", str(path), clients={"eks": _eks()}
    )
    assert code == 2 and "left untouched" in err
    assert path.read_text() == "clusters: [unclosed\n"


def test_kubeconfig_eks_name_from_the_orchestrator(run) -> None:
    sm, stub = stubbed("sagemaker")
    stub.add_response(
        "describe_cluster", cluster_description(Orchestrator={"Eks": {"ClusterArn": EKS["arn"]}})
    )
    code, data = run.json("kubeconfig", *BASE, "--print", clients={"sagemaker": sm, "eks": _eks()})
    assert code == 0 and data["clusters"][0]["name"] == EKS["arn"]


def test_kubeconfig_local_port_keeps_verifying_the_endpoint_name(run, config_file: Path) -> None:
    code, out, _ = run(
        "kubeconfig", "--config", str(config_file), "--print", "--local-port", "8443", clients={"eks": _eks()}
    )
    assert code == 0
    doc = yaml.safe_load(out)
    tunnel = f"{EKS['arn']}@localhost:8443"
    assert doc["clusters"] == [
        {
            "name": tunnel,
            "cluster": {
                "server": "https://localhost:8443",
                "certificate-authority-data": "Q0VSVA==",
                "tls-server-name": "abcdef.gr7.us-west-2.eks.amazonaws.com",  # host names are case-insensitive
            },
        }
    ]
    assert doc["contexts"] == [{"name": tunnel, "context": {"cluster": tunnel, "user": EKS["arn"]}}]
    assert doc["users"][0]["name"] == EKS["arn"]


def test_kubeconfig_local_port_entry_sits_beside_the_direct_one(run, config_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "config"
    base = ("kubeconfig", "--config", str(config_file), "--kubeconfig", str(path))
    assert run(*base, clients={"eks": _eks()})[0] == 0
    assert run(*base, "--local-port", "9443", "--alias", "hp-tunnel", clients={"eks": _eks()})[0] == 0
    merged = yaml.safe_load(path.read_text())
    servers = {c["name"]: c["cluster"]["server"] for c in merged["clusters"]}
    assert servers == {EKS["arn"]: EKS["endpoint"], f"{EKS['arn']}@localhost:9443": "https://localhost:9443"}
    assert [u["name"] for u in merged["users"]] == [EKS["arn"]]
    assert merged["current-context"] == "hp-tunnel"


@pytest.mark.parametrize("port", ["0", "65536", "https"])
def test_kubeconfig_refuses_a_port_that_is_no_tcp_port(run, config_file: Path, port: str) -> None:
    code, _, err = run("kubeconfig", "--config", str(config_file), "--print", "--local-port", port)
    assert code == 2 and "--local-port" in err


def test_ssh_config_logs_in_as_the_amazon_linux_user_by_default(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [_node(IDS[0])]})
    code, out, _ = run("ssh-config", *BASE, clients={"sagemaker": client})
    assert code == 0 and "  User ec2-user" in out
