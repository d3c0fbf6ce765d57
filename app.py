#!/usr/bin/env python3
"""Entry point: load the config named by `-c config=PATH` (default config/default.yaml) and build the stacks.

After synth the replacement guard compares the templates with the project's lock of the deployed state
(`-c lock_dir=DIR`, default config/locks) and leaves its candidate lock in the cloud assembly.
"""

from __future__ import annotations

import gc

if __name__ == "__main__":
    # One synth per process, then exit: the cyclic garbage collector only walks the tens of thousands of class
    # objects that importing aws_cdk and jsii creates, again and again while they load: 0.36 s and 0.54 s less
    # wall time for the default config's synth in two trials (medians of 6 and 8 alternated runs, 2026-12-03).
    # Memory is freed when the process ends (peak 648 MB against 654 MB with it on, all-features config).
    # Only as a script: tests import this file and run main() in their own long-lived process.
    gc.disable()

import json
import sys
from pathlib import Path

from aws_cdk import App

from infra.config import load_config, require_offered_types
from infra.errors import ConfigError, redact
from infra.guards.replacement import CANDIDATE_NAME, LOCK_DIR, guard_replacement, lock_path, write_atomically
from stacks import validation

ROOT = Path(__file__).resolve().parent
DEFAULT_CONFIG = "config/default.yaml"


def main() -> None:
    app = App()
    path = Path(app.node.try_get_context("config") or DEFAULT_CONFIG)
    lock_dir = Path(app.node.try_get_context("lock_dir") or ROOT / LOCK_DIR)
    try:
        config = load_config(path)
        try:  # a feature whose resource types the region lacks: CloudFormation would reject the whole stack
            require_offered_types(config)
        except ConfigError as error:
            raise error.within(str(path)) from None
        legacy = path.with_name(f"{path.stem}.lock.json")
        if legacy.is_file() and not lock_path(lock_dir, config.project).is_file():
            raise ConfigError(
                "replacement lock", str(legacy),
                f"an old-format lock beside the config; locks now live in {lock_dir}/<project>.lock.json: rebuild "
                "it from the deployed stacks with scripts/promote_lock.py --from-stacks, then delete the old file",
            )
        # The constructs and cdk-nag are imported once the config is known to be good (about 1 s): a bad config
        # is reported that much sooner.
        from stacks.app_builder import build_app

        build_app(app, config)
        validation.register(app)  # AWS's template validation without aws-cdk-lib's GameLift rule
        if validation.control_tower_requested(app):  # `make lint`: AWS Control Tower's proactive controls
            validation.register_control_tower(app, config)
        assembly = app.synth()
        # Read from the files: the artifacts' `template` would send each template through jsii, three times slower.
        templates = {stack.stack_name: json.loads(Path(stack.template_full_path).read_text(encoding="utf-8"))
                     for stack in assembly.stacks}
        candidate = guard_replacement(config, templates, lock_dir)
    except ConfigError as error:
        print(f"error: {redact(str(error))}", file=sys.stderr)
        sys.exit(2)
    write_atomically(Path(assembly.directory) / CANDIDATE_NAME, candidate)


if __name__ == "__main__":
    main()
    # The process ends here. Without this the interpreter's garbage collection at exit walks every object of the
    # jsii and aws_cdk modules once more, about half a second of CPU (perf, 2026-12-03); frozen objects are left to
    # the exit itself. Here rather than in main(): tests run main() in their own long-lived process.
    gc.freeze()
