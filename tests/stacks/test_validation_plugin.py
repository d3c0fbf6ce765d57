"""stacks/validation.py: AWS's template validation registered in place of aws-cdk-lib's own, without its
GameLift rule, and nothing under `cdk synth --no-validation`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, cdk_json_context, new_app

RULES_DIR = "package/core/lib/validation/rules/"


def _default_rules() -> dict[str, str]:
    """aws-cdk-lib's default Rego rules, read from the installed package's jsii tarball: file name -> text."""
    import aws_cdk

    (tarball,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    rules: dict[str, str] = {}
    with tarfile.open(tarball, "r|gz") as archive:  # read as a stream, once: half the time of random access
        for member in archive:
            if member.name.startswith(RULES_DIR) and member.isfile():
                rules[member.name.removeprefix(RULES_DIR)] = archive.extractfile(member).read().decode()  # type: ignore[union-attr]
    return rules


def test_the_default_rules_left_out_are_aws_cdk_libs_gamelift_rule_alone():
    """What include_default_rules=False leaves out: one Rego file, whose every rule is about GameLift resources.
    A new default rule in another aws-cdk-lib fails here, so leaving the defaults out is decided again."""
    rules = _default_rules()
    assert sorted(rules) == ["gamelift-fleet.rego"]
    types = set(re.findall(r'"(AWS::[A-Za-z0-9]+::[A-Za-z0-9]+)"', rules["gamelift-fleet.rego"]))
    assert types and all(t.startswith("AWS::GameLift::") for t in types), types


def test_no_template_has_a_resource_the_left_out_rule_checks(default_synth, all_features_synth):
    for synth in (default_synth, all_features_synth):
        assert synth.templates
        for name, template in synth.templates.items():
            types = {resource["Type"] for resource in template.get("Resources", {}).values()}
            assert not {t for t in types if t.startswith("AWS::GameLift::")}, name


def _gamelift_findings(app, outdir: Path) -> list[str]:
    """Synthesize a GameLift fleet whose ingress port range is inverted (CDK-GameLift-001 in
    gamelift-fleet.rego) and return the CloudFormation Validate findings (rule names) of the report."""
    from aws_cdk import CfnResource, Stack

    CfnResource(Stack(app, "Fleet"), "Fleet", type="AWS::GameLift::Fleet", properties={
        "Name": "fleet", "EC2InstanceType": "c5.large",
        "EC2InboundPermissions": [{"FromPort": 2000, "ToPort": 1000, "IpRange": "10.0.0.0/16", "Protocol": "TCP"}],
    })
    app.synth()
    report = json.loads((outdir / "validation-report.json").read_text())
    return [v["ruleName"] for p in report["pluginReports"] if p["pluginName"] == "CloudFormation Validate"
            for v in p["violations"]]


def test_the_registered_plugin_leaves_out_the_gamelift_rule_and_only_it(tmp_path):
    """The same planted fleet: aws-cdk-lib's plugin reports CDK-GameLift-001; the registered one does not, and
    reports the same findings otherwise. (aws-cdk-lib's plugin is built here once more, about 1 s.)"""
    from aws_cdk import App, CloudFormationValidatePlugin, Validations

    context = {**cdk_json_context(), "@aws-cdk/core:failSynthOnValidationErrors": False}
    default_app = App(context=context, outdir=str(tmp_path / "default"))
    Validations.of(default_app).add_plugins(CloudFormationValidatePlugin())
    with_rule = _gamelift_findings(default_app, tmp_path / "default")
    without_rule = _gamelift_findings(new_app(context=context, outdir=str(tmp_path / "ours")), tmp_path / "ours")
    assert "CDK-GameLift-001" in with_rule
    assert [r for r in with_rule if not r.startswith("CDK-GameLift-")] == without_rule


def test_the_registered_plugin_replaces_aws_cdk_libs_own(tmp_path):
    """On an app with aws-cdk-lib's defaults, registered twice: the planted error is reported by one
    CloudFormation Validate plugin, once (a second engine would add a second report with the same finding)."""
    from aws_cdk import CfnResource, Stack

    from stacks import validation

    app = new_app(context=cdk_json_context(), outdir=str(tmp_path))
    validation.register(app)  # a second time: nothing more
    CfnResource(Stack(app, "Planted"), "Data", type="AWS::S3::Bucket", properties={"NoSuchProperty": True})
    with pytest.raises(Exception, match="NoSuchProperty"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (reported,) = [p for p in report["pluginReports"] if p["pluginName"] == "CloudFormation Validate"]
    assert [v["ruleName"] for v in reported["violations"]] == ["F3002"]


# A schema error planted in an app of a process that runs as `cdk synth --no-validation` does. Node.js reads
# CDK_VALIDATION from its own environment, set when it starts: hence a process of its own.
NO_VALIDATION = """
import json, sys
sys.path.insert(0, ".")
from aws_cdk import App, CfnResource, Stack
from stacks import validation

app = App(outdir=sys.argv[1], context={"@aws-cdk/core:validateAgainstDefaultRules": True})
CfnResource(Stack(app, "Planted"), "Data", type="AWS::S3::Bucket", properties={"NoSuchProperty": True})
validation.register(app)
app.synth()
print(json.dumps({"enabled": validation.enabled(), "built": validation.plugin.cache_info().currsize}))
"""


def test_no_validation_registers_nothing(tmp_path):
    """`cdk synth --no-validation` sets CDK_VALIDATION=false (aws-cdk CLI 2.1148.1 lib/index.js): register() then
    builds and adds nothing, and the planted error passes, as with aws-cdk-lib's own plugin. (That the plugin it
    registers otherwise does the checking is the next test.)"""
    env = {**os.environ, "CDK_VALIDATION": "false"}
    result = subprocess.run([sys.executable, "-c", NO_VALIDATION, str(tmp_path)],
                            capture_output=True, text=True, cwd=ROOT, env=env, check=False, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {"enabled": False, "built": 0}
    assert not (tmp_path / "validation-report.json").exists()


def test_the_registered_plugin_is_the_one_that_checks(tmp_path):
    """With aws-cdk-lib's own plugin switched off on the App (builtin_cloud_formation_validation=False), the
    planted error still fails the synth: the fixtures' checks are done by the plugin register() adds."""
    from aws_cdk import CfnResource, Stack

    app = new_app(context=cdk_json_context(), outdir=str(tmp_path), builtin_cloud_formation_validation=False)
    CfnResource(Stack(app, "Planted"), "Data", type="AWS::S3::Bucket", properties={"NoSuchProperty": True})
    with pytest.raises(Exception, match=r"(?s)NoSuchProperty.*CloudFormation Validate"):
        app.synth()
