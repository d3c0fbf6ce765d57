"""Leftovers of a kept destroy (preflight) and what blocks a VPC delete (pre-destroy), against moto and Stubber."""

from __future__ import annotations

from pathlib import Path

import boto3
from hpctl_testkit import REGION, config_data, stubbed
from moto import mock_aws

from hpctl import leftovers, predestroy, preflight
from hpctl.aws import Clients
from infra.config import parse_config

CONFIG = parse_config(config_data())  # project "hp": EKS cluster hp-eks


def _no_stack(stack: str) -> tuple[object, object]:
    cf, stub = stubbed("cloudformation")
    stub.add_client_error("list_stack_resources", "ValidationError", f"Stack with id {stack} does not exist")
    return cf, stub


@mock_aws
def test_a_kept_control_plane_log_group_without_its_stack_is_a_leftover_with_the_delete_command():
    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName="/aws/eks/hp-eks/cluster")
    logs.create_log_group(logGroupName="/aws/eks/hp-eks/cluster-other")  # same prefix, another group
    cf, stub = _no_stack("hp-eks")
    clients = Clients(REGION, preset={"logs": logs, "cloudformation": cf})
    (found,) = leftovers.find(CONFIG, clients)
    stub.assert_no_pending_responses()
    assert (found.log_group, found.stack, found.stack_exists) == ("/aws/eks/hp-eks/cluster", "hp-eks", False)
    assert found.commands(REGION) == [
        f"aws logs delete-log-group --region {REGION} --log-group-name /aws/eks/hp-eks/cluster"]
    (check,) = preflight.check_leftovers(CONFIG, Clients(REGION, preset={"logs": logs, "cloudformation":
                                                                           _no_stack("hp-eks")[0]}))
    assert check.verdict == preflight.FAIL and "delete-log-group" in check.reason


@mock_aws
def test_a_group_its_stack_owns_is_no_leftover_and_one_it_does_not_can_be_imported():
    logs = boto3.client("logs", region_name=REGION)
    for name in ("/aws/eks/hp-eks/cluster", "/aws/containerinsights/hp-eks/host"):
        logs.create_log_group(logGroupName=name)
    cf, stub = stubbed("cloudformation")
    stub.add_response("list_stack_resources", {"StackResourceSummaries": []},
                      {"StackName": "hp-observability"})
    stub.add_response("list_stack_resources", {"StackResourceSummaries": [{
        "LogicalResourceId": "ControlPlaneLogs", "PhysicalResourceId": "/aws/eks/hp-eks/cluster",
        "ResourceType": "AWS::Logs::LogGroup", "LastUpdatedTimestamp": "2026-12-01T00:00:00Z",
        "ResourceStatus": "CREATE_COMPLETE"}]}, {"StackName": "hp-eks"})
    (found,) = leftovers.find(CONFIG, Clients(REGION, preset={"logs": logs, "cloudformation": cf}))
    assert (found.log_group, found.stack_exists) == ("/aws/containerinsights/hp-eks/host", True)
    assert found.commands(REGION)[1].startswith("npx cdk import hp-observability")


@mock_aws
def test_nothing_kept_means_no_stack_is_asked():
    logs = boto3.client("logs", region_name=REGION)
    cf, stub = stubbed("cloudformation")  # no responses: any call would fail the test
    (check,) = preflight.check_leftovers(CONFIG, Clients(REGION, preset={"logs": logs, "cloudformation": cf}))
    assert check.verdict == preflight.PASS


# --- pre-destroy -------------------------------------------------------------------------------------


def _vpc_with_leftovers() -> tuple[str, dict[str, str]]:
    """A VPC holding one leaked CNI ENI, one unrelated detached ENI and two load balancers (one tagged for hp-eks)."""
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{z}")
               ["Subnet"]["SubnetId"] for i, z in ((1, "a"), (2, "b"))]
    cni = ec2.create_network_interface(
        SubnetId=subnets[0], Description="aws-K8S-i-0123456789abcdef0",
        TagSpecifications=[{"ResourceType": "network-interface",
                            "Tags": [{"Key": "cluster.k8s.amazonaws.com/name", "Value": "hp-eks"}]}],
    )["NetworkInterface"]["NetworkInterfaceId"]
    other = ec2.create_network_interface(SubnetId=subnets[0], Description="someone else's")[
        "NetworkInterface"]["NetworkInterfaceId"]
    elbv2 = boto3.client("elbv2", region_name=REGION)
    ours = elbv2.create_load_balancer(Name="k8s-training-svc", Subnets=subnets, Type="network",
                                      Tags=[{"Key": "elbv2.k8s.aws/cluster", "Value": "hp-eks"}])[
        "LoadBalancers"][0]["LoadBalancerArn"]
    theirs = elbv2.create_load_balancer(Name="another-team", Subnets=subnets)["LoadBalancers"][0][
        "LoadBalancerArn"]
    elsewhere = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    elsewhere_subnets = [ec2.create_subnet(VpcId=elsewhere, CidrBlock=f"10.9.{i}.0/24",
                                           AvailabilityZone=f"{REGION}{z}")["Subnet"]["SubnetId"]
                         for i, z in ((1, "a"), (2, "b"))]
    elbv2.create_load_balancer(Name="elsewhere", Subnets=elsewhere_subnets,  # another VPC: not listed
                               Tags=[{"Key": "elbv2.k8s.aws/cluster", "Value": "hp-eks"}])
    return vpc, {"cni": cni, "other": other, "ours": ours, "theirs": theirs}


def _byo_config(vpc: str):
    data = config_data()
    data["network"] = {"existing_vpc_id": vpc, "control_plane_az_ids": ["usw2-az1", "usw2-az2"],
                       "control_plane_subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
                       "hyperpod_subnets": [{"az_id": "usw2-az2", "subnet_id": "subnet-0bbbbbbbbbbbbbbb1"}]}
    return parse_config(data)


@mock_aws
def test_lists_load_balancers_and_detached_interfaces_of_the_vpc_and_marks_this_clusters():
    vpc, ids = _vpc_with_leftovers()
    clients = Clients(REGION)
    found = {b.id: b for b in predestroy.find(_byo_config(vpc), clients, vpc)}
    assert set(found) == {ids["cni"], ids["other"], ids["ours"], ids["theirs"]}
    assert {i for i, b in found.items() if b.ours} == {ids["cni"], ids["ours"]}


@mock_aws
def test_delete_removes_only_what_is_tagged_for_this_cluster():
    vpc, ids = _vpc_with_leftovers()
    clients = Clients(REGION)
    config = _byo_config(vpc)
    assert predestroy.remove(clients, predestroy.find(config, clients, vpc)) == []
    left = {b.id for b in predestroy.find(config, clients, vpc)}
    assert left == {ids["other"], ids["theirs"]}


def test_the_vpc_comes_from_the_network_stack_and_is_none_once_it_is_gone():
    cf, stub = stubbed("cloudformation")
    stub.add_response("list_stack_resources", {"StackResourceSummaries": [{
        "LogicalResourceId": "NetworkVpc", "PhysicalResourceId": "vpc-0123456789abcdef0",
        "ResourceType": "AWS::EC2::VPC", "LastUpdatedTimestamp": "2026-12-01T00:00:00Z",
        "ResourceStatus": "CREATE_COMPLETE"}]}, {"StackName": "hp-network"})
    stub.add_client_error("list_stack_resources", "ValidationError", "Stack with id hp-network does not exist")
    clients = Clients(REGION, preset={"cloudformation": cf})
    assert predestroy.vpc_id(CONFIG, clients) == "vpc-0123456789abcdef0"
    assert predestroy.vpc_id(CONFIG, clients) is None


@mock_aws
def test_cli_lists_then_deletes_after_confirmation_and_exits_1_while_something_remains(run, write_config):
    vpc, ids = _vpc_with_leftovers()
    data = config_data()
    data["network"] = {"existing_vpc_id": vpc, "control_plane_az_ids": ["usw2-az1", "usw2-az2"],
                       "control_plane_subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
                       "hyperpod_subnets": [{"az_id": "usw2-az2", "subnet_id": "subnet-0bbbbbbbbbbbbbbb1"}]}
    path: Path = write_config(data)
    code, listed = run.json("pre-destroy", "--config", str(path))
    assert code == 1 and listed["deleted"] is False and len(listed["blockers"]) == 4
    code, out, err = run("pre-destroy", "--config", str(path), "--delete")
    assert code == 2 and "pass --yes" in err  # no terminal in tests: refused, nothing deleted
    code, deleted = run.json("pre-destroy", "--config", str(path), "--delete", "--yes")
    assert code == 1 and deleted["failed"] == []  # someone else's load balancer and ENI remain
    ec2 = boto3.client("ec2", region_name=REGION)
    assert not ec2.describe_network_interfaces(
        Filters=[{"Name": "network-interface-id", "Values": [ids["cni"]]}])["NetworkInterfaces"]
