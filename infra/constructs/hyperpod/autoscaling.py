"""Karpenter autoscaling of HyperPod instance groups: the role HyperPod assumes to add and remove nodes, and the
HyperpodNodeClass and NodePool of each autoscaled group, installed as a local Helm chart after the cluster."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import InstanceGroupConfig
from infra.constructs.common import acknowledge, nag_name
from infra.constructs.helm_release import ChartSource, HelmInstaller, HelmRelease
from infra.constructs.hyperpod.cluster import HyperPodCluster
from infra.facts.instances import is_accelerated
from infra.facts.names import NAG_PACK_NAME, NODE_POOLS_RELEASE_NAME

# The local chart with one HyperpodNodeClass and one NodePool per autoscaled instance group.
NODE_POOLS_CHART_DIR = Path(__file__).parent / "autoscaling_chart"
# HyperPod installs the CRDs of both kinds when the cluster's autoscaling is on; the release waits until the API
# server serves them. Group, version and kind as in AWS's NodeClass and NodePool samples (see the chart's template).
NODE_POOL_KINDS = ("karpenter.sagemaker.amazonaws.com/v1/HyperpodNodeClass", "karpenter.sh/v1/NodePool")
# Both kinds are cluster-scoped; the namespace only holds helm's record of the release.
NODE_POOLS_RELEASE_NAMESPACE = "kube-system"
# Who assumes the role: the trust policy of "Create an IAM role for HyperPod autoscaling with Karpenter"
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-iam.html), the same in
# awslabs/awsome-distributed-training@0edaf15:1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/
# hyperpod-eks-tf/modules/sagemaker_iam_role/main.tf (karpenter_role).
AUTOSCALING_SERVICE_PRINCIPAL = "hyperpod.sagemaker.amazonaws.com"
# The grant operations HyperPod may pass on when it encrypts the volumes of the nodes it adds (same sources).
KMS_GRANT_OPERATIONS = ["CreateGrant", "Decrypt", "DescribeKey", "GenerateDataKeyWithoutPlaintext", "ReEncryptTo",
                        "ReEncryptFrom", "RetireGrant"]


class HyperPodAutoscalingRole(Construct):
    """The cluster role (``ClusterRole``) HyperPod assumes to add and remove the nodes Karpenter asks for.

    Trust and permissions are AWS's documented policy (see the module's sources), narrowed to this account and
    region: ``sagemaker:BatchAddClusterNodes`` and ``sagemaker:BatchDeleteClusterNodes`` on HyperPod clusters,
    and ``kms:CreateGrant``/``kms:DescribeKey`` only through SageMaker, for AWS resources, with the listed grant
    operations. The policy is inline, so it exists as soon as the role does: the cluster names the role at
    creation. Pass ``role.role_arn`` to ``HyperPodCluster(autoscaling_role_arn=...)``.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        clusters = stack.format_arn(service="sagemaker", resource="cluster", resource_name="*")
        keys = stack.format_arn(service="kms", resource="key", resource_name="*")
        policy = iam.PolicyDocument(statements=[
            # The cluster's ARN ends in an ID SageMaker assigns at creation, after this role must exist.
            iam.PolicyStatement(
                sid="AddAndRemoveClusterNodes",
                actions=["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
                resources=[clusters],
                conditions={"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}},
            ),
            # For the nodes' volumes when they are encrypted with a customer-managed key. AWS's policy grants both
            # actions in one statement with the grant conditions; kms:GrantIsForAWSResource and kms:GrantOperations
            # are in the request context of the grant operations only (CreateGrant, ListGrants, RevokeGrant: "AWS
            # KMS condition keys", https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html), so
            # beside DescribeKey the Bool condition can never hold and DescribeKey would be denied. DescribeKey
            # gets its own statement with the one condition that applies to it (kms:ViaService).
            iam.PolicyStatement(
                sid="GrantOnNodeVolumeKeys",
                actions=["kms:CreateGrant"],
                resources=[keys],
                conditions={
                    "StringLike": {"kms:ViaService": "sagemaker.*.amazonaws.com"},
                    "Bool": {"kms:GrantIsForAWSResource": "true"},
                    "ForAllValues:StringEquals": {"kms:GrantOperations": KMS_GRANT_OPERATIONS},
                },
            ),
            iam.PolicyStatement(
                sid="DescribeNodeVolumeKeys",
                actions=["kms:DescribeKey"],
                resources=[keys],
                conditions={"StringLike": {"kms:ViaService": "sagemaker.*.amazonaws.com"}},
            ),
        ])
        self.role = iam.Role(
            self, "Role",
            assumed_by=iam.ServicePrincipal(AUTOSCALING_SERVICE_PRINCIPAL),
            description="Assumed by SageMaker HyperPod to add and remove the nodes Karpenter asks for",
            inline_policies={"KarpenterAutoscaling": policy},
        )
        acknowledge(
            self.role, f"AwsSolutions-IAM5[Resource::{nag_name(self, clusters)}]",
            "The role is named by the cluster at creation, before SageMaker assigns the cluster ID its ARN ends "
            "in; limited to HyperPod clusters of this account and region (AWS's documented policy allows any).",
        )
        acknowledge(
            self.role, f"AwsSolutions-IAM5[Resource::{nag_name(self, keys)}]",
            "AWS's documented policy for the volumes of added nodes; usable only through SageMaker "
            "(kms:ViaService), for grants to AWS resources, with the listed grant operations.",
        )


class KarpenterNodePools(Construct):
    """A HyperpodNodeClass and a Karpenter NodePool for each of ``instance_groups``, named after the group.

    Installed by ``installer`` (any ``HelmInstaller`` on the EKS cluster, e.g. the dependencies chart's) as the
    local chart ``autoscaling_chart/`` once ``hyperpod_cluster`` exists: HyperPod installs its managed Karpenter,
    and with it these kinds, when the cluster's autoscaling is enabled. The NodePool has no limits and keeps
    nodes until Karpenter consolidates them (``expireAfter: Never``, as AWS's sample). The groups are
    ``InstanceGroupConfig`` values of ``hyperpod_cluster``; on its accelerated ones the missing deep health
    checks (HyperPod pack SM4) are acknowledged, since AWS does not autoscale groups that have them.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        installer: HelmInstaller,
        instance_groups: Sequence[InstanceGroupConfig],
        hyperpod_cluster: HyperPodCluster,
    ) -> None:
        super().__init__(scope, construct_id)
        self.release = HelmRelease(
            self, "Release", installer=installer, release_name=NODE_POOLS_RELEASE_NAME,
            namespace=NODE_POOLS_RELEASE_NAMESPACE,
            chart=ChartSource.local(self, "Chart", NODE_POOLS_CHART_DIR),
            values={"instanceGroups": [group.name for group in instance_groups]},
            required_kinds=NODE_POOL_KINDS,
        )
        self.release.node.add_dependency(hyperpod_cluster.cfn_cluster)
        for group in instance_groups:
            if any(is_accelerated(t) for t in group.instance_types):
                acknowledge(
                    hyperpod_cluster.cfn_cluster, f"{NAG_PACK_NAME}-SM4[{group.name}]",
                    f"Karpenter scales {group.name}; AWS does not autoscale groups with deep health checks "
                    "(sagemaker-hyperpod-eks-autoscaling-nodeclass: they take 60-90 minutes, pods stay pending).",
                    pack=NAG_PACK_NAME,
                )
