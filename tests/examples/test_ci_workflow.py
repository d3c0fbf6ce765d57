"""examples/ci/pull-request.yml: valid YAML with the documented jobs, each running what its README says."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.conftest import ROOT

CI = ROOT / "examples" / "ci"


def _workflow() -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load((CI / "pull-request.yml").read_text(encoding="utf-8"))
    return data


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_the_workflow_runs_on_pull_requests_with_read_only_contents() -> None:
    workflow = _workflow()
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"] == {"contents": "read"}


def test_the_jobs_are_the_documented_ones() -> None:
    jobs = _workflow()["jobs"]
    readme = (CI / "README.md").read_text(encoding="utf-8")
    assert list(jobs) == re.findall(r"^\| `([a-z-]+)` \|", readme, flags=re.MULTILINE) == ["test", "lint", "fleets"]
    assert "make test" in _runs(jobs["test"]) and "make lint" in _runs(jobs["lint"])


def test_the_fleets_job_synthesizes_every_fleet_and_says_what_it_skipped() -> None:
    fleets = _workflow()["jobs"]["fleets"]
    steps = {step.get("name"): step for step in fleets["steps"]}
    assert 'for fleet in config/fleet*.yaml; do\n  make pipeline FLEET="$fleet"' in steps[
        "Synthesize every fleet's pipeline"]["run"]
    assert "if" not in steps["Synthesize every fleet's pipeline"]  # runs without credentials
    skipped = steps["Skipped without read-only credentials"]
    assert skipped["if"] == "env.FLEET_READ_ROLE_ARN == ''" and "GITHUB_STEP_SUMMARY" in skipped["run"]
    review = steps["cdk diff and the guard's verdict of every stage"]
    assert review["if"] == "env.FLEET_READ_ROLE_ARN != ''"
    assert "make --no-print-directory diff-stage" in review["run"] and "-m hpctl guard" in review["run"]
    assert "gh pr comment" in review["run"]
    assert fleets["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
