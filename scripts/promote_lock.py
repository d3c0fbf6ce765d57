#!/usr/bin/env python3
"""Records the deployed state in the project's replacement lock (config/locks/<project>.lock.json).

``make deploy`` runs it after ``cdk deploy`` succeeded: it promotes the candidate the synth left in cdk.out.
``--from-stacks`` instead reads the templates CloudFormation holds for the stacks of that synth (AWS
credentials needed): use it to start a lock for a project deployed before the lock existed, after a deploy
that failed part-way, or to replace an old-format lock.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.errors import ConfigError  # noqa: E402
from infra.guards.replacement import CANDIDATE_NAME, LOCK_DIR, lock_path, promote, snapshot, write_atomically  # noqa: E402


def from_stacks(cdk_out: Path, lock_dir: Path) -> Path:
    import boto3

    # The same reader as `hpctl preflight`: the project's stacks in cdk.out's manifest, a stack not deployed skipped.
    from hpctl.preflight import deployed_templates, synth_stacks

    project = json.loads((cdk_out / CANDIDATE_NAME).read_text(encoding="utf-8"))["project"]
    templates = deployed_templates(boto3.client, list(synth_stacks(cdk_out, project)))
    path = lock_path(lock_dir, project)
    write_atomically(path, snapshot(templates, project))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cdk_out", nargs="?", default="cdk.out", type=Path)
    parser.add_argument("--lock-dir", type=Path, default=ROOT / LOCK_DIR)
    parser.add_argument("--from-stacks", action="store_true", help="read the deployed templates instead")
    args = parser.parse_args()
    try:
        path = from_stacks(args.cdk_out, args.lock_dir) if args.from_stacks else promote(args.cdk_out, args.lock_dir)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"recorded the deployed state in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
