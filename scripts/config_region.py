"""Print the region of a config file (`make lint` lints each synthesized config for its own region).

Usage: python scripts/config_region.py CONFIG. The config is validated as synth validates it; ``region`` is a
required key (infra/config/app.py), so every valid config names one and no default is needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infra.config import load_config  # noqa: E402
from infra.errors import ConfigError  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: config_region.py CONFIG", file=sys.stderr)
        return 2
    try:
        print(load_config(argv[0]).region)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
