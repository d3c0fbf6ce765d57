"""The EKS control plane HyperPod joins: eks_v2 cluster without default capacity, add-ons, access entries."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.constructs.addon import EksAddon
from infra.constructs.common import acknowledge
from infra.errors import ConfigError
from infra.facts import addons
from infra.facts.names import eks_control_plane_log_group

# Add-ons the control plane needs before HyperPod nodes join. HyperPod supports only the VPC CNI.
CORE_ADDONS = tuple(addon.name for addon in addons.CORE)

ALL_LOG_TYPES = [
    eks.ClusterLoggingTypes.API,
    eks.ClusterLoggingTypes.AUDIT,
    eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    eks.ClusterLoggingTypes.SCHEDULER,
]


# eks.Cluster props the construct sets itself and an override may not change (``eks_cluster_overrides``): the
# HyperPod integration depends on them.
INVARIANT_CLUSTER_PROPS = {
    "default_capacity": "HyperPod brings the workers: no default capacity",
    "default_capacity_type": "HyperPod brings the workers: no default node group or Auto Mode",
    "bootstrap_self_managed_addons": "the managed add-ons own the VPC CNI, which HyperPod needs",
    "cluster_name": "give eks_cluster_name",
    "version": "give kubernetes_version",
    "vpc": "give vpc",
    "vpc_subnets": "give subnets",
    "security_group": "give security_group",
    "secrets_encryption_key": "give secrets_key",
    "endpoint_access": "give endpoint_access",
}


class EksControlPlane(Construct):
    """An Amazon EKS cluster ready to orchestrate a SageMaker HyperPod cluster.

    Defaults: private endpoint, authentication mode API, all five control-plane log types kept
    ``log_retention`` in ``/aws/eks/<name>/cluster``, secrets encrypted with a new customer-managed KMS key
    (rotation on), the add-ons of ``CORE_ADDONS`` as EKS managed add-ons at EKS's default versions (kept on the
    cluster when the add-on resource is deleted), and an access entry with cluster-admin access for each of
    ``admin_principal_arns``. The cluster creator gets no implicit admin access.

    ``eks_cluster_overrides``: further ``eks.Cluster`` props (e.g. ``tags``, ``kubectl_provider_options``), applied
    over the defaults; the props in ``INVARIANT_CLUSTER_PROPS`` (no default capacity, no self-managed add-on
    bootstrap, and those given as props here) are refused there with the reason.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        eks_cluster_name: str,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        kubernetes_version: str,
        endpoint_access: eks.EndpointAccess | None = None,
        authentication_mode: Literal["API", "API_AND_CONFIG_MAP"] = "API",
        admin_principal_arns: Sequence[str] = (),
        namespace_admins: Mapping[str, Sequence[str]] | None = None,
        addon_versions: Mapping[str, str] | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        secrets_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        eks_cluster_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        refused = sorted(set(eks_cluster_overrides or {}) & set(INVARIANT_CLUSTER_PROPS))
        if refused:
            raise ConfigError(f"eks_cluster_overrides.{refused[0]}", (eks_cluster_overrides or {})[refused[0]],
                              INVARIANT_CLUSTER_PROPS[refused[0]])
        self.eks_cluster_name = eks_cluster_name
        self.secrets_key = secrets_key or kms.Key(
            self, "SecretsKey", enable_key_rotation=True, removal_policy=removal_policy,
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {eks_cluster_name}",
        )
        # EKS writes control-plane logs here; creating the group first lets the stack own its retention.
        self.log_group = logs.LogGroup(
            self, "ControlPlaneLogs", log_group_name=eks_control_plane_log_group(eks_cluster_name),
            retention=log_retention, removal_policy=removal_policy,
        )
        self.eks_cluster = self._cluster(
            eks_cluster_overrides or {}, kubernetes_version=kubernetes_version, vpc=vpc, subnets=subnets,
            security_group=security_group, endpoint_access=endpoint_access or eks.EndpointAccess.PRIVATE,
        )
        self.cfn_cluster: eks.CfnCluster = self.eks_cluster.node.default_child  # type: ignore[assignment]
        if authentication_mode != "API":
            # eks_v2 always writes API; the L1 escape hatch is the documented way to change it.
            self.cfn_cluster.add_property_override("AccessConfig.AuthenticationMode", authentication_mode)
        self.addons = self._core_addons(addon_versions or {})
        admin = eks.AccessPolicy.from_access_policy_name("AmazonEKSClusterAdminPolicy",
                                                         access_scope_type=eks.AccessScopeType.CLUSTER)
        self.admin_access_entries = [self._access_entry("Admin", principal, admin)
                                     for principal in admin_principal_arns]
        self.namespace_access_entries = [
            self._access_entry("NamespaceAdmin", principal, eks.AccessPolicy.from_access_policy_name(
                "AmazonEKSAdminPolicy", access_scope_type=eks.AccessScopeType.NAMESPACE, namespaces=list(namespaces)))
            for principal, namespaces in (namespace_admins or {}).items()
        ]
        self._outputs()

    def _cluster(self, overrides: Mapping[str, Any], *, kubernetes_version: str, vpc: ec2.IVpc,
                 subnets: Sequence[ec2.ISubnet], security_group: ec2.ISecurityGroup,
                 endpoint_access: eks.EndpointAccess) -> eks.Cluster:
        """The eks_v2 cluster: defaults, then the caller's overrides, then the invariants HyperPod needs."""
        props: dict[str, Any] = {
            "cluster_logging": ALL_LOG_TYPES,
            "output_config_command": False,
            "bootstrap_cluster_creator_admin_permissions": False,
            **overrides,
            "cluster_name": self.eks_cluster_name,
            "version": eks.KubernetesVersion.of(kubernetes_version),
            "vpc": vpc,
            "vpc_subnets": [ec2.SubnetSelection(subnets=list(subnets))],
            "security_group": security_group,
            "endpoint_access": endpoint_access,
            "default_capacity_type": eks.DefaultCapacityType.NODEGROUP,
            "default_capacity": 0,
            "bootstrap_self_managed_addons": False,
            "secrets_encryption_key": self.secrets_key,
        }
        cluster = eks.Cluster(self, "Cluster", **props)
        cluster.node.add_dependency(self.log_group)
        acknowledge(
            cluster.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy]",
            "The EKS service role must carry AmazonEKSClusterPolicy; EKS documents no scoped equivalent.",
        )
        acknowledge(
            cluster, "@aws-cdk/aws-eks:clusterMustManuallyTagSubnet",
            "HyperPodNetwork tags the subnets it creates with the ELB role tags; an existing VPC's owner tags "
            "its own subnets.",
            pack="Annotation",
        )
        return cluster

    def _core_addons(self, versions: Mapping[str, str]) -> dict[str, EksAddon]:
        """The add-ons of ``infra.facts.addons.CORE``, kept on the cluster when their resource is deleted."""
        built: dict[str, EksAddon] = {}
        for addon in addons.CORE:
            # Inside a construct named Addon-<name>, as the ID "Resource": the logical IDs aws_eks_v2.Addon gave these
            # add-ons when it built them, which deployed clusters carry.
            holder = Construct(self, f"Addon-{addon.name}")
            built[addon.name] = EksAddon(
                holder, "Resource", addon=addon, eks_cluster_name=self.eks_cluster.cluster_name,
                version=versions.get(addon.name), preserve_on_delete=True, resolve_conflicts=None,
            )
        return built

    def _access_entry(self, kind: str, principal: str, policy: eks.IAccessPolicy) -> eks.AccessEntry:
        # The ID follows the principal, not its list position, so reordering replaces nothing.
        digest = hashlib.sha256(principal.encode()).hexdigest()[:10]
        return eks.AccessEntry(
            self, f"{kind}-{digest}",
            cluster=self.eks_cluster,  # type: ignore[arg-type]  # jsii stubs: Cluster lacks an ICluster member
            principal=principal, access_policies=[policy],
        )

    def _outputs(self) -> None:
        region = Stack.of(self).region
        CfnOutput(self, "ClusterName", value=self.eks_cluster.cluster_name, description="EKS cluster name")
        CfnOutput(self, "ClusterArn", value=self.eks_cluster.cluster_arn, description="EKS cluster ARN")
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --name {self.eks_cluster.cluster_name} --region {region}",
            description="Adds this cluster to your kubeconfig (your principal needs an access entry)",
        )
