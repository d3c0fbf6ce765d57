"""cfn-lint over synthesized templates, inside the test process.

One process loads cfn-lint's rules and resource schemas once (the command line pays about 1.5 s to start), and a
template whose text an earlier variant already produced is linted once: most variants share some of their stacks
with the default config byte for byte.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

# cfn-lint findings this project accepts, each with the reason (`make lint` passes the same to the command line).
CFN_LINT_IGNORED: dict[str, str] = {
    "W3005": "aws-cdk-lib's Lambda constructs (BucketDeployment, the custom resource Provider) add a DependsOn "
    "on the role's default policy next to a GetAtt of the role; the duplicate edge is harmless.",
}

_FINDINGS: dict[str, list[str]] = {}  # sha256 of a template's text -> its findings


@cache
def _runner() -> Any:
    """cfn-lint's runner with the command line's defaults: its rules are built once, as the command line builds
    them once for all the files it is given (about 0.6 s)."""
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    return Runner(ConfigMixIn([], ignore_checks=list(CFN_LINT_IGNORED)))


def cfn_lint_problems(template: Path) -> list[str]:
    """cfn-lint's findings on ``template`` (every rule but CFN_LINT_IGNORED), one line each."""
    key = hashlib.sha256(template.read_bytes()).hexdigest()
    if key not in _FINDINGS:
        from cfnlint.runner.template.runner import run_template_by_file_path

        runner = _runner()
        matches = run_template_by_file_path(str(template), runner.config, runner.rules, ignore_bad_template=False)
        _FINDINGS[key] = [f"{match.rule.id} line {match.linenumber}: {match.message}" for match in matches]
    return [f"{template.name}: {finding}" for finding in _FINDINGS[key]]
