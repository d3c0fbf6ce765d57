"""The AWS Control Tower proactive controls the product does not meet by default: one list, with the reason for
each and the config that meets it.

Control Tower's proactive controls are CloudFormation hooks; AWS publishes them as cfn-guard rules, and the CDK team
ships them with the cfn-guard binary as a policy-validation plugin: cdklabs-cdk-validator-cfnguard 0.0.62 (cfn-guard
3.1.1, its guard-version.json), rules under ``rules/control-tower/cfn-guard/<service>/ct-<service>-pr-<n>.guard``.
The plugin's ``disabledRules`` takes those file names (``ct-s3-pr-9``); ``stacks/validation.py`` registers it
with :func:`disabled_rules` of the config, so a control is off only where this list says why. Every other control
of the package holds for the default and all-features configs (the tests run the plugin over both).

``docs/safety.md`` renders this list (``render_markdown``; tests/safety/test_control_tower.py checks the two match).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infra.config import AppConfig

SWITCH = "compliance: control_tower"


@dataclass(frozen=True)
class Control:
    rule_file: str  # the plugin's name for the rule file: what disabledRules takes
    control_id: str  # Control Tower's identifier, as the rule's message gives it
    title: str
    resources: str  # what fails it, in this product
    reason: str  # why it is not met by default (or at all)
    met_by: str  # the config that meets it; "nothing" when nothing of the product can
    met: Callable[[AppConfig], bool]

    def row(self) -> str:
        cells = (f"`{self.control_id}`", self.title, self.resources, self.met_by, self.reason)
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _governed(config: AppConfig) -> bool:
    return config.compliance == "control_tower"


def _never(config: AppConfig) -> bool:
    return False


# S3's rules for a server access log destination (https://docs.aws.amazon.com/AmazonS3/latest/userguide/
# enable-server-access-logging.html, read as c2hans/aws-docs@9a3d9b40): "The destination bucket must use Amazon S3
# managed keys (SSE-S3)", "S3 buckets that have S3 Object Lock enabled can't be used as destination buckets for
# server access logs", "Your destination bucket should not have server access logging enabled".
_LOG_DESTINATION = ("S3 requires a server access log destination to use SSE-S3, to have no Object Lock and not "
                    "to log itself, so a log bucket the app creates cannot meet it while the lifecycle bucket meets "
                    "CT.S3.PR.2; `access_logs_bucket` sends the logs to an existing bucket instead")
_OWN_LOG_BUCKET = "the access log bucket the app creates (none with `access_logs_bucket`)"


def _own_log_bucket_gone(config: AppConfig) -> bool:
    return config.access_logs_bucket is not None


CONTROLS: tuple[Control, ...] = (
    Control("ct-s3-pr-2", "CT.S3.PR.2", "S3 bucket has server access logging", _OWN_LOG_BUCKET,
            _LOG_DESTINATION, "`access_logs_bucket`", _own_log_bucket_gone),
    Control("ct-s3-pr-9", "CT.S3.PR.9", "S3 bucket has Object Lock", _OWN_LOG_BUCKET + "; the lifecycle bucket "
            "too unless the switch is on", _LOG_DESTINATION + "; with the switch the lifecycle bucket has Object "
            "Lock (no default retention, so the upload's pruning still deletes)",
            SWITCH + " with `access_logs_bucket`", lambda config: _governed(config) and _own_log_bucket_gone(config)),
    Control("ct-s3-pr-10", "CT.S3.PR.10", "S3 bucket encrypted with a KMS key", _OWN_LOG_BUCKET,
            _LOG_DESTINATION + "; the lifecycle bucket uses SSE-KMS", "`access_logs_bucket`", _own_log_bucket_gone),
    Control("ct-s3-pr-4", "CT.S3.PR.4", "S3 bucket has event notifications", "both lifecycle buckets",
            "events nobody consumes by default", SWITCH + " (both buckets send their events to EventBridge)",
            _governed),
    Control("ct-lambda-pr-3", "CT.LAMBDA.PR.3", "Lambda function in a VPC", "the deploy-time functions: the "
            "scripts upload, the custom-resource providers' framework functions, the Grafana content provisioner, "
            "aws-cdk-lib's AwsCustomResource and CfnJson functions; the chart installer's functions run in the VPC "
            "but name subnets of the network stack, which the rule's template check refuses",
            "the functions reach AWS's APIs through the NAT gateways either way; in the VPC each needs ENI "
            "permissions, a security group, and subnets the template names by SSM dynamic references (the rule "
            "accepts only a string or a reference to a subnet of the same template), so only with the switch",
            SWITCH + " (every function in two control-plane subnets, named through SSM parameters of the network "
            "stack, with an HTTPS-only security group)", _governed),
    Control("ct-stepfunctions-pr-1", "CT.STEPFUNCTIONS.PR.1", "Step Functions state machine logs",
            "the readiness wait's state machine (aws-cdk-lib's Provider framework)", "its execution history is "
            "logged to a log group of its own only with the switch: the role then needs Step Functions' log "
            "delivery actions on '*'",
            SWITCH + " (its events, without execution data, to a retained, KMS-encrypted log group)", _governed),
    Control("ct-stepfunctions-pr-2", "CT.STEPFUNCTIONS.PR.2", "Step Functions state machine traced by X-Ray",
            "the readiness wait's state machine (aws-cdk-lib's Provider framework)", "X-Ray tracing only with the "
            "switch: aws-cdk-lib's Provider has no setting for it, so the switch sets it on the resource with the "
            "X-Ray actions aws-cdk-lib grants a traced state machine", SWITCH, _governed),
    Control("ct-eks-pr-1", "CT.EKS.PR.1", "EKS API endpoint not public", "the EKS cluster with "
            "`eks.endpoint: public_and_private`", "a public endpoint is a choice of the config",
            "`eks.endpoint: private` (the default; " + SWITCH + " refuses any other)",
            lambda config: config.eks.endpoint == "private"),
)


def met_only_with_access_logs_bucket(config: AppConfig) -> list[Control]:
    """The listed controls ``config`` fails that it would meet with an existing ``access_logs_bucket``: those the
    app's own access log bucket fails (S3's rules for a log destination), for the synth's warning."""
    elsewhere = config.model_copy(update={"access_logs_bucket": "an-existing-bucket"})
    return [control for control in CONTROLS if not control.met(config) and control.met(elsewhere)]


def disabled_rules(config: AppConfig) -> list[str]:
    """The plugin's rule files to leave out for ``config``: the listed controls it does not meet."""
    return [control.rule_file for control in CONTROLS if not control.met(config)]


def render_markdown() -> str:
    """The table docs/safety.md holds between its control-tower markers."""
    header = ("| control | what it asks | what fails it here | what meets it | why it is off |\n"
              "| --- | --- | --- | --- | --- |")
    return "\n".join([header, *(control.row() for control in CONTROLS)])
