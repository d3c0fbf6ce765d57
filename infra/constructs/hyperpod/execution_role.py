"""The HyperPod execution role: the IAM role every node (and every pod without Pod Identity) runs as."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.constructs.common import acknowledge, log_group_arn, nag_name

# Why each wildcard resource of the policy cannot be narrower (the acknowledgments name the rendered ARNs).
WILDCARD_REASONS: dict[str, str] = {
    "*": "Granted only for actions without resource-level permissions: cloudwatch:PutMetricData "
    "(limited to the /aws/sagemaker/Clusters namespace by condition), the ssmmessages session channels, "
    "the VPC CNI's ec2:Describe* calls and ecr:GetAuthorizationToken, as in AWS's execution role template.",
    "alarms": "Rolling-update auto-rollback reads the alarms the operator names at update time; AWS's template "
    "grants cloudwatch:DescribeAlarms on '*', this narrows it to alarms of this region and account.",
    "cluster log groups": "HyperPod names the cluster's log group after the cluster id, which exists only after "
    "creation.",
    "cluster log streams": "Streams are named per instance group and instance id by the nodes themselves.",
    "network interfaces": "The VPC CNI creates ENIs at run time, so their IDs are unknown; AWS's execution role "
    "template grants the same resource.",
    "instances": "HyperPod creates the node instances at run time, so their IDs are unknown; AWS's execution role "
    "template grants the same resource.",
    "repositories": "Node images (EKS add-ons, HyperPod agents) come from AWS-owned registries whose account IDs "
    "differ by region; pulls are limited to this region and to read actions.",
}


class HyperPodExecutionRole(Construct):
    """An execution role for a HyperPod cluster orchestrated by EKS, scoped to this cluster's resources.

    Grants the equivalent of AmazonSageMakerClusterInstanceRolePolicy (logs and metrics under
    /aws/sagemaker/Clusters, SSM session channels), read of the lifecycle prefix, the VPC CNI's ENI
    management on the resources AWS's template names (instances, ENIs, the VPC, its HyperPod subnets and
    security group), cloudwatch:DescribeAlarms for rolling-update rollback, ECR image pulls,
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
        # The VPC CNI's ENI statements follow AWS's execution role template statement by statement
        # (aws/sagemaker-hyperpod-cluster-setup@b920fcf430f1fd3b36c01bb63b63348f95f0b9fb:
        # eks/cloudformation/sagemaker-iam-role-template.yaml): resources instance/*, network-interface/*, the VPC,
        # each subnet and security group, with no condition keys (an ec2:Vpc condition is not evaluated for every
        # resource type these actions touch, so it would deny them).
        stack = Stack.of(self)

        def ec2_arn(resource: str, name: str) -> str:
            return stack.format_arn(service="ec2", resource=resource, resource_name=name)

        network_interfaces = ec2_arn("network-interface", "*")
        instances = ec2_arn("instance", "*")
        eni_scope = [instances, network_interfaces, ec2_arn("vpc", vpc_id)] \
            + [ec2_arn("subnet", s) for s in subnet_ids] \
            + [ec2_arn("security-group", g) for g in security_group_ids]
        cluster_log_groups = log_group_arn(self, "/aws/sagemaker/Clusters/*")
        cluster_log_streams = log_group_arn(self, "/aws/sagemaker/Clusters/*:log-stream:*")
        alarms = stack.format_arn(service="cloudwatch", resource="alarm", resource_name="*",
                                  arn_format=ArnFormat.COLON_RESOURCE_NAME)
        # Any account: the AWS-owned registries differ by region.
        repositories = stack.format_arn(service="ecr", account="*", resource="repository", resource_name="*")
        statements = [
            iam.PolicyStatement(
                sid="ClusterLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                         "logs:DescribeLogStreams"],
                resources=[cluster_log_groups, cluster_log_streams],
            ),
            iam.PolicyStatement(
                sid="ClusterMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Clusters"}},
            ),
            iam.PolicyStatement(
                # AWS's template grants it on "*": rolling software updates read the alarms named for
                # auto-rollback, as the execution role ("To use the automatic rollback functionality, you must add
                # the permission cloudwatch:DescribeAlarms to your IAM execution role",
                # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-update.html; nothing else
                # is named there). Narrowed to alarm ARNs, the only resource type the action takes (Service
                # Authorization Reference, as bundled in parliament 1.6.4's iam_definition.json), but not to the
                # config's rollback_alarms: `hpctl update-software --alarm` names others at update time.
                sid="RollbackAlarms", actions=["cloudwatch:DescribeAlarms"], resources=[alarms],
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
                # On the bucket without an s3:prefix condition, as in AWS's template: a condition would deny
                # HeadBucket and a listing of the prefix without its trailing slash.
                sid="LifecycleScriptsList", actions=["s3:ListBucket"], resources=[lifecycle_bucket_arn],
            ),
            iam.PolicyStatement(
                sid="VpcCniDescribe",
                actions=["ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeNetworkInterfaces",
                         "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeTags",
                         "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions"],
                resources=["*"],
            ),
            iam.PolicyStatement(
                sid="VpcCniManageEni",
                actions=["ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
                         "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
                         "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission",
                         "ec2:ModifyNetworkInterfaceAttribute"],
                resources=eni_scope,
            ),
            iam.PolicyStatement(
                # AWS's template grants Detach on "*"; it takes instance and network-interface only (Service
                # Authorization Reference, as bundled in parliament 1.6.4), the resources Attach has there.
                sid="VpcCniAttachEni",
                actions=["ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface"],
                resources=[instances, network_interfaces],
            ),
            iam.PolicyStatement(
                sid="VpcCniTagEni",  # on creation and later: the VPC CNI tags the ENIs it manages
                actions=["ec2:CreateTags"],
                resources=[network_interfaces],
            ),
            iam.PolicyStatement(sid="EcrAuth", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(
                sid="EcrPull",
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=[repositories],
            ),
            iam.PolicyStatement(
                sid="ThisEksCluster",
                actions=["eks:DescribeCluster", "eks-auth:AssumeRoleForPodIdentity"],
                resources=[eks_cluster_arn],
            ),
        ]
        self.policy = iam.Policy(self, "Policy", statements=statements, roles=[self.role])
        wildcards = {"*": "*", "alarms": alarms, "cluster log groups": cluster_log_groups,
                     "cluster log streams": cluster_log_streams, "network interfaces": network_interfaces,
                     "instances": instances, "repositories": repositories}
        for what, arn in wildcards.items():
            acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{nag_name(self, arn)}]", WILDCARD_REASONS[what])
        acknowledge(
            self.policy,
            f"AwsSolutions-IAM5[Resource::{nag_name(self, lifecycle_bucket_arn)}/{lifecycle_prefix}/*]",
            "Nodes read the lifecycle scripts by name under the lifecycle prefix only.",
        )
