"""stacks/validation.py: AWS's template validation engine, built on another thread while app.py imports the
constructs, and registered in place of aws-cdk-lib's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cdk_json_context, new_app

# app.py's main() in a fresh interpreter, stopped once the plugin is registered, with every request jsii's Python
# client sends recorded with the thread that sent it (jsii 1.142.0 jsii/_kernel/providers/process.py).
PROBE = """
import json, sys, threading
from jsii._kernel.providers import process

sent = []
send = process._NodeProcess.send

def recording_send(self, request, response_type):
    target = getattr(request, "fqn", None) or getattr(request, "name", None)
    sent.append([threading.current_thread().name, type(request).__name__, target])
    return send(self, request, response_type)

process._NodeProcess.send = recording_send
sys.path.insert(0, ".")
import app as entry

marks = {}
start, register = entry.validation.start, entry.validation.register

def marked_start():
    start()
    marks["start"] = len(sent)

def marked_register(app):
    marks["register"] = len(sent)
    register(app)
    print(json.dumps({"sent": sent, "marks": marks}))
    raise SystemExit(0)

entry.validation.start, entry.validation.register = marked_start, marked_register
entry.main()
"""


def test_app_py_makes_no_jsii_call_while_the_engine_is_built_on_another_thread():
    """jsii's client is not thread-safe: from start() to register() app.py's thread sends nothing, and the
    engine is created once, on the other thread."""
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads(result.stdout.splitlines()[-1])
    sent, marks = probe["sent"], probe["marks"]
    window = sent[marks["start"]:marks["register"]]
    assert [s for s in window if s[0] == "MainThread"] == []
    creates = [s for s in sent if s[2] == "aws-cdk-lib.CloudFormationValidatePlugin"]
    assert creates == [["cfn-validate-engine", "CreateRequest", "aws-cdk-lib.CloudFormationValidatePlugin"]]
    # Every jsii package was loaded before the window, by the thread that goes on to use them.
    loads = {s[2] for s in sent[:marks["start"]] if s[1] == "LoadRequest" and s[0] == "MainThread"}
    assert {"aws-cdk-lib", "constructs", "cdk-nag", "@aws-cdk/lambda-layer-kubectl-v33"} <= loads


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
print(json.dumps({"enabled": validation.enabled(), "built": validation._future is not None}))
"""


def test_no_validation_registers_nothing(tmp_path):
    """`cdk synth --no-validation` sets CDK_VALIDATION=false (aws-cdk CLI 2.1148.1 lib/index.js): register() then
    builds and adds nothing, and the planted error passes, as with aws-cdk-lib's own plugin. (That the plugin it
    registers otherwise does the checking is the next test.)"""
    env = {**os.environ, "CDK_VALIDATION": "false"}
    result = subprocess.run([sys.executable, "-c", NO_VALIDATION, str(tmp_path)],
                            capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {"enabled": False, "built": False}
    assert not (tmp_path / "validation-report.json").exists()


def test_the_registered_plugin_is_the_one_that_checks(tmp_path):
    """With aws-cdk-lib's own plugin switched off on the App (builtin_cloud_formation_validation=False), the
    planted error still fails the synth: the fixtures' checks are done by the plugin register() adds."""
    from aws_cdk import CfnResource, Stack

    app = new_app(context=cdk_json_context(), outdir=str(tmp_path), builtin_cloud_formation_validation=False)
    CfnResource(Stack(app, "Planted"), "Data", type="AWS::S3::Bucket", properties={"NoSuchProperty": True})
    with pytest.raises(Exception, match=r"(?s)NoSuchProperty.*CloudFormation Validate"):
        app.synth()
