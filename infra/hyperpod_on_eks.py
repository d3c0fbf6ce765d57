"""HyperPodOnEks: the whole product (network, EKS, HyperPod, observability) inside one consumer's stack."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from infra.common import data_removal_policy, retention
from infra.config import AppConfig, eks_cluster_name
from infra.eks import EksControlPlane
from infra.errors import ConfigError
from infra.hyperpod.assembly import add_hyperpod
from infra.network import HyperPodNetwork
from infra.observability import HyperPodObservability

PACKAGE_DIR = Path(__file__).resolve().parent
# The lifecycle scripts ship inside the package (infra/lifecycle_scripts links to the repository's copy).
DEFAULT_LIFECYCLE_DIR = PACKAGE_DIR / "lifecycle_scripts"


class HyperPodOnEks(Construct):
    """A SageMaker HyperPod cluster orchestrated by Amazon EKS, with everything around it, in one stack.

    Builds, from one validated ``AppConfig``: ``network`` (HyperPodNetwork), ``control_plane``
    (EksControlPlane, None when ``eks_cluster`` is given), ``lifecycle`` (LifecycleScripts),
    ``execution_role`` (HyperPodExecutionRole), ``dependencies_chart`` (HyperPodDependenciesChart),
    ``hyperpod`` (HyperPodCluster) and ``observability`` (HyperPodObservability, None when every piece is off).
    The HyperPod cluster waits for the dependencies chart and the scripts; the observability add-ons wait
    for the HyperPod cluster.

    Bring your own (each replaces what would be created):
      - ``vpc`` + ``control_plane_subnets`` + ``hyperpod_subnets`` (AZ ID -> subnet) [+ ``security_group``]:
        ``config.network`` is then not used; giving ``vpc`` with ``network.existing_vpc_id`` is an error;
      - ``eks_cluster`` (e.g. ``eks.Cluster.from_cluster_attributes``) + ``eks_cluster_security_group`` (a
        group of the cluster's control plane that the chart installer may reach on 443): ``config.eks`` is
        then not used; giving ``secrets_key`` with it is an error;
      - ``lifecycle_bucket``; ``execution_role`` (an error with ``hyperpod.permissions_boundary_arn``);
        ``secrets_key`` (the EKS secrets KMS key).
    ``lifecycle_scripts_dir`` defaults to the scripts packaged with this library (``hyperpod.lifecycle_scripts_dir``
    is for the app's stacks). Cross-cutting: ``permissions_boundary`` applies to every IAM role created here
    and ``tags`` to every resource, including the stack-level functions aws-cdk-lib adds for them.
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
        permissions_boundary: iam.IManagedPolicy | None = None,
        tags: Mapping[str, str] | None = None,
        lifecycle_scripts_dir: Path | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = data_removal_policy(config.destroy_data_on_delete)
        log_retention = retention(config.eks.log_retention_days)
        if eks_cluster is not None and secrets_key is not None:
            raise ConfigError("eks", None, "secrets_key applies to a cluster created here, not to eks_cluster")
        if eks_cluster is not None and eks_cluster_security_group is None:
            raise ConfigError("eks", None, "eks_cluster needs eks_cluster_security_group (the chart installer "
                              "reaches the API server through it)")
        if vpc is not None and config.network.existing_vpc_id:
            raise ConfigError("network.existing_vpc_id", config.network.existing_vpc_id,
                              "give either an existing vpc construct or network.existing_vpc_id, not both")
        if execution_role is not None and config.hyperpod.permissions_boundary_arn:
            raise ConfigError("hyperpod.permissions_boundary_arn", config.hyperpod.permissions_boundary_arn,
                              "applies to an execution role created here, not to execution_role")

        self.network = HyperPodNetwork(
            self, "Network",
            config=None if vpc is not None else config.network,
            vpc=vpc, control_plane_subnets=control_plane_subnets, hyperpod_subnets=hyperpod_subnets,
            security_group=security_group, removal_policy=removal,
        )
        missing = sorted({g.az_id for g in config.hyperpod.instance_groups} - set(self.network.hyperpod_subnets))
        if missing:
            raise ConfigError("hyperpod_subnets", sorted(self.network.hyperpod_subnets),
                              f"no HyperPod subnet for the instance groups' AZ IDs {missing}")

        self.control_plane: EksControlPlane | None = None
        if eks_cluster is None:
            self.control_plane = EksControlPlane(
                self, "ControlPlane", config=config.eks, cluster_name=eks_cluster_name(config),
                vpc=self.network.vpc, subnets=self.network.control_plane_subnets,
                security_group=self.network.security_group, secrets_key=secrets_key, removal_policy=removal,
            )
            cluster: eks.ICluster = self.control_plane.cluster  # type: ignore[assignment]
            cluster_name = eks_cluster_name(config)
            api_security_group = self.network.security_group
        else:
            cluster = eks_cluster
            cluster_name = eks_cluster.cluster_name
            assert eks_cluster_security_group is not None
            api_security_group = eks_cluster_security_group
        self.cluster = cluster

        hp = config.hyperpod
        parts = add_hyperpod(
            self, config=hp, eks_cluster=cluster, vpc=self.network.vpc,
            control_plane_subnets=self.network.control_plane_subnets,
            hyperpod_subnets=self.network.hyperpod_subnets, node_security_group=self.network.security_group,
            api_security_group=api_security_group, scripts_dir=lifecycle_scripts_dir or DEFAULT_LIFECYCLE_DIR,
            log_retention=log_retention, removal_policy=removal, lifecycle_bucket=lifecycle_bucket,
            execution_role=execution_role, fsx_lustre=config.storage.fsx_lustre.enabled,
        )
        self.lifecycle = parts.lifecycle
        self.execution_role = parts.execution_role
        self.dependencies_chart = parts.dependencies_chart
        self.hyperpod = parts.cluster
        o = config.observability
        self.observability: HyperPodObservability | None = None
        if o.any_enabled:
            self.observability = HyperPodObservability(
                self, "Observability", config=o, name=hp.cluster_name, eks_cluster_name=cluster_name,
                eks_cluster_arn=cluster.cluster_arn, hyperpod_cluster_name=hp.cluster_name,
                log_retention=log_retention, removal_policy=removal,
            )
            # The add-ons need running HyperPod nodes.
            self.observability.node.add_dependency(self.hyperpod.cfn_cluster)

        # aws-cdk-lib puts some functions (BucketDeployment, AwsCustomResource) at stack level.
        scopes = [self, *self._stack_singletons()]
        for scope_ in scopes:
            if permissions_boundary is not None:
                iam.PermissionsBoundary.of(scope_).apply(permissions_boundary)
            for key, value in {"project": config.project, **(tags or {})}.items():
                Tags.of(scope_).add(key, value)

    def _stack_singletons(self) -> list[IConstruct]:
        """Stack-level singletons aws-cdk-lib created for this construct's resources."""
        prefixes = ("Custom::CDKBucketDeployment", "AWS679f53fac002430cb0da5b7982bd2287")
        return [c for c in Stack.of(self).node.children if c.node.id.startswith(prefixes)]
