"""AWS's built-in CloudFormation template validation, registered on the app without aws-cdk-lib's GameLift rule.

`cdk synth` runs aws-cdk-lib's CloudFormation Validate plugin over every template: the CloudFormation resource
schemas and the rules of AWS's `@aws/cloudformation-validate` engine, plus the plugin's "default rules". In
aws-cdk-lib 2.275.0 those default rules are the Rego files of ``core/lib/validation/rules``, which holds one:
``gamelift-fleet.rego`` (GameLift fleet and alias invariants, ``CDK-GameLift-001`` to ``-007``; read in the
package's jsii tarball). This app creates no ``AWS::GameLift::*`` resource, so that rule can find nothing here,
yet compiling it is about a quarter of the engine's construction (1.8 s without it against 2.5 s with it, in
Node.js alone) and about 0.2 s of the default config's synth (8 alternated pairs, 2026-12-04: median 2.68 s
against 2.89 s). The plugin registered here is built with ``include_default_rules=False``; everything else it
checks, and the errors-versus-warnings rule (``@aws-cdk/core:validateAgainstDefaultRules`` in cdk.json, applied
by the plugin's name), is as before. tests/stacks/test_validation_plugin.py fails if aws-cdk-lib ships another
default rule or a template gains a GameLift resource, so this is decided again then.

A plugin registered on the app replaces aws-cdk-lib's own (aws-cdk-lib 2.275.0
core/lib/private/synthesis-validation.js: ``hasUserRegisteredCloudFormationValidatePlugin``, an ``instanceof``
test); app.py registers it after the nag packs, so ``validation-report.json`` lists the reports in the same
order as before (a report with no findings is left out). aws-cdk-lib skips its own when
``CDK_VALIDATION`` is "false", which the CLI sets for ``cdk synth --no-validation`` (aws-cdk CLI 2.1148.1
lib/index.js); :func:`register` does too. It cannot see an App's ``builtin_cloud_formation_validation=False``
and registers the plugin even then (a test relies on that to show the registered plugin does the checking).

One plugin serves every app of a process (tests synthesize many): nothing in it is per app. It is built and
used on the calling thread only: jsii's Python client sends one request at a time over one pipe and is not
safe across threads (jsii 1.142.0 jsii/_kernel/providers/process.py: ``_NodeProcess.send`` takes no lock).
"""

from __future__ import annotations

import os
import weakref
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_cdk import App, CloudFormationValidatePlugin, IPolicyValidationPluginBeta1

    from infra.config import AppConfig

# Apps given the plugin: a second instance on one app would fail its synth (DuplicateCloudFormationValidatePlugin).
_registered: weakref.WeakSet[App] = weakref.WeakSet()


def enabled() -> bool:
    """False under ``cdk synth --no-validation`` (the CLI sets CDK_VALIDATION=false), as aws-cdk-lib decides."""
    return os.environ.get("CDK_VALIDATION") != "false"


@cache
def plugin() -> CloudFormationValidatePlugin:
    """The process's one plugin: AWS's schema and engine rules, without aws-cdk-lib's GameLift rule."""
    from aws_cdk import CloudFormationValidatePlugin

    return CloudFormationValidatePlugin(include_default_rules=False)


def register(app: App) -> None:
    """Give ``app`` the process's plugin in place of aws-cdk-lib's own, once; nothing under --no-validation."""
    if not enabled() or app in _registered:
        return
    from aws_cdk import Validations

    Validations.of(app).add_plugins(plugin())
    _registered.add(app)


# The context key that turns the Control Tower check on for one `cdk synth` (`make lint` sets it): the plugin is
# not run on every synth because it costs more than the 0.2 s a synth may spend on it (docs/bench.md).
CONTROL_TOWER_CONTEXT = "control_tower_controls"


def control_tower_requested(app: App) -> bool:
    """True when the synth was asked for the Control Tower check (``-c control_tower_controls=true``)."""
    return str(app.node.try_get_context(CONTROL_TOWER_CONTEXT)).lower() == "true"


def control_tower_plugin(config: AppConfig) -> IPolicyValidationPluginBeta1:
    """cfn-guard with AWS Control Tower's proactive-control rules (cdklabs-cdk-validator-cfnguard 0.0.62, which
    bundles cfn-guard 3.1.1 for Linux and macOS), less the controls ``infra.guards.control_tower`` lists as not met
    by ``config``. Imported here only: loading the package's jsii assembly (12 MB) is part of its cost."""
    from cdklabs.cdk_validator_cfnguard import CfnGuardValidator

    from infra.guards.control_tower import disabled_rules

    return CfnGuardValidator(control_tower_rules_enabled=True, disabled_rules=disabled_rules(config))


def register_control_tower(app: App, config: AppConfig) -> None:
    """Add the Control Tower plugin to ``app``: a control it fails that the list does not disable fails the synth."""
    from aws_cdk import Validations

    Validations.of(app).add_plugins(control_tower_plugin(config))
