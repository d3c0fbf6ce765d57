"""Small shared pieces the constructs use: log retention, removal policy, cdk-nag acknowledgments, the role of
one Kubernetes service account."""

from __future__ import annotations

from aws_cdk import Acknowledgment, ArnFormat, Aws, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

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


def service_account_role(
    scope: Construct, construct_id: str, *, cluster_name: str, namespace: str, service_account: str, description: str,
) -> iam.Role:
    """A role EKS Pod Identity gives only to ``namespace/service_account`` of the EKS cluster ``cluster_name``.

    Pod Identity tags every session with the cluster ARN, namespace and service account
    (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html, "List of session tags added by EKS Pod
    Identity"); the trust policy matches them as aws:RequestTag/<key>, as AWS's own example does
    (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html, "Setting Conditions"). aws:SourceAccount
    as on the add-on roles of observability. The cluster ARN is built from the name the caller's add-on already
    reads: no second cross-stack reference.
    """
    return iam.Role(
        scope, construct_id,
        assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com").with_conditions({"StringEquals": {
            "aws:SourceAccount": Aws.ACCOUNT_ID,
            "aws:RequestTag/eks-cluster-arn": Stack.of(scope).format_arn(
                service="eks", resource="cluster", resource_name=cluster_name),
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": service_account,
        }}).with_session_tags(),
        description=description,
    )
