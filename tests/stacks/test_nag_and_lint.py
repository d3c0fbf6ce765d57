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


@pytest.fixture(scope="session")
def cfn_lint_findings(request) -> dict[str, list[dict]]:
    """One cfn-lint run over every variant's templates (it loads its schemas once): findings per file."""
    templates = sorted(
        str(path) for variant in VARIANTS for path in request.getfixturevalue(variant).outdir.glob("*.template.json")
    )
    ignore = [arg for check in CFN_LINT_IGNORED for arg in ("--ignore-checks", check)]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "json", *ignore, "--", *templates],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode in (0, 2, 4, 6, 8, 10, 12, 14), result.stderr  # bit flags of finding levels
    findings: dict[str, list[dict]] = {t: [] for t in templates}
    for finding in json.loads(result.stdout or "[]"):
        findings.setdefault(finding["Filename"], []).append(finding)
    return findings


@pytest.mark.parametrize("variant", VARIANTS)
def test_cfn_lint_reports_nothing(request, cfn_lint_findings, variant):
    outdir = str(request.getfixturevalue(variant).outdir)
    mine = {f: items for f, items in cfn_lint_findings.items() if f.startswith(outdir + "/")}
    assert mine, "no template was linted"
    problems = [f"{i['Rule']['Id']} {i['Filename']}: {i['Message']}" for items in mine.values() for i in items]
    assert problems == [], "\n".join(problems)
