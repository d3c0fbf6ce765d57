"""cfn-lint over synthesized templates, inside the test process.

One process loads cfn-lint's rules and resource schemas once (the command line pays about 1.5 s to start), and a
template whose text was linted before is not linted again:
- within a run, most variants share some of their stacks with the default config byte for byte;
- across runs, the findings are kept on disk (``CACHE_DIR``), one file per template text. The file's name is the
  SHA-256 of cfn-lint's version, its effective configuration (``repr`` of its ConfigMixIn: the ignored rules,
  regions and anything a .cfnlintrc adds) and the template's bytes, so a template that changed by one byte, another
  cfn-lint or another configuration is linted anew. Those are everything cfn-lint reads here: the resource
  schemas ship inside the pinned package. A fresh clone (as in CI) has no cache and lints every template;
  ``CFN_LINT_CACHE=off`` does the same on any run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / ".cache" / "cfn-lint"

# cfn-lint findings this project accepts, each with the reason (`make lint` passes the same to the command line).
CFN_LINT_IGNORED: dict[str, str] = {
    "W3005": "aws-cdk-lib's Lambda constructs (BucketDeployment, the custom resource Provider) add a DependsOn "
    "on the role's default policy next to a GetAtt of the role; the duplicate edge is harmless.",
}

_FINDINGS: dict[str, list[str]] = {}  # cache key of a template's text -> its findings


@cache
def _config() -> Any:
    """cfn-lint's configuration as its command line builds it from no arguments but the ignored rules (it reads a
    .cfnlintrc of the home or working directory too)."""
    from cfnlint.config import ConfigMixIn

    return ConfigMixIn([], ignore_checks=list(CFN_LINT_IGNORED))


@cache
def _runner() -> Any:
    """cfn-lint's runner: its rules are built once (about 1.5 s), as the command line builds them once for all the
    files it is given, and only in a process that has a template to lint."""
    from cfnlint.runner import Runner

    return Runner(_config())


@cache
def _key_prefix() -> bytes:
    """What besides the template decides cfn-lint's findings: its version and its effective configuration."""
    from cfnlint.version import __version__

    return f"cfn-lint {__version__}\n{_config()!r}\n".encode()


def cache_key(text: bytes) -> str:
    return hashlib.sha256(_key_prefix() + text).hexdigest()


def _disk_cache_on() -> bool:
    return os.environ.get("CFN_LINT_CACHE", "").lower() not in {"off", "0", "false", "no"}


def _read_cached(key: str) -> list[str] | None:
    try:
        findings = json.loads((CACHE_DIR / f"{key}.json").read_text())
    except (OSError, ValueError):  # none yet, or unreadable: lint again
        return None
    if isinstance(findings, list) and all(isinstance(finding, str) for finding in findings):
        return findings
    return None


def _write_cached(key: str, findings: list[str]) -> None:
    """Atomically (two xdist workers may lint the same text): a reader sees the whole file or none."""
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=CACHE_DIR, suffix=".tmp", delete=False) as handle:
            json.dump(findings, handle)
        os.replace(handle.name, CACHE_DIR / f"{key}.json")
    except OSError:  # a read-only checkout still lints; it only keeps nothing
        pass


def lint(template: Path) -> list[str]:
    """cfn-lint's findings on ``template``, always by running cfn-lint (no cache)."""
    from cfnlint.runner.template.runner import run_template_by_file_path

    runner = _runner()
    matches = run_template_by_file_path(str(template), runner.config, runner.rules, ignore_bad_template=False)
    return [f"{match.rule.id} line {match.linenumber}: {match.message}" for match in matches]


def cfn_lint_problems(template: Path) -> list[str]:
    """cfn-lint's findings on ``template`` (every rule but CFN_LINT_IGNORED), one line each."""
    key = cache_key(template.read_bytes())
    if key not in _FINDINGS:
        cached = _read_cached(key) if _disk_cache_on() else None
        if cached is None:
            cached = lint(template)
            if _disk_cache_on():
                _write_cached(key, cached)
        _FINDINGS[key] = cached
    return [f"{template.name}: {finding}" for finding in _FINDINGS[key]]
