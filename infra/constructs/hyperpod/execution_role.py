"""The HyperPod execution role: the IAM role every node (and every pod without Pod Identity) runs as."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import ArnFormat, Stack, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.constructs.common import acknowledge, log_group_arn, nag_name
from infra.facts import health_monitoring_agent

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
    "hyperpod clusters": "aws-node attaches ENIs through sagemaker:AttachClusterNodeNetworkInterface on the HyperPod "
    "cluster, whose ARN ends in an id HyperPod assigns at creation, after this role (the cluster names it); the "
    "cluster resource type has no name-based ARN, so clusters of this region and account are the narrowest.",
    "repositories": "Node images (EKS add-ons, HyperPod agents) come from AWS-owned registries whose account IDs "
    "differ by region; pulls are limited to this region and to read actions.",
}


# AWS's sources for the policy, named once and cited by each statement below.
INSTANCE_ROLE_POLICY = ("AmazonSageMakerClusterInstanceRolePolicy, https://docs.aws.amazon.com/sagemaker/latest/dg/"
                        "security-iam-awsmanpol-AmazonSageMakerClusterInstanceRolePolicy.html")
EXECUTION_ROLE_TEMPLATE = ("aws/sagemaker-hyperpod-cluster-setup@b920fcf430f1fd3b36c01bb63b63348f95f0b9fb:"
                           "eks/cloudformation/sagemaker-iam-role-template.yaml")
SERVICE_AUTHORIZATION = "Service Authorization Reference, as bundled in parliament 1.6.4's iam_definition.json"
# aws-node on a HyperPod node attaches ENIs through SageMaker (see the VpcCniHyperPodAttachEni grant).
VPC_CNI_HYPERPOD_ATTACH = (
    "aws/amazon-vpc-cni-k8s pull request #3874, https://github.com/aws/amazon-vpc-cni-k8s/pull/3874; the operation: "
    "AttachClusterNodeNetworkInterface in botocore 1.44.8's sagemaker model; the cluster ARN: "
    "https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html, read in "
    "parliament 1.6.4's copy")
# What a pull of an ECR image needs: "ecr:BatchGetImage, ecr:GetDownloadUrlForLayer, and ecr:GetAuthorizationToken".
ECR_PULL = "https://docs.aws.amazon.com/AmazonECR/latest/userguide/ECR_on_ECS.html"


@dataclass(frozen=True)
class Grant:
    """One statement of the execution role's policy, as data.

    ``resources`` name entries of the role's resource table (``HyperPodExecutionRole._resources``: "*", the
    cluster's log groups, the VPC's subnets, ...), in the order they are written; ``source`` is where the grant
    comes from.
    """

    sid: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    source: str
    conditions: Mapping[str, Mapping[str, str]] | None = None


# The policy, statement by statement. The VPC CNI's ENI statements follow AWS's execution role template
# (EXECUTION_ROLE_TEMPLATE): resources instance/*, network-interface/*, the VPC, each subnet and security group,
# with no condition keys (an ec2:Vpc condition is not evaluated for every resource type these actions touch, so
# it would deny them). The template's statements were read again at commit
# 225929764f92613e15ff951569564a71f3711470 and are as cited; the managed policy's statements as its page shows them.
POLICY: tuple[Grant, ...] = (
    # The managed policy's logs grants, one statement for the groups and their streams.
    Grant("ClusterLogs",
          ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"),
          ("cluster log groups", "cluster log streams"), source=INSTANCE_ROLE_POLICY),
    Grant("ClusterMetrics", ("cloudwatch:PutMetricData",), ("*",), source=INSTANCE_ROLE_POLICY,
          conditions={"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Clusters"}}),
    # AWS's template grants it on "*": rolling software updates read the alarms named for auto-rollback, as the
    # execution role ("To use the automatic rollback functionality, you must add the permission
    # cloudwatch:DescribeAlarms to your IAM execution role"; nothing else is named there). Narrowed to alarm ARNs,
    # the only resource type the action takes (SERVICE_AUTHORIZATION), but not to the config's rollback_alarms:
    # `hpctl update-software --alarm` names others at update time.
    Grant("RollbackAlarms", ("cloudwatch:DescribeAlarms",), ("alarms",),
          source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-update.html"),
    Grant("SsmSessions",
          ("ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
           "ssmmessages:OpenDataChannel"),
          ("*",), source=INSTANCE_ROLE_POLICY),
    # AWS's template grants s3:GetObject on the whole bucket; the nodes read only the lifecycle prefix.
    Grant("LifecycleScriptsRead", ("s3:GetObject",), ("lifecycle scripts",), source=EXECUTION_ROLE_TEMPLATE),
    # On the bucket without an s3:prefix condition, as in AWS's template: a condition would deny HeadBucket and a
    # listing of the prefix without its trailing slash.
    Grant("LifecycleScriptsList", ("s3:ListBucket",), ("lifecycle bucket",), source=EXECUTION_ROLE_TEMPLATE),
    # The template's AmazonEKSCNIDescribePolicy statement and its Describe* calls on "*", in one statement.
    Grant("VpcCniDescribe",
          ("ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeNetworkInterfaces",
           "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeTags", "ec2:DescribeVpcs",
           "ec2:DescribeDhcpOptions"),
          ("*",), source=EXECUTION_ROLE_TEMPLATE),
    Grant("VpcCniManageEni",
          ("ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses", "ec2:CreateNetworkInterface",
           "ec2:DeleteNetworkInterface", "ec2:CreateNetworkInterfacePermission",
           "ec2:DeleteNetworkInterfacePermission", "ec2:ModifyNetworkInterfaceAttribute"),
          ("instances", "network interfaces", "vpc", "subnets", "security groups"), source=EXECUTION_ROLE_TEMPLATE),
    # AWS's template grants Detach on "*"; it takes instance and network-interface only (SERVICE_AUTHORIZATION),
    # the resources Attach has there.
    Grant("VpcCniAttachEni", ("ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface"),
          ("instances", "network interfaces"), source=EXECUTION_ROLE_TEMPLATE),
    # VPC CNI releases with aws/amazon-vpc-cni-k8s pull request #3874 (VPC_CNI_HYPERPOD_ATTACH, merged 2026-09-11) do
    # not call ec2:AttachNetworkInterface on a HyperPod node, "which is not authorized on these nodes" (the PR's
    # docs/iam-policy.md, as reviewed 2026-09-14): aws-node asks SageMaker to attach the ENI with
    # AttachClusterNodeNetworkInterface, naming the cluster by ARN (cluster id from the node's providerID, account from
    # sts:GetCallerIdentity, which needs no permission:
    # https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html), the node and the ENI (botocore
    # 1.44.8's sagemaker model: ClusterName, NodeId, NetworkInterfaceId, all required). aws-node runs as this role:
    # vpc-cni gets no Pod Identity role here (infra/facts/addons.py VPC_CNI). The first release carrying the change is
    # unverified: the repository's snapshot read here ends before the merge
    # (aws/amazon-vpc-cni-k8s@b52188387f2e2f10bf289ace929d6a63b176a4fa, "Prepare v1.23.1 release", 2026-08-20; newest
    # tag v1.23.0), so it is a release after v1.23.1. The product takes EKS's default vpc-cni version, which may be
    # older: the EC2 attach grants above stay. Resource: the cluster resource type,
    # arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId} (SERVICE_AUTHORIZATION); its id exists only
    # after this role, hence cluster/* of this region and account (WILDCARD_REASONS). The action's own row (resource
    # types, condition keys) is unverified: parliament 1.6.4 predates it and the reference page
    # (list_amazonsagemaker.html) was not readable here; no condition key is set, as one the action does not evaluate
    # would deny it.
    Grant("VpcCniHyperPodAttachEni", ("sagemaker:AttachClusterNodeNetworkInterface",), ("hyperpod clusters",),
          source=VPC_CNI_HYPERPOD_ATTACH),
    # On creation and later: the VPC CNI tags the ENIs it manages.
    Grant("VpcCniTagEni", ("ec2:CreateTags",), ("network interfaces",), source=EXECUTION_ROLE_TEMPLATE),
    Grant("EcrAuth", ("ecr:GetAuthorizationToken",), ("*",), source=EXECUTION_ROLE_TEMPLATE),
    # AWS's template grants the pulls on "*"; here on repositories of this region in any account.
    Grant("EcrPull", ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"),
          ("repositories",), source=EXECUTION_ROLE_TEMPLATE),
    # The dependencies chart's health-monitoring agent pulls from us-east-1 in every region outside the chart's
    # region map (infra/facts/health_monitoring_agent.py, whose SOURCE is the chart's template): the pull of
    # that one repository, wherever the chart renders it for this stack's region, with the two actions a pull
    # needs beside ecr:GetAuthorizationToken (EcrAuth) per ECR_PULL. Both take the repository resource type
    # (SERVICE_AUTHORIZATION), so no wildcard is needed.
    Grant("HealthMonitoringAgentPull", ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"),
          ("health monitoring agent image",), source=health_monitoring_agent.SOURCE),
    # eks-auth:AssumeRoleForPodIdentity is the template's; eks:DescribeCluster is not in it (unverified: no AWS
    # source found that the nodes need it).
    Grant("ThisEksCluster", ("eks:DescribeCluster", "eks-auth:AssumeRoleForPodIdentity"), ("eks cluster",),
          source=EXECUTION_ROLE_TEMPLATE),
)


class HyperPodExecutionRole(Construct):
    """An execution role for a HyperPod cluster orchestrated by EKS, scoped to this cluster's resources.

    Grants the equivalent of AmazonSageMakerClusterInstanceRolePolicy (logs and metrics under
    /aws/sagemaker/Clusters, SSM session channels), read of the lifecycle prefix, the VPC CNI's ENI
    management on the resources AWS's template names (instances, ENIs, the VPC, its HyperPod subnets and
    security group), sagemaker:AttachClusterNodeNetworkInterface (the VPC CNI's ENI attach on HyperPod nodes) on
    the HyperPod clusters of this region and account, cloudwatch:DescribeAlarms for rolling-update rollback, ECR
    image pulls (this region's repositories, and the one the dependencies chart pulls its health-monitoring agent
    from for this region),
    eks:DescribeCluster and eks-auth:AssumeRoleForPodIdentity on this EKS cluster only: the statements of
    ``POLICY``. No action is ``*``; ``*`` resources appear only where the API has no resource-level permissions,
    each acknowledged in ``WILDCARD_REASONS``. An optional permissions boundary applies to the role.

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
        self.role = self._node_role(permissions_boundary_arn)
        resources = self._resources(
            eks_cluster_arn=eks_cluster_arn, vpc_id=vpc_id, subnet_ids=subnet_ids,
            security_group_ids=security_group_ids, lifecycle_bucket_arn=lifecycle_bucket_arn,
            lifecycle_prefix=lifecycle_prefix)
        # A grant whose resources are all absent is left out (the agent's image outside the aws partition).
        self.policy = iam.Policy(self, "Policy", roles=[self.role], statements=[
            _statement(g, resources) for g in POLICY if any(resources[name] for name in g.resources)])
        self._acknowledge_wildcards(resources, lifecycle_bucket_arn, lifecycle_prefix)

    def _node_role(self, permissions_boundary_arn: str | None) -> iam.Role:
        """The role HyperPod's nodes run as, under the boundary when one is given."""
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="SageMaker HyperPod execution role (node role) for an EKS-orchestrated cluster",
        )
        if permissions_boundary_arn:
            # An aspect on the role itself runs after any wider one, so this specific boundary wins.
            boundary = iam.ManagedPolicy.from_managed_policy_arn(self, "Boundary", permissions_boundary_arn)
            iam.PermissionsBoundary.of(role).apply(boundary)
        return role

    def _resources(
        self, *, eks_cluster_arn: str, vpc_id: str, subnet_ids: Sequence[str], security_group_ids: Sequence[str],
        lifecycle_bucket_arn: str, lifecycle_prefix: str,
    ) -> dict[str, list[str]]:
        """The ARNs the statements of ``POLICY`` name, by the names they use."""
        stack = Stack.of(self)

        def ec2_arn(resource: str, name: str) -> str:
            return stack.format_arn(service="ec2", resource=resource, resource_name=name)

        return {
            "*": ["*"],
            "cluster log groups": [log_group_arn(self, "/aws/sagemaker/Clusters/*")],
            "cluster log streams": [log_group_arn(self, "/aws/sagemaker/Clusters/*:log-stream:*")],
            "alarms": [stack.format_arn(service="cloudwatch", resource="alarm", resource_name="*",
                                        arn_format=ArnFormat.COLON_RESOURCE_NAME)],
            "lifecycle bucket": [lifecycle_bucket_arn],
            "lifecycle scripts": [f"{lifecycle_bucket_arn}/{lifecycle_prefix}/*"],
            "instances": [ec2_arn("instance", "*")],
            "network interfaces": [ec2_arn("network-interface", "*")],
            "vpc": [ec2_arn("vpc", vpc_id)],
            "subnets": [ec2_arn("subnet", s) for s in subnet_ids],
            "security groups": [ec2_arn("security-group", g) for g in security_group_ids],
            # Any account: the AWS-owned registries differ by region.
            "repositories": [stack.format_arn(service="ecr", account="*", resource="repository", resource_name="*")],
            "health monitoring agent image": _health_monitoring_agent_repositories(stack),
            "eks cluster": [eks_cluster_arn],
            "hyperpod clusters": [stack.format_arn(service="sagemaker", resource="cluster", resource_name="*")],
        }

    def _acknowledge_wildcards(self, resources: Mapping[str, Sequence[str]], lifecycle_bucket_arn: str,
                               lifecycle_prefix: str) -> None:
        """Acknowledge cdk-nag's IAM5 finding on each wildcard resource of the policy, with its reason."""
        assert self.policy is not None
        for what, reason in WILDCARD_REASONS.items():
            (arn,) = resources[what]
            acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{nag_name(self, arn)}]", reason)
        acknowledge(
            self.policy,
            f"AwsSolutions-IAM5[Resource::{nag_name(self, lifecycle_bucket_arn)}/{lifecycle_prefix}/*]",
            "Nodes read the lifecycle scripts by name under the lifecycle prefix only.",
        )


def _health_monitoring_agent_repositories(stack: Stack) -> list[str]:
    """The repository the dependencies chart renders the health-monitoring agent's image from for the stack's
    region (the chart installer sets the agent's region to it).

    A region-agnostic stack (its region a token) gets every repository the chart's map can render: read-only
    grants, each on one named repository, valid in whatever region the template is deployed to. A CfnMapping
    looked up by AWS::Region was not chosen: without the AWS::LanguageExtensions transform Fn::FindInMap has no
    default, so the mapping would have to list every region (the fallback included) and a region missing from it
    fails the deployment. Outside the aws partition nothing is granted: the chart renders an image in the aws
    partition, which no role of another partition can pull, and IAM refuses a policy naming another partition's
    ARNs ("MalformedPolicyDocument: Partition "aws" is not valid for resource", as reported in
    https://github.com/aws/copilot-cli/issues/3844); there the agent needs the chart value
    ``health-monitoring-agent.hmaimage``. Chart values that set the agent's ``region`` or ``hmaimage`` move the
    image elsewhere: grant its repository with ``role.add_to_principal_policy``.
    """
    if Token.is_unresolved(stack.region):
        registries = health_monitoring_agent.all_image_registries()
    elif not Token.is_unresolved(stack.partition) and stack.partition != health_monitoring_agent.PARTITION:
        return []
    else:
        registries = [health_monitoring_agent.image_registry(stack.region)]
    return [stack.format_arn(service="ecr", region=region, account=account, resource="repository",
                             resource_name=health_monitoring_agent.REPOSITORY) for account, region in registries]


def _statement(grant: Grant, resources: Mapping[str, Sequence[str]]) -> iam.PolicyStatement:
    """``grant`` as an IAM statement over the ARNs ``resources`` gives its names."""
    return iam.PolicyStatement(
        sid=grant.sid, actions=list(grant.actions),
        resources=[arn for name in grant.resources for arn in resources[name]],
        conditions={k: dict(v) for k, v in grant.conditions.items()} if grant.conditions else None,
    )
