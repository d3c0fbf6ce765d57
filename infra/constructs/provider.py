"""aws-cdk-lib's custom resource Provider framework as our custom resources use it: logged and acknowledged, with
the one code asset of their functions."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.constructs.common import acknowledge, nag_name

# The deploy-time code of every custom resource function: the package infra/runtime, shipped as the top-level
# package ``runtime`` of one asset whose root is infra/ with everything but runtime/ left out (``exclude`` in
# aws-cdk-lib's glob mode: later patterns win, ``!`` takes a path back in). Each handler string names its module
# from there (``runtime.chart_installer.handler.on_event``): Lambda splits the string at its last dot and imports
# the rest with importlib.import_module
# (aws/aws-lambda-python-runtime-interface-client@0184e90396bbb34fafa2feedae2b4f65a24efb2f:awslambdaric/bootstrap.py,
# _get_handler). The modules import each other relatively (``..common.deadline``), so
# the same files run as ``infra.runtime`` in synth and tests; tests/chart_installer/test_packaging.py imports both
# handlers from a synthesized asset directory alone.
RUNTIME_DIR = Path(__file__).parents[1] / "runtime"
RUNTIME_ASSET_EXCLUDE = ("*", f"!{RUNTIME_DIR.name}", f"!{RUNTIME_DIR.name}/**", "__pycache__", "*.pyc")


def runtime_code() -> lambda_.Code:
    """The asset holding the ``runtime`` package (and nothing else of infra/) for a custom resource function."""
    return lambda_.Code.from_asset(str(RUNTIME_DIR.parent), exclude=list(RUNTIME_ASSET_EXCLUDE))


def logged_provider(
    scope: Construct, *, on_event: lambda_.IFunction, log_retention: logs.RetentionDays, removal_policy: RemovalPolicy,
) -> cr.Provider:
    """A ``Provider`` (ID ``Provider``) for ``on_event``, its framework function logging to a group of ours
    (ID ``ProviderLogs``), and the framework's three cdk-nag findings acknowledged on that function alone.

    The framework function is aws-cdk-lib's: its policy, its permission to invoke ``on_event`` and its runtime
    are not ours to change, so each finding on it is acknowledged with the reason.
    """
    provider = cr.Provider(
        scope, "Provider",
        on_event_handler=on_event,
        log_group=logs.LogGroup(scope, "ProviderLogs", retention=log_retention, removal_policy=removal_policy),
    )
    framework = provider.node.find_child("framework-onEvent")
    acknowledge(
        framework,
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        "The custom resource framework function (aws-cdk-lib) uses the basic execution policy for its logs.",
    )
    acknowledge(
        framework,
        f"AwsSolutions-IAM5[Resource::{nag_name(scope, on_event.function_arn)}:*]",
        "The framework invokes the custom resource's function and its versions (aws-cdk-lib's Provider).",
    )
    acknowledge(framework, "AwsSolutions-L1",
                "The framework function's runtime is set by aws-cdk-lib and moves with library upgrades.")
    return provider
