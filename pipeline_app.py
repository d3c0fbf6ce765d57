#!/usr/bin/env python3
"""The fleet's delivery pipeline: ``make pipeline FLEET=config/fleet.example.yaml`` (docs/fleet.md).

Reads the fleet file named by ``-c fleet=PATH``, validates it and every cluster config it names, and synthesizes
one CDK Pipelines pipeline stack with a stage per cluster (stacks/pipeline.py). The nag packs and AWS's template
validation check every template, the pipeline's and each stage's, as for the app. A bad fleet file is one line
on stderr, exit 2.
"""

from __future__ import annotations

import sys

from aws_cdk import App

from infra.config import require_offered_types
from infra.config.fleet import load_fleet
from infra.errors import ConfigError
from stacks import validation


def main(app: App | None = None) -> None:
    """``app``: a test's App (context and output directory of its own); `cdk synth` runs this with none."""
    app = app or App()
    fleet_file = app.node.try_get_context("fleet")
    try:
        if not fleet_file:
            raise ConfigError("fleet", None, "pass the fleet file: make pipeline FLEET=path (or cdk -c fleet=path)")
        fleet = load_fleet(fleet_file)
        for stage in fleet.stages:
            try:
                require_offered_types(stage.config)
            except ConfigError as error:
                raise error.within(stage.config_path) from None
        # The constructs are imported once the fleet is known to be good, as in app.py.
        from stacks.app_builder import register_nag
        from stacks.pipeline import build_pipeline

        build_pipeline(app, fleet, fleet_file)
        register_nag(app)
        validation.register(app)
        app.synth()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
