"""Refuse a deploy that would leave nobody able to use kubectl on the EKS cluster (`make deploy` runs it first)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpctl.preflight import FAIL, check_admin_access  # noqa: E402
from infra.config import load_config  # noqa: E402
from infra.errors import ConfigError  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: require_admin.py CONFIG", file=sys.stderr)
        return 2
    try:
        (check,) = check_admin_access(load_config(argv[0]))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if check.verdict == FAIL:
        print(f"error: {check.reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
