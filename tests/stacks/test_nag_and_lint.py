"""cdk-nag AwsSolutions and cfn-lint over every synthesized template, for each config variant."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra.config import needed_types, require_offered_types
from infra.errors import ConfigError
from infra.facts.region_types import unoffered
from tests import template_lint
from tests.conftest import ROOT, cdk_json_context, new_app
from tests.template_lint import CFN_LINT_IGNORED, cfn_lint_problems

VARIANTS = ["default_synth", "variant_synth", "byo_synth", "group_features_synth", "governance_synth",
            "rolling_update_synth", "addons_synth", "all_features_synth"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_aws_solutions_has_no_unacknowledged_finding(request, variant):
    synth = request.getfixturevalue(variant)
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    assert "AwsSolutions" in plugins, "the AwsSolutions pack did not run"
    nag = plugins["AwsSolutions"]
    assert nag["conclusion"] == "success", json.dumps(nag["violations"], indent=1)[:4000]
    assert nag["violations"] == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_acknowledgment_is_one_finding_on_one_resource_with_a_reason(request, variant):
    synth = request.getfixturevalue(variant)
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    for plugin in report["pluginReports"]:
        for finding in plugin.get("suppressedViolations", []):
            assert len(finding["violatingConstructs"]) == 1, finding["ruleName"]
            assert "*" not in finding["acknowledgedId"].split("[")[0], finding["acknowledgedId"]
            assert len(finding["reason"]) >= 30, finding


@pytest.mark.parametrize("variant", VARIANTS)
def test_cfn_lint_reports_nothing_for_the_configs_region(request, variant):
    """Linted for the config's own region, as `make lint` lints it. The one finding allowed is E3006, a resource type
    the region does not offer, and only where synth refuses the config for it (infra/config/regions.py; the test
    fixtures build without app.py's check): governance_synth turns task governance on in us-west-2."""
    synth = request.getfixturevalue(variant)
    templates = sorted(synth.outdir.glob("*.template.json"))
    assert templates, "no template was linted"
    problems = [problem for template in templates for problem in cfn_lint_problems(template, synth.config.region)]
    assert [p for p in problems if " E3006 " not in p] == [], "\n".join(problems)
    flagged = {re.search(r"Resource type '([^']+)' does not exist", p).group(1)  # type: ignore[union-attr]
               for p in problems if " E3006 " in p}
    needed = {t for types in needed_types(synth.config).values() for t in types}
    assert flagged == needed & (unoffered(synth.config.region) or set())
    if flagged:
        with pytest.raises(ConfigError, match=f"region {synth.config.region} does not offer"):
            require_offered_types(synth.config)


def test_the_lint_of_the_tests_is_for_the_region_it_is_given(tmp_path):
    template = tmp_path / "scheduler.template.json"
    template.write_text(json.dumps({"Resources": {"Policy": {
        "Type": "AWS::SageMaker::ClusterSchedulerConfig",
        "Properties": {"Name": "p", "ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdefghijkl",
                       "SchedulerConfig": {"PriorityClasses": [{"Name": "training", "Weight": 50}]}}}}}))
    assert template_lint.lint(template, "us-east-1") == []
    (finding,) = template_lint.lint(template, "us-west-2")
    assert finding.startswith("E3006 ") and "'us-west-2'" in finding
    assert template_lint.cache_key(b"{}", "us-west-2") != template_lint.cache_key(b"{}", "us-east-1")


PLANTED = {"Resources": {"Data": {"Type": "AWS::S3::Bucket", "Properties": {"NoSuchProperty": True}}}}


def test_cfn_lint_finds_a_planted_error_and_skips_only_the_accepted_rules(tmp_path):
    """The in-process lint (run here, never read from the cache) reports what the command line would: here a
    property S3 does not have."""
    template = tmp_path / "planted.template.json"
    template.write_text(json.dumps(PLANTED))
    problems = template_lint.lint(template)
    assert len(problems) == 1 and problems[0].startswith("E3002 "), problems
    # W3005 (accepted: a DependsOn that a GetAtt already implies) is not reported; another warning is.
    role = {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                           "Action": "sts:AssumeRole"}]}}}
    topic = {"Type": "AWS::SNS::Topic", "DependsOn": ["Role"],
             "Properties": {"DisplayName": {"Fn::GetAtt": ["Role", "RoleId"]}}}
    accepted = tmp_path / "accepted.template.json"
    accepted.write_text(json.dumps({"Resources": {"Role": role, "Topic": topic}}))
    assert template_lint.lint(accepted) == []
    warned = tmp_path / "warned.template.json"
    warned.write_text(json.dumps({"Parameters": {"Unused": {"Type": "String"}}, "Resources": {"Role": role}}))
    assert [p.split()[0] for p in template_lint.lint(warned)] == ["W2001"]


@pytest.fixture
def lint_cache(tmp_path, monkeypatch):
    """An empty findings cache of this test's own, and an empty in-memory one."""
    monkeypatch.setattr(template_lint, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(template_lint, "_FINDINGS", {})
    monkeypatch.delenv("CFN_LINT_CACHE", raising=False)
    return tmp_path / "cache"


def test_kept_findings_are_per_template_text_and_a_changed_template_is_linted_again(tmp_path, lint_cache,
                                                                                  monkeypatch):
    template = tmp_path / "data.template.json"
    template.write_text(json.dumps(PLANTED))
    (finding,) = cfn_lint_problems(template)
    assert finding.startswith("data.template.json: E3002 ")
    kept = lint_cache / f"{template_lint.cache_key(template.read_bytes())}.json"
    assert json.loads(kept.read_text()) == [finding.removeprefix("data.template.json: ")]

    # Another process (an empty memory) reads the kept findings and does not lint; a file of another name with
    # the same text gets the same findings under its own name.
    lint = template_lint.lint
    monkeypatch.setattr(template_lint, "_FINDINGS", {})
    monkeypatch.setattr(template_lint, "lint", lambda path: pytest.fail(f"{path} was linted again"))
    copy = tmp_path / "copy.template.json"
    copy.write_bytes(template.read_bytes())
    assert cfn_lint_problems(copy) == [finding.replace("data.template.json", "copy.template.json")]

    # One byte more and it is linted anew: the property fixed, nothing found and nothing stale reported.
    monkeypatch.setattr(template_lint, "lint", lint)
    monkeypatch.setattr(template_lint, "_FINDINGS", {})
    fixed = {"Resources": {"Data": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "data"}}}}
    template.write_text(json.dumps(fixed))
    assert cfn_lint_problems(template) == []
    assert len(list(lint_cache.glob("*.json"))) == 2


def test_an_unreadable_kept_entry_is_linted_again_and_rewritten(tmp_path, lint_cache, monkeypatch):
    template = tmp_path / "data.template.json"
    template.write_text(json.dumps(PLANTED))
    kept = lint_cache / f"{template_lint.cache_key(template.read_bytes())}.json"
    lint_cache.mkdir()
    for broken in ("{not json", json.dumps({"E3002": 1}), json.dumps([1])):
        kept.write_text(broken)
        monkeypatch.setattr(template_lint, "_FINDINGS", {})
        (finding,) = cfn_lint_problems(template)
        assert " E3002 " in finding
        assert json.loads(kept.read_text()) == [finding.removeprefix("data.template.json: ")]


def test_cfn_lint_cache_off_lints_every_time_and_keeps_nothing(tmp_path, lint_cache, monkeypatch):
    template = tmp_path / "data.template.json"
    template.write_text(json.dumps(PLANTED))
    lint_cache.mkdir()
    (lint_cache / f"{template_lint.cache_key(template.read_bytes())}.json").write_text(json.dumps(["kept"]))
    monkeypatch.setenv("CFN_LINT_CACHE", "off")
    (finding,) = cfn_lint_problems(template)
    assert " E3002 " in finding
    assert json.loads((lint_cache / f"{template_lint.cache_key(template.read_bytes())}.json").read_text()) == [
        "kept"]
    assert len(list(lint_cache.iterdir())) == 1


def test_the_cache_key_names_what_decides_the_findings(monkeypatch):
    import importlib.metadata

    from cfnlint.version import __version__

    prefix = template_lint._key_prefix().decode()
    assert f"cfn-lint {__version__}" in prefix
    for requirement in ("networkx", "regex", "sympy", "jsonpatch"):
        assert f"{requirement}=={importlib.metadata.version(requirement)}" in prefix
    assert '"ignore_checks"' in prefix and "W3005" in prefix and '"regions"' in prefix
    assert hashlib.sha256(Path(template_lint.__file__).read_bytes()).hexdigest() in prefix
    # The key is of the prefix and the text together: another prefix, another key for the same text.
    key = template_lint.cache_key(b"{}")
    monkeypatch.setattr(template_lint, "_key_prefix", lambda region="us-east-1": b"cfn-lint 0.0.0\n")
    assert template_lint.cache_key(b"{}") != key


def test_no_kept_findings_when_the_configuration_names_rule_files_of_its_own(tmp_path, lint_cache, monkeypatch):
    """Their contents are not in the key: such a configuration lints every time and keeps nothing."""
    from cfnlint.config import ConfigMixIn

    template = tmp_path / "data.template.json"
    template.write_text(json.dumps(PLANTED))
    rules = tmp_path / "rules"
    rules.mkdir()
    config = template_lint._config
    for own in ({"append_rules": [str(rules)]}, {"override_spec": str(tmp_path / "spec.json")}):
        monkeypatch.setattr(template_lint, "_config",
                            lambda own=own: ConfigMixIn([], ignore_checks=list(CFN_LINT_IGNORED), **own))
        template_lint._config_names_files_of_its_own.cache_clear()
        assert not template_lint._disk_cache_on(), own
    monkeypatch.setattr(template_lint, "_config", config)
    template_lint._config_names_files_of_its_own.cache_clear()
    assert template_lint._disk_cache_on()


def test_aws_builtin_validation_fails_a_synth_of_this_suite_on_a_schema_error(tmp_path):
    """The fixtures' synths run AWS's built-in template validation as `cdk synth` does, and an error fails them
    (cdk.json sets @aws-cdk/core:validateAgainstDefaultRules)."""
    from aws_cdk import CfnResource, Stack

    app = new_app(context=cdk_json_context(), outdir=str(tmp_path))
    CfnResource(Stack(app, "Planted"), "Data", type="AWS::S3::Bucket", properties={"NoSuchProperty": True})
    with pytest.raises(Exception, match=r"(?s)NoSuchProperty.*CloudFormation Validate"):
        app.synth()


@pytest.mark.parametrize("variant", VARIANTS)
def test_aws_builtin_validation_warns_of_nothing(request, variant):
    """Its errors fail the synth; its warnings would only be reported, so they are checked here. (A plugin that
    found nothing and had nothing acknowledged is left out of the report.)"""
    report = json.loads((request.getfixturevalue(variant).outdir / "validation-report.json").read_text())
    found = [v for p in report["pluginReports"] if p["pluginName"] == "CloudFormation Validate"
             for v in p["violations"]]
    assert found == []


def test_make_lint_accepts_the_same_cfn_lint_findings_as_the_tests():
    makefile = (ROOT / "Makefile").read_text()
    (line,) = [line for line in makefile.splitlines() if line.startswith("CFN_LINT_IGNORED :=")]
    assert line.split(":=", 1)[1].split() == sorted(CFN_LINT_IGNORED)


def test_make_lint_lints_each_config_for_its_own_region():
    """Each cfn-lint line of `make lint` lints one output directory with --regions of the config synthesized into
    it, read by scripts/config_region.py (cfn-lint's default is us-east-1 only)."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    lines = [" ".join(line.split()) for line in recipe.splitlines() if "cfn-lint" in line]
    assert lines == [
        'region=$$($(PY) scripts/config_region.py $(CONFIG)) && $(VENV)/bin/cfn-lint --regions "$$region" '
        "$(addprefix --ignore-checks ,$(CFN_LINT_IGNORED)) -- cdk.out/*.template.json",
        'region=$$($(PY) scripts/config_region.py $(ALL_FEATURES_CONFIG)) && $(VENV)/bin/cfn-lint --regions '
        '"$$region" $(addprefix --ignore-checks ,$(CFN_LINT_IGNORED)) -- $(ALL_FEATURES_OUT)/*.template.json',
        # The example fleet's pipeline templates, for the pipeline's region (tests/stacks/test_pipeline.py).
        '$(VENV)/bin/cfn-lint --regions "$$($(PY) scripts/fleet_stages.py --pipeline-region $(EXAMPLE_FLEET))" '
        "$(addprefix --ignore-checks ,$(CFN_LINT_IGNORED) $(PIPELINE_CFN_LINT_IGNORED)) -- "
        "$(PIPELINE_OUT)/*.template.json",
    ]
    assert "$(CDK) synth --quiet -c config=$(ALL_FEATURES_CONFIG) -o $(ALL_FEATURES_OUT)" in recipe


@pytest.mark.parametrize(("config", "region"), [("default.yaml", "us-west-2"), ("all-features.yaml", "us-east-1")])
def test_config_region_prints_the_configs_region(config, region):
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "config_region.py"), str(ROOT / "config" / config)],
                            capture_output=True, text=True, check=False, cwd=ROOT)
    assert (result.returncode, result.stdout) == (0, f"{region}\n"), result.stderr


def test_config_region_of_a_bad_config_fails_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("project: x\n")
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "config_region.py"), str(bad)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: Invalid configuration in ") and result.stderr.count("\n") == 1
