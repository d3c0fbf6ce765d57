"""docs/constructs keeps up with the code: every public construct has a page listing each keyword-only prop
with the type and default of its real signature."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
from typing import Any

import pytest

import infra
from tests.conftest import ROOT

DOCS = ROOT / "docs" / "constructs"

# Public construct (or rule pack) -> its page in docs/constructs.
PAGES: dict[str, str] = {
    "HyperPodOnEks": "hyperpod-on-eks.md",
    "HyperPodNetwork": "hyperpod-network.md",
    "EksControlPlane": "eks-control-plane.md",
    "LifecycleScripts": "lifecycle-scripts.md",
    "HyperPodExecutionRole": "hyperpod-execution-role.md",
    "HyperPodDependenciesChart": "helm-releases.md",
    "HelmInstaller": "helm-releases.md",
    "HelmRelease": "helm-releases.md",
    "ChartSource": "helm-releases.md",
    "HyperPodCluster": "hyperpod-cluster.md",
    "HyperPodVolumeKey": "hyperpod-volume-key.md",
    "LogsKey": "logs-key.md",
    "HyperPodAutoscalingRole": "autoscaling.md",
    "KarpenterNodePools": "autoscaling.md",
    "HyperPodObservability": "observability.md",
    "ContainerInsights": "observability.md",
    "ManagedPrometheus": "observability.md",
    "ManagedGrafana": "observability.md",
    "GrafanaContent": "observability.md",
    "HyperPodAlerts": "observability.md",
    "ClusterDashboard": "observability.md",
    "SharedFileSystem": "shared-file-system.md",
    "FsxCsiDriver": "shared-file-system.md",
    "HyperPodTaskGovernance": "task-governance.md",
    "TrainingOperator": "cluster-addons.md",
    "S3CsiDriver": "cluster-addons.md",
    "InferenceOperator": "cluster-addons.md",
    "HyperPodChecks": "hyperpod-checks.md",
}
NOT_CONSTRUCTS = {"infra.config", "infra.errors"}


# What HyperPodOnEks returns (the types of its `parts` and `storage`): records of constructs, documented there.
RESULT_RECORDS = {"HyperPodParts", "SharedStorage"}


def _public_classes() -> list[str]:
    """The exported constructs, props structs and the nag pack; not the config models nor the result records."""
    return sorted(
        name for name, module in infra._EXPORTS.items()
        if module not in NOT_CONSTRUCTS and inspect.isclass(getattr(infra, name)) and name not in RESULT_RECORDS
    )


def test_every_exported_result_record_is_named_where_its_construct_returns_it():
    page = (DOCS / "hyperpod-on-eks.md").read_text()
    for name in sorted(RESULT_RECORDS):
        assert dataclasses.is_dataclass(getattr(infra, name)), name
        assert f"`infra.{name}`" in page, f"docs/constructs/hyperpod-on-eks.md does not name infra.{name}"


def _keyword_only(cls: type) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(cls.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY]


def _section(page: str, name: str) -> str:
    """The part of a page about ``name``: from the heading naming it to the next heading of its level or
    above; the whole page when no heading below the title names it."""
    lines = page.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"(#+) ", line)
        if match and i > 0 and re.fullmatch(rf"#+ `{name}`", line.strip()):
            level = len(match.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (m := re.match(r"(#+) ", lines[j])) and len(m.group(1)) <= level), len(lines))
            return "\n".join(lines[i:end])
    return page


def _rows(text: str) -> dict[str, list[str]]:
    """Markdown table rows keyed by their first cell's code name: `name` -> the other cells, unescaped."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        match = re.fullmatch(r"`(\w+)`.*", cells[0])
        if match:
            rows.setdefault(match.group(1), cells[1:])
    return rows


def _props_table(section: str) -> str:
    """The first table of ``section`` whose header starts with 'prop' (the props table)."""
    lines = section.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| prop |")), None)
    if start is None:
        return ""
    end = next((j for j in range(start + 1, len(lines)) if not lines[j].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def _default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    if isinstance(value, enum.Enum):
        return f"`{type(value).__name__}.{value.name}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`"
    return f"`{value!r}`"


def test_every_public_construct_has_a_page_listed_in_the_index():
    assert sorted(PAGES) == _public_classes(), "a construct was exported or removed: update PAGES and docs/constructs"
    index = (DOCS / "README.md").read_text()
    for page in sorted(set(PAGES.values())):
        assert (DOCS / page).is_file(), page
        assert f"]({page})" in index, f"docs/constructs/README.md does not link {page}"
    for name in PAGES:
        assert f"`{name}`" in index, f"docs/constructs/README.md does not name {name}"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_lists_every_keyword_only_prop_with_its_type_and_default(name):
    cls = getattr(infra, name)
    section = _section((DOCS / PAGES[name]).read_text(), name)
    rows = _rows(_props_table(section))
    for param in _keyword_only(cls):
        where = f"docs/constructs/{PAGES[name]} ({name})"
        assert f"`{param.name}`" in section, f"{where} does not mention the prop `{param.name}`"
        assert param.name in rows, f"{where} has no row for `{param.name}` in its props table"
        type_cell, default_cell = rows[param.name][0], rows[param.name][1]
        assert type_cell == f"`{param.annotation}`", f"{where}: `{param.name}` is `{param.annotation}`, not {type_cell}"
        assert default_cell == _default(param.default), (
            f"{where}: `{param.name}` defaults to {_default(param.default)}, not {default_cell}"
        )


def test_pages_name_no_prop_the_code_does_not_have():
    for page in sorted(set(PAGES.values())):
        text = (DOCS / page).read_text()
        names = [n for n, p in PAGES.items() if p == page]
        for name in names:
            section = _section(text, name)
            if section is text and len(names) > 1:
                continue  # a shared page's intro names no props
            documented = set(_rows(_props_table(section)))
            actual = {p.name for p in _keyword_only(getattr(infra, name))}
            assert documented <= actual | {"scope"}, f"{page} ({name}) documents {sorted(documented - actual)}"

