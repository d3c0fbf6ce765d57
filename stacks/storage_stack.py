"""StorageStack: the shared FSx for Lustre file system, its CSI driver, and its volume and claim on the cluster."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from infra.common import data_removal_policy, retention
from infra.config import AppConfig
from infra.eks import EksControlPlane
from infra.helm_release import ChartSource, HelmInstaller, HelmRelease
from infra.network import HyperPodNetwork
from infra.storage import (
    STORAGE_CHART_DIR,
    STORAGE_RELEASE_NAME,
    STORAGE_RELEASE_NAMESPACE,
    FsxCsiDriver,
    SharedFileSystem,
)


def storage_az_id(config: AppConfig) -> str:
    """The AZ ID of the file system: the configured one, else the first HyperPod subnet's."""
    return config.storage.fsx_lustre.az_id or config.network.hyperpod_subnets[0].az_id


class StorageStack(Stack):
    """Created after the HyperPod stack: the CSI driver's pods need running nodes."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        network: HyperPodNetwork,
        control_plane: EksControlPlane,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        fsx_config = config.storage.fsx_lustre
        cluster = control_plane.cluster
        self.file_system = SharedFileSystem(
            self, "SharedFileSystem",
            config=fsx_config,
            subnet=network.hyperpod_subnets[storage_az_id(config)],
            security_group=network.security_group,
        )
        self.csi_driver = FsxCsiDriver(
            self, "FsxCsiDriver",
            cluster=cluster,
            file_system_arn=self.file_system.file_system_arn,
            addon_version=fsx_config.csi_driver_version,
        )
        self.installer = HelmInstaller(
            self, "ChartInstaller",
            cluster=cluster,
            vpc=network.vpc,
            subnets=network.control_plane_subnets,
            cluster_security_group=network.security_group,
            purpose="shared storage chart installer",
            installs="the shared storage Helm chart",
            log_retention=retention(config.eks.log_retention_days),
            removal_policy=data_removal_policy(config.destroy_data_on_delete),
        )
        self.volume_values = self.file_system.volume_values()
        self.volume_release = HelmRelease(
            self, "SharedStorageRelease",
            installer=self.installer,
            release_name=STORAGE_RELEASE_NAME,
            namespace=STORAGE_RELEASE_NAMESPACE,
            chart=ChartSource.local(self, "StorageChart", STORAGE_CHART_DIR),
            values=self.volume_values,
        )
        # Pods mount through the driver; the claim is installed once the driver is there.
        self.volume_release.node.add_dependency(self.csi_driver.addon)
        if self.file_system.data_repository is not None:
            self.volume_release.node.add_dependency(self.file_system.data_repository)
        CfnOutput(self, "PersistentVolumeClaim", value=f"{fsx_config.namespace}/{fsx_config.pvc_name}",
                  description="namespace/name of the claim that mounts the shared file system")
