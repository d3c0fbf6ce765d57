"""What a new user trips on: answers botocore cannot read, one unreadable cluster, names already taken, a shared
VPC, removing a group that has nodes, the flags and the messages outside the repository."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from hpctl_testkit import CLUSTER, CLUSTER_ARN, REGION, cluster_description, config_data, moto_cluster, stubbed
from moto import mock_aws
from test_hpctl_leftovers_predestroy import _adopting, _vpc_with_leftovers

from hpctl import predestroy, preflight
from hpctl.aws import Clients
from hpctl.commands import terminal
from infra.config import parse_config

BASE = ("--cluster", CLUSTER, "--region", REGION)


class _Body:
    """The raw body botocore reads an HTTP answer from (AWSResponse.content calls raw.stream())."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any):
        yield self.data


def answered_by_a_proxy(client: Any) -> Any:
    """Every request of `client` answered 200 with an HTML page, as a captive proxy does: no request leaves."""

    def send(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, 200, {"Content-Type": "text/html"},
                           _Body(b"<html><body>Please log in to the proxy<br></body></html>"))

    client.meta.events.register("before-send", send)
    return client


def test_an_answer_botocore_cannot_parse_is_one_line_and_exit_3(run, config_file: Path) -> None:
    cloudformation = answered_by_a_proxy(boto3.client("cloudformation", region_name=REGION))
    code, _, err = run("pre-destroy", "--config", str(config_file), clients={"cloudformation": cloudformation})
    assert code == 3, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "could not be read" in err and "proxy" in err


# --- flags and output ------------------------------------------------------------------------------


def _groups(*names: str) -> list[dict[str, Any]]:
    return [{"InstanceGroupName": n, "InstanceType": "ml.g5.8xlarge", "CurrentCount": 1, "TargetCount": 1,
             "ExecutionRole": "arn:aws:iam::123456789012:role/x", "ThreadsPerCore": 1,
             "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/s", "OnCreate": "on_create.sh"}} for n in names]


def _event(n: int, group: str) -> dict[str, Any]:
    return {"EventId": f"e{n}", "ClusterArn": CLUSTER_ARN, "ClusterName": CLUSTER, "ResourceType": "Instance",
            "InstanceGroupName": group, "InstanceId": "i-0aaaaaaaaaaaaaaa1", "EventLevel": "Info",
            "EventTime": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=n),
            "Description": f"event {n} of {group}"}


def test_events_group_is_repeatable(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description(groups=_groups("a", "b", "c")))
    stub.add_response("list_cluster_events", {"Events": [_event(3, "c"), _event(2, "b"), _event(1, "a")]},
                      {"ClusterName": CLUSTER, "SortBy": "EventTime", "SortOrder": "Descending", "MaxResults": 100})
    code, records = run.json("events", *BASE, "--group", "a", "--group", "b", clients={"sagemaker": client})
    assert code == 0
    assert [r["group"] for r in records] == ["a", "b"]


def test_an_unknown_group_is_the_same_error_in_events_and_nodes(run) -> None:
    errors = []
    for command in ("events", "nodes"):
        client, stub = stubbed("sagemaker")
        stub.add_response("describe_cluster", cluster_description(groups=_groups("a")))
        code, out, err = run(command, *BASE, "--group", "nope", clients={"sagemaker": client})
        assert code == 2 and out == "", (command, err)
        errors.append(err)
    assert errors[0] == errors[1] and "no instance group nope" in errors[0] and "have: a" in errors[0]


def test_update_software_has_one_batch_wait_and_the_old_spelling_warns(run) -> None:
    code, out, _ = run("update-software", "--help")
    assert "--batch-wait SECONDS" in out and "deprecated: use --batch-wait" in out
    requests = []
    for flag in ("--batch-wait", "--wait-interval"):
        client, stub = stubbed("sagemaker")
        stub.add_response("describe_cluster", cluster_description())
        code, request = run.json("update-software", *BASE, flag, "120", "--batch-size", "1", "--dry-run",
                                 clients={"sagemaker": client})
        assert code == 0
        requests.append(request)
    assert requests[0] == requests[1] and requests[0]["DeploymentConfig"]["WaitIntervalInSeconds"] == 120
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    _, _, err = run("update-software", *BASE, "--wait-interval", "120", "--dry-run", clients={"sagemaker": client})
    assert "--wait-interval is deprecated, use --batch-wait" in err


def test_render_examples_json_without_out_is_json(run, config_file: Path) -> None:
    code, rendered = run.json("render-examples", "--config", str(config_file))
    assert code == 0
    assert rendered and all(isinstance(docs, list) and all("kind" in d for d in docs) for docs in rendered.values())


@pytest.mark.parametrize(("command", "has", "lacks"), [
    ("status", ["0  success", "2  ", "3  AWS error"], ["1  ", "4  "]),
    ("drift", ["1  drift found"], ["4  "]),
    ("wait", ["1  the cluster is Failed", "4  timeout"], []),
    ("render-examples", ["2  "], ["1  ", "3  ", "4  "]),
])
def test_each_commands_help_lists_only_its_exit_codes(run, command: str, has: list[str], lacks: list[str]) -> None:
    _, out, _ = run(command, "--help")
    codes = out.split("exit codes:")[1]
    assert all(line in codes for line in has), codes
    assert not any(f"\n  {line}" in codes for line in lacks), codes


def test_the_refusal_without_a_terminal_is_one_line(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal, "_stdin_is_terminal", lambda: False)
    client, _ = stubbed("sagemaker")
    nodes = [f"i-0{n:016x}" for n in range(12)]
    code, _, err = run("reboot", *nodes, *BASE, clients={"sagemaker": client})
    assert code == 2
    assert err.strip().splitlines() == [
        f"hpctl: needs confirmation but stdin is not a terminal: pass --yes to reboot 12 node(s) of cluster {CLUSTER} "
        f"({REGION})"]


# --- outside the repository ------------------------------------------------------------------------


def test_outside_the_repository_a_missing_config_says_what_to_pass(run, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run("status", "--region", REGION)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["hpctl: no config file: pass --cluster or --config, or set HPCTL_CONFIG to "
                                        "one (config/default.yaml is read only in the repository)"]
    code, _, err = run("drift", "--region", REGION)
    assert code == 2 and "no config file: pass --config, or set HPCTL_CONFIG" in err


def test_hpctl_config_names_the_config(run, config_file: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HPCTL_CONFIG", str(config_file))
    code, rendered = run.json("render-examples")
    assert code == 0 and rendered
    code, _, err = run("render-examples", "--config", str(tmp_path / "other.yaml"))  # --config comes first
    assert code == 2 and "other.yaml" in err


# --- clusters ---------------------------------------------------------------------------------------------------


def _summary(n: int) -> dict[str, Any]:
    return {"ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/c{n:011d}", "ClusterName": f"c{n}",
            "CreationTime": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "ClusterStatus": "InService"}


def test_one_unreadable_cluster_is_marked_denied_and_the_rest_are_listed(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("list_clusters", {"ClusterSummaries": [_summary(1), _summary(2)]})
    stub.add_client_error("describe_cluster", "AccessDeniedException", "not authorized to DescribeCluster on c1",
                          http_status_code=400)
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []})
    code, out, err = run("clusters", "--region", REGION, clients={"sagemaker": client})
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(rows) == {"c1", "c2"} and "denied" in rows["c1"] and "3/3" in rows["c2"]
    assert "1 cluster(s) could not be read: c1 denied" in err


def test_a_long_listing_shows_its_progress(run) -> None:
    code, data = run.json("clusters", "--region", REGION, clients={"sagemaker": _stub_clusters(25)})
    assert code == 0 and len(data) == 25
    _, _, err = run("clusters", "--region", REGION, clients={"sagemaker": _stub_clusters(25)})
    assert "read 10 of 25 clusters" in err and "read 20 of 25 clusters" in err


def _stub_clusters(count: int) -> Any:
    client, stub = stubbed("sagemaker")
    stub.add_response("list_clusters", {"ClusterSummaries": [_summary(n) for n in range(count)]})
    for _ in range(count):
        stub.add_response("describe_cluster", cluster_description())
        stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []})
    return client


# --- pre-destroy --------------------------------------------------------------------------------------------------


@mock_aws
def test_pre_destroy_in_a_shared_vpc_exits_0_once_this_clusters_are_gone(run, write_config) -> None:
    """Another team's untagged ENI in a VPC the config adopts blocks nothing of this cluster's."""
    vpc, ids = _vpc_with_leftovers()
    path = write_config(_adopting(vpc))
    code, out, _ = run("pre-destroy", "--config", str(path))
    assert code == 1 and "to delete (--delete)" in out  # this cluster's load balancer and ENI are still there
    code, out, err = run("pre-destroy", "--config", str(path), "--delete", "--yes")
    assert code == 0, err
    rows = {line.split()[2 if line.startswith(("load balancer", "network interface")) else 1]: line
            for line in out.splitlines()[1:] if line.strip()}
    assert rows[ids["cni"]].rstrip().endswith("deleted") and rows[ids["ours"]].rstrip().endswith("deleted")
    assert "left alone: not this cluster's (shared VPC" in rows[ids["other"]]


@mock_aws
def test_pre_destroy_in_the_projects_own_vpc_counts_anyones_blocker(run, write_config, monkeypatch) -> None:
    """The destroy deletes the project's own VPC: another team's interface in it still blocks that."""
    vpc, ids = _vpc_with_leftovers()
    monkeypatch.setattr(predestroy, "vpc_id", lambda cfg, clients: vpc)  # the network stack's VPC
    path = write_config(config_data())
    code, deleted = run.json("pre-destroy", "--config", str(path), "--delete", "--yes")
    assert code == 1 and deleted["shared_vpc"] is False
    blocking = {b["id"] for b in deleted["blockers"] if b["blocks"]}
    assert blocking == {ids["other"], ids["theirs"]}


# --- preflight: names already taken ------------------------------------------------------------------------------


def _resources(resource_type: str, physical_id: str) -> dict[str, Any]:
    """ListStackResources' answer (botocore's StackResourceSummary)."""
    return {"StackResourceSummaries": [{"LogicalResourceId": "Cluster", "PhysicalResourceId": physical_id,
                                        "ResourceType": resource_type, "ResourceStatus": "CREATE_COMPLETE",
                                        "LastUpdatedTimestamp": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}]}


def _stack(name: str, description: str) -> dict[str, Any]:
    return {"Stacks": [{"StackName": name, "StackStatus": "CREATE_COMPLETE", "Description": description,
                        "CreationTime": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}]}


def _names(*, hyperpod_owner: str | None, eks_exists: bool, eks_stack_description: str | None) -> list:
    cfg = parse_config(config_data())
    eks, eks_stub = stubbed("eks")
    cf, cf_stub = stubbed("cloudformation")
    eks_arn = f"arn:aws:eks:{REGION}:123456789012:cluster/hp-eks"
    if eks_exists:
        eks_stub.add_response("describe_cluster", {"cluster": {"name": "hp-eks", "arn": eks_arn}}, {"name": "hp-eks"})
    else:
        eks_stub.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found", 404)
    cf_stub.add_response("list_stack_resources", _resources("AWS::SageMaker::Cluster", hyperpod_owner or "x")
                         if hyperpod_owner else {"StackResourceSummaries": []}, {"StackName": "hp-hyperpod"})
    if eks_exists:
        cf_stub.add_client_error("list_stack_resources", "ValidationError", "Stack with id hp-eks does not exist")
    if eks_stack_description is None:
        cf_stub.add_client_error("describe_stacks", "ValidationError", "Stack with id hp-eks does not exist")
    else:
        cf_stub.add_response("describe_stacks", _stack("hp-eks", eks_stack_description), {"StackName": "hp-eks"})
    cf_stub.add_client_error("describe_stacks", "ValidationError", "Stack with id hp-hyperpod does not exist")
    deployed = cluster_description()
    checks = preflight.check_names(cfg, Clients(REGION, preset={"eks": eks, "cloudformation": cf}), deployed,
                                   ["hp-eks", "hp-hyperpod"])
    cf_stub.assert_no_pending_responses()
    return checks


def test_preflight_fails_when_a_hyperpod_cluster_eks_cluster_or_stack_of_the_name_is_someone_elses() -> None:
    checks = _names(hyperpod_owner=None, eks_exists=True, eks_stack_description="Team X's EKS cluster")
    by_name = {c.name: c for c in checks}
    assert all(c.verdict == preflight.FAIL for c in checks) and set(by_name) == {
        f"name {CLUSTER}", "name hp-eks"}  # the EKS cluster's and the stack's share the name hp-eks
    reasons = " | ".join(c.reason for c in checks)
    assert (f"AWS::SageMaker::Cluster named {CLUSTER} already exists in {REGION} and stack hp-hyperpod did not "
            "create it: choose another hyperpod.cluster_name") in reasons
    assert f"aws sagemaker delete-cluster --cluster-name {CLUSTER} --region {REGION}" in reasons
    assert "AWS::EKS::Cluster named hp-eks already exists" in reasons
    assert "a stack named hp-eks already exists in us-west-2 and is not this app's" in reasons


def test_preflight_passes_names_that_are_this_projects_own() -> None:
    from hpctl_testkit import CLUSTER_ARN

    checks = _names(hyperpod_owner=CLUSTER_ARN, eks_exists=False,
                    eks_stack_description="HyperPod on EKS: EKS control plane, add-ons, access entries")
    assert [(c.name, c.verdict) for c in checks] == [("names", preflight.PASS)]


def test_the_apps_stacks_carry_the_description_preflight_recognises() -> None:
    from infra.facts.names import STACK_COMPONENTS, STACK_DESCRIPTION_PREFIX
    from stacks.app_builder import DESCRIPTIONS

    assert set(DESCRIPTIONS) == set(STACK_COMPONENTS)
    assert all(d.startswith(STACK_DESCRIPTION_PREFIX) for d in DESCRIPTIONS.values())


# --- drift: removing a group that has nodes ------------------------------------------------------------------


@mock_aws
def test_drift_says_removing_a_group_with_nodes_terminates_them_and_synth_refuses_it_unacknowledged(
        run, write_config) -> None:
    moto_cluster(boto3.client("sagemaker", region_name=REGION), [
        {"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "InstanceCount": 3},
        {"InstanceGroupName": "old", "InstanceType": "ml.m5.xlarge", "InstanceCount": 2}])
    path = write_config(config_data())
    code, out, err = run("drift", "--config", str(path))
    assert code == 1
    assert "SYNTH REFUSES: its nodes would terminate" in out
    assert ("WARNING: removing instance group old terminates its nodes and the jobs on them: its 2 node(s) would be "
            "terminated: synth refuses it unless hyperpod.acknowledge_group_removal lists the group.") in err
    code, result = run.json("drift", "--config", str(write_config(config_data(acknowledge_group_removal=["old"]))))
    (removal,) = [c for c in result["changes"] if c["group"] == "old"]
    assert removal["effect"] == "remove group: its nodes terminate" and result["refused"] is False
    assert removal["note"] == "its nodes are terminated; listed in hyperpod.acknowledge_group_removal"


def test_drift_and_synth_ask_the_one_replacement_engine_about_a_removed_group() -> None:
    from infra.guards import replacement

    assert replacement.group_removal("old", 2, []) == (replacement.REFUSE, "its 2 node(s) would be terminated: "
                                                       "synth refuses it unless hyperpod.acknowledge_group_removal "
                                                       "lists the group")
    assert replacement.group_removal("old", 2, ["old"])[0] == replacement.WARN
