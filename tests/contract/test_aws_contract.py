"""The synthesized templates agree with the facts read in AWS's own sources (tests/contract/aws_facts.json)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import DEPENDENCIES_CHART_REVISION
from infra.facts.intrinsics import render

FACTS: dict[str, Any] = json.loads((Path(__file__).parent / "aws_facts.json").read_text())
# The cited files of the pinned dependencies chart, stored as they are at the pinned commit.
PINNED = Path(__file__).parent / "pinned" / "sagemaker-hyperpod-cli"
PINNED_SOURCE: dict[str, Any] = json.loads((PINNED / "SOURCE.json").read_text())
CITATION = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{40}):(?P<path>[^\s(]+)")
# Keys of a section that are not facts.
NOT_FACTS = {"source", "sources", "narrowed"}


def _facts() -> Iterator[tuple[str, str, Any, str]]:
    """Every fact as (section, key, value, citation): the fact's own entry in ``sources``, else the section's."""
    for section, facts in FACTS.items():
        if section.startswith("_"):
            continue
        for key, value in facts.items():
            if key not in NOT_FACTS:
                yield section, key, value, facts.get("sources", {}).get(key, facts["source"])


def _cited(citation: str) -> tuple[str, str, str]:
    match = CITATION.match(citation)
    assert match, f"not repository@commit:path: {citation}"
    return match["repo"], match["commit"], match["path"]


def _in_chart(repo: str, path: str) -> bool:
    chart = FACTS["dependencies_chart"]
    return (f"https://github.com/{repo}" == chart["repository"]
            and (path == chart["chart_path"] or path.startswith(chart["chart_path"] + "/")))


def _git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id


def test_every_fact_names_its_source():
    for name, fact in FACTS.items():
        if not name.startswith("_"):
            assert "@" in fact["source"] and ":" in fact["source"], name
    for *_, citation in _facts():
        _cited(citation)
    for name, fact in FACTS.items():
        if not name.startswith("_"):
            assert set(fact.get("sources", {})) <= set(fact) - NOT_FACTS, f"{name}.sources names no fact"


def test_stored_chart_files_are_the_pinned_commits():
    assert PINNED_SOURCE["commit"] == DEPENDENCIES_CHART_REVISION == FACTS["dependencies_chart"]["revision"]
    assert f"https://github.com/{PINNED_SOURCE['repository']}" == FACTS["dependencies_chart"]["repository"]


@pytest.mark.parametrize("directory", sorted(p.parent for p in PINNED.parent.glob("*/SOURCE.json")),
                         ids=lambda p: p.name)
def test_stored_files_are_the_files_at_their_commit(directory: Path):
    """Each stored directory (the pinned chart's files, and the device plugin charts it depends on) holds exactly
    the files its SOURCE.json lists, each the file of that repository at that commit."""
    source = json.loads((directory / "SOURCE.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]) and "/" in source["repository"]
    stored = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file() and p.name != "SOURCE.json"}
    assert stored == set(source["files"])
    for path, entry in source["files"].items():
        assert _git_blob((directory / path).read_bytes()) == entry["blob"], f"{path} is not the file at the commit"


def _holds(path: str, value: str) -> bool:
    """The stored chart file holds the value: verbatim, or, for a values key ``<dependency>.<key>`` cited to a
    subchart's file, as ``.Values.<key>`` in a subchart the chart's Chart.yaml names ``<dependency>``."""
    text = (PINNED / path).read_text()
    if value in text:
        return True
    chart_path = FACTS["dependencies_chart"]["chart_path"]
    subchart = re.match(re.escape(chart_path) + r"/charts/([^/]+)/", path)
    scope, _, key = value.partition(".")
    if not (subchart and key):
        return False
    chart = yaml.safe_load((PINNED / chart_path / "Chart.yaml").read_text())
    names = {d.get("alias") or d["name"] for d in chart.get("dependencies", [])
             if d.get("repository") == f"file://charts/{subchart.group(1)}"}
    return scope in names and re.search(r"\.Values\." + re.escape(key) + r"\b", text) is not None


def test_facts_cited_to_a_chart_file_are_in_that_file():
    """A fact whose citation is a file of the pinned dependencies chart is found in that file, as stored."""
    checked = []
    for section, key, value, citation in _facts():
        repo, commit, path = _cited(citation)
        if not _in_chart(repo, path) or path == FACTS["dependencies_chart"]["chart_path"]:
            continue
        assert commit == DEPENDENCIES_CHART_REVISION, f"{section}.{key} cites the chart at another commit"
        assert path in PINNED_SOURCE["files"], f"{section}.{key} cites {path}: store it in {PINNED}"
        for item in value if isinstance(value, list) else [value]:
            assert isinstance(item, str) and _holds(path, item), f"{section}.{key} = {item!r} is not in {path}"
        checked.append(f"{section}.{key}")
    assert checked, "no fact cites a file of the chart"


def test_chart_pin_facts_are_the_address_they_cite():
    """repository, revision and chart_path cite the chart directory itself: they are its address."""
    fact = FACTS["dependencies_chart"]
    for key in ("repository", "revision", "chart_path"):
        assert key not in fact.get("sources", {}), key
    repo, commit, path = _cited(fact["source"])
    assert (fact["repository"], fact["revision"], fact["chart_path"]) == (f"https://github.com/{repo}", commit, path)
    assert commit == DEPENDENCIES_CHART_REVISION


def _chart_release(synth) -> dict[str, Any]:
    (release,) = [r["Properties"] for r in synth.template("hyperpod")["Resources"].values()
                  if r["Type"] == "Custom::HyperPodHelmRelease"]
    return release


def test_dependencies_chart_pin_is_the_commit_read(default_synth):
    fact = FACTS["dependencies_chart"]
    release = _chart_release(default_synth)
    assert release["Source"] == "git"
    assert (release["GitRepository"], release["GitRevision"], release["ChartPath"]) == (
        fact["repository"], fact["revision"], fact["chart_path"])
    assert (release["ReleaseName"], release["Namespace"]) == (fact["release"], fact["namespace"])


def _observability_addons(synth) -> list[dict[str, Any]]:
    fact = FACTS["observability_addon"]
    return [r["Properties"] for r in synth.template("observability")["Resources"].values()
            if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == fact["addon_name"]]


@pytest.mark.parametrize("variant", ["default_synth", "variant_synth", "observability_minimal_synth"])
def test_observability_addon_sends_only_keys_aws_uses(request, variant):
    fact = FACTS["observability_addon"]
    (addon,) = _observability_addons(request.getfixturevalue(variant))
    configuration = json.loads(render(addon["ConfigurationValues"]))
    assert set(configuration) <= set(fact["top_level_keys"])
    assert {"ampWorkspace", "metricsProvider", "logging"} <= set(configuration)
    assert sorted(configuration["ampWorkspace"]) == fact["ampWorkspace"]
    if "amgWorkspace" in configuration:
        assert sorted(configuration["amgWorkspace"]) == fact["amgWorkspace"]
    assert sorted(configuration["logging"]) == fact["logging"]
    assert set(configuration["metricsProvider"]) == set(fact["families"])
    for family, settings in configuration["metricsProvider"].items():
        assert sorted(settings) == fact["family_keys"], family
        assert settings["level"] in fact["families"][family], (family, settings["level"])
    (association,) = addon["PodIdentityAssociations"]
    assert association["ServiceAccount"] == fact["service_account"]


def _execution_role_statements(synth) -> list[dict[str, Any]]:
    (policy,) = [r["Properties"] for k, r in synth.template("hyperpod")["Resources"].items()
                 if r["Type"] == "AWS::IAM::Policy" and k.startswith("ExecutionRolePolicy")]
    return policy["PolicyDocument"]["Statement"]


def _grants(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    def listed(value: Any) -> list[Any]:
        return value if isinstance(value, list) else [value]
    return [s for s in statements if s["Effect"] == "Allow" and action in listed(s["Action"])]


def _resource_types(statement: dict[str, Any]) -> set[str]:
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    types = set()
    for resource in resources:
        text = render(resource)
        match = re.search(r":([a-z][a-z-]*)(?:/|:\*)", text)  # ...:subnet/<id> -> subnet, ...:alarm:* -> alarm
        types.add("*" if text == "*" else match.group(1) if match else text)
    return types


@pytest.mark.parametrize("variant", ["default_synth", "variant_synth"])
def test_execution_role_grants_what_aws_documents_unconditionally(request, variant):
    fact = FACTS["execution_role"]
    statements = _execution_role_statements(request.getfixturevalue(variant))

    def unconditional(action: str) -> list[dict[str, Any]]:
        found = [s for s in _grants(statements, action) if "Condition" not in s]
        assert found, f"{action} is not granted without a condition"
        return found

    for action in fact["actions_on_eni_scope"]:
        (statement,) = unconditional(action)
        assert _resource_types(statement) == set(fact["eni_scope_resource_types"]), action
    for action in fact["attach_actions"]:
        (statement,) = unconditional(action)
        assert _resource_types(statement) == set(fact["attach_resource_types"]), action
    for action in fact["star_actions"]:
        assert any(_resource_types(s) == {"*"} for s in unconditional(action)), action
    for action in fact["alarm_actions"]:
        assert all(_resource_types(s) == {"alarm"} for s in unconditional(action)), action
    for action in fact["ecr_pull"] + fact["eni_tag_actions"] + fact["cluster_actions"]:
        unconditional(action)
    for action, kind in fact["bucket_actions"].items():
        (statement,) = unconditional(action)
        text = json.dumps(statement["Resource"])
        assert ("/" in text) is (kind == "object"), action
