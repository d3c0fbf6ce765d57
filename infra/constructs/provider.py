"""aws-cdk-lib's custom resource Provider framework as our custom resources use it: logged and acknowledged."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.constructs.common import acknowledge, nag_name


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
