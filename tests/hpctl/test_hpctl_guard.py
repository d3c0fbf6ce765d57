"""`hpctl guard`, the pipeline's step before each deploy: the replacement engine over the templates CloudFormation
holds (GetTemplate) against the synthesized ones. It refuses what synth's guard refuses, with the same reasons."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hpctl_testkit import stubbed

from infra.errors import ConfigError
from infra.guards.replacement import REFUSE, findings, guard_replacement, lock_path, snapshot, write_atomically
from tests.conftest import ROOT

CONFIG = ROOT / "config" / "default.yaml"


def _assembly(cdk_out: Path, templates: dict[str, dict[str, Any]]) -> None:
    """A cloud assembly as a pipeline stage's (stackName in the manifest, as build_app sets it)."""
    cdk_out.mkdir(parents=True, exist_ok=True)
    artifacts = {f"dev{name}": {"type": "aws:cloudformation:stack",
                                "properties": {"templateFile": f"dev{name}.template.json", "stackName": name}}
                 for name in templates}
    (cdk_out / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    for name, template in templates.items():
        (cdk_out / f"dev{name}.template.json").write_text(json.dumps(template))


def _guard(run, tmp_path: Path, deployed: dict[str, dict[str, Any]], synth: dict[str, dict[str, Any]]):
    cdk_out = tmp_path / "cdk.out.pipeline" / "assembly-dev"
    _assembly(cdk_out, synth)
    cloudformation, stub = stubbed("cloudformation")
    for name in synth:  # only GetTemplate: any other call fails the Stubber
        stub.add_response("get_template", {"TemplateBody": json.dumps(deployed[name])},
                          {"StackName": name, "TemplateStage": "Original"})
    code, out = run.json("guard", "--config", str(CONFIG), "--region", "us-west-2", "--cdk-out", str(cdk_out),
                         clients={"cloudformation": cloudformation})
    stub.assert_no_pending_responses()
    return code, out


def test_an_unchanged_stage_passes(run, tmp_path: Path, default_synth) -> None:
    code, out = _guard(run, tmp_path, default_synth.templates, default_synth.templates)
    assert code == 0 and [c["verdict"] for c in out["checks"]] == ["pass"]


def test_a_removed_group_is_refused_with_synths_reason(run, tmp_path: Path, default_synth) -> None:
    """The group with nodes renamed: synth's guard (compared with a lock of the deployed templates) and the pipeline's
    guard (compared with the deployed templates themselves) refuse it with the same reason."""
    synth = copy.deepcopy(default_synth.templates)
    [cluster] = [r for r in synth["hyperpod-dev-hyperpod"]["Resources"].values()
                 if r["Type"] == "AWS::SageMaker::Cluster"]
    cluster["Properties"]["InstanceGroups"][0]["InstanceGroupName"] = "renamed"
    code, out = _guard(run, tmp_path, default_synth.templates, synth)
    failed = [c["reason"] for c in out["checks"] if c["verdict"] == "fail"]
    assert code == 1 and out["ok"] is False and len(failed) == 1

    locked, current = snapshot(default_synth.templates, "hyperpod-dev"), snapshot(synth, "hyperpod-dev")
    assert failed == [f.reason for f in findings(locked, current, default_synth.config) if f.severity == REFUSE]
    write_atomically(lock_path(tmp_path / "locks", "hyperpod-dev"), locked)
    with pytest.raises(ConfigError) as refused:
        guard_replacement(default_synth.config, synth, tmp_path / "locks", warn=lambda _: None)
    assert failed[0] in str(refused.value)
