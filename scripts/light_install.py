#!/usr/bin/env python3
"""CI's check of the light install of hpctl: runs the block of docs/hpctl.md marked `light-install`, as written, in a
fresh HOME (so `~/.hpctl` is a new virtual environment), then checks what that environment can do without the CDK.

Needs the package index (pip installs the distribution's dependencies); .ci/run calls it after `make test`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "hpctl.md"
MARKER = "<!-- light-install:"


def documented_commands(text: str | None = None) -> list[str]:
    """The shell lines of the fenced block right after the light-install marker of docs/hpctl.md."""
    lines = (DOC.read_text(encoding="utf-8") if text is None else text).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MARKER))
    if not lines[start + 1].startswith("```"):
        raise ValueError(f"{DOC}: the light-install marker is not followed by a code block")
    end = next(i for i in range(start + 2, len(lines)) if lines[i].startswith("```"))
    return [line for line in lines[start + 2:end] if line.strip()]


def run(command: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    print(f"+ {command}", flush=True)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=ROOT, env=env, text=True, check=check)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hpctl-light-") as home:
        env = {key: value for key, value in os.environ.items()
               if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}}
        env["HOME"] = home
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                      if not p.startswith(str(ROOT)))  # not the repository's .venv/bin
        for command in documented_commands():
            run(command, env)
        venv = Path(home) / ".hpctl" / "bin"
        run(f"{venv}/pip check", env)  # nothing declared is missing: no aws-cdk-lib complaint
        if run(f"{venv}/python -c 'import aws_cdk'", env, check=False).returncode == 0:
            print("light install: aws_cdk is importable, the install pulled the CDK", file=sys.stderr)
            return 1
        run(f"{venv}/hpctl --help > /dev/null", env)
        run(f"{venv}/hpctl preflight --help > /dev/null", env)  # preflight imports jsonschema
        # Offline commands that read the config, the facts and the instance catalog.
        run(f"{venv}/hpctl render-examples --config config/default.yaml --out {home}/examples > /dev/null", env)
        plan = "plan --config config/default.yaml --checkpoint-gib 100 --write-mib-per-s 1000 --json"
        run(f"{venv}/hpctl {plan} > /dev/null", env)
    print("light install: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
