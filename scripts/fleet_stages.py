#!/usr/bin/env python3
"""Print the stages of a fleet file, one line each, tab-separated: name, config file, account, region, the read-only
role the guard reads it with, and its folder in the pipeline's cloud assembly (examples/ci/pull-request.yml reads it).

Usage: python scripts/fleet_stages.py FLEET; with ``--pipeline-region``, only the pipeline's region (`make lint`).
The fleet and every config it names are validated as `make pipeline` validates them; an error is one line on
stderr, exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infra.config.fleet import load_fleet  # noqa: E402
from infra.errors import ConfigError  # noqa: E402


def main(argv: list[str]) -> int:
    region_only = argv[:1] == ["--pipeline-region"]
    argv = argv[1:] if region_only else argv
    if len(argv) != 1:
        print("usage: fleet_stages.py [--pipeline-region] FLEET", file=sys.stderr)
        return 2
    try:
        fleet = load_fleet(argv[0])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if region_only:
        print(fleet.pipeline.region)
        return 0
    for stage in fleet.stages:
        print("\t".join((stage.cluster.name, stage.config_path, stage.cluster.account, stage.cluster.region,
                         stage.lookup_role_arn, stage.assembly)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
