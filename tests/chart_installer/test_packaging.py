"""The code asset of the custom resource functions is what Lambda runs: the ``runtime`` package alone, from which
every handler string must import without the repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from infra.constructs.provider import RUNTIME_DIR

# The handler of each function built from the runtime asset (infra/constructs: helm_release.py, grafana_content.py).
HANDLERS = {"runtime.chart_installer.handler.on_event", "runtime.grafana_content.handler.on_event"}
# The readiness provider's functions (HelmInstaller.readiness_provider), from the same asset; the default app has
# no Readiness yet, tests/stacks/test_readiness.py synthesizes them.
READINESS_HANDLERS = ("runtime.chart_installer.handler.readiness.on_event",
                      "runtime.chart_installer.handler.readiness.is_complete")


def runtime_functions(synth) -> dict[str, str]:
    """Handler -> S3 key of every Lambda function of the default app whose handler lies in the runtime package."""
    found: dict[str, str] = {}
    for template in synth.templates.values():
        for resource in template["Resources"].values():
            properties = resource.get("Properties", {})
            if resource["Type"] == "AWS::Lambda::Function" and str(properties.get("Handler")).startswith("runtime."):
                found[properties["Handler"]] = properties["Code"]["S3Key"]
    return found


def test_both_functions_ship_one_asset_holding_only_the_runtime_package(default_synth) -> None:
    functions = runtime_functions(default_synth)
    assert set(functions) >= HANDLERS
    keys = set(functions.values())
    assert len(keys) == 1  # the same asset
    asset = default_synth.outdir / f"asset.{keys.pop().removesuffix('.zip')}"
    files = sorted(str(path.relative_to(asset)) for path in asset.rglob("*") if path.is_file())
    expected = sorted(str(Path("runtime") / path.relative_to(RUNTIME_DIR)) for path in RUNTIME_DIR.rglob("*.py"))
    assert files == expected
    assert "runtime/common/deadline.py" in files and "runtime/common/errors.py" in files


def test_lambda_imports_every_handler_from_the_asset_root_without_the_repository(default_synth) -> None:
    # What Lambda does with a handler "a.b.c.f": import "a.b.c" with the asset's root on sys.path
    # (aws/aws-lambda-python-runtime-interface-client@0184e903:awslambdaric/bootstrap.py, _get_handler). -I keeps
    # the working directory, PYTHONPATH and user site out; the asset root is the only path added.
    functions = runtime_functions(default_synth)
    asset = default_synth.outdir / f"asset.{functions['runtime.chart_installer.handler.on_event'].removesuffix('.zip')}"
    code = (
        "import importlib, json, sys; sys.path.insert(0, sys.argv[1])\n"
        "for handler in sys.argv[2:]:\n"
        "    module, _, name = handler.rpartition('.')\n"
        "    assert callable(getattr(importlib.import_module(module), name)), handler\n"
        "print(json.dumps(sorted(name for name in sys.modules if name == 'infra' or name.startswith(('infra.', "
        "'runtime')))))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", code, str(asset), *sorted(functions), *READINESS_HANDLERS],
        capture_output=True, text=True,
        check=False, cwd=asset, env={"PATH": os.environ.get("PATH", "")}, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert not [name for name in loaded if name == "infra" or name.startswith("infra.")]
    assert {"runtime.chart_installer.handler.protocol", "runtime.chart_installer.handler.helm",
            "runtime.grafana_content.handler", "runtime.common.deadline", "runtime.common.errors",
            "runtime.chart_installer.handler.readiness"} <= set(loaded)
