"""EKS add-ons for training on the HyperPod nodes: the HyperPod training operator (with cert-manager) and the
Mountpoint for Amazon S3 CSI driver, each controller on its own EKS Pod Identity role."""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config.addons import CERT_MANAGER_ADDON, S3_CSI_ADDON, TRAINING_OPERATOR_ADDON
from infra.constructs.common import acknowledge, service_account_role
from infra.errors import ConfigError

# The operator's service account and the managed policy of its role: AWS's Terraform module,
# awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/
# 7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/hyperpod_training_operator/main.tf.
TRAINING_OPERATOR_NAMESPACE = "aws-hyperpod"
TRAINING_OPERATOR_SERVICE_ACCOUNT = "hp-training-operator-controller-manager"
TRAINING_OPERATOR_POLICY = "AmazonSageMakerHyperPodTrainingOperatorAccess"
# cert-manager's pods (controller, webhook, cainjector) tolerate every taint, so they run on tainted HyperPod
# nodes too: the configuration values of AWS's module, awslabs/awsome-distributed-training@0edaf15:
# 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/hyperpod_cluster/cert_manager.tf.
_TOLERATE_ALL = [{"operator": "Exists", "effect": effect} for effect in ("NoSchedule", "NoExecute", "PreferNoSchedule")]
CERT_MANAGER_CONFIGURATION = {
    "replicaCount": 1, "tolerations": _TOLERATE_ALL,
    "webhook": {"replicaCount": 1, "tolerations": _TOLERATE_ALL},
    "cainjector": {"replicaCount": 1, "tolerations": _TOLERATE_ALL},
}
# The service account the driver-level Pod Identity association names ("s3-csi-driver-sa"):
# awslabs/mountpoint-s3-csi-driver@57c6bedb46e2c1281883b80dad4d5d54b438b0de:docs/CONFIGURATION.md ("Driver-Level
# Credentials with EKS Pod Identity"); kube-system is where the add-on puts it (the eksctl command of
# https://docs.aws.amazon.com/eks/latest/userguide/mountpoint-for-s3-add-on.html, and AWS's Terraform module
# modules/hyperpod_inference_operator/iam_roles.tf, system:serviceaccount:kube-system:s3-csi-driver-sa).
S3_CSI_NAMESPACE = "kube-system"
S3_CSI_SERVICE_ACCOUNT = "s3-csi-driver-sa"
# What Mountpoint needs on a general purpose bucket to list, read, write and (with the allow-delete mount
# option) delete: awslabs/mountpoint-s3@58817cab2fc3020a422d8aa14049a86b296f4498:doc/CONFIGURATION.md,
# "IAM permissions", its least-privilege example.
S3_BUCKET_ACTIONS = ["s3:ListBucket"]
S3_OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"]


def _pod_identity_addon(scope: Construct, *, addon_name: str, cluster_name: str, namespace: str,
                        service_account: str, role: iam.IRole) -> tuple[eks_l1.CfnPodIdentityAssociation,
                                                                         eks_l1.CfnAddon]:
    """The add-on ``addon_name``, created after a Pod Identity association of ``namespace/service_account`` with
    ``role`` (construct IDs "PodIdentityAssociation" and "Addon" in ``scope``)."""
    # A Pod Identity association of its own rather than the add-on's PodIdentityAssociations: EKS accepts those
    # only when the add-on version declares that it needs IAM permissions, and version v1.2.1-eksbuild.1 of the
    # training operator stopped declaring it (CreateAddon then fails: "Pod Identity feature is not supported
    # for addon version"), per the comment in AWS's Terraform module cited above (issue
    # awslabs/awsome-distributed-training#1075). A separate association works whatever the add-on declares.
    association = eks_l1.CfnPodIdentityAssociation(
        scope, "PodIdentityAssociation", cluster_name=cluster_name, namespace=namespace,
        service_account=service_account, role_arn=role.role_arn,
    )
    addon = eks_l1.CfnAddon(scope, "Addon", addon_name=addon_name, cluster_name=cluster_name,
                            resolve_conflicts="OVERWRITE", preserve_on_delete=False)
    # The controller has credentials from its first start.
    addon.add_resource_dependency(association)
    return association, addon


class TrainingOperator(Construct):
    """The EKS add-on ``amazon-sagemaker-hyperpod-training-operator`` and the cert-manager add-on it needs.

    The operator's controller (``aws-hyperpod/hp-training-operator-controller-manager``) gets a role only EKS
    Pod Identity gives, only to that service account of this cluster, with the AWS managed policy
    ``AmazonSageMakerHyperPodTrainingOperatorAccess`` (what AWS's Terraform module and console attach). With
    ``install_cert_manager`` the EKS add-on ``cert-manager`` is installed first; pass False when the cluster
    already has cert-manager. The EKS Pod Identity agent must be on the cluster (``EksControlPlane`` installs
    it). The add-ons need running nodes: create this after the HyperPod cluster.
    """

    def __init__(self, scope: Construct, construct_id: str, *, eks_cluster: eks.ICluster,
                 install_cert_manager: bool = True) -> None:
        super().__init__(scope, construct_id)
        cluster_name = eks_cluster.cluster_name
        self.cert_manager: eks_l1.CfnAddon | None = None
        if install_cert_manager:
            self.cert_manager = eks_l1.CfnAddon(
                self, "CertManager", addon_name=CERT_MANAGER_ADDON, cluster_name=cluster_name,
                resolve_conflicts="OVERWRITE", preserve_on_delete=False,
                configuration_values=json.dumps(CERT_MANAGER_CONFIGURATION, separators=(",", ":")),
            )
        self.role = service_account_role(
            self, "ControllerRole", cluster_name=cluster_name, namespace=TRAINING_OPERATOR_NAMESPACE,
            service_account=TRAINING_OPERATOR_SERVICE_ACCOUNT,
            description="HyperPod training operator controller (EKS Pod Identity)",
        )
        self.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(TRAINING_OPERATOR_POLICY))
        acknowledge(self.role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                               f"{TRAINING_OPERATOR_POLICY}]",
                    "AWS maintains this policy for the training operator's controller as the operator gains "
                    "features; AWS's Terraform module and console install attach the same policy")
        self.association, self.addon = _pod_identity_addon(
            self, addon_name=TRAINING_OPERATOR_ADDON, cluster_name=cluster_name,
            namespace=TRAINING_OPERATOR_NAMESPACE, service_account=TRAINING_OPERATOR_SERVICE_ACCOUNT, role=self.role)
        # Its webhook certificates come from cert-manager.
        if self.cert_manager is not None:
            self.addon.add_resource_dependency(self.cert_manager)


class S3CsiDriver(Construct):
    """The EKS add-on ``aws-mountpoint-s3-csi-driver`` on a Pod Identity role that reaches only ``bucket_arns``.

    The driver (``kube-system/s3-csi-driver-sa``, driver-level credentials) may list each bucket and get, put,
    abort multipart uploads of and delete its objects: Mountpoint's documented least-privilege set. Deletion
    still needs the ``allow-delete`` mount option on the volume. Buckets encrypted with SSE-KMS also need
    ``kms:Decrypt``/``kms:GenerateDataKey`` on their key, which is not granted. Volumes are provisioned
    statically (a PersistentVolume naming the bucket; the driver creates no buckets). The EKS Pod Identity agent
    must be on the cluster. The add-on needs running nodes: create it after the HyperPod cluster.
    """

    def __init__(self, scope: Construct, construct_id: str, *, eks_cluster: eks.ICluster,
                 bucket_arns: Sequence[str]) -> None:
        super().__init__(scope, construct_id)
        if not bucket_arns:
            raise ConfigError("bucket_arns", list(bucket_arns), "S3CsiDriver needs at least one bucket ARN")
        cluster_name = eks_cluster.cluster_name
        self.role = service_account_role(
            self, "DriverRole", cluster_name=cluster_name, namespace=S3_CSI_NAMESPACE,
            service_account=S3_CSI_SERVICE_ACCOUNT,
            description="Mountpoint for Amazon S3 CSI driver (EKS Pod Identity): the configured buckets only",
        )
        objects = [f"{arn}/*" for arn in bucket_arns]
        self.policy = iam.Policy(self, "DriverPolicy", roles=[self.role], statements=[
            iam.PolicyStatement(sid="MountpointBuckets", actions=S3_BUCKET_ACTIONS, resources=list(bucket_arns)),
            iam.PolicyStatement(sid="MountpointObjects", actions=S3_OBJECT_ACTIONS, resources=objects),
        ])
        for resource in objects:
            acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{resource}]",
                        "every object of a bucket the config lists for mounting: a volume shows the whole bucket")
        self.association, self.addon = _pod_identity_addon(
            self, addon_name=S3_CSI_ADDON, cluster_name=cluster_name, namespace=S3_CSI_NAMESPACE,
            service_account=S3_CSI_SERVICE_ACCOUNT, role=self.role)
        # The association needs the policy in place before the driver first calls S3.
        self.addon.node.add_dependency(self.policy)
