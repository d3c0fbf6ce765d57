"""aws-cdk-lib's custom resource Provider framework as our custom resources use it: logged and acknowledged, with
the one code asset of their functions."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

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
    is_complete: lambda_.IFunction | None = None, query_interval: Duration | None = None,
    total_timeout: Duration | None = None, log_and_trace_waiter: bool = False,
) -> cr.Provider:
    """A ``Provider`` (ID ``Provider``) for ``on_event``, its framework functions logging to a group of ours
    (ID ``ProviderLogs``), and the framework's cdk-nag findings acknowledged on the resource they are on.

    With ``is_complete`` the provider is asynchronous: after ``on_event`` the framework's waiter state machine
    calls ``is_complete`` every ``query_interval`` until it answers complete or fails, and answers "Operation timed
    out" after ``total_timeout`` (aws-cdk-lib 2.275.0 custom-resources/lib/provider-framework: waiter-state-machine.js,
    runtime/framework.js).

    The framework functions and the waiter are aws-cdk-lib's: their policies, their permission to invoke our
    functions and their runtime are not ours to change, so each finding on them is acknowledged with the reason.

    ``log_and_trace_waiter`` (``compliance: control_tower``: AWS Control Tower's CT.STEPFUNCTIONS.PR.1 and .2): the
    waiter state machine logs its events (ALL, without execution data) to a log group of ours (ID ``WaiterLogs``,
    a local reference as the control's template check wants; ``waiterStateMachineLogOptions``, aws-cdk-lib 2.275.0
    provider.d.ts), and is traced by X-Ray: Provider has no tracing setting, so ``TracingConfiguration.Enabled`` is
    set on its ``AWS::StepFunctions::StateMachine`` with the X-Ray actions aws-cdk-lib's own ``StateMachine`` grants
    for ``tracingEnabled`` (aws-stepfunctions/lib/state-machine.js, buildTracingConfiguration). Neither property is
    create-only (cfn-lint's AWS::StepFunctions::StateMachine schema lists StateMachineName and StateMachineType), so
    turning the switch on updates the waiter in place.
    """
    provider = cr.Provider(
        scope, "Provider",
        on_event_handler=on_event,
        is_complete_handler=is_complete,
        query_interval=query_interval,
        total_timeout=total_timeout,
        log_group=logs.LogGroup(scope, "ProviderLogs", retention=log_retention, removal_policy=removal_policy),
        # The framework logs every event it gets, resource properties included (runtime/framework.js, onEvent:
        # log("onEventHandler", {...cfnRequest, ResponseURL: "..."}); isComplete likewise), through console.log, which
        # Lambda's JSON log format records at INFO. FATAL, aws-cdk-lib 2.275.0's default here (provider.js,
        # frameworkLambdaLoggingLevel), drops them; set explicitly so an upgrade that changes the default cannot
        # start writing chart values to the log group. The waiter's execution history stays off
        # (disableWaiterStateMachineLogging, default true) unless log_and_trace_waiter, and then has no execution
        # data.
        framework_lambda_logging_level=lambda_.ApplicationLogLevel.FATAL,
        disable_waiter_state_machine_logging=(not log_and_trace_waiter) if is_complete is not None else None,
        waiter_state_machine_log_options=cr.LogOptions(
            destination=logs.LogGroup(scope, "WaiterLogs", retention=log_retention, removal_policy=removal_policy),
            # ALL, which cdk-nag's AwsSolutions-SF1 asks for (CT.STEPFUNCTIONS.PR.1 takes ERROR or ALL); without
            # execution data (includeExecutionData, default false): no input or output of a check is logged.
            level=sfn.LogLevel.ALL) if log_and_trace_waiter and is_complete is not None else None,
    )
    framework = ["framework-onEvent"] + (["framework-isComplete", "framework-onTimeout"] if is_complete else [])
    invoked = [on_event] + ([is_complete] if is_complete else [])
    for name in framework:
        function = provider.node.find_child(name)
        acknowledge(
            function,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The custom resource framework function (aws-cdk-lib) uses the basic execution policy for its logs.",
        )
        for user_function in invoked:
            acknowledge(
                function,
                f"AwsSolutions-IAM5[Resource::{nag_name(scope, user_function.function_arn)}:*]",
                "The framework invokes the custom resource's functions and their versions (aws-cdk-lib's Provider).",
            )
        acknowledge(function, "AwsSolutions-L1",
                    "The framework function's runtime is set by aws-cdk-lib and moves with library upgrades.")
    if is_complete is not None:
        waiter = provider.node.find_child("waiter-state-machine")
        for name in ("framework-isComplete", "framework-onTimeout"):
            arn = provider.node.find_child(name).function_arn  # type: ignore[attr-defined]
            acknowledge(waiter, f"AwsSolutions-IAM5[Resource::{nag_name(scope, arn)}:*]",
                        "The framework's waiter state machine invokes its isComplete and onTimeout functions and "
                        "their versions (aws-cdk-lib's Provider).")
        if log_and_trace_waiter:
            _trace(waiter)
        else:
            acknowledge(waiter, "AwsSolutions-SF1",
                        "aws-cdk-lib's waiter has one task, the framework's isComplete function, which logs every "
                        "call to ProviderLogs; its own logging would need logs:* on '*' for the role (compliance: "
                        "control_tower turns it on).")
            acknowledge(waiter, "AwsSolutions-SF2",
                        "The waiter state machine is aws-cdk-lib's; Provider offers no X-Ray tracing setting for it "
                        "(compliance: control_tower sets it on the resource).")
    return provider


# What aws-cdk-lib 2.275.0's StateMachine grants its role for tracingEnabled (aws-stepfunctions/lib/state-machine.js,
# buildTracingConfiguration): X-Ray's trace and sampling actions, which take no resource.
XRAY_ACTIONS = ["xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
                "xray:GetSamplingTargets"]


def _trace(waiter: IConstruct) -> None:
    """X-Ray tracing on the Provider framework's waiter state machine, with its role's permission."""
    machine: sfn.CfnStateMachine = waiter.node.find_child("Resource")  # type: ignore[assignment]
    machine.tracing_configuration = sfn.CfnStateMachine.TracingConfigurationProperty(enabled=True)
    role: iam.Role = waiter.node.find_child("Role")  # type: ignore[assignment]
    role.add_to_policy(iam.PolicyStatement(sid="XRayTracing", actions=XRAY_ACTIONS, resources=["*"]))
    acknowledge(role, "AwsSolutions-IAM5[Resource::*]",
                "X-Ray's trace and sampling actions take no resource (aws-cdk-lib grants them on '*' for a traced "
                "state machine), and Step Functions' log delivery actions likewise (aws-cdk-lib's waiter).")
