"""The synthesized templates agree with the facts read in AWS's own sources (tests/contract/aws_facts.json)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra.facts.intrinsics import render

FACTS: dict[str, Any] = json.loads((Path(__file__).parent / "aws_facts.json").read_text())


def test_every_fact_names_its_source():
    for name, fact in FACTS.items():
        if not name.startswith("_"):
            assert "@" in fact["source"] and ":" in fact["source"], name


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
