"""cfn-lint over synthesized templates, inside the test process.

One process loads cfn-lint's rules and resource schemas once (the command line pays about 1.5 s to start), and a
template whose text was linted before is not linted again:
- within a run, most variants share some of their stacks with the default config byte for byte;
- across runs, the findings are kept on disk (``CACHE_DIR``), one file per template text. The file's name is the
  SHA-256 of what decides the findings: cfn-lint's version and the versions of the packages it requires, its
  effective configuration (``repr`` of its ConfigMixIn: the ignored rules, the region and anything a .cfnlintrc
  adds), this module's own source (how cfn-lint is called and its findings written), and the template's bytes.
  A template that changed by one byte, another cfn-lint or dependency, another configuration or another version
  of this module is linted anew.

Not in the key, so the cache is not used at all: a configuration that names rule or schema files of its own
(custom rules, extra rule directories, an override spec, registry schemas), whose contents could change under
the same names. Not covered: `cfn-lint --update-specs`, which rewrites the schemas inside the installed package
in place (this project pins cfn-lint and never runs it); `make clean` or ``CFN_LINT_CACHE=off`` after such a
change. A fresh clone (as in CI) has no cache and lints every template; ``CFN_LINT_CACHE=off`` does the same on
any run.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
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

# cfn-lint's own default region. A synthesized config's templates are linted for the config's region (as `make lint`
# does): a resource type that region does not offer is E3006 there only.
DEFAULT_REGION = "us-east-1"


@cache
def _config(region: str = DEFAULT_REGION) -> Any:
    """cfn-lint's configuration as its command line builds it from the ignored rules and ``--regions <region>``
    (it reads a .cfnlintrc of the home or working directory too)."""
    from cfnlint.config import ConfigMixIn

    return ConfigMixIn([], ignore_checks=list(CFN_LINT_IGNORED), regions=[region])


@cache
def _runner(region: str = DEFAULT_REGION) -> Any:
    """cfn-lint's runner for one region: its rules are built once (about 1.5 s), as the command line builds them
    once for all the files it is given, and only in a process that has a template to lint."""
    from cfnlint.runner import Runner

    return Runner(_config(region))


def _installed(requirement: str) -> str | None:
    """``name==version`` of an installed requirement (an extra's that is not installed: None). The name is
    parsed by `packaging` (pytest's own dependency), as pip parses it."""
    from packaging.requirements import Requirement

    name = Requirement(requirement).name
    try:
        return f"{name}=={importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return None


@cache
def _key_prefix(region: str = DEFAULT_REGION) -> bytes:
    """What besides the template decides cfn-lint's findings (see the module docstring)."""
    from cfnlint.version import __version__

    dependencies = sorted(filter(None, map(_installed, importlib.metadata.requires("cfn-lint") or [])))
    this_module = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return (f"cfn-lint {__version__}\n{' '.join(dependencies)}\n{_config(region)!r}\n{this_module}\n").encode()


def cache_key(text: bytes, region: str = DEFAULT_REGION) -> str:
    return hashlib.sha256(_key_prefix(region) + text).hexdigest()


@cache
def _config_names_files_of_its_own() -> bool:
    """Whether cfn-lint's configuration names rule or schema files besides its own package's (module docstring)."""
    import cfnlint.rules

    config = _config()
    builtin_rules = Path(cfnlint.rules.__file__).parent.resolve()
    return bool(config.custom_rules or config.override_spec or config.registry_schemas
                or any(Path(path).resolve() != builtin_rules for path in config.append_rules))


def _disk_cache_on() -> bool:
    off = os.environ.get("CFN_LINT_CACHE", "").lower() in {"off", "0", "false", "no"}
    return not off and not _config_names_files_of_its_own()


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


def lint(template: Path, region: str = DEFAULT_REGION) -> list[str]:
    """cfn-lint's findings on ``template`` for ``region``, always by running cfn-lint (no cache)."""
    from cfnlint.runner.template.runner import run_template_by_file_path

    runner = _runner(region)
    matches = run_template_by_file_path(str(template), runner.config, runner.rules, ignore_bad_template=False)
    return [f"{match.rule.id} line {match.linenumber}: {match.message}" for match in matches]


def cfn_lint_problems(template: Path, region: str = DEFAULT_REGION) -> list[str]:
    """cfn-lint's findings on ``template`` for ``region`` (every rule but CFN_LINT_IGNORED), one line each."""
    key = cache_key(template.read_bytes(), region)
    if key not in _FINDINGS:
        cached = _read_cached(key) if _disk_cache_on() else None
        if cached is None:
            cached = lint(template, region)
            if _disk_cache_on():
                _write_cached(key, cached)
        _FINDINGS[key] = cached
    return [f"{template.name}: {finding}" for finding in _FINDINGS[key]]
