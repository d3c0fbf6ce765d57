"""EKS add-ons for training on the HyperPod nodes: the HyperPod training operator (with cert-manager) and the
Mountpoint for Amazon S3 CSI driver, each controller on its own EKS Pod Identity role."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from infra.constructs.addon import EksAddon
from infra.constructs.common import acknowledge
from infra.constructs.helm_release import HelmInstaller
from infra.constructs.readiness import Readiness
from infra.errors import ConfigError
from infra.facts.addons import CERT_MANAGER, S3_CSI, TRAINING_OPERATOR

# The operator's service account and the managed policy of its role: AWS's Terraform module,
# awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/
# 7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/hyperpod_training_operator/main.tf.
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
# What Mountpoint needs on a general purpose bucket to list, read, write and (with the allow-delete mount
# option) delete: awslabs/mountpoint-s3@58817cab2fc3020a422d8aa14049a86b296f4498:doc/CONFIGURATION.md,
# "IAM permissions", its least-privilege example.
S3_BUCKET_ACTIONS = ["s3:ListBucket"]
S3_OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"]


class TrainingOperator(Construct):
    """The EKS add-on ``amazon-sagemaker-hyperpod-training-operator`` and the cert-manager add-on it needs.

    The operator's controller (``aws-hyperpod/hp-training-operator-controller-manager``) gets a role only EKS
    Pod Identity gives, only to that service account of this cluster, with the AWS managed policy
    ``AmazonSageMakerHyperPodTrainingOperatorAccess`` (what AWS's Terraform module and console attach). With
    ``install_cert_manager`` the EKS add-on ``cert-manager`` is installed first, at ``cert_manager_version``
    (default: the version AWS's Terraform module pins, ``infra.facts.addons.CERT_MANAGER.version``; None for EKS's
    default); pass False when the cluster already has cert-manager. Changing the version of a deployed add-on is an
    update in place (AddonVersion is not among the create-only properties of cfn-lint's AWS::EKS::Addon schema).
    The EKS Pod Identity agent must be on the cluster (``EksControlPlane`` installs it). The add-ons need running
    nodes: create this after the HyperPod cluster.
    """

    def __init__(self, scope: Construct, construct_id: str, *, eks_cluster: eks.ICluster,
                 install_cert_manager: bool = True, readiness_installer: HelmInstaller | None = None,
                 cert_manager_version: str | None = CERT_MANAGER.version) -> None:
        super().__init__(scope, construct_id)
        cluster_name = eks_cluster.cluster_name
        self.cert_manager: EksAddon | None = None
        if install_cert_manager:
            self.cert_manager = EksAddon(self, "CertManager", addon=CERT_MANAGER, eks_cluster_name=cluster_name,
                                         version=cert_manager_version, configuration=CERT_MANAGER_CONFIGURATION)
        # Its webhook certificates come from cert-manager: with an installer to check it, after cert-manager's
        # Deployments are available (AWS's module, cert_manager.tf's wait_for_cert_manager), else after its add-on.
        self.cert_manager_ready: Readiness | None = None
        cert_manager: IDependable | None = None
        if self.cert_manager is not None:
            if readiness_installer is not None:
                self.cert_manager_ready = self.cert_manager.wait_until_ready(readiness_installer)
            cert_manager = self.cert_manager_ready or self.cert_manager.addon
        self.operator = EksAddon(
            self, "Addon", addon=TRAINING_OPERATOR, eks_cluster_name=cluster_name, role_id="ControllerRole",
            role_description="HyperPod training operator controller (EKS Pod Identity)",
            after=[cert_manager] if cert_manager is not None else [],
        )
        assert self.operator.role is not None and self.operator.association is not None
        self.role = self.operator.role
        self.association = self.operator.association
        self.addon = self.operator.addon
        self.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(TRAINING_OPERATOR_POLICY))
        acknowledge(self.role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                               f"{TRAINING_OPERATOR_POLICY}]",
                    "AWS maintains this policy for the training operator's controller as the operator gains "
                    "features; AWS's Terraform module and console install attach the same policy")


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
        self.driver = EksAddon(
            self, "Addon", addon=S3_CSI, eks_cluster_name=eks_cluster.cluster_name, role_id="DriverRole",
            role_description="Mountpoint for Amazon S3 CSI driver (EKS Pod Identity): the configured buckets only",
        )
        assert self.driver.role is not None and self.driver.association is not None
        self.role = self.driver.role
        self.association = self.driver.association
        self.addon = self.driver.addon
        objects = [f"{arn}/*" for arn in bucket_arns]
        self.policy = iam.Policy(self, "DriverPolicy", roles=[self.role], statements=[
            iam.PolicyStatement(sid="MountpointBuckets", actions=S3_BUCKET_ACTIONS, resources=list(bucket_arns)),
            iam.PolicyStatement(sid="MountpointObjects", actions=S3_OBJECT_ACTIONS, resources=objects),
        ])
        for resource in objects:
            acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{resource}]",
                        "every object of a bucket the config lists for mounting: a volume shows the whole bucket")
        # The association needs the policy in place before the driver first calls S3.
        self.addon.node.add_dependency(self.policy)
