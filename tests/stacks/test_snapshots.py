"""One normalised snapshot per stack: the tripwire for every change the intent tests do not name.

Update after a deliberate change with: make test PYTEST_ARGS="--snapshot-update -n 0" (then review the diff).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from tests.conftest import ROOT

_ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def normalise(value: Any) -> Any:
    """Strip what changes without a change of intent: asset hashes and CDK metadata."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if k not in {"Metadata", "aws:cdk:path"}}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        return _ASSET_HASH.sub("<asset-hash>", value)
    return value


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("part", ["network", "eks", "hyperpod", "observability"])
def test_stack_snapshot(default_synth, snapshot_json, part):
    template = normalise(default_synth.template(part))
    template.get("Parameters", {}).pop("BootstrapVersion", None)
    template.get("Rules", {}).pop("CheckBootstrapVersion", None)
    assert template == snapshot_json


def test_every_snapshot_file_belongs_to_a_collected_test(request):
    """syrupy reports unused snapshots only without xdist; the suite runs under xdist, so this test does it."""
    tests = {(item.path.stem, item.name) for item in request.session.items}
    files = sorted(ROOT.glob("tests/**/__snapshots__/*/*.json"))
    assert files, "no snapshot found"
    unused = [str(f.relative_to(ROOT)) for f in files if (f.parent.name, f.stem) not in tests]
    assert unused == [], "snapshots no test reads: delete them or restore their tests"
