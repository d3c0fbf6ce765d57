"""AWS's built-in CloudFormation template validation, built while the app's Python modules load.

`cdk synth` runs aws-cdk-lib's CloudFormation Validate plugin over every template. Left to aws-cdk-lib, its rule
engine is built during ``app.synth()`` (aws-cdk-lib 2.275.0 core/lib/private/synthesis-validation.js:
``pluginsToEvaluate`` takes ``CloudFormationValidatePlugin._singletonInstance()``), 1.4 to 2.1 s of Node.js time
in our measurements, with the whole construct tree in memory, while Python waits. Built here instead, it costs
the same Node.js process less (its heap is small then; its construction starts about 80 garbage collector marking
cycles, each a mark of the whole heap) and overlaps with Python importing the constructs, which needs no Node.js.

An instance registered on the app replaces aws-cdk-lib's own (``hasUserRegisteredCloudFormationValidatePlugin``
in the same file, an ``instanceof`` test; the aws_cdk README's "CloudFormationValidatePlugin" section registers
one the same way), built with the same default (``includeDefaultRules`` true). The findings and the
errors-versus-warnings rule (``@aws-cdk/core:validateAgainstDefaultRules``, cdk.json; applied by plugin name) are
the same, as the templates are; in ``validation-report.json`` its report comes first instead of last (plugins
registered on the app are listed before the default). One instance serves every app of a process: nothing in
it is per app, and aws-cdk-lib disposes of an engine only in its own test hooks.

aws-cdk-lib skips its own instance when ``CDK_VALIDATION`` is "false", which the CLI sets for
``cdk synth --no-validation`` (aws-cdk CLI 2.1148.1 lib/index.js: ``CDK_VALIDATION: "false"``); :func:`register`
honours it too. It cannot see an App's ``builtin_cloud_formation_validation=False`` and registers the plugin even
then (a test relies on that to show the registered plugin does the checking).

jsii's Python client sends one request at a time over one pipe and is not safe across threads (jsii 1.142.0
jsii/_kernel/providers/process.py: ``_NodeProcess.send``). Between :func:`start` and :func:`register` the calling
thread must not call into jsii; importing ``aws_cdk`` submodules and this project's modules does not, once the jsii
packages below are loaded (tests/stacks/test_validation_plugin.py checks it).
"""

from __future__ import annotations

import importlib
import os
import threading
import weakref
from concurrent.futures import Future
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_cdk import App, CloudFormationValidatePlugin

# Every jsii package the app's modules import. Importing one sends a `load` request to Node.js, so they are all
# imported before the engine is built on another thread.
JSII_PACKAGES = ("aws_cdk", "constructs", "cdk_nag", "aws_cdk.lambda_layer_kubectl_v33")

_lock = threading.Lock()
_future: Future[CloudFormationValidatePlugin] | None = None
# Apps given the plugin: a second instance on one app would fail its synth (DuplicateCloudFormationValidatePlugin).
_registered: weakref.WeakSet[App] = weakref.WeakSet()


def enabled() -> bool:
    """False under ``cdk synth --no-validation`` (the CLI sets CDK_VALIDATION=false), as aws-cdk-lib decides."""
    return os.environ.get("CDK_VALIDATION") != "false"


def _build(future: Future[CloudFormationValidatePlugin]) -> None:
    try:
        from aws_cdk import CloudFormationValidatePlugin

        future.set_result(CloudFormationValidatePlugin())
    except BaseException as error:  # handed to the thread that waits in plugin()
        future.set_exception(error)


def start() -> None:
    """Load the jsii packages here, then build the plugin on a background thread; once per process.

    Until :func:`plugin` (or :func:`register`) returns, the calling thread must make no jsii call.
    """
    global _future
    with _lock:
        if _future is not None or not enabled():
            return
        for name in JSII_PACKAGES:
            importlib.import_module(name)
        _future = Future()
        threading.Thread(target=_build, args=(_future,), name="cfn-validate-engine", daemon=True).start()


def plugin() -> CloudFormationValidatePlugin:
    """The process's one plugin: the one :func:`start` is building, or built now."""
    global _future
    with _lock:
        if _future is None:
            _future = Future()
            _build(_future)
        future = _future
    return future.result()


def register(app: App) -> None:
    """Give ``app`` the process's plugin in place of aws-cdk-lib's own, once; nothing under --no-validation."""
    if not enabled() or app in _registered:
        return
    from aws_cdk import Validations

    Validations.of(app).add_plugins(plugin())
    _registered.add(app)
