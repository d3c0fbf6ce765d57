"""The EKS control plane HyperPod joins: eks_v2 cluster without default capacity, add-ons, access entries."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.common import acknowledge, retention
from infra.config import EksConfig
from infra.names import eks_control_plane_log_group

# Add-ons the control plane needs before HyperPod nodes join. HyperPod supports only the VPC CNI.
CORE_ADDONS = ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent")

ALL_LOG_TYPES = [
    eks.ClusterLoggingTypes.API,
    eks.ClusterLoggingTypes.AUDIT,
    eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    eks.ClusterLoggingTypes.SCHEDULER,
]


class EksControlPlane(Construct):
    """An Amazon EKS cluster ready to orchestrate a SageMaker HyperPod cluster.

    Defaults (from ``EksConfig``): private endpoint, authentication mode API, all five control-plane
    log types kept ``log_retention_days`` in ``/aws/eks/<name>/cluster``, secrets encrypted with a new
    customer-managed KMS key (rotation on), no default capacity and no Auto Mode (HyperPod brings the
    workers and needs the VPC CNI), the add-ons of ``CORE_ADDONS`` as EKS managed add-ons (kept on the
    cluster when the add-on resource is deleted), and an access entry with cluster-admin access for
    each of ``admin_principal_arns``. The cluster creator gets no implicit admin access.

    Invariants: ``bootstrap_self_managed_addons`` is off so that the managed add-ons own the CNI.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EksConfig,
        cluster_name: str,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        secrets_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.cluster_name = cluster_name
        self.secrets_key = secrets_key or kms.Key(
            self,
            "SecretsKey",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {cluster_name}",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        # EKS writes control-plane logs here; creating the group first lets the stack own its retention.
        self.log_group = logs.LogGroup(
            self,
            "ControlPlaneLogs",
            log_group_name=eks_control_plane_log_group(cluster_name),
            retention=retention(config.log_retention_days),
            removal_policy=removal_policy,
        )
        endpoint = (
            eks.EndpointAccess.PRIVATE
            if config.endpoint == "private"
            else eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*[str(c) for c in config.public_access_cidrs])
        )
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=cluster_name,
            version=eks.KubernetesVersion.of(config.version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=list(subnets))],
            security_group=security_group,
            endpoint_access=endpoint,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            bootstrap_self_managed_addons=False,
            bootstrap_cluster_creator_admin_permissions=False,
            secrets_encryption_key=self.secrets_key,
            cluster_logging=ALL_LOG_TYPES,
            output_config_command=False,
        )
        self.cluster.node.add_dependency(self.log_group)
        acknowledge(
            self.cluster.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy]",
            "The EKS service role must carry AmazonEKSClusterPolicy; EKS documents no scoped equivalent.",
        )
        acknowledge(
            self.cluster,
            "@aws-cdk/aws-eks:clusterMustManuallyTagSubnet",
            "HyperPodNetwork tags the subnets it creates with the ELB role tags; an existing VPC's owner tags "
            "its own subnets.",
            pack="Annotation",
        )
        self.cfn_cluster: eks.CfnCluster = self.cluster.node.default_child  # type: ignore[assignment]
        if config.authentication_mode != "API":
            # eks_v2 always writes API; the L1 escape hatch is the documented way to change it.
            self.cfn_cluster.add_property_override("AccessConfig.AuthenticationMode", config.authentication_mode)

        self.addons: dict[str, eks.Addon] = {}
        for name in CORE_ADDONS:
            self.addons[name] = eks.Addon(
                self,
                f"Addon-{name}",
                cluster=self.cluster,  # type: ignore[arg-type]  # jsii stubs: Cluster lacks an ICluster member
                addon_name=name,
                addon_version=config.addon_versions.get(name),  # type: ignore[call-overload]
                preserve_on_delete=True,
            )

        self.admin_access_entries: list[eks.AccessEntry] = []
        admin = eks.AccessPolicy.from_access_policy_name(
            "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
        )
        for principal in config.admin_principal_arns:
            # The ID follows the principal, not its list position, so reordering replaces nothing.
            digest = hashlib.sha256(principal.encode()).hexdigest()[:10]
            self.admin_access_entries.append(
                eks.AccessEntry(
                    self,
                    f"Admin-{digest}",
                    cluster=self.cluster,  # type: ignore[arg-type]  # jsii stubs: Cluster lacks an ICluster member
                    principal=principal,
                    access_policies=[admin],
                )
            )

        self.namespace_access_entries: list[eks.AccessEntry] = []
        for grant in config.namespace_admins:
            digest = hashlib.sha256(grant.principal_arn.encode()).hexdigest()[:10]
            self.namespace_access_entries.append(eks.AccessEntry(
                self, f"NamespaceAdmin-{digest}",
                cluster=self.cluster,  # type: ignore[arg-type]  # jsii stubs: Cluster lacks an ICluster member
                principal=grant.principal_arn,
                access_policies=[eks.AccessPolicy.from_access_policy_name(
                    "AmazonEKSAdminPolicy", access_scope_type=eks.AccessScopeType.NAMESPACE,
                    namespaces=list(grant.namespaces))],
            ))

        region = Stack.of(self).region
        CfnOutput(self, "ClusterName", value=self.cluster.cluster_name, description="EKS cluster name")
        CfnOutput(self, "ClusterArn", value=self.cluster.cluster_arn, description="EKS cluster ARN")
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --name {self.cluster.cluster_name} --region {region}",
            description="Adds this cluster to your kubeconfig (your principal needs an access entry)",
        )
