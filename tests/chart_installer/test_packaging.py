"""The installer's asset directory is what Lambda runs: its handler package must import from there alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from infra.constructs.helm_release import HANDLER_DIR


def test_lambda_imports_the_handler_package_from_the_asset_root_without_the_repository() -> None:
    # What Lambda does with the handler "handler.on_event": import "handler" with the asset's root on sys.path
    # (aws/aws-lambda-python-runtime-interface-client@0184e903:awslambdaric/bootstrap.py, _get_handler). -I keeps
    # the working directory, PYTHONPATH and user site out; the asset root is the only path added.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import handler; assert callable(handler.on_event); "
        "import json; print(json.dumps(sorted(name for name in sys.modules "
        "if name == 'infra' or name.startswith(('infra.', 'handler.')))))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", code, str(HANDLER_DIR)], capture_output=True, text=True, check=False,
        cwd=HANDLER_DIR.parent, env={"PATH": os.environ.get("PATH", "")}, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert not [name for name in loaded if name == "infra" or name.startswith("infra.")]
    assert {"handler.protocol", "handler.charts", "handler.helm", "handler.crds"} <= set(loaded)
