"""The VPC for HyperPod on EKS: control-plane subnets, HyperPod subnets on secondary CIDRs by AZ ID, EFA group."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

from aws_cdk import Aws, Fn, RemovalPolicy, Stack, Tags, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.constructs.common import acknowledge
from infra.constructs.function_placement import DEPLOY_TIME_SUBNETS
from infra.errors import ConfigError
from infra.facts.ip_plan import control_plane_layout
from infra.facts.names import NAG_PACK_NAME

# Interface endpoints a closed network needs for HyperPod nodes, EKS and the operator tooling: construct ID ->
# the name of the ec2.InterfaceVpcEndpointAwsService constant. Names, not the constants: reading one is a call into
# jsii, made where an endpoint is built rather than whenever this module is imported.
CLOSED_NETWORK_ENDPOINTS: dict[str, str] = {
    "Ec2": "EC2",
    "EcrApi": "ECR",
    "EcrDkr": "ECR_DOCKER",
    "Sts": "STS",
    "Logs": "CLOUDWATCH_LOGS",
    "Monitoring": "CLOUDWATCH_MONITORING",
    "Ssm": "SSM",
    "SsmMessages": "SSM_MESSAGES",
    "Ec2Messages": "EC2_MESSAGES",
    "EksAuth": "EKS_AUTH",
    "SageMakerApi": "SAGEMAKER_API",
}


class _PlacedSubnet(NamedTuple):
    """A subnet this construct creates, with its AZ ID and its own route table."""

    az_id: str
    subnet: ec2.CfnSubnet
    table: ec2.CfnRouteTable


class HyperPodNetwork(Construct):
    """A VPC laid out for a HyperPod cluster orchestrated by EKS, or an existing one adopted.

    Three ways to get the VPC, exactly one of them:
      - New VPC (``vpc_cidr``): one private and one public subnet per ``control_plane_az_ids`` entry, placed
        by AZ ID and carved from ``vpc_cidr`` (see ``infra.facts.ip_plan.control_plane_layout``); NAT gateways per
        AZ or a single one (``nat_gateways``); each ``hyperpod_subnet_cidrs`` entry (AZ ID -> CIDR) as a
        secondary VPC CIDR holding one private subnet, placed by AZ ID, routed to the NAT gateway of the same
        AZ ID when there is one; an S3 gateway endpoint (open, or with ``s3_endpoint_policy="this_account"``
        limited to this account's buckets and the AWS-owned buckets nodes read) and flow logs to CloudWatch
        Logs kept ``flow_logs_retention``.
      - Existing VPC by ID (``existing_vpc_id`` with ``control_plane_subnet_ids`` and ``hyperpod_subnet_ids``,
        AZ ID -> subnet ID): the subnets are imported; nothing is created in the VPC except the security group
        and, with ``interface_endpoints``, the interface endpoints.
      - Existing VPC as constructs: ``vpc``, ``control_plane_subnets`` (at least 2, private, in different AZs)
        and ``hyperpod_subnets`` (AZ ID -> private subnet).
    ``interface_endpoints`` adds the interface endpoints of ``CLOSED_NETWORK_ENDPOINTS`` (not with ``vpc``),
    open to ``vpc_cidr`` and the HyperPod CIDRs.

    ``security_group``: the group EFA needs (all traffic to and from itself, FSx for Lustre ports within
    it, and all egress or, with ``node_egress="https_only"``, HTTPS only), shared by the EKS control plane ENIs
    and the HyperPod nodes; created unless an existing one is passed (which must then allow the same).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc_cidr: str | None = None,
        control_plane_az_ids: Sequence[str] = (),
        hyperpod_subnet_cidrs: Mapping[str, str] | None = None,
        nat_gateways: Literal["per_az", "single"] = "per_az",
        s3_endpoint_policy: Literal["open", "this_account"] = "open",
        flow_logs_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        existing_vpc_id: str | None = None,
        control_plane_subnet_ids: Sequence[str] = (),
        hyperpod_subnet_ids: Mapping[str, str] | None = None,
        vpc: ec2.IVpc | None = None,
        control_plane_subnets: Sequence[ec2.ISubnet] = (),
        hyperpod_subnets: Mapping[str, ec2.ISubnet] | None = None,
        security_group: ec2.ISecurityGroup | None = None,
        node_egress: Literal["all", "https_only"] = "all",
        interface_endpoints: bool = False,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.flow_log: ec2.FlowLog | None = None
        self.flow_log_group: logs.LogGroup | None = None
        self.s3_endpoint: ec2.CfnVPCEndpoint | None = None
        self.interface_endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {}
        self.nat_gateways: dict[str, ec2.CfnNatGateway] = {}
        self.cfn_vpc: ec2.CfnVPC | None = None

        ways = [name for name, given in (("vpc", vpc is not None), ("existing_vpc_id", existing_vpc_id is not None),
                                         ("vpc_cidr", vpc_cidr is not None and existing_vpc_id is None)) if given]
        if len(ways) != 1:
            raise ConfigError("network", ways, "give exactly one of vpc_cidr (a VPC to create), existing_vpc_id "
                              "(a VPC by ID) or vpc (an existing vpc construct with its subnets)")
        if vpc is not None:
            if len(control_plane_subnets) < 2 or not hyperpod_subnets:
                raise ConfigError("network", None, "an existing vpc needs at least 2 control_plane_subnets and "
                                  "hyperpod_subnets (AZ ID -> subnet)")
            if interface_endpoints:
                raise ConfigError("interface_endpoints", True, "not with an existing vpc construct: add the "
                                  "endpoints to your VPC yourself")
            self.vpc: ec2.IVpc = vpc
            self.control_plane_subnets: list[ec2.ISubnet] = list(control_plane_subnets)
            self.hyperpod_subnets: dict[str, ec2.ISubnet] = dict(hyperpod_subnets)
        elif existing_vpc_id is not None:
            self._adopt_existing(existing_vpc_id, control_plane_az_ids, control_plane_subnet_ids,
                                 hyperpod_subnet_ids or {})
        else:
            assert vpc_cidr is not None
            self._create(vpc_cidr, control_plane_az_ids, hyperpod_subnet_cidrs or {}, nat_gateways,
                         s3_endpoint_policy, flow_logs_retention, removal_policy)

        self.security_group: ec2.ISecurityGroup = security_group or self._efa_security_group(node_egress)
        if interface_endpoints:
            peers = [c for c in (vpc_cidr, *(hyperpod_subnet_cidrs or {}).values()) if c is not None]
            self._add_interface_endpoints(peers)

    def deploy_time_subnet_ids(self, consumer: Construct) -> list[str]:
        """The IDs of the subnets deploy-time Lambda functions of ``consumer``'s stack run in (the first
        ``DEPLOY_TIME_SUBNETS`` control-plane subnets), as that stack's template may name them for AWS Control
        Tower's CT.LAMBDA.PR.3 (infra/constructs/function_placement.py): literal IDs and subnets of the
        consumer's stack as they are; subnets of another stack by SSM dynamic references to parameters made here
        on first use (``DeployTimeSubnet<i>``, named after this construct's stack), so the consumer's stack also
        waits for this one. Not when this construct is in the consumer's stack: a parameter of the same stack may
        not exist yet when CloudFormation resolves the reference (which it does "when necessary during stack and
        change set operations", awsdocs/aws-cloudformation-user-guide@056fba84:doc_source/dynamic-references.md);
        the subnets of a VPC of another stack are then cross-stack references, which the control's rule refuses."""
        subnets = self.control_plane_subnets[:DEPLOY_TIME_SUBNETS]
        here, there = Stack.of(self), Stack.of(consumer)
        if here is there or all(not Token.is_unresolved(s.subnet_id) or Stack.of(s) is there for s in subnets):
            return [s.subnet_id for s in subnets]
        there.add_stack_dependency(here, "deploy-time functions name the network's subnets through SSM parameters")
        ids = []
        for i, subnet in enumerate(subnets):
            name = f"/{here.stack_name}/deploy-time-subnet-{i}"
            if self.node.try_find_child(f"DeployTimeSubnet{i}") is None:
                ssm.StringParameter(self, f"DeployTimeSubnet{i}", parameter_name=name, string_value=subnet.subnet_id,
                                    description="A subnet the app's deploy-time Lambda functions run in")
            # forceDynamicReference: '{{resolve:ssm:<name>}}', a string in the template, not a template parameter
            # (aws-cdk-lib 2.275.0 aws-ssm StringParameterAttributes).
            ids.append(ssm.StringParameter.from_string_parameter_attributes(
                consumer, f"DeployTimeSubnet{i}Id", parameter_name=name, force_dynamic_reference=True).string_value)
        return ids

    # --- existing VPC -------------------------------------------------------------------------------
    def _adopt_existing(self, vpc_id: str, az_ids: Sequence[str], control_plane_subnet_ids: Sequence[str],
                        hyperpod_subnet_ids: Mapping[str, str]) -> None:
        self.vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=vpc_id,
            # Only used to label imported subnets; subnets are always selected explicitly by ID.
            availability_zones=list(az_ids),
        )
        self.control_plane_subnets = [
            ec2.Subnet.from_subnet_id(self, f"ControlPlaneSubnet{i}", subnet_id)
            for i, subnet_id in enumerate(control_plane_subnet_ids)
        ]
        self.hyperpod_subnets = {
            az_id: ec2.Subnet.from_subnet_id(self, f"HyperPodSubnet-{az_id}", subnet_id)
            for az_id, subnet_id in hyperpod_subnet_ids.items()
        }

    # --- new VPC ------------------------------------------------------------------------------------
    def _create(self, vpc_cidr: str, az_ids: Sequence[str], hyperpod_cidrs: Mapping[str, str],
                nat_gateways: str, s3_endpoint_policy: str, flow_logs_retention: logs.RetentionDays,
                removal_policy: RemovalPolicy) -> None:
        """A new VPC, in creation order: the VPC and its internet gateway, the control-plane subnets, the NAT
        gateways, the HyperPod subnets on their secondary CIDRs, the default routes, the subnets as constructs,
        the S3 gateway endpoint and the flow logs."""
        vpc = self._new_vpc(vpc_cidr)
        igw, attachment = self._internet_gateway(vpc)
        public, private = self._control_plane_subnets(vpc, vpc_cidr, az_ids, igw, attachment)
        nat_azs = self._add_nat_gateways(public, nat_gateways, attachment)
        hyperpod = self._hyperpod_subnets(vpc, hyperpod_cidrs)
        self._route_to_nat(private + hyperpod, nat_azs)
        self._expose_subnets(vpc, public, private, hyperpod)
        self._add_s3_gateway_endpoint(vpc, [t for _, _, t in private + hyperpod], s3_endpoint_policy)
        self._add_flow_logs(flow_logs_retention, removal_policy)

    def _new_vpc(self, vpc_cidr: str) -> ec2.CfnVPC:
        vpc = ec2.CfnVPC(
            self,
            "Vpc",
            cidr_block=vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
        )
        self.cfn_vpc = vpc
        Tags.of(vpc).add("Name", f"{Aws.STACK_NAME}-vpc")
        return vpc

    def _internet_gateway(self, vpc: ec2.CfnVPC) -> tuple[ec2.CfnInternetGateway, ec2.CfnVPCGatewayAttachment]:
        igw = ec2.CfnInternetGateway(self, "InternetGateway")
        attachment = ec2.CfnVPCGatewayAttachment(self, "IgwAttachment", vpc_id=vpc.ref, internet_gateway_id=igw.ref)
        return igw, attachment

    def _control_plane_subnets(
        self, vpc: ec2.CfnVPC, vpc_cidr: str, az_ids: Sequence[str], igw: ec2.CfnInternetGateway,
        attachment: ec2.CfnVPCGatewayAttachment,
    ) -> tuple[list[_PlacedSubnet], list[_PlacedSubnet]]:
        """(public, private): per AZ ID a public subnet routed to the internet gateway and a private subnet, carved
        from the VPC CIDR by ``control_plane_layout``."""
        public: list[_PlacedSubnet] = []
        private: list[_PlacedSubnet] = []
        for az_id, private_cidr, public_cidr in control_plane_layout(ipaddress.IPv4Network(vpc_cidr), list(az_ids)):
            pub = self._subnet(f"Public-{az_id}", vpc, az_id, str(public_cidr), role="kubernetes.io/role/elb")
            route = ec2.CfnRoute(
                self, f"Public-{az_id}-Default", route_table_id=pub[1].ref,
                destination_cidr_block="0.0.0.0/0", gateway_id=igw.ref,
            )
            route.add_resource_dependency(attachment)
            public.append(_PlacedSubnet(az_id, *pub))
            private.append(
                _PlacedSubnet(az_id, *self._subnet(f"Private-{az_id}", vpc, az_id, str(private_cidr),
                                                   role="kubernetes.io/role/internal-elb"))
            )
        return public, private

    def _add_nat_gateways(self, public: Sequence[_PlacedSubnet], nat_gateways: str,
                          attachment: ec2.CfnVPCGatewayAttachment) -> list[str]:
        """A NAT gateway in each public subnet (per_az) or in the first one (single); the AZ IDs that have one."""
        nat_azs = [az for az, _, _ in public] if nat_gateways == "per_az" else [public[0].az_id]
        for az_id, subnet, _ in public:
            if az_id not in nat_azs:
                continue
            eip = ec2.CfnEIP(self, f"NatEip-{az_id}", domain="vpc")
            eip.add_resource_dependency(attachment)
            self.nat_gateways[az_id] = ec2.CfnNatGateway(
                self, f"Nat-{az_id}", subnet_id=subnet.ref, allocation_id=eip.attr_allocation_id
            )
        return nat_azs

    def _hyperpod_subnets(self, vpc: ec2.CfnVPC, hyperpod_cidrs: Mapping[str, str]) -> list[_PlacedSubnet]:
        """Each HyperPod CIDR as a secondary CIDR of the VPC holding one private subnet in its AZ ID."""
        hyperpod: list[_PlacedSubnet] = []
        for az_id, cidr in hyperpod_cidrs.items():
            cidr_block = ec2.CfnVPCCidrBlock(self, f"SecondaryCidr-{az_id}", vpc_id=vpc.ref, cidr_block=cidr)
            subnet, table = self._subnet(f"HyperPod-{az_id}", vpc, az_id, cidr, role=None)
            subnet.add_resource_dependency(cidr_block)
            Tags.of(subnet).add("hyperpod:subnet", "true")
            hyperpod.append(_PlacedSubnet(az_id, subnet, table))
        return hyperpod

    def _route_to_nat(self, subnets: Sequence[_PlacedSubnet], nat_azs: Sequence[str]) -> None:
        """The default route of each private subnet: the NAT gateway of its AZ ID, else the first one."""
        for az_id, _, table in subnets:
            nat = self.nat_gateways.get(az_id) or self.nat_gateways[nat_azs[0]]
            ec2.CfnRoute(
                self, f"{table.node.id}-Default", route_table_id=table.ref,
                destination_cidr_block="0.0.0.0/0", nat_gateway_id=nat.ref,
            )

    def _expose_subnets(self, vpc: ec2.CfnVPC, public: Sequence[_PlacedSubnet], private: Sequence[_PlacedSubnet],
                        hyperpod: Sequence[_PlacedSubnet]) -> None:
        """``vpc`` and the subnets as the IVpc and ISubnet constructs the other components take."""
        self.vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "VpcRef",
            vpc_id=vpc.ref,
            vpc_cidr_block=vpc.attr_cidr_block,
            availability_zones=[s.attr_availability_zone for _, s, _ in private],
            public_subnet_ids=[s.ref for _, s, _ in public],
            public_subnet_route_table_ids=[t.ref for _, _, t in public],
            private_subnet_ids=[s.ref for _, s, _ in private],
            private_subnet_route_table_ids=[t.ref for _, _, t in private],
        )
        self.control_plane_subnets = [self._import(s, t, f"ControlPlane-{az}") for az, s, t in private]
        self.public_subnets = [self._import(s, t, f"PublicRef-{az}") for az, s, t in public]
        self.hyperpod_subnets = {az: self._import(s, t, f"HyperPodRef-{az}") for az, s, t in hyperpod}

    def _add_s3_gateway_endpoint(self, vpc: ec2.CfnVPC, route_tables: Sequence[ec2.CfnRouteTable],
                                 s3_endpoint_policy: str) -> None:
        self.s3_endpoint = ec2.CfnVPCEndpoint(
            self,
            "S3Endpoint",
            vpc_id=vpc.ref,
            service_name=f"com.amazonaws.{Aws.REGION}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[t.ref for t in route_tables],
            policy_document=(self._s3_endpoint_policy().to_json()
                             if s3_endpoint_policy == "this_account" else None),
        )

    def _add_flow_logs(self, retention: logs.RetentionDays, removal_policy: RemovalPolicy) -> None:
        """All of the VPC's traffic logged to a CloudWatch log group, through a role only this account's flow logs
        may use."""
        self.flow_log_group = logs.LogGroup(
            self,
            "FlowLogs",
            retention=retention,
            removal_policy=removal_policy,
        )
        # Only the flow logs of this account may use the role (aws:SourceAccount + aws:SourceArn, as the VPC user
        # guide recommends: https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html). The flow
        # log's ID is unknown before it exists, hence the wildcard the guide suggests.
        flow_log_role = iam.Role(self, "FlowLogRole", assumed_by=iam.ServicePrincipal(
            "vpc-flow-logs.amazonaws.com").with_conditions({
                "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                "ArnLike": {"aws:SourceArn": Stack.of(self).format_arn(service="ec2", resource="vpc-flow-log",
                                                                       resource_name="*")},
            }))
        self.flow_log = ec2.FlowLog(
            self,
            "FlowLog",
            resource_type=ec2.FlowLogResourceType.from_vpc(self.vpc),
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group, flow_log_role),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )

    def _subnet(
        self, name: str, vpc: ec2.CfnVPC, az_id: str, cidr: str, *, role: str | None
    ) -> tuple[ec2.CfnSubnet, ec2.CfnRouteTable]:
        subnet = ec2.CfnSubnet(
            self,
            name,
            vpc_id=vpc.ref,
            availability_zone_id=az_id,
            cidr_block=cidr,
            map_public_ip_on_launch=False,
        )
        Tags.of(subnet).add("Name", Fn.join("-", [Aws.STACK_NAME, name]))
        if role:
            Tags.of(subnet).add(role, "1")
        table = ec2.CfnRouteTable(self, f"{name}-Routes", vpc_id=vpc.ref)
        ec2.CfnSubnetRouteTableAssociation(self, f"{name}-Assoc", subnet_id=subnet.ref, route_table_id=table.ref)
        return subnet, table

    def _import(self, subnet: ec2.CfnSubnet, table: ec2.CfnRouteTable, name: str) -> ec2.ISubnet:
        return ec2.Subnet.from_subnet_attributes(
            self,
            name,
            subnet_id=subnet.ref,
            availability_zone=subnet.attr_availability_zone,
            route_table_id=table.ref,
            ipv4_cidr_block=subnet.cidr_block,
        )

    def _s3_endpoint_policy(self) -> iam.PolicyDocument:
        aws_buckets = [
            f"prod-{Aws.REGION}-starport-layer-bucket",  # ECR image layers
            f"al2023-repos-{Aws.REGION}-*",  # Amazon Linux 2023 packages
            f"amazonlinux-2-repos-{Aws.REGION}",  # Amazon Linux 2 packages
        ]
        return iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    sid="ThisAccountBuckets",
                    principals=[iam.AnyPrincipal()],
                    # What training does with its own buckets: read, write, delete, list, multipart uploads.
                    actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket",
                             "s3:GetBucketLocation", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts",
                             "s3:ListBucketMultipartUploads"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:ResourceAccount": Aws.ACCOUNT_ID}},
                ),
                # A custom resource handler in the VPC answers CloudFormation with a PUT to a presigned URL of an
                # AWS-owned bucket, e.g. https://cloudformation-custom-resource-response-useast1.s3-us-east-1.
                # amazonaws.com/... (the event example of https://docs.aws.amazon.com/lambda/latest/dg/
                # services-cloudformation.html); "If they can't send responses to Amazon S3, CloudFormation won't
                # receive a response and the stack operation fails" (AWS::CloudFormation::CustomResource reference).
                iam.PolicyStatement(
                    sid="CloudFormationResponses",
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:PutObject"],
                    resources=[Stack.of(self).format_arn(service="s3", region="", account="",
                                                         resource="cloudformation-custom-resource-response-*",
                                                         resource_name="*")],
                ),
                iam.PolicyStatement(
                    sid="AwsOwnedPackageBuckets",
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:GetObject"],
                    resources=[Stack.of(self).format_arn(service="s3", region="", account="", resource=bucket,
                                                         resource_name="*") for bucket in aws_buckets],
                ),
            ]
        )

    # --- shared -------------------------------------------------------------------------------------
    def _efa_security_group(self, node_egress: str) -> ec2.SecurityGroup:
        all_egress = node_egress == "all"
        group = ec2.SecurityGroup(
            self,
            "EfaSecurityGroup",
            vpc=self.vpc,
            description="HyperPod nodes and EKS control plane: EFA needs all traffic within this group",
            # All egress is AWS's rule (security-group-template.yaml, InternetCommunicationRuleEgress); it covers
            # the traffic within the group too.
            allow_all_outbound=all_egress,
        )
        group.add_ingress_rule(group, ec2.Port.all_traffic(), "EFA and node-to-node traffic within the group")
        for port in (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023)):
            group.add_ingress_rule(group, port, "FSx for Lustre within the group")
        if all_egress:
            acknowledge(group, "HyperPod-EC2-2",
                        "network.node_egress is all: AWS's HyperPod security group template allows all egress "
                        "(InternetCommunicationRuleEgress); https_only restricts it.", pack=NAG_PACK_NAME)
        else:
            group.add_egress_rule(group, ec2.Port.all_traffic(), "EFA and node-to-node traffic within the group")
            group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to AWS APIs and registries")
        return group

    def _add_interface_endpoints(self, peers: Sequence[str]) -> None:
        subnets = ec2.SubnetSelection(subnets=self.control_plane_subnets)
        for name, service in CLOSED_NETWORK_ENDPOINTS.items():
            endpoint = ec2.InterfaceVpcEndpoint(
                self, f"{name}Endpoint", vpc=self.vpc, service=getattr(ec2.InterfaceVpcEndpointAwsService, service),
                subnets=subnets,
                private_dns_enabled=True, open=False,
            )
            for cidr in peers:
                endpoint.connections.allow_default_port_from(ec2.Peer.ipv4(cidr), "HTTPS from the VPC")
            self.interface_endpoints[name] = endpoint

