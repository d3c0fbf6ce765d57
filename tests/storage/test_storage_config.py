"""Config refusals of the storage keys this stack adds (same shape as tests/config/test_config.py)."""

from __future__ import annotations

import pytest

from infra.config import parse_config
from infra.errors import ConfigError
from tests.conftest import mutate


@pytest.mark.parametrize(
    ("changes", "key", "words"),
    [
        ({"csi_driver_version": "latest"}, "storage.fsx_lustre.csi_driver_version", "pattern"),
        ({"csi_driver_version": "v1.6.0"}, "storage.fsx_lustre.csi_driver_version", "eksbuild"),
        ({"namespace": "kube-system"}, "storage.fsx_lustre.namespace", "already exists"),
        ({"namespace": "default"}, "storage.fsx_lustre.namespace", "already exists"),
        ({"pvc_name": "Shared_FSx"}, "storage.fsx_lustre.pvc_name", "pattern"),
        ({"data_repository_s3_uri": "s3://example-training-data/x"},
         "storage.fsx_lustre.automatic_backup_retention_days", "write 0"),
        ({"data_repository_export_deletions": True}, "storage.fsx_lustre.data_repository_export_deletions",
         "only used with data_repository_s3_uri"),
        ({"automatic_backup_retention_days": 91}, "storage.fsx_lustre.automatic_backup_retention_days", "90"),
    ],
    ids=["version word", "version without build", "kube-system", "default", "claim name",
         "backups with a data repository", "export deletions without one", "backups beyond 90 days"],
)
def test_refused_with_the_key_named(changes, key, words):
    with pytest.raises(ConfigError) as error:
        parse_config(mutate({"storage": {"fsx_lustre": changes}}), "cfg.yaml")
    message = str(error.value)
    assert key in message and words in message, message


def test_pinned_csi_driver_version_is_accepted():
    config = parse_config(mutate({"storage": {"fsx_lustre": {"csi_driver_version": "v1.6.0-eksbuild.1"}}}))
    assert config.storage.fsx_lustre.csi_driver_version == "v1.6.0-eksbuild.1"
    assert parse_config(mutate({})).storage.fsx_lustre.csi_driver_version is None
