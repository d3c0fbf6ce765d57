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


def _adopting(vpc: str) -> dict:
    """The config data of a project that adopts the VPC ``vpc`` by ID (its subnets named)."""
    data = config_data()
    data["network"] = {"existing_vpc_id": vpc, "control_plane_az_ids": ["usw2-az1", "usw2-az2"],
                       "control_plane_subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
                       "hyperpod_subnets": [{"az_id": "usw2-az2", "subnet_id": "subnet-0bbbbbbbbbbbbbbb1"}]}
    return data


@mock_aws
def test_cli_lists_then_deletes_after_confirmation_and_in_a_shared_vpc_only_this_clusters_decide(run, write_config):
    vpc, ids = _vpc_with_leftovers()
    path: Path = write_config(_adopting(vpc))
    code, listed = run.json("pre-destroy", "--config", str(path))
    assert code == 1 and listed["deleted"] is False and len(listed["blockers"]) == 4
    code, out, err = run("pre-destroy", "--config", str(path), "--delete")
    assert code == 2 and "pass --yes" in err  # no terminal in tests: refused, nothing deleted
    code, deleted = run.json("pre-destroy", "--config", str(path), "--delete", "--yes")
    # Someone else's load balancer and ENI remain, in a VPC the config adopts: they block nothing of this cluster's.
    assert code == 0 and deleted["failed"] == [] and deleted["shared_vpc"] is True
    results = {b["id"]: b["result"] for b in deleted["blockers"]}
    assert results[ids["cni"]] == results[ids["ours"]] == "deleted"
    assert results[ids["other"]].startswith("left alone: not this cluster's (shared VPC")
    ec2 = boto3.client("ec2", region_name=REGION)
    assert not ec2.describe_network_interfaces(
        Filters=[{"Name": "network-interface-id", "Values": [ids["cni"]]}])["NetworkInterfaces"]


# --- pre-destroy: GuardDuty's endpoint and security group ----------------------------------------------------

GD_SERVICE = f"com.amazonaws.{REGION}.guardduty-data"
GD_TAG = [{"Key": "GuardDutyManaged", "Value": "true"}]


def _endpoint(ec2, vpc: str, subnet: str, service: str, tags=None, groups=None) -> str:
    extra = {"TagSpecifications": [{"ResourceType": "vpc-endpoint", "Tags": tags}]} if tags else {}
    return ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=service, VpcEndpointType="Interface", SubnetIds=[subnet],
                                   SecurityGroupIds=groups or [], **extra)["VpcEndpoint"]["VpcEndpointId"]


def _vpc_with_guardduty() -> tuple[str, dict[str, str]]:
    """What GuardDuty's automated agent makes (an endpoint of guardduty-data and the group
    GuardDutyManagedSecurityGroup-<vpc>, both tagged GuardDutyManaged=true), next to endpoints that are not its own:
    one of guardduty-data made by hand, one tagged GuardDutyManaged=false, one of another service, a group tagged
    false, and GuardDuty's endpoint of another VPC."""
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(
        GroupName=f"GuardDutyManagedSecurityGroup-{vpc}", Description="GuardDuty", VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": GD_TAG}])["GroupId"]
    own_group = ec2.create_security_group(
        GroupName="mine", Description="mine", VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group",
                            "Tags": [{"Key": "GuardDutyManaged", "Value": "false"}]}])["GroupId"]
    ids = {
        "guardduty": _endpoint(ec2, vpc, subnet, GD_SERVICE, GD_TAG, [group]),
        "by_hand": _endpoint(ec2, vpc, subnet, GD_SERVICE),
        "excluded": _endpoint(ec2, vpc, subnet, GD_SERVICE, [{"Key": "GuardDutyManaged", "Value": "false"}]),
        "sts": _endpoint(ec2, vpc, subnet, f"com.amazonaws.{REGION}.sts", GD_TAG),
        "group": group,
        "own_group": own_group,
    }
    elsewhere = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    elsewhere_subnet = ec2.create_subnet(VpcId=elsewhere, CidrBlock="10.9.1.0/24")["Subnet"]["SubnetId"]
    ids["elsewhere"] = _endpoint(ec2, elsewhere, elsewhere_subnet, GD_SERVICE, GD_TAG)
    return vpc, ids


def _not_interfaces(blockers):
    """moto gives an endpoint plain detached (`available`) interfaces, which pre-destroy lists, unmarked, as
    network interfaces (AWS's are in use, RequesterManaged, and are not listed): left out of these comparisons."""
    return [b for b in blockers if (b.kind if isinstance(b, predestroy.Blocker) else b["kind"]) != "network interface"]


def _live_endpoints() -> set[str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    return {e["VpcEndpointId"] for e in ec2.describe_vpc_endpoints()["VpcEndpoints"] if e["State"] != "deleted"}


@mock_aws
def test_lists_guardduty_endpoints_of_the_vpc_and_marks_only_those_guardduty_tagged():
    vpc, ids = _vpc_with_guardduty()
    found = {b.id: b for b in _not_interfaces(predestroy.find(_byo_config(vpc), Clients(REGION), vpc))}
    # guardduty-data endpoints of this VPC and GuardDuty's group; not the sts endpoint, not our own group, not the
    # endpoint of the other VPC
    assert set(found) == {ids["guardduty"], ids["by_hand"], ids["excluded"], ids["group"]}
    assert {i for i, b in found.items() if b.ours} == {ids["guardduty"], ids["group"]}
    assert found[ids["guardduty"]].kind == "vpc endpoint" and GD_SERVICE in found[ids["guardduty"]].detail
    assert (found[ids["group"]].kind, found[ids["group"]].detail) == (
        "security group", f"GuardDutyManagedSecurityGroup-{vpc}")
    kinds = [b.kind for b in _not_interfaces(predestroy.find(_byo_config(vpc), Clients(REGION), vpc))]
    assert kinds.index("security group") > max(i for i, k in enumerate(kinds) if k == "vpc endpoint")


@mock_aws
def test_delete_removes_guardduty_endpoint_and_group_and_leaves_the_rest():
    vpc, ids = _vpc_with_guardduty()
    clients = Clients(REGION)
    config = _byo_config(vpc)
    assert predestroy.remove(clients, predestroy.find(config, clients, vpc)) == []
    assert _live_endpoints() == {ids["by_hand"], ids["excluded"], ids["sts"], ids["elsewhere"]}
    groups = {g["GroupId"] for g in boto3.client("ec2", region_name=REGION).describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"]}
    assert ids["group"] not in groups and ids["own_group"] in groups
    assert {b.id for b in _not_interfaces(predestroy.find(config, clients, vpc))} == {ids["by_hand"], ids["excluded"]}


def test_a_refused_endpoint_delete_and_a_group_still_in_use_are_reported_as_failed():
    """DeleteVpcEndpoints reports a refusal in Unsuccessful (botocore's ec2 model: DeleteVpcEndpointsResult);
    a group still used by the endpoint's interfaces answers DependencyViolation."""
    ec2, stub = stubbed("ec2")
    stub.add_response("delete_vpc_endpoints", {"Unsuccessful": [{
        "Error": {"Code": "InvalidVpcEndpoint.NotFound", "Message": "gone"}, "ResourceId": "vpce-0abc"}]},
        {"VpcEndpointIds": ["vpce-0abc"]})
    stub.add_client_error("delete_security_group", "DependencyViolation",
                          "resource sg-0abc has a dependent object", expected_params={"GroupId": "sg-0abc"})
    endpoint = predestroy.Blocker("vpc endpoint", "vpce-0abc", GD_SERVICE, True)
    group = predestroy.Blocker("security group", "sg-0abc", "GuardDutyManagedSecurityGroup-vpc-1", True)
    not_ours = predestroy.Blocker("vpc endpoint", "vpce-0def", GD_SERVICE, False)  # no call: a stub would fail
    failed = dict(predestroy.remove(Clients(REGION, preset={"ec2": ec2}), [endpoint, not_ours, group]))
    stub.assert_no_pending_responses()
    assert set(failed) == {endpoint, group}
    assert "InvalidVpcEndpoint.NotFound" in failed[endpoint]
    assert "DependencyViolation" in failed[group] and "pre-destroy --delete" in failed[group]


@mock_aws
def test_cli_deletes_guardduty_leftovers_after_confirmation_and_leaves_unmarked_ones_of_a_shared_vpc(
        run, write_config):
    vpc, ids = _vpc_with_guardduty()
    path: Path = write_config(_adopting(vpc))
    code, listed = run.json("pre-destroy", "--config", str(path))
    assert code == 1 and listed["deleted"] is False
    assert {(b["kind"], b["id"], b["ours"]) for b in _not_interfaces(listed["blockers"])} == {
        ("vpc endpoint", ids["guardduty"], True), ("vpc endpoint", ids["by_hand"], False),
        ("vpc endpoint", ids["excluded"], False), ("security group", ids["group"], True)}
    code, out, err = run("pre-destroy", "--config", str(path), "--delete")
    assert code == 2 and "pass --yes" in err and ids["guardduty"] in _live_endpoints()  # refused: nothing deleted
    code, deleted = run.json("pre-destroy", "--config", str(path), "--delete", "--yes")
    assert code == 0 and deleted["failed"] == []  # the two endpoints GuardDuty did not tag remain: not ours
    assert ids["guardduty"] not in _live_endpoints() and ids["elsewhere"] in _live_endpoints()
