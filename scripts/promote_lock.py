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
    from botocore.exceptions import ClientError

    candidate = json.loads((cdk_out / CANDIDATE_NAME).read_text(encoding="utf-8"))
    manifest = json.loads((cdk_out / "manifest.json").read_text(encoding="utf-8"))
    cloudformation = boto3.client("cloudformation")
    templates = {}
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        name = artifact.get("properties", {}).get("stackName", artifact_id)
        try:
            body = cloudformation.get_template(StackName=name, TemplateStage="Original")["TemplateBody"]
        except ClientError as error:
            if "does not exist" in str(error):
                continue  # not deployed (yet): nothing of it to record
            raise
        templates[name] = body if isinstance(body, dict) else json.loads(body)
    path = lock_path(lock_dir, candidate["project"])
    write_atomically(path, snapshot(templates, candidate["project"]))
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
