"""The `storage` section: the shared FSx for Lustre file system, its S3 data repository and its claim in EKS."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from infra.config.base import StrictModel, refusal
from infra.config.fields import AzId, WholeNumber

# Namespaces every EKS cluster with HyperPod already has (the last one is created by HyperPod's chart).
CLUSTER_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", "aws-hyperpod"})

S3Uri = Annotated[str, Field(pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")]


class FsxLustreConfig(StrictModel):
    """A shared FSx for Lustre file system (PERSISTENT_2) for datasets and checkpoints."""

    enabled: bool = False
    # PERSISTENT_2 takes 1200 GiB or a multiple of 2400 GiB.
    capacity_gib: StrictInt = Field(default=1200, ge=1200, le=2_400_000)
    throughput_per_tib: Annotated[Literal[125, 250, 500, 1000], WholeNumber] = 250
    # The AZ ID of the HyperPod subnet to place it in; default: the first HyperPod subnet.
    az_id: AzId | None = None
    # Optional S3 data repository association: s3://bucket/prefix linked at file_system_path.
    data_repository_s3_uri: S3Uri | None = None
    # With the association, deleting a file on FSx also deletes its object in S3 only when this is true.
    data_repository_export_deletions: bool = False
    # Daily automatic backups kept this many days (FSx allows 0-90; 0 turns them off). FSx does not back up a
    # file system linked to S3, so with data_repository_s3_uri write 0: S3 then holds the durable copy.
    automatic_backup_retention_days: StrictInt = Field(default=7, ge=0, le=90)
    file_system_path: Annotated[str, Field(pattern=r"^/[A-Za-z0-9_./-]*$")] = "/data"
    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)] = "training"
    pvc_name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)] = "fsx-claim"
    # Keep the file system when the stack is deleted (checkpoints outlive the cluster).
    retain_on_delete: bool = True
    # Version of the EKS add-on aws-fsx-csi-driver; null lets EKS pick its default for the Kubernetes version.
    csi_driver_version: Annotated[str, Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+$")] | None = None

    @field_validator("namespace")
    @classmethod
    def _own_namespace(cls, value: str) -> str:
        if value in CLUSTER_NAMESPACES:
            raise refusal("", None, f"{value} already exists on every cluster; the storage chart creates its "
                                     "namespace, use another (e.g. training)")
        return value

    @model_validator(mode="after")
    def _data_repository(self) -> FsxLustreConfig:
        if self.data_repository_s3_uri and self.automatic_backup_retention_days:
            raise refusal("automatic_backup_retention_days", self.automatic_backup_retention_days,
                          "FSx for Lustre does not back up a file system linked to S3 (data_repository_s3_uri); "
                          "write 0")
        if self.data_repository_export_deletions and not self.data_repository_s3_uri:
            raise refusal("data_repository_export_deletions", True, "only used with data_repository_s3_uri")
        return self

    @field_validator("capacity_gib")
    @classmethod
    def _capacity_step(cls, value: int) -> int:
        if value != 1200 and value % 2400 != 0:
            raise refusal("", None, f"PERSISTENT_2 capacity is 1200 GiB or a multiple of 2400 GiB, got {value}")
        return value


class StorageConfig(StrictModel):
    fsx_lustre: FsxLustreConfig = FsxLustreConfig()

