"""NetworkStack intent: subnets by AZ ID, secondary CIDRs, NAT layout, EFA group, endpoints, flow logs."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match, Template


def test_vpc_uses_the_configured_cidr(default_synth):
    vpcs = default_synth.resources("network", "AWS::EC2::VPC")
    assert [v["Properties"]["CidrBlock"] for v in vpcs.values()] == ["10.192.0.0/16"]


def test_every_subnet_is_placed_by_az_id_never_by_name(default_synth):
    subnets = default_synth.resources("network", "AWS::EC2::Subnet")
    assert len(subnets) == 5  # 2 private + 2 public control-plane subnets + 1 HyperPod subnet
    for subnet in subnets.values():
        props = subnet["Properties"]
        assert "AvailabilityZone" not in props
        assert props["AvailabilityZoneId"] in {"usw2-az1", "usw2-az2"}
        assert props["MapPublicIpOnLaunch"] is False


def test_hyperpod_subnet_sits_on_its_secondary_cidr_and_waits_for_it(default_synth):
    template = default_synth.template("network")
    blocks = default_synth.resources("network", "AWS::EC2::VPCCidrBlock")
    assert [b["Properties"]["CidrBlock"] for b in blocks.values()] == ["10.1.0.0/16"]
    (block_id,) = blocks
    hyperpod = [
        (k, v) for k, v in template["Resources"].items()
        if v["Type"] == "AWS::EC2::Subnet" and v["Properties"]["CidrBlock"] == "10.1.0.0/16"
    ]
    assert len(hyperpod) == 1
    assert block_id in hyperpod[0][1]["DependsOn"]
    assert hyperpod[0][1]["Properties"]["AvailabilityZoneId"] == "usw2-az2"


def test_per_az_nat_gateways_and_single_nat_variant(default_synth, variant_synth):
    assert len(default_synth.resources("network", "AWS::EC2::NatGateway")) == 2
    assert len(variant_synth.resources("network", "AWS::EC2::NatGateway")) == 1


def test_private_and_hyperpod_subnets_route_through_nat(default_synth):
    routes = default_synth.resources("network", "AWS::EC2::Route")
    via_nat = [r for r in routes.values() if "NatGatewayId" in r["Properties"]]
    via_igw = [r for r in routes.values() if "GatewayId" in r["Properties"]]
    assert len(via_nat) == 3 and len(via_igw) == 2


def test_efa_group_allows_all_traffic_within_itself_and_no_open_all_traffic_egress(default_synth):
    groups = default_synth.resources("network", "AWS::EC2::SecurityGroup")
    (group_id,) = groups
    egress = groups[group_id]["Properties"]["SecurityGroupEgress"]
    # AWS's security group template allows all egress: the default follows it.
    assert [{k: v for k, v in e.items() if k != "Description"} for e in egress] == [
        {"CidrIp": "0.0.0.0/0", "IpProtocol": "-1"}]
    ingress = default_synth.resources("network", "AWS::EC2::SecurityGroupIngress").values()
    self_rules = {
        (r["Properties"]["IpProtocol"], r["Properties"].get("FromPort"), r["Properties"].get("ToPort"))
        for r in ingress
        if r["Properties"]["SourceSecurityGroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    }
    assert self_rules == {("-1", None, None), ("tcp", 988, 988), ("tcp", 1018, 1023)}
    assert default_synth.resources("network", "AWS::EC2::SecurityGroupEgress") == {}  # covered by all egress


def test_https_only_egress_when_asked(variant_synth):
    groups = variant_synth.resources("network", "AWS::EC2::SecurityGroup")
    (group,) = [g for k, g in groups.items() if k.startswith("NetworkEfaSecurityGroup")]
    assert [{k: v for k, v in e.items() if k != "Description"} for e in group["Properties"]["SecurityGroupEgress"]] \
        == [{"CidrIp": "0.0.0.0/0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443}]
    self_egress = variant_synth.resources("network", "AWS::EC2::SecurityGroupEgress").values()
    assert "-1" in [e["Properties"]["IpProtocol"] for e in self_egress]


def test_s3_gateway_endpoint_has_no_policy_by_default(default_synth):
    (s3,) = default_synth.resources("network", "AWS::EC2::VPCEndpoint").values()
    assert s3["Properties"]["VpcEndpointType"] == "Gateway"
    assert "PolicyDocument" not in s3["Properties"]  # AWS's setup sets none: public datasets stay reachable
    assert len(s3["Properties"]["RouteTableIds"]) == 3


def test_s3_gateway_endpoint_policy_is_scoped_when_asked(variant_synth):
    endpoints = variant_synth.resources("network", "AWS::EC2::VPCEndpoint")
    (s3,) = [e for e in endpoints.values() if e["Properties"]["VpcEndpointType"] == "Gateway"]
    statements = s3["Properties"]["PolicyDocument"]["Statement"]
    actions = {a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}
    assert {"s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"} <= actions
    assert all(s["Action"] != "*" and "s3:*" not in s["Action"] for s in statements)
    account_scoped = [s for s in statements if s["Resource"] == "*"]
    assert account_scoped and all(
        s["Condition"]["StringEquals"]["aws:ResourceAccount"] == {"Ref": "AWS::AccountId"} for s in account_scoped
    )
    # A custom resource handler in the VPC can answer CloudFormation: PUT only, only to its response buckets.
    (responses,) = [s for s in statements if s.get("Sid") == "CloudFormationResponses"]
    assert responses["Action"] == "s3:PutObject"
    assert responses["Resource"] == "arn:aws:s3:::cloudformation-custom-resource-response-*/*"



def test_interface_endpoints_only_when_asked(default_synth, variant_synth):
    def interface_count(synth):
        return sum(
            1 for e in synth.resources("network", "AWS::EC2::VPCEndpoint").values()
            if e["Properties"].get("VpcEndpointType") == "Interface"
        )

    assert interface_count(default_synth) == 0
    assert interface_count(variant_synth) == 11
    services = json.dumps([e["Properties"]["ServiceName"] for e in
                           variant_synth.resources("network", "AWS::EC2::VPCEndpoint").values()])
    for name in ("ecr.api", "ecr.dkr", "eks-auth", "sagemaker.api", "ssmmessages", "sts", "logs"):
        assert name in services


def test_flow_logs_to_a_retained_log_group(default_synth):
    template = Template.from_json(default_synth.template("network"))
    template.has_resource_properties("AWS::EC2::FlowLog", {"ResourceType": "VPC", "TrafficType": "ALL"})
    (flow_log,) = template.find_resources("AWS::EC2::FlowLog").values()
    role_id = flow_log["Properties"]["DeliverLogsPermissionArn"]["Fn::GetAtt"][0]
    (trust,) = default_synth.template("network")["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"][
        "Statement"]
    assert trust["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    source_arn = json.dumps(trust["Condition"]["ArnLike"]["aws:SourceArn"])
    assert ":vpc-flow-log/*" in source_arn and "AWS::AccountId" in source_arn
    template.has_resource("AWS::Logs::LogGroup", {
        "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
        "Properties": Match.object_like({"RetentionInDays": 365}),
    })


def test_existing_vpc_is_adopted_not_created(byo_synth):
    template = byo_synth.template("network")
    types = {r["Type"] for r in template["Resources"].values()}
    assert types == {"AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupIngress"}
    groups = byo_synth.resources("network", "AWS::EC2::SecurityGroup")
    assert [g["Properties"]["VpcId"] for g in groups.values()] == ["vpc-0123456789abcdef0"]
    cluster = next(iter(byo_synth.resources("eks", "AWS::EKS::Cluster").values()))
    assert cluster["Properties"]["ResourcesVpcConfig"]["SubnetIds"] == [
        "subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"
    ]
