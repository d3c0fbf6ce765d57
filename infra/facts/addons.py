"""The EKS add-ons this product installs: each add-on's name and, where it runs on EKS Pod Identity, the namespace
and service account its credentials go to. One declaration per add-on; every fact names its source.

The constructs build every add-on from these with ``infra.constructs.addon.EksAddon``; the config, ``hpctl
preflight`` and the tests read the names from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# AWS's Terraform modules for HyperPod on EKS, read at this commit (written ${_TF} in the comments below):
_TF = ("awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/"
       "7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules")


@dataclass(frozen=True)
class PodIdentityFacts:
    """Where an add-on's controller takes its credentials: ``namespace/service_account``.

    ``association``: ``addon`` when the add-on's own ``PodIdentityAssociations`` carry it; ``separate`` when a
    ``AWS::EKS::PodIdentityAssociation`` of its own must (an add-on version that does not declare that it needs
    IAM permissions refuses the add-on's associations).
    """

    namespace: str
    service_account: str
    association: Literal["addon", "separate"] = "addon"


@dataclass(frozen=True)
class Workload:
    """A workload an add-on runs, whose readiness tells that the add-on works (what AWS's modules wait for)."""

    kind: Literal["deployment", "daemonset"]
    namespace: str
    name: str


@dataclass(frozen=True)
class AddonFacts:
    """One EKS add-on: its name, its Pod Identity facts (None: the add-on takes no AWS credentials of its own),
    where both were read, the workloads that must be available before what needs the add-on is created, and the
    version AWS's own setup pins (None: none pinned, EKS installs its default for the Kubernetes version)."""

    name: str
    pod_identity: PodIdentityFacts | None
    source: str
    workloads: tuple[Workload, ...] = ()
    version: str | None = None


# The control plane's add-ons; HyperPod supports only the VPC CNI (../shared/ARCHITECTURE.md, "Facts: EKS side").
# vpc-cni, kube-proxy and eks-pod-identity-agent: ${_TF}/eks_cluster/main.tf (aws_eks_addon, lines 105-119).
# coredns is not in AWS's module (it leaves it to EKS); the name is the one deployed clusters of this product carry,
# not checked against a document here.
VPC_CNI = AddonFacts("vpc-cni", None, f"{_TF}/eks_cluster/main.tf")
KUBE_PROXY = AddonFacts("kube-proxy", None, f"{_TF}/eks_cluster/main.tf")
COREDNS = AddonFacts("coredns", None, "unverified: not in AWS's Terraform module")
# Its DaemonSet: "kubectl rollout status daemonset/eks-pod-identity-agent --namespace kube-system"
# (awsdocs/amazon-eks-user-guide@4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:latest/ug/manage-access/aws-access/
# service-accounts.adoc line 976, https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html).
POD_IDENTITY_AGENT = AddonFacts("eks-pod-identity-agent", None, f"{_TF}/eks_cluster/main.tf",
                                (Workload("daemonset", "kube-system", "eks-pod-identity-agent"),))
CORE = (VPC_CNI, KUBE_PROXY, COREDNS, POD_IDENTITY_AGENT)

# cert-manager, "required for HPTO": ${_TF}/hyperpod_cluster/cert_manager.tf, which waits (lines 73-75,
# `kubectl wait --for=condition=available deployment/<name> -n cert-manager`) for its three Deployments. Its version
# is pinned as AWS's module pins it: addon_version = var.cert_manager_version (cert_manager.tf line 6), default
# "v1.18.2-eksbuild.2" (${_TF}/hyperpod_cluster/variables.tf lines 129-133). Whether EKS offers it for the config's
# Kubernetes version is checked live by `hpctl preflight` (check_addon_versions), not here.
CERT_MANAGER = AddonFacts("cert-manager", None, f"{_TF}/hyperpod_cluster/cert_manager.tf", (
    Workload("deployment", "cert-manager", "cert-manager"),
    Workload("deployment", "cert-manager", "cert-manager-cainjector"),
    Workload("deployment", "cert-manager", "cert-manager-webhook"),
), version="v1.18.2-eksbuild.2")
# The operator's service account, and a separate association: ${_TF}/hyperpod_training_operator/main.tf (version
# v1.2.1-eksbuild.1 stopped declaring that it needs IAM permissions, so CreateAddon refuses the add-on's own
# associations: "Pod Identity feature is not supported for addon version", awslabs/awsome-distributed-training#1075).
TRAINING_OPERATOR = AddonFacts(
    "amazon-sagemaker-hyperpod-training-operator",
    PodIdentityFacts("aws-hyperpod", "hp-training-operator-controller-manager", association="separate"),
    f"{_TF}/hyperpod_training_operator/main.tf",
)
# Driver-level credentials go to kube-system/s3-csi-driver-sa (awsdocs/amazon-eks-user-guide@4d52b4d:latest/ug/storage/
# s3-csi.adoc lines 141-142, an IRSA setup; whether every add-on version takes Pod Identity is not verified here):
# awslabs/mountpoint-s3-csi-driver@
# 57c6bedb46e2c1281883b80dad4d5d54b438b0de:docs/CONFIGURATION.md ("Driver-Level Credentials with EKS Pod Identity"),
# and ${_TF}/hyperpod_inference_operator/iam_roles.tf (system:serviceaccount:kube-system:s3-csi-driver-sa). A separate
# association, as for the operator: it works whatever the add-on version declares.
S3_CSI = AddonFacts(
    "aws-mountpoint-s3-csi-driver",
    PodIdentityFacts("kube-system", "s3-csi-driver-sa", association="separate"),
    "https://docs.aws.amazon.com/eks/latest/userguide/mountpoint-for-s3-add-on.html",
)
# The controller's service account: ${_TF}/fsx_lustre/main.tf (aws_eks_addon.fsx_lustre_csi_driver,
# pod_identity_association), in kube-system (awsdocs/amazon-eks-user-guide@4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:
# latest/ug/storage/fsx-csi.adoc lines 74-75 and 95, "kube-system/fsx-csi-controller-sa").
# AWS's module waits for Deployment fsx-csi-controller in kube-system before it uses the driver (same file, line 53).
FSX_CSI = AddonFacts(
    "aws-fsx-csi-driver",
    PodIdentityFacts("kube-system", "fsx-csi-controller-sa"),
    f"{_TF}/fsx_lustre/main.tf",
    (Workload("deployment", "kube-system", "fsx-csi-controller"),),
)
# No IAM role: AWS's module installs it without a pod identity association (${_TF}/task_governance/main.tf), and
# waits for Kueue's controller, Deployment kueue-controller-manager in kueue-system, before the compute quotas
# (same file, lines 105-106, its wait_for_kueue_webhook).
TASK_GOVERNANCE = AddonFacts("amazon-sagemaker-hyperpod-taskgovernance", None, f"{_TF}/task_governance/main.tf",
                             (Workload("deployment", "kueue-system", "kueue-controller-manager"),))
# Container Insights: the agent's service account cloudwatch-agent in amazon-cloudwatch
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/install-CloudWatch-Observability-EKS-addon.html,
# option 3's `--name cloudwatch-agent --namespace amazon-cloudwatch`; awsdocs/amazon-eks-user-guide@
# 4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:latest/ug/workloads/eks-add-ons.adoc lines 513-514).
CONTAINER_INSIGHTS = AddonFacts(
    "amazon-cloudwatch-observability",
    PodIdentityFacts("amazon-cloudwatch", "cloudwatch-agent"),
    "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/install-CloudWatch-Observability-EKS-addon.html",
)
# The collector's service account: ${_TF}/observability/eks_addon.tf (pod_identity_association); its namespace:
# "Namespace: hyperpod-observability; Service account: hyperpod-observability-operator-otel-collector" (AWS's page
# "Troubleshooting the Amazon SageMaker HyperPod observability add-on", section "Verify Pod Identity association",
# https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html).
HYPERPOD_OBSERVABILITY = AddonFacts(
    "amazon-sagemaker-hyperpod-observability",
    PodIdentityFacts("hyperpod-observability", "hyperpod-observability-operator-otel-collector"),
    f"{_TF}/observability/eks_addon.tf",
)

ALL = (*CORE, CERT_MANAGER, TRAINING_OPERATOR, S3_CSI, FSX_CSI, TASK_GOVERNANCE, CONTAINER_INSIGHTS,
       HYPERPOD_OBSERVABILITY)


def addon_namespaces() -> frozenset[str]:
    """Every namespace the add-ons above run in (their Pod Identity service accounts' and their workloads')."""
    return frozenset({a.pod_identity.namespace for a in ALL if a.pod_identity}
                     | {w.namespace for a in ALL for w in a.workloads})
