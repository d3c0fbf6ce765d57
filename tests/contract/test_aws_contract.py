"""The synthesized templates agree with the facts read in AWS's own sources (tests/contract/aws_facts.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.nag_pack import render

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
