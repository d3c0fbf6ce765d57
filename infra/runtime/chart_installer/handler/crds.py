"""The CRDs of a chart's crds/ directories, which helm installs on the first install only, applied on upgrades."""

from __future__ import annotations

import re
from pathlib import Path

from .helm import OnCluster
from .process import check, log

# "# Source: <chart>[/charts/<subchart>...]/crds/<file>", the header helm template --include-crds writes above
# each file of a crds/ directory (helm/helm@05fa379 pkg/action/action.go renderResources, with
# Chart.CRDObjects in pkg/chart/v2/chart.go); templates/ paths never match.
CRD_SOURCE = re.compile(r"^# Source: [^/]+(/charts/[^/]+)*/crds/.+$", re.MULTILINE)
FIELD_MANAGER = "hyperpod-chart-installer"


def apply_crds(on: OnCluster, chart_dir: Path, values_file: Path) -> None:
    """Applies the CRDs of the crds/ directories of the chart and its enabled subcharts, which helm installs
    on the first install only (https://helm.sh/docs/chart_best_practices/custom_resource_definitions/).
    Server-side apply, because a large CRD does not fit the annotation client-side apply keeps."""
    render = ["template", on.release.name, str(chart_dir), "--values", str(values_file), "--include-crds"]
    result = on.helm(render)
    check(result, f"helm template {on.release.physical_id}")
    files = crd_files(result.stdout)
    if not files:
        log("the chart has no crds/ directory to apply")
        return
    crds = on.workdir / "crds.yaml"
    crds.write_text("---\n" + "---\n".join(files))
    apply = ["apply", "--server-side", "--force-conflicts", "--field-manager", FIELD_MANAGER, "--filename", str(crds)]
    check(on.kubectl(apply), f"kubectl apply of the CRDs of {on.release.physical_id}")
    log(f"applied the CRDs of {len(files)} files of crds/ directories")


def crd_files(rendered: str) -> list[str]:
    """The files of crds/ directories in ``helm template --include-crds`` output, each once. helm can load a
    file:// subchart twice, from its directory and from its packed archive (seen with a vendored chart), and
    then renders its crds/ files twice: the first copy of each source path is kept."""
    files: dict[str, str] = {}
    for part in re.split(r"^---\n(?=# Source: )", rendered, flags=re.MULTILINE):
        if match := CRD_SOURCE.match(part):
            files.setdefault(match.group(0), part)
    return list(files.values())
