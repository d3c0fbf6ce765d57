"""scripts/vendor_chart.py offline: a fake GitHub download and a fake helm stand in for the internet."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import ChartConfig, load_config
from infra.config import hyperpod as hyperpod_config
from infra.constructs.hyperpod.dependencies_chart import check_vendored_revision
from infra.errors import ConfigError
from infra.runtime.chart_installer.handler import charts, crds, errors, process
from infra.runtime.chart_installer.handler.process import run as real_run  # before any test fakes it
from tests.conftest import ROOT

from .fakes import ARCHIVE_URL, CHART_PATH, REPOSITORY, SHA, FakeDownloads

_spec = importlib.util.spec_from_file_location("scripts_vendor_chart", ROOT / "scripts" / "vendor_chart.py")
assert _spec is not None and _spec.loader is not None
vendor_chart = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = vendor_chart
_spec.loader.exec_module(vendor_chart)

TOP_CHART = {
    "apiVersion": "v2",
    "name": "hyperpod-helm-chart",
    "version": "0.1.0",
    "dependencies": [
        {"name": "cert-manager", "version": "v1.18.2", "repository": "oci://quay.io/jetstack/charts"},
        {"name": "training-operators", "version": "0.1.0", "repository": "file://charts/training-operators"},
        {"name": "hyperpod-inference-operator", "version": "2.2.2", "repository": "file://charts/inference-operator"},
    ],
}
SUBCHARTS = {
    "training-operators": {"apiVersion": "v2", "name": "training-operators", "version": "0.1.0"},
    "inference-operator": {
        "apiVersion": "v2",
        "name": "hyperpod-inference-operator",
        "version": "2.2.2",
        "dependencies": [{"name": "keda", "version": "2.17.1", "repository": "https://kedacore.github.io/charts"}],
    },
}


def _tarball(directory: Path, files: dict[str, str]) -> bytes:
    """GitHub's archive of the repository at SHA holding ``files`` (paths relative to the chart)."""
    path = directory / "source.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"sagemaker-hyperpod-cli-{SHA}/{CHART_PATH}/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path.read_bytes()


def _source_tarball(directory: Path) -> bytes:
    files = {"Chart.yaml": yaml.safe_dump(TOP_CHART), "values.yaml": "{}\n"}
    for folder, chart in SUBCHARTS.items():
        files[f"charts/{folder}/Chart.yaml"] = yaml.safe_dump(chart)
    return _tarball(directory, files)


class FakeHelmDependencies:
    """``helm dependency update`` as helm does it: one archive per dependency in the chart's charts/; a
    ``file://`` dependency is packed with whatever its own charts/ holds at that moment."""

    def __init__(self) -> None:
        self.updated: list[str] = []

    def __call__(self, args: Sequence[str], env: Any, timeout: float) -> subprocess.CompletedProcess[str]:
        assert timeout > 0
        assert env["HELM_CONFIG_HOME"].startswith(env["HOME"])  # no workstation repositories leak in
        if list(args[1:]) == ["version", "--short"]:
            return subprocess.CompletedProcess(list(args), 0, "v4.1.4+g05fa379\n", "")
        assert list(args[1:3]) == ["dependency", "update"], args
        chart_dir = Path(args[3])
        self.updated.append(chart_dir.name)
        charts = chart_dir / "charts"
        charts.mkdir(exist_ok=True)
        for dependency in yaml.safe_load((chart_dir / "Chart.yaml").read_text())["dependencies"]:
            packed = f"{dependency['name']} {dependency['version']}"
            repository = dependency["repository"]
            if repository.startswith("file://"):
                subchart = chart_dir / repository.removeprefix("file://")
                inside = sorted(path.name for path in (subchart / "charts").glob("*.tgz"))
                packed += f" with {inside}"
            (charts / f"{dependency['name']}-{dependency['version']}.tgz").write_text(packed)
        return subprocess.CompletedProcess(list(args), 0, "Saving charts\n", "")


@pytest.fixture
def fake_helm(monkeypatch: pytest.MonkeyPatch) -> FakeHelmDependencies:
    fake = FakeHelmDependencies()
    monkeypatch.setattr(process, "run", fake)
    return fake


def _vendor(tmp_path: Path, output: Path) -> dict[str, Any]:
    workdir = tmp_path / "work"
    workdir.mkdir()
    return dict(vendor_chart.vendor(REPOSITORY, SHA, CHART_PATH, output, Path("/fake/helm"), workdir))


def test_vendoring_resolves_nested_dependencies_first_and_locks_every_archive(
    tmp_path: Path, downloads: FakeDownloads, fake_helm: FakeHelmDependencies
) -> None:
    downloads.serve(_source_tarball(tmp_path))
    output = tmp_path / "vendor" / "hyperpod-dependencies"
    output.parent.mkdir()

    lock = _vendor(tmp_path, output)

    assert downloads.urls == [ARCHIVE_URL]
    # The inference operator's own dependencies are resolved before its parent packs it.
    assert fake_helm.updated == ["inference-operator", "HyperPodHelmChart"]
    packed = (output / "charts" / "hyperpod-inference-operator-2.2.2.tgz").read_text()
    assert packed == "hyperpod-inference-operator 2.2.2 with ['keda-2.17.1.tgz']"
    assert (lock["repository"], lock["revision"], lock["chart_path"]) == (REPOSITORY, SHA, CHART_PATH)
    assert lock["helm"] == "v4.1.4+g05fa379"
    assert sorted(lock["archives"]) == [
        "charts/cert-manager-v1.18.2.tgz",
        "charts/hyperpod-inference-operator-2.2.2.tgz",
        "charts/inference-operator/charts/keda-2.17.1.tgz",
        "charts/training-operators-0.1.0.tgz",
    ]
    for name, digest in lock["archives"].items():
        assert hashlib.sha256((output / name).read_bytes()).hexdigest() == digest
    assert json.loads((output / charts.VENDOR_LOCK).read_text()) == lock
    assert (output / "Chart.yaml").is_file()


def test_the_vendored_chart_passes_the_installers_check(
    tmp_path: Path, downloads: FakeDownloads, fake_helm: FakeHelmDependencies
) -> None:
    downloads.serve(_source_tarball(tmp_path))
    output = tmp_path / "vendored"
    _vendor(tmp_path, output)

    charts.verify_vendored(output)
    (output / "charts" / "cert-manager-v1.18.2.tgz").write_text("another cert-manager")
    with pytest.raises(errors.ChartInstallerError, match="cert-manager-v1.18.2.tgz"):
        charts.verify_vendored(output)


def test_vendoring_again_replaces_the_previous_directory(
    tmp_path: Path, downloads: FakeDownloads, fake_helm: FakeHelmDependencies
) -> None:
    output = tmp_path / "vendored"
    output.mkdir()
    (output / "stale.yaml").write_text("from an older commit")
    downloads.serve(_source_tarball(tmp_path))

    _vendor(tmp_path, output)

    assert not (output / "stale.yaml").exists()
    assert not output.with_name("vendored.new").exists()


def test_a_failed_helm_leaves_the_previous_vendored_chart_in_place(
    tmp_path: Path, downloads: FakeDownloads, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "vendored"
    output.mkdir()
    (output / "Chart.yaml").write_text("previous")
    downloads.serve(_source_tarball(tmp_path))
    failed = subprocess.CompletedProcess(["helm"], 1, "", "Error: could not download oci://quay.io/jetstack/charts")
    monkeypatch.setattr(process, "run", lambda args, env, timeout: failed)

    with pytest.raises(errors.ChartInstallerError, match="could not download"):
        _vendor(tmp_path, output)
    assert (output / "Chart.yaml").read_text() == "previous"


def _nested_file_chart(directory: Path) -> bytes:
    """A chart that packs a subchart that packs a subchart with a crds/ directory."""
    crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: leafs.example.com}\n"
    return _tarball(directory, {
        "Chart.yaml": "apiVersion: v2\nname: top\nversion: 0.1.0\ndependencies:\n"
                      "  - {name: mid, version: 0.1.0, repository: 'file://charts/mid'}\n",
        "charts/mid/Chart.yaml": "apiVersion: v2\nname: mid\nversion: 0.1.0\ndependencies:\n"
                                 "  - {name: leaf, version: 0.2.0, repository: 'file://charts/leaf'}\n",
        "charts/mid/charts/leaf/Chart.yaml": "apiVersion: v2\nname: leaf\nversion: 0.2.0\n",
        "charts/mid/charts/leaf/crds/leafs.yaml": crd,
        "templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: top}\n",
    })


def test_the_kubectl_layers_helm_vendors_a_nested_chart_the_installer_accepts(
    tmp_path: Path, downloads: FakeDownloads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real helm of the layer, offline: file:// dependencies need no registry."""
    monkeypatch.setattr(process, "run", real_run)
    downloads.serve(_nested_file_chart(tmp_path))
    workdir = tmp_path / "work"
    workdir.mkdir()
    helm = vendor_chart.layer_helm(workdir)
    output = tmp_path / "vendored"

    lock = vendor_chart.vendor(REPOSITORY, SHA, CHART_PATH, output, helm, workdir)

    assert lock["helm"].startswith("v4.")
    assert sorted(lock["archives"]) == ["charts/mid-0.1.0.tgz", "charts/mid/charts/leaf-0.2.0.tgz"]
    charts.verify_vendored(output)
    rendered = subprocess.run(
        [str(helm), "template", "r", str(output), "--include-crds"],
        capture_output=True, text=True, check=True, env=process.helm_env(tmp_path / "render"),
    ).stdout
    # helm may render the leaf's crds/ file twice (subchart loaded as directory and archive): applied once.
    assert [crds.CRD_SOURCE.match(f).group(0) for f in crds.crd_files(rendered)] == [  # type: ignore[union-attr]
        "# Source: top/charts/mid/charts/leaf/crds/leafs.yaml"
    ]


def _source_digest(tmp_path: Path) -> str:
    source = tmp_path / "digest"
    with tarfile.open(fileobj=io.BytesIO(_source_tarball(tmp_path))) as tar:
        tar.extractall(source, filter="data")
    return charts.tree_digest(source / f"sagemaker-hyperpod-cli-{SHA}")


def test_main_vendors_the_commit_the_config_pins(
    tmp_path: Path, downloads: FakeDownloads, fake_helm: FakeHelmDependencies, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chart = load_config(vendor_chart.DEFAULT_CONFIG).hyperpod.dependencies_chart
    # The fake source stands for the default commit: its digest is the one pinned.
    monkeypatch.setattr(hyperpod_config, "DEPENDENCIES_CHART_SOURCE_SHA256", _source_digest(tmp_path))
    downloads.serve(_source_tarball(tmp_path))
    output = tmp_path / "vendored"

    assert vendor_chart.main(["--output", str(output), "--helm", "/fake/helm"]) == 0

    assert downloads.urls == [f"{chart.git_repository}/archive/{chart.revision}.tar.gz"]
    lock = json.loads((output / charts.VENDOR_LOCK).read_text())
    assert lock["revision"] == chart.revision
    assert lock["source_sha256"] == _source_digest(tmp_path)
    assert "4 dependency archives locked" in capsys.readouterr().out


def test_main_refuses_a_source_tree_other_than_the_pinned_one(
    tmp_path: Path, downloads: FakeDownloads, fake_helm: FakeHelmDependencies
) -> None:
    """The default commit's digest is pinned; what is served here is other files under the same URL."""
    downloads.serve(_source_tarball(tmp_path))
    output = tmp_path / "vendored"

    with pytest.raises(errors.ChartInstallerError, match="has SHA-256 .*, the config pins "
                                                         f"{hyperpod_config.DEPENDENCIES_CHART_SOURCE_SHA256}"):
        vendor_chart.main(["--output", str(output), "--helm", "/fake/helm"])
    assert not output.exists() and fake_helm.updated == []


def test_digest_prints_the_source_tree_sha256_of_a_revision_and_vendors_nothing(
    tmp_path: Path, downloads: FakeDownloads, fake_helm: FakeHelmDependencies, capsys: pytest.CaptureFixture[str]
) -> None:
    downloads.serve(_source_tarball(tmp_path))

    assert vendor_chart.main(["--digest", SHA, "--repository", REPOSITORY]) == 0

    assert downloads.urls == [ARCHIVE_URL]
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"source_sha256: {_source_digest(tmp_path)}")
    assert fake_helm.updated == []


def _local_chart(tmp_path: Path, lock: str | None) -> ChartConfig:
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: vendored\nversion: 0.1.0\n")
    if lock is not None:
        (tmp_path / charts.VENDOR_LOCK).write_text(lock)
    return ChartConfig(source="local", local_path=str(tmp_path))


def test_a_chart_vendored_at_the_pinned_commit_is_accepted(tmp_path: Path) -> None:
    pinned = ChartConfig().revision
    check_vendored_revision(_local_chart(tmp_path, json.dumps({"revision": pinned, "archives": {}})))


def test_a_local_chart_that_is_not_vendored_is_not_checked(tmp_path: Path) -> None:
    check_vendored_revision(_local_chart(tmp_path, None))


@pytest.mark.parametrize(("lock", "key"), [
    (json.dumps({"revision": "f" * 40, "archives": {}}), "dependencies_chart.revision"),
    ("not json", "dependencies_chart.local_path"),
])
def test_a_stale_or_broken_vendored_chart_is_refused_at_synth(tmp_path: Path, lock: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"{key}: .*run make vendor-chart again") as raised:
        check_vendored_revision(_local_chart(tmp_path, lock))
    assert "\n" not in str(raised.value)


def test_a_crd_file_rendered_twice_is_applied_once():
    doc = "# Source: top/charts/leaf/crds/a.yaml\nkind: CustomResourceDefinition\n"
    rendered = f"---\n{doc}---\n# Source: top/templates/cm.yaml\nkind: ConfigMap\n---\n{doc}"
    assert crds.crd_files(rendered) == [doc]
