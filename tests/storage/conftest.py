"""The FSx-enabled variant, synthesized once per session for the storage and examples tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Synthesized, mutate, synthesize_variant

# Two HyperPod subnets with the file system in the second, so "the right AZ" is not the default one;
# every storage key away from its default so each can be traced into the template.
FSX_CHANGES: dict[str, Any] = {
    "network": {
        "hyperpod_subnets": [
            {"az_id": "usw2-az2", "cidr": "10.1.0.0/16"},
            {"az_id": "usw2-az3", "cidr": "10.2.0.0/16"},
        ],
    },
    "storage": {
        "fsx_lustre": {
            "enabled": True,
            "capacity_gib": 2400,
            "throughput_per_tib": 500,
            "az_id": "usw2-az3",
            "data_repository_s3_uri": "s3://example-training-data/datasets",
            "automatic_backup_retention_days": 0,  # FSx does not back up a file system linked to S3
            "file_system_path": "/datasets",
            "namespace": "ml-team",
            "pvc_name": "shared-fsx",
            "csi_driver_version": "v1.6.0-eksbuild.1",
        }
    },
}


def fsx_config_data() -> dict[str, Any]:
    return mutate(FSX_CHANGES)


@pytest.fixture(scope="session")
def fsx_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "fsx", fsx_config_data())
