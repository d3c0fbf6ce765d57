"""The local storage chart, rendered in Python (its templates only substitute values): PV, PVC, namespace."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from infra.config import FsxLustreConfig
from infra.constructs.storage import NOMINAL_VOLUME_SIZE, STORAGE_CHART_DIR, persistent_volume_name

_VALUE = re.compile(r"\{\{ \.Values\.(?P<value>\w+)( \| quote)? \}\}")
# `{{- $existing := lookup "v1" "<Kind>" ... }}` then `{{ dig "a" "b" .Values.x $existing | quote }}`: the value
# an object already in the cluster holds, else the chart value (helm's lookup gives an empty map when the object
# is not there, and dig then falls back to its default).
_LOOKUP = re.compile(r'\{\{- \$existing := lookup "v1" "(\w+)" [^}]*\}\}\n')
_DIG = re.compile(r'\{\{ dig (?P<path>(?:"\w+" )+)\.Values\.(?P<value>\w+) \$existing \| quote \}\}')


def render(values: dict[str, Any], cluster: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """kind -> object, with ``cluster`` (kind -> object) the objects lookup finds; refuses any template syntax
    beyond `{{ .Values.x }}`, `{{ .Values.x | quote }}` and the lookup/dig pair above."""
    objects = {}
    for template in sorted((STORAGE_CHART_DIR / "templates").glob("*.yaml")):
        def substitute(match: re.Match[str]) -> str:
            value = values[match.group(1)]
            return f'"{value}"' if match.group(2) else str(value)

        text = template.read_text()
        kind = _LOOKUP.search(text)
        existing = (cluster or {}).get(kind.group(1), {}) if kind else {}

        def dig(match: re.Match[str], existing: dict[str, Any] = existing) -> str:
            found: Any = existing
            for key in re.findall(r'"(\w+)"', match.group("path")):
                found = found.get(key) if isinstance(found, dict) else None
            return f'"{values[match.group("value")] if found is None else found}"'

        text = _VALUE.sub(substitute, _DIG.sub(dig, _LOOKUP.sub("", text)))
        assert "{{" not in text, f"{template.name} uses template syntax this test cannot render"
        document = yaml.safe_load(text)
        objects[document["kind"]] = document
    return objects


def stack_values(config: FsxLustreConfig) -> dict[str, Any]:
    """The values the storage stack sends, with sample attributes in place of the file system's tokens."""
    return {
        "namespace": config.namespace,
        "persistentVolumeName": persistent_volume_name(config.namespace, config.pvc_name),
        "claimName": config.pvc_name,
        "storage": NOMINAL_VOLUME_SIZE,
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
    used = {m.group("value") for t in templates for pattern in (_VALUE, _DIG) for m in pattern.finditer(t.read_text())}
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


def test_an_upgrade_keeps_the_size_an_existing_volume_and_claim_were_created_with():
    """A claim created bigger (as before the size became nominal) is neither shrunk nor grown by an upgrade:
    Kubernetes refuses a smaller request, and a bigger one needs a StorageClass that allows expansion."""
    cluster = {"PersistentVolume": {"spec": {"capacity": {"storage": "2400Gi"}}},
               "PersistentVolumeClaim": {"spec": {"resources": {"requests": {"storage": "2400Gi"}}}}}
    upgraded = render(stack_values(FsxLustreConfig(enabled=True)), cluster)
    assert upgraded["PersistentVolume"]["spec"]["capacity"] == {"storage": "2400Gi"}
    assert upgraded["PersistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"] == "2400Gi"
