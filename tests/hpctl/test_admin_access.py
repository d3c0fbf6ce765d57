"""A deploy that would leave nobody able to use kubectl is refused before it starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from hpctl.preflight import FAIL, PASS, check_admin_access
from infra.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "arn:aws:iam::111122223333:role/PlatformAdmin"


def _data(admins: list[str]) -> dict:
    data = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    data["eks"]["admin_principal_arns"] = admins
    return data


def test_no_admin_fails_naming_the_key():
    (check,) = check_admin_access(parse_config(_data([])))
    assert check.verdict == FAIL and "eks.admin_principal_arns" in check.reason


def test_an_admin_passes():
    (check,) = check_admin_access(parse_config(_data([ADMIN])))
    assert check.verdict == PASS and ADMIN in check.reason


def test_make_deploy_guard_exit_codes(tmp_path):
    def run(admins: list[str]) -> subprocess.CompletedProcess[str]:
        path = tmp_path / f"c{len(admins)}.yaml"
        path.write_text(yaml.safe_dump(_data(admins)))
        return subprocess.run([sys.executable, str(ROOT / "scripts" / "require_admin.py"), str(path)],
                              capture_output=True, text=True, cwd=tmp_path)

    refused = run([])
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "admin_principal_arns" in refused.stderr
    assert run([ADMIN]).returncode == 0
