"""Small shared pieces the constructs use: log retention, removal policy, ARNs of log groups, cdk-nag
acknowledgments."""

from __future__ import annotations

from aws_cdk import Acknowledgment, ArnFormat, RemovalPolicy, Stack, Validations
from aws_cdk import aws_logs as logs
from constructs import IConstruct

from infra.config import RETENTION_DAYS
from infra.facts.intrinsics import UNKNOWN, render


def retention(days: int) -> logs.RetentionDays:
    """The RetentionDays member for a day count the config validated against RETENTION_DAYS."""
    return logs.RetentionDays[RETENTION_DAYS[days]]


def data_removal_policy(destroy_data_on_delete: bool) -> RemovalPolicy:
    """Data-bearing resources (buckets, log groups, keys) are retained unless the config opts out."""
    return RemovalPolicy.DESTROY if destroy_data_on_delete else RemovalPolicy.RETAIN


def log_group_arn(scope: IConstruct, name: str) -> str:
    """The ARN of the log group (or group pattern) ``name`` in ``scope``'s stack: ``...:log-group:<name>``;
    ``name`` may end in ``:log-stream:*`` for the streams of the groups."""
    return Stack.of(scope).format_arn(service="logs", resource="log-group", resource_name=name,
                                      arn_format=ArnFormat.COLON_RESOURCE_NAME)


def nag_name(scope: IConstruct, value: str) -> str:
    """How cdk-nag prints a (possibly token) value in a finding ID, e.g. ``<BucketAB12.Arn>/prefix/*``.

    Acknowledgments must name the exact finding, and a finding on a resource ARN embeds the logical ID
    of the resource; this derives it instead of copying generated IDs into the code. A value with an intrinsic
    ``render`` does not know is refused: its acknowledgment could never match the finding.
    """
    name = render(Stack.of(scope).resolve(value))
    if UNKNOWN in name:
        raise ValueError(f"cannot name {value!r} in a cdk-nag finding: it renders as {name!r}")
    return name


def acknowledge(scope: IConstruct, finding: str, reason: str, pack: str = "AwsSolutions") -> None:
    """Acknowledge one cdk-nag finding on ``scope`` (and only its own resources) with a checkable reason."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{pack}::{finding}", reason=reason))
