#!/usr/bin/env python3
"""Entry point: load the config named by `-c config=PATH` (default config/default.yaml) and build the stacks."""

from __future__ import annotations

import sys

from aws_cdk import App

from infra.config import load_config
from infra.errors import ConfigError
from infra.hyperpod.lock import guard_replacement, lock_path_for
from stacks.app_builder import build_app

DEFAULT_CONFIG = "config/default.yaml"


def main() -> None:
    app = App()
    path = app.node.try_get_context("config") or DEFAULT_CONFIG
    try:
        config = load_config(path)
        guard_replacement(config, lock_path_for(path))
        build_app(app, config)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    app.synth()


if __name__ == "__main__":
    main()
