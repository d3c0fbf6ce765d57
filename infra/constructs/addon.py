"""The one way this product builds an EKS add-on: ``EksAddon``, with its Pod Identity role of one trust shape."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Aws, CfnTag, Duration, Stack, Token
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from infra.constructs.helm_release import HelmInstaller
from infra.constructs.readiness import MAX_TIMEOUT_SECONDS, Readiness, ReadinessCheck
from infra.facts.addons import AddonFacts, Workload


def pod_identity_trust(scope: Construct, *, eks_cluster_arn: str, namespace: str,
                       service_account: str) -> iam.IPrincipal:
    """EKS Pod Identity, for ``namespace/service_account`` of the EKS cluster ``eks_cluster_arn`` only.

    aws:SourceAccount and aws:SourceArn (the EKS cluster) as AWS's own module writes them for the HyperPod
    observability collector (awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:
    1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/observability/iam_roles.tf);
    the namespace and service account as the session tags Pod Identity adds, matched as aws:RequestTag/<key>
    (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html, "Setting Conditions"), which needs
    sts:TagSession beside sts:AssumeRole (same page).
    """
    return iam.ServicePrincipal("pods.eks.amazonaws.com").with_conditions({"StringEquals": {
        "aws:SourceAccount": Aws.ACCOUNT_ID,
        "aws:SourceArn": eks_cluster_arn,
        "aws:RequestTag/kubernetes-namespace": namespace,
        "aws:RequestTag/kubernetes-service-account": service_account,
    }}).with_session_tags()


def eks_cluster_arn_of(scope: Construct, eks_cluster_name: str) -> str:
    """The ARN of the EKS cluster ``eks_cluster_name`` in ``scope``'s account and region."""
    return Stack.of(scope).format_arn(service="eks", resource="cluster", resource_name=eks_cluster_name)


class EksAddon(Construct):
    """One EKS add-on (``AWS::EKS::Addon``) and, when it runs on EKS Pod Identity, its role.

    - ``addon``: the add-on's facts (``infra.facts.addons``): its name and its Pod Identity namespace and service
      account.
    - ``version``: a pinned ``vX.Y.Z-eksbuild.N`` (cite where it was read), or None for EKS's default for the
      cluster's Kubernetes version.
    - ``configuration``: the add-on's configuration values (EKS validates them against the version's schema);
      tokens allowed.
    - ``role_id``: with Pod Identity, the construct ID of the role, created beside this construct in ``scope``
      with ``pod_identity_trust``; its permissions are the caller's to add (``self.role``). The add-on is given
      the role by its own ``PodIdentityAssociations``, or by an ``AWS::EKS::PodIdentityAssociation`` (construct
      ID ``PodIdentityAssociation`` in ``scope``) when the facts say ``separate``; either way it is created after.
    - ``after``: what must exist (or be ready) before the add-on is created: its role's policies, a readiness
      check (``infra.constructs.readiness.Readiness``), another add-on.
    - ``preserve_on_delete``: keep the add-on's software on the cluster when the resource is deleted.
    - ``resolve_conflicts``: ``OVERWRITE`` takes over fields someone changed by hand; None leaves EKS's default.
    - ``tags``: tags of the add-on resource itself, beside the ones the app adds to everything (the add-on's
      ``Tags`` update in place: cfn-lint's AWS::EKS::Addon schema marks them ``tagUpdatable`` and not create-only).

    The add-on resource is this construct's default child, so its logical ID is the one a ``CfnAddon`` at
    ``(scope, construct_id)`` had; the role and association IDs are the ones the components used before this
    construct existed. Changing the ID of an installed add-on would make CloudFormation create a second add-on of
    the same name before deleting the first, which EKS refuses.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, addon: AddonFacts, eks_cluster_name: str,
        eks_cluster_arn: str | None = None, version: str | None = None,
        configuration: Mapping[str, Any] | None = None, role_id: str | None = None,
        role_description: str | None = None, after: Sequence[IDependable] = (), preserve_on_delete: bool = False,
        resolve_conflicts: str | None = "OVERWRITE", tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.facts = addon
        self.role: iam.Role | None = None
        self.association: eks_l1.CfnPodIdentityAssociation | None = None
        identity = addon.pod_identity
        if (identity is None) != (role_id is None):
            raise ValueError(f"{addon.name}: role_id goes with an add-on that runs on Pod Identity, and only then")
        inline: list[eks_l1.CfnAddon.PodIdentityAssociationProperty] = []
        if identity is not None and role_id is not None:
            self.role = iam.Role(
                scope, role_id,
                assumed_by=pod_identity_trust(
                    scope, eks_cluster_arn=eks_cluster_arn or eks_cluster_arn_of(scope, eks_cluster_name),
                    namespace=identity.namespace, service_account=identity.service_account),
                description=role_description or f"{addon.name} (EKS Pod Identity)",
            )
            if identity.association == "separate":
                self.association = eks_l1.CfnPodIdentityAssociation(
                    scope, "PodIdentityAssociation", cluster_name=eks_cluster_name, namespace=identity.namespace,
                    service_account=identity.service_account, role_arn=self.role.role_arn)
            else:
                inline.append(eks_l1.CfnAddon.PodIdentityAssociationProperty(
                    role_arn=self.role.role_arn, service_account=identity.service_account))
        self.addon = eks_l1.CfnAddon(
            self, "Default", addon_name=addon.name, cluster_name=eks_cluster_name, addon_version=version,
            resolve_conflicts=resolve_conflicts, preserve_on_delete=preserve_on_delete,
            configuration_values=_configuration_values(self, configuration),
            pod_identity_associations=inline or None,
            tags=[CfnTag(key=k, value=v) for k, v in tags.items()] if tags else None,
        )
        if self.association is not None:
            # The controller has credentials from its first start.
            self.addon.add_resource_dependency(self.association)
        if after:
            self.addon.node.add_dependency(*after)

    @property
    def addon_name(self) -> str:
        return self.facts.name

    def wait_until_ready(self, installer: HelmInstaller) -> Readiness:
        """A ``Readiness`` (construct ID ``Ready`` in this construct) that passes once EKS reports the add-on ACTIVE
        (not DEGRADED) and the workloads its facts name are available; make what needs the add-on depend on it."""
        # The longest wait a Readiness takes: the workloads may wait for a node's deep health checks to pass (a node
        # running them is "not available for running workloads", https://docs.aws.amazon.com/sagemaker/latest/dg/
        # sagemaker-hyperpod-eks-resiliency-node-labels.html).
        ready = Readiness(self, "Ready", installer=installer, what=self.facts.name,
                          timeout=Duration.seconds(MAX_TIMEOUT_SECONDS),
                          checks=[ReadinessCheck.addon(self.facts.name),
                                  *(workload_check(w) for w in self.facts.workloads)])
        ready.node.add_dependency(self.addon)
        return ready


def workload_check(workload: Workload) -> ReadinessCheck:
    """The readiness check of one workload an add-on runs."""
    if workload.kind == "daemonset":
        return ReadinessCheck.daemonset(workload.namespace, workload.name)
    return ReadinessCheck.deployment(workload.namespace, workload.name)


def _configuration_values(scope: Construct, configuration: Mapping[str, Any] | None) -> str | None:
    """The JSON string EKS takes: compact, keys in the given order; through the stack when it holds tokens."""
    if configuration is None:
        return None
    text = json.dumps(configuration, separators=(",", ":"))
    return Stack.of(scope).to_json_string(dict(configuration)) if Token.is_unresolved(text) else text
