"""cdk.json sets every feature flag of the installed aws-cdk-lib to the value it recommends.

The recommendations are read from the feature-flag report aws-cdk-lib writes into every cloud assembly
(the artifact the CDK CLI's `cdk flags` reads), so an aws-cdk-lib upgrade that adds or changes a
recommendation fails here until cdk.json follows it or the "Feature flags" section of docs/development.md explains
why not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Synthesized, cdk_json_context

# A row of docs/development.md's table of kept values: | `flag` | `value as JSON` | reason |
KEPT_ROW = re.compile(r"^\| `(@[^`]+)` \| `([^`]+)` \| (.+) \|$")


def recommended_flags(outdir: Path) -> dict[str, Any]:
    manifest = json.loads((outdir / "manifest.json").read_text())
    reports = [a for a in manifest["artifacts"].values() if a["type"] == "cdk:feature-flag-report"]
    assert len(reports) == 1 and reports[0]["properties"]["module"] == "aws-cdk-lib"
    return {name: flag["recommendedValue"] for name, flag in reports[0]["properties"]["flags"].items()}


def kept_flags(readme: str) -> dict[str, Any]:
    """The flags the "Feature flags" section of docs/development.md keeps at another value than recommended."""
    section = readme.split("\n## Feature flags\n", 1)[1].split("\n## ", 1)[0]
    return {m[1]: json.loads(m[2]) for line in section.splitlines() if (m := KEPT_ROW.match(line))}


def flag_problems(recommended: dict[str, Any], context: dict[str, Any], kept: dict[str, Any]) -> list[str]:
    problems = []
    for name, value in sorted(recommended.items()):
        expected = kept.get(name, value)
        if name not in context:
            problems.append(f"{name} is not set (recommended: {json.dumps(value)})")
        elif context[name] != expected:
            problems.append(f"{name} is {json.dumps(context[name])}, expected {json.dumps(expected)}")
    problems += [f"{name} is set but aws-cdk-lib has no such flag" for name in sorted(set(context) - set(recommended))]
    problems += [f"{name} is kept at its recommended value: remove it from docs/development.md" for name in sorted(kept)
                 if name in recommended and kept[name] == recommended[name]]
    return problems


@pytest.fixture(scope="module")
def recommended(default_synth: Synthesized) -> dict[str, Any]:
    return recommended_flags(default_synth.outdir)


@pytest.fixture(scope="module")
def kept() -> dict[str, Any]:
    return kept_flags((ROOT / "docs" / "development.md").read_text(encoding="utf-8"))


def test_cdk_json_sets_every_flag_to_the_recommended_value(recommended, kept):
    assert flag_problems(recommended, cdk_json_context(), kept) == []


def test_every_kept_value_has_a_reason_and_is_in_cdk_json(kept):
    assert kept, "docs/development.md's table of kept values was not found"
    assert set(kept) <= set(cdk_json_context())


def test_an_unset_or_changed_flag_is_reported(recommended, kept):
    context = cdk_json_context()
    del context["@aws-cdk/aws-ec2:restrictDefaultSecurityGroup"]
    context["@aws-cdk/core:enablePartitionLiterals"] = False
    context["@aws-cdk/core:enableStackNameDuplicates"] = True  # a v1 flag aws-cdk-lib 2 no longer has
    assert flag_problems(recommended, context, kept) == [
        "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup is not set (recommended: true)",
        "@aws-cdk/core:enablePartitionLiterals is false, expected true",
        "@aws-cdk/core:enableStackNameDuplicates is set but aws-cdk-lib has no such flag",
    ]


def test_a_kept_value_is_checked_against_cdk_json(recommended, kept):
    flag = "@aws-cdk/core:defaultCrossStackReferences"
    assert flag in kept
    context = cdk_json_context() | {flag: recommended[flag]}
    assert flag_problems(recommended, context, kept) == [
        f"{flag} is {json.dumps(recommended[flag])}, expected {json.dumps(kept[flag])}"
    ]
