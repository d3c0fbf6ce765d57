"""Records the stateful resources of the templates synthesized from the current code, as the baseline the
upgrade test compares later code with: `python -m tests.safety.upgrade.record` (from the repository root).

Run it only at a release a deployment may be on; the file it writes names the commit it was taken from.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.safety.upgrade.variants import STATEFUL_TYPES, VARIANTS

BASELINE_FILE = Path(__file__).with_name("baseline.json")


def stateful(templates: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """stack name -> logical ID -> {Type, Properties} for every stateful resource of the templates."""
    return {
        stack: {
            logical_id: {"Type": resource["Type"], "Properties": resource.get("Properties", {})}
            for logical_id, resource in template["Resources"].items()
            if resource["Type"] in STATEFUL_TYPES
        }
        for stack, template in sorted(templates.items())
    }


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, check=True).stdout.strip()
    if dirty:
        sys.exit("commit first: the baseline must be the templates of one commit")
    recorded: dict[str, Any] = {"commit": commit, "variants": {}}
    for name, synthesize in VARIANTS.items():
        with tempfile.TemporaryDirectory() as outdir:
            recorded["variants"][name] = stateful(synthesize(Path(outdir)))
    BASELINE_FILE.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {BASELINE_FILE} from {commit}")


if __name__ == "__main__":
    main()
