"""The local storage chart, rendered in Python (its templates only substitute values): PV, PVC, namespace."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from infra.config import FsxLustreConfig
from infra.storage import STORAGE_CHART_DIR, persistent_volume_name

_VALUE = re.compile(r"\{\{ \.Values\.(\w+)( \| quote)? \}\}")


def render(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """kind -> object; refuses any template syntax beyond `{{ .Values.x }}` and `{{ .Values.x | quote }}`."""
    objects = {}
    for template in sorted((STORAGE_CHART_DIR / "templates").glob("*.yaml")):
        def substitute(match: re.Match[str]) -> str:
            value = values[match.group(1)]
            return f'"{value}"' if match.group(2) else str(value)

        text = _VALUE.sub(substitute, template.read_text())
        assert "{{" not in text, f"{template.name} uses template syntax this test cannot render"
        document = yaml.safe_load(text)
        objects[document["kind"]] = document
    return objects


def stack_values(config: FsxLustreConfig) -> dict[str, Any]:
    """The values the storage stack sends, with sample attributes in place of the file system's tokens."""
    return {
        "namespace": config.namespace,
        "persistentVolumeName": persistent_volume_name(config),
        "claimName": config.pvc_name,
        "storage": f"{config.capacity_gib}Gi",
        "fileSystemId": "fs-0123456789abcdef0",
        "dnsName": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
        "mountName": "abcdefgh",
    }


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any]]:
    return render(stack_values(FsxLustreConfig(enabled=True, namespace="ml-team", pvc_name="shared-fsx")))


def test_chart_declares_every_value_the_stack_sends_and_nothing_else():
    declared = yaml.safe_load((STORAGE_CHART_DIR / "values.yaml").read_text())
    templates = (STORAGE_CHART_DIR / "templates").glob("*.yaml")
    used = {m.group(1) for t in templates for m in _VALUE.finditer(t.read_text())}
    sent = set(stack_values(FsxLustreConfig()))
    assert set(declared) == used == sent
    chart = yaml.safe_load((STORAGE_CHART_DIR / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "hyperpod-shared-storage"


def test_persistent_volume_is_the_file_system_statically_and_retained(rendered):
    pv = rendered["PersistentVolume"]
    assert pv["apiVersion"] == "v1" and pv["metadata"]["name"] == "ml-team-shared-fsx"
    spec = pv["spec"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["storageClassName"] == ""
    assert spec["capacity"] == {"storage": "1200Gi"}
    assert spec["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0123456789abcdef0",
        "volumeAttributes": {"dnsname": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", "mountname": "abcdefgh"},
    }


def test_claim_binds_to_that_volume_in_the_training_namespace(rendered):
    pvc = rendered["PersistentVolumeClaim"]
    assert pvc["metadata"] == {"name": "shared-fsx", "namespace": "ml-team"}
    assert pvc["spec"]["volumeName"] == rendered["PersistentVolume"]["metadata"]["name"]
    assert pvc["spec"]["storageClassName"] == ""  # no default class may provision another volume
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1200Gi"


def test_namespace_is_created_and_kept_on_uninstall(rendered):
    namespace = rendered["Namespace"]
    assert namespace["metadata"]["name"] == "ml-team"
    assert namespace["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
