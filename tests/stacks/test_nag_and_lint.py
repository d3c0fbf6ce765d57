"""cdk-nag AwsSolutions and cfn-lint over every synthesized template, for each config variant."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# cfn-lint findings this project accepts, each with the reason.
CFN_LINT_IGNORED: dict[str, str] = {
    "W3005": "aws-cdk-lib's Lambda constructs (BucketDeployment, the custom resource Provider) add a DependsOn "
    "on the role's default policy next to a GetAtt of the role; the duplicate edge is harmless.",
}

VARIANTS = ["default_synth", "variant_synth", "byo_synth"]


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
def test_cfn_lint_reports_nothing(request, variant):
    synth = request.getfixturevalue(variant)
    templates = sorted(str(p) for p in Path(synth.outdir).glob("*.template.json"))
    assert templates
    ignore = [arg for check in CFN_LINT_IGNORED for arg in ("--ignore-checks", check)]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), *ignore, "--", *templates],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
