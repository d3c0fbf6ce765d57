"""HyperPodOnEks: the whole product (network, EKS, HyperPod, observability, storage) inside one consumer's stack."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.composition import Existing, Placement, compose
from infra.config import AppConfig

PACKAGE_DIR = Path(__file__).resolve().parent
# The lifecycle scripts ship inside the package (infra/lifecycle_scripts links to the repository's copy).
DEFAULT_LIFECYCLE_DIR = PACKAGE_DIR / "lifecycle_scripts"


class HyperPodOnEks(Construct):
    """A SageMaker HyperPod cluster orchestrated by Amazon EKS, with everything around it, in one stack.

    Builds, from one validated ``AppConfig`` and by the same composition as the app's stacks
    (``infra.composition.compose``): ``network`` (HyperPodNetwork), ``eks_control_plane`` (EksControlPlane,
    None when ``eks_cluster`` is given), ``eks_cluster``, ``lifecycle`` (LifecycleScripts), ``execution_role``
    (HyperPodExecutionRole), ``dependencies_chart`` (HyperPodDependenciesChart), ``hyperpod_cluster``
    (HyperPodCluster), ``observability`` (HyperPodObservability, None when every piece is off) and ``storage``
    (SharedStorage, None unless ``storage.fsx_lustre.enabled``). The HyperPod cluster waits for the dependencies
    chart and the scripts; observability and storage wait for the HyperPod cluster.

    Bring your own (each replaces what would be created):
      - ``vpc`` + ``control_plane_subnets`` + ``hyperpod_subnets`` (AZ ID -> subnet) [+ ``security_group``]:
        ``config.network`` then only names the AZ IDs; giving ``vpc`` with ``network.existing_vpc_id`` is an error;
      - ``eks_cluster`` (e.g. ``eks.Cluster.from_cluster_attributes``) + ``eks_cluster_security_group`` (a
        group of the cluster's control plane that the chart installer may reach on 443): ``config.eks`` is
        then not used; giving ``secrets_key`` with it is an error;
      - ``lifecycle_bucket``; ``execution_role`` (an error with ``hyperpod.permissions_boundary_arn``);
        ``secrets_key`` (the EKS secrets KMS key).
    ``lifecycle_scripts_dir`` defaults to the scripts packaged with this library (``hyperpod.lifecycle_scripts_dir``
    is for the app's stacks). Cross-cutting, from the config: ``permissions_boundary_arn`` applies to every IAM
    role created here and ``tags`` (with ``project``) to every resource, including the stack-level functions
    aws-cdk-lib adds for them; ``destroy_data_on_delete`` sets the removal policy of data-bearing resources.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        vpc: ec2.IVpc | None = None,
        control_plane_subnets: Sequence[ec2.ISubnet] = (),
        hyperpod_subnets: Mapping[str, ec2.ISubnet] | None = None,
        security_group: ec2.ISecurityGroup | None = None,
        eks_cluster: eks.ICluster | None = None,
        eks_cluster_security_group: ec2.ISecurityGroup | None = None,
        lifecycle_bucket: s3.IBucket | None = None,
        execution_role: iam.IRole | None = None,
        secrets_key: kms.IKey | None = None,
        lifecycle_scripts_dir: Path | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        parts = compose(
            config, Placement.together(self), scripts_dir=lifecycle_scripts_dir or DEFAULT_LIFECYCLE_DIR,
            existing=Existing(
                vpc=vpc, control_plane_subnets=control_plane_subnets, hyperpod_subnets=hyperpod_subnets,
                security_group=security_group, eks_cluster=eks_cluster,
                eks_cluster_security_group=eks_cluster_security_group, lifecycle_bucket=lifecycle_bucket,
                execution_role=execution_role, secrets_key=secrets_key,
            ),
        )
        self.parts = parts
        self.network = parts.network
        self.eks_control_plane = parts.eks_control_plane
        self.eks_cluster = parts.eks_cluster
        self.lifecycle = parts.lifecycle
        self.execution_role = parts.execution_role
        self.dependencies_chart = parts.dependencies_chart
        self.hyperpod_cluster = parts.hyperpod_cluster
        self.observability = parts.observability
        self.storage = parts.storage
