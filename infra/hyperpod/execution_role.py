"""The HyperPod execution role: the IAM role every node (and every pod without Pod Identity) runs as."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.common import acknowledge, nag_name


def _arn(service: str, resource: str) -> str:
    """A partition-aware ARN in this stack's region and account."""
    return f"arn:{Aws.PARTITION}:{service}:{Aws.REGION}:{Aws.ACCOUNT_ID}:{resource}"


# Each wildcard resource the policy needs, as cdk-nag names it, with the reason it cannot be narrower.
WILDCARD_REASONS: dict[str, str] = {
    "Resource::*": "Granted only for actions without resource-level permissions: cloudwatch:PutMetricData "
    "(limited to the /aws/sagemaker/Clusters namespace by condition), the ssmmessages session channels, "
    "the VPC CNI's ec2:Describe* calls and ecr:GetAuthorizationToken.",
    "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/*":
        "HyperPod names the cluster's log group after the cluster id, which exists only after creation.",
    "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/*"
    ":log-stream:*": "Streams are named per instance group and instance id by the nodes themselves.",
    "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:network-interface/*":
        "The VPC CNI creates ENIs at run time; every statement on them requires ec2:Vpc to be this VPC.",
    "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:instance/*":
        "HyperPod creates the node instances at run time; limited to this VPC by the ec2:Vpc condition.",
    "Resource::arn:<AWS::Partition>:ecr:<AWS::Region>:*:repository/*":
        "Node images (EKS add-ons, HyperPod agents) come from AWS-owned registries whose account IDs differ "
        "by region; pulls are limited to this region and to read actions.",
}


class HyperPodExecutionRole(Construct):
    """An execution role for a HyperPod cluster orchestrated by EKS, scoped to this cluster's resources.

    Grants the equivalent of AmazonSageMakerClusterInstanceRolePolicy (logs and metrics under
    /aws/sagemaker/Clusters, SSM session channels), read of the lifecycle prefix only, the VPC CNI's ENI
    management limited to the VPC, its HyperPod subnets and security group, ECR image pulls,
    eks:DescribeCluster and eks-auth:AssumeRoleForPodIdentity on this EKS cluster only. No action is
    ``*``; ``*`` resources appear only where the API has no resource-level permissions, each acknowledged
    in ``WILDCARD_REASONS``. An optional permissions boundary applies to the role.

    Pass ``role`` to bring an existing role instead (then nothing is created or granted here).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        eks_cluster_arn: str,
        vpc_id: str,
        subnet_ids: Sequence[str],
        security_group_ids: Sequence[str],
        lifecycle_bucket_arn: str,
        lifecycle_prefix: str,
        permissions_boundary_arn: str | None = None,
        role: iam.IRole | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.policy: iam.Policy | None = None
        if role is not None:
            self.role: iam.IRole = role
            return
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="SageMaker HyperPod execution role (node role) for an EKS-orchestrated cluster",
        )
        if permissions_boundary_arn:
            # An aspect on the role itself runs after any wider one, so this specific boundary wins.
            boundary = iam.ManagedPolicy.from_managed_policy_arn(self, "Boundary", permissions_boundary_arn)
            iam.PermissionsBoundary.of(self.role).apply(boundary)
        vpc_arn = _arn("ec2", f"vpc/{vpc_id}")
        network_interfaces = _arn("ec2", "network-interface/*")
        in_this_vpc = {"ArnEquals": {"ec2:Vpc": vpc_arn}}
        statements = [
            iam.PolicyStatement(
                sid="ClusterLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                         "logs:DescribeLogStreams"],
                resources=[
                    _arn("logs", "log-group:/aws/sagemaker/Clusters/*"),
                    _arn("logs", "log-group:/aws/sagemaker/Clusters/*:log-stream:*"),
                ],
            ),
            iam.PolicyStatement(
                sid="ClusterMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Clusters"}},
            ),
            iam.PolicyStatement(
                sid="SsmSessions",
                actions=["ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
                         "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"],
                resources=["*"],
            ),
            iam.PolicyStatement(
                sid="LifecycleScriptsRead",
                actions=["s3:GetObject"],
                resources=[f"{lifecycle_bucket_arn}/{lifecycle_prefix}/*"],
            ),
            iam.PolicyStatement(
                sid="LifecycleScriptsList",
                actions=["s3:ListBucket"],
                resources=[lifecycle_bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{lifecycle_prefix}/*", f"{lifecycle_prefix}/"]}},
            ),
            iam.PolicyStatement(
                sid="VpcCniDescribe",
                actions=["ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeNetworkInterfaces",
                         "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeTags",
                         "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions"],
                resources=["*"],
            ),
            iam.PolicyStatement(
                sid="VpcCniCreateEniInSubnets",
                actions=["ec2:CreateNetworkInterface"],
                resources=[_arn("ec2", f"subnet/{s}") for s in subnet_ids]
                + [_arn("ec2", f"security-group/{g}") for g in security_group_ids],
            ),
            iam.PolicyStatement(
                sid="VpcCniManageEni",
                # The *NetworkInterfacePermission actions let the HyperPod instances (in a service account)
                # attach the ENIs created in this VPC, per HyperPod's VPC permissions for the execution role.
                actions=["ec2:CreateNetworkInterface", "ec2:AssignPrivateIpAddresses",
                         "ec2:UnassignPrivateIpAddresses", "ec2:AttachNetworkInterface",
                         "ec2:DetachNetworkInterface", "ec2:DeleteNetworkInterface",
                         "ec2:ModifyNetworkInterfaceAttribute", "ec2:CreateNetworkInterfacePermission",
                         "ec2:DeleteNetworkInterfacePermission"],
                resources=[network_interfaces],
                conditions=in_this_vpc,
            ),
            iam.PolicyStatement(
                sid="VpcCniAttachToNode",
                actions=["ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface"],
                resources=[_arn("ec2", "instance/*")],
                conditions=in_this_vpc,
            ),
            iam.PolicyStatement(
                sid="VpcCniTagEni",  # on creation and later: the VPC CNI tags the ENIs it manages
                actions=["ec2:CreateTags"],
                resources=[network_interfaces],
                conditions=in_this_vpc,
            ),
            iam.PolicyStatement(sid="EcrAuth", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(
                sid="EcrPull",
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[f"arn:{Aws.PARTITION}:ecr:{Aws.REGION}:*:repository/*"],
            ),
            iam.PolicyStatement(
                sid="ThisEksCluster",
                actions=["eks:DescribeCluster", "eks-auth:AssumeRoleForPodIdentity"],
                resources=[eks_cluster_arn],
            ),
        ]
        self.policy = iam.Policy(self, "Policy", statements=statements, roles=[self.role])
        for finding, reason in WILDCARD_REASONS.items():
            acknowledge(self.policy, f"AwsSolutions-IAM5[{finding}]", reason)
        acknowledge(
            self.policy,
            f"AwsSolutions-IAM5[Resource::{nag_name(self, lifecycle_bucket_arn)}/{lifecycle_prefix}/*]",
            "Nodes read the lifecycle scripts by name under the lifecycle prefix only.",
        )
