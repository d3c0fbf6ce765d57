"""Observability for a HyperPod cluster: Container Insights, Managed Prometheus and Grafana, alerts, dashboard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import jsii
from aws_cdk import Aws, CfnOutput, CfnTag, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import custom_resources as cr
from aws_cdk.aws_eks import CfnAddon
from aws_cdk.interfaces import aws_events as events_refs
from constructs import Construct

from infra.config import (
    SAGEMAKER_TAG_KEY,
    AlertsConfig,
    GrafanaConfig,
    GrafanaNetworkAccess,
    PrometheusConfig,
    grafana_needs_prometheus,
)
from infra.config.observability_addon import addon_configuration, prometheus_endpoint
from infra.constructs.addon import EksAddon
from infra.constructs.common import acknowledge, log_group_arn, nag_name, retention
from infra.constructs.grafana_content import GrafanaAdminRevocation, GrafanaContent
from infra.facts.addons import CONTAINER_INSIGHTS, HYPERPOD_OBSERVABILITY
from infra.facts.names import cluster_log_groups, container_insights_log_groups

EVENT_SOURCE = "aws.sagemaker"
EVENT_DETAIL_TYPE = "SageMaker HyperPod Cluster Event"

# SageMaker=true on the AMP workspace, the Grafana workspace and the HyperPod observability add-on, as AWS's Terraform
# tags them (awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/
# 7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/observability/prometheus_workspace.tf lines 12-14,
# grafana_workspace.tf lines 21-23, eks_addon.tf lines 61-63). The AWS managed policy
# AmazonSageMakerHyperPodObservabilityAdminAccess (v2, https://docs.aws.amazon.com/aws-managed-policy/latest/reference/
# AmazonSageMakerHyperPodObservabilityAdminAccess.html) tests the tag: aps:CreateWorkspace, grafana:CreateWorkspace and
# eks:CreateAddon only with aws:RequestTag/SageMaker = true, and eks:UpdatePodIdentityAssociation and
# eks:DeletePodIdentityAssociation only on associations with aws:ResourceTag/SageMaker = true (statement
# EKSAddonPodIdentityAccess). The add-on's association is created by EKS from the add-on's PodIdentityAssociations,
# which take no tags in CloudFormation; whether EKS copies the add-on's tags onto it is unverified. Adding the tag to a
# deployed workspace or add-on is an update in place: cfn-lint's schemas of AWS::APS::Workspace,
# AWS::Grafana::Workspace and AWS::EKS::Addon (schema date 2026-10-20) mark Tags tagUpdatable, not create-only.
SAGEMAKER_TAGS = {SAGEMAKER_TAG_KEY: "true"}


class ContainerInsights(Construct):
    """The ``amazon-cloudwatch-observability`` add-on (GPU and EFA metrics included) on its own Pod Identity role.

    The agent's role may put metrics only in the Container Insights namespaces and write logs only under
    ``/aws/containerinsights/<cluster>/``; those log groups are created here with ``log_retention``.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, eks_cluster_name: str, eks_cluster_arn: str,
        log_retention: logs.RetentionDays, removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        prefix = f"/aws/containerinsights/{eks_cluster_name}"
        self.log_groups = [
            logs.LogGroup(self, f"Logs-{name.rsplit('/', 1)[1]}", log_group_name=name, retention=log_retention,
                          removal_policy=removal_policy)
            for name in container_insights_log_groups(eks_cluster_name)
        ]
        self.agent = EksAddon(
            self, "Addon", addon=CONTAINER_INSIGHTS, eks_cluster_name=eks_cluster_name,
            eks_cluster_arn=eks_cluster_arn, role_id="AgentRole",
            role_description="CloudWatch agent of Container Insights (Pod Identity)",
        )
        assert self.agent.role is not None
        self.role = self.agent.role
        self.addon = self.agent.addon
        self.policy = iam.Policy(self, "AgentPolicy", roles=[self.role], statements=[
            iam.PolicyStatement(
                sid="ContainerInsightsMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": ["ContainerInsights", "CWAgent"]}},
            ),
            iam.PolicyStatement(
                sid="ContainerInsightsLogs",
                # The agents (Fluent Bit, CloudWatch agent) create their groups and set retention themselves.
                actions=["logs:CreateLogGroup", "logs:PutRetentionPolicy", "logs:CreateLogStream",
                         "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[log_group_arn(self, f"{prefix}/*"), log_group_arn(self, f"{prefix}/*:log-stream:*")],
            ),
            iam.PolicyStatement(
                sid="DescribeNodes",
                actions=["ec2:DescribeVolumes", "ec2:DescribeTags", "ec2:DescribeInstances", "logs:DescribeLogGroups"],
                resources=["*"],
            ),
        ])
        acknowledge(self.policy, "AwsSolutions-IAM5[Resource::*]",
                    "PutMetricData (limited to the ContainerInsights/CWAgent namespaces by condition), "
                    "ec2:Describe* and logs:DescribeLogGroups have no resource-level permissions.")
        for resource in (f"{prefix}/*", f"{prefix}/*:log-stream:*"):
            acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{nag_name(self, log_group_arn(self, resource))}]",
                        "The agent names streams per node and pod; the groups are this cluster's only.")
        # The agents write to the groups this stack owns, so that their retention is the stack's; the policy first.
        self.addon.node.add_dependency(*self.log_groups, self.policy)


class ManagedPrometheus(Construct):
    """An AMP workspace (customer-managed key, logging on) and the collector role of the HyperPod add-on.

    ``add_hyperpod_observability_addon()`` installs the add-on that feeds the workspace. Its collector runs
    on a Pod Identity role allowed ``aps:RemoteWrite`` on this workspace only, plus the HyperPod cluster log
    groups the add-on documents. With a Grafana workspace the add-on is told its name and ARN (``amgWorkspace``)
    as AWS's setups do; the data sources and dashboards are provisioned by ``GrafanaContent``
    (infra/constructs/grafana_content.py).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, name: str, eks_cluster_name: str, eks_cluster_arn: str,
        hyperpod_cluster_name: str, metrics: PrometheusConfig | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN, key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = key or kms.Key(self, "Key", enable_key_rotation=True, removal_policy=removal_policy,
                                  description=f"Amazon Managed Service for Prometheus workspace {name}")
        self.log_group = logs.LogGroup(self, "WorkspaceLogs", retention=log_retention,
                                       removal_policy=removal_policy)
        self.workspace = aps.CfnWorkspace(
            self, "Workspace", alias=name, kms_key_arn=self.key.key_arn,
            logging_configuration=aps.CfnWorkspace.LoggingConfigurationProperty(
                log_group_arn=f"{self.log_group.log_group_arn}"),
            tags=[CfnTag(key=k, value=v) for k, v in SAGEMAKER_TAGS.items()],
        )
        self.workspace.apply_removal_policy(removal_policy)
        self.metrics = metrics or PrometheusConfig()
        self.eks_cluster_name = eks_cluster_name
        self.eks_cluster_arn = eks_cluster_arn
        self.hyperpod_cluster_name = hyperpod_cluster_name
        self.collector: EksAddon | None = None
        self.collector_role: iam.Role | None = None
        self.collector_policy: iam.Policy | None = None
        self.addon: CfnAddon | None = None

    def add_hyperpod_observability_addon(self, grafana: ManagedGrafana | None) -> CfnAddon:
        """Install the HyperPod observability add-on writing to this workspace, its collector on a Pod Identity role
        (after the HyperPod cluster)."""
        # AWS's module strips the endpoint's trailing slash (trimsuffix in main.tf); the attribute has one, so the
        # endpoint is built from the workspace ID instead.
        endpoint = prometheus_endpoint(Aws.REGION, Aws.URL_SUFFIX, self.workspace.attr_workspace_id)
        configuration = addon_configuration(
            self.metrics, prometheus_endpoint=endpoint, prometheus_arn=self.workspace.attr_arn,
            grafana_workspace=(grafana.workspace_name, grafana.workspace_arn) if grafana else None,
        )
        self.collector = EksAddon(
            self, "HyperPodObservabilityAddon", addon=HYPERPOD_OBSERVABILITY, eks_cluster_name=self.eks_cluster_name,
            eks_cluster_arn=self.eks_cluster_arn, configuration=configuration, role_id="CollectorRole",
            role_description="HyperPod observability collector: remote write to one AMP workspace (Pod Identity)",
            tags=SAGEMAKER_TAGS,
        )
        assert self.collector.role is not None
        self.collector_role = self.collector.role
        # This HyperPod cluster's groups only (/aws/sagemaker/Clusters/<name>/<id>), not every cluster's.
        clusters_prefix = f"/aws/sagemaker/Clusters/{self.hyperpod_cluster_name}/*"
        clusters_logs = [log_group_arn(self, clusters_prefix), log_group_arn(self, f"{clusters_prefix}:log-stream:*")]
        self.collector_policy = iam.Policy(self, "CollectorPolicy", roles=[self.collector_role], statements=[
            iam.PolicyStatement(sid="RemoteWriteThisWorkspace", actions=["aps:RemoteWrite"],
                                resources=[self.workspace.attr_arn]),
            iam.PolicyStatement(
                sid="HyperPodClusterLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams",
                         "logs:PutLogEvents", "logs:GetLogEvents", "logs:FilterLogEvents", "logs:StartQuery",
                         "logs:GetQueryResults"],
                resources=clusters_logs,
            ),
            iam.PolicyStatement(sid="LogsWithoutResourceScope",
                                actions=["logs:DescribeLogGroups", "logs:StopQuery"],
                                resources=["*"]),
        ])
        acknowledge(self.collector_policy, "AwsSolutions-IAM5[Resource::*]",
                    "logs:DescribeLogGroups and logs:StopQuery have no resource-level permissions.")
        for resource in clusters_logs:
            acknowledge(self.collector_policy, f"AwsSolutions-IAM5[Resource::{nag_name(self, resource)}]",
                        "HyperPod names the cluster log group after the cluster id, known only after creation.")
        self.addon = self.collector.addon
        self.addon.node.add_dependency(self.collector_policy)
        return self.addon


class ManagedGrafana(Construct):
    """An Amazon Managed Grafana workspace reading one AMP workspace and CloudWatch.

    Authentication: IAM Identity Center by default, or SAML. The workspace role may query only
    ``prometheus_workspace_arn``, read CloudWatch metrics, and query the log groups ``log_group_names`` (name
    patterns, see ``cluster_log_groups``). With ``network_access`` only the listed prefix lists and VPC
    endpoints reach the workspace. Identity Center users and groups of ``admin_user_ids`` and
    ``admin_group_ids`` are made admins through a custom resource (CloudFormation has no resource for it); those an
    update removes lose the role again (``GrafanaAdminRevocation``).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, name: str, prometheus_workspace_arn: str,
        log_group_names: Sequence[str], authentication: Literal["AWS_SSO", "SAML"] = "AWS_SSO",
        admin_user_ids: Sequence[str] = (), admin_group_ids: Sequence[str] = (),
        network_access: GrafanaNetworkAccess | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self, "WorkspaceRole",
            assumed_by=iam.ServicePrincipal("grafana.amazonaws.com").with_conditions(
                {"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}),
            description="Amazon Managed Grafana: read one Prometheus workspace and CloudWatch",
        )
        # What the provisioned dashboards and alert rules query is in infra/facts/grafana_queries.py (ACTIONS, with
        # its sources); tests/grafana_content/test_dashboard_permissions.py checks every query of them against this
        # policy. Resource types are the Service Authorization Reference's as bundled in parliament 1.6.4
        # (iam_definition.json): every aps action below takes workspace* (arn:${Partition}:aps:${Region}:${Account}:
        # workspace/${WorkspaceId}); cloudwatch:GetMetricData, ListMetrics and ec2:DescribeRegions take none (*).
        # Not granted, although AWS's Terraform grants them (modules/observability/iam_roles.tf, awslabs/
        # awsome-distributed-training@0edaf15): cloudwatch:GetMetricStatistics and DescribeAlarmHistory (no
        # provisioned query calls them: grafana_queries.py says why), the Alertmanager reads and silence writes
        # (no Alertmanager data source is provisioned), and every workspace of the account (this one only).
        self.policy = iam.Policy(self, "WorkspacePolicy", roles=[self.role], statements=[
            iam.PolicyStatement(
                sid="QueryThisPrometheusWorkspace",
                # aps:ListRules: the dashboards' alert list panels read the workspace's rules (grafana_queries.py).
                actions=["aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata",
                         "aps:DescribeWorkspace", "aps:ListRules"],
                resources=[prometheus_workspace_arn],
            ),
            iam.PolicyStatement(
                sid="ReadCloudWatch",
                actions=["aps:ListWorkspaces", "cloudwatch:DescribeAlarmsForMetric", "cloudwatch:DescribeAlarms",
                         "cloudwatch:ListMetrics", "cloudwatch:GetMetricData", "cloudwatch:GetInsightRuleReport",
                         "logs:DescribeLogGroups", "logs:StopQuery", "ec2:DescribeTags", "ec2:DescribeInstances",
                         "ec2:DescribeRegions", "tag:GetResources"],
                resources=["*"],
            ),
            # The logs actions of AmazonGrafanaCloudWatchAccess (https://docs.aws.amazon.com/aws-managed-policy/
            # latest/reference/AmazonGrafanaCloudWatchAccess.html) that take a resource, on this cluster's groups
            # only. Resource types from the Service Authorization Reference as bundled in parliament 1.6.4
            # (iam_definition.json): StartQuery, GetQueryResults, GetLogGroupFields on log-group;
            # GetLogEvents on log-stream; DescribeLogGroups and StopQuery on * (above).
            iam.PolicyStatement(
                sid="QueryThisClustersLogs",
                actions=["logs:StartQuery", "logs:GetQueryResults", "logs:GetLogGroupFields", "logs:GetLogEvents"],
                resources=[log_group_arn(self, f"{group}{suffix}")
                           for group in log_group_names for suffix in ("", ":*")],
            ),
        ])
        acknowledge(self.policy, "AwsSolutions-IAM5[Resource::*]",
                    "Metric reads, logs:DescribeLogGroups and logs:StopQuery have no resource scoping "
                    "(as in AmazonGrafanaCloudWatchAccess); log queries are limited to this cluster's groups.")
        for group in log_group_names:
            for suffix in ("", ":*"):
                if "*" in group + suffix:
                    acknowledge(self.policy, "AwsSolutions-IAM5[Resource::"
                                f"{nag_name(self, log_group_arn(self, f'{group}{suffix}'))}]",
                                "A group prefix of this cluster (names carry the cluster name) and its streams.")
        access = network_access
        network_access_control = (
            grafana.CfnWorkspace.NetworkAccessControlProperty(
                prefix_list_ids=access.prefix_list_ids or None, vpce_ids=access.vpce_ids or None)
            if access is not None else None
        )
        self.workspace = grafana.CfnWorkspace(
            self, "Workspace", name=name, account_access_type="CURRENT_ACCOUNT",
            authentication_providers=[authentication], permission_type="CUSTOMER_MANAGED",
            role_arn=self.role.role_arn, data_sources=["PROMETHEUS", "CLOUDWATCH"],
            description=f"Dashboards of HyperPod cluster {name}",
            network_access_control=network_access_control,
            tags=[grafana.CfnWorkspace.TagsItemsProperty(key=k, value=v) for k, v in SAGEMAKER_TAGS.items()],
        )
        self.workspace_name = name
        self.workspace_arn = Stack.of(self).format_arn(service="grafana", resource="/workspaces",
                                                       resource_name=self.workspace.attr_id)
        self.url = Fn.join("", ["https://", self.workspace.attr_endpoint])
        self.admin_assignment: cr.AwsCustomResource | None = None
        self.admin_revocation: GrafanaAdminRevocation | None = None
        if admin_user_ids or admin_group_ids:
            self._assign_admins(admin_user_ids, admin_group_ids, log_retention, removal_policy)

    def _assign_admins(self, admin_user_ids: Sequence[str], admin_group_ids: Sequence[str],
                       log_retention: logs.RetentionDays,
                       removal_policy: RemovalPolicy) -> None:
        def batch(action: str) -> dict[str, object]:
            users = [{"id": u, "type": "SSO_USER"} for u in admin_user_ids]
            users += [{"id": g, "type": "SSO_GROUP"} for g in admin_group_ids]
            return {"workspaceId": self.workspace.attr_id,
                    "updateInstructionBatch": [{"action": action, "role": "ADMIN", "users": users}]}

        self.admin_assignment = cr.AwsCustomResource(
            self, "Admins",
            on_update=cr.AwsSdkCall(service="grafana", action="UpdatePermissions", parameters=batch("ADD"),
                                    physical_resource_id=cr.PhysicalResourceId.of(
                                        Fn.join("-", [self.workspace.attr_id, "admins"]))),
            on_delete=cr.AwsSdkCall(service="grafana", action="UpdatePermissions", parameters=batch("REVOKE")),
            policy=cr.AwsCustomResourcePolicy.from_statements([iam.PolicyStatement(
                actions=["grafana:UpdatePermissions"], resources=[self.workspace_arn])]),
            install_latest_aws_sdk=False,
            # Its own group, created before the function: see LifecycleScripts for why not Lambda's default.
            log_group=logs.LogGroup(self, "AdminsLogs", retention=log_retention, removal_policy=removal_policy),
        )
        # ADD never takes anything back: the users and groups an update removes lose ADMIN here, after the grant.
        self.admin_revocation = GrafanaAdminRevocation(
            self, "AdminRevocation", workspace_id=self.workspace.attr_id, workspace_arn=self.workspace_arn,
            admin_user_ids=admin_user_ids, admin_group_ids=admin_group_ids,
            log_retention=log_retention, removal_policy=removal_policy)
        self.admin_revocation.node.add_dependency(self.admin_assignment)
        # The SDK-call function is a per-stack singleton of aws-cdk-lib.
        handler = next(c for c in Stack.of(self).node.children if c.node.id.startswith("AWS679f53fac002430cb0da5b7"))
        acknowledge(
            handler,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "AwsCustomResource's function (aws-cdk-lib) uses the basic execution policy only for its own logs.",
        )


@jsii.implements(events.IRuleTarget)
class _TopicWithoutGrant:
    """An SNS topic as a rule target, without the unconditioned topic-policy grant ``targets.SnsTopic`` adds."""

    def __init__(self, topic: sns.ITopic, message: events.RuleTargetInput) -> None:
        self.topic = topic
        self.message = message

    def bind(self, rule: events_refs.IRuleRef, id: str | None = None) -> events.RuleTargetConfig:  # noqa: A002 (jsii name)
        return events.RuleTargetConfig(arn=self.topic.topic_arn, input=self.message)


class HyperPodAlerts(Construct):
    """HyperPod cluster events of one cluster at the configured levels, readable, to an encrypted SNS topic.

    Also an alarm on Container Insights' failed node count of the EKS cluster. A new key allows EventBridge
    and CloudWatch to publish; a ``key`` passed in must already allow them (an imported key's policy cannot
    be changed from here).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, hyperpod_cluster_name: str, eks_cluster_name: str,
        levels: Sequence[Literal["Info", "Warn", "Error"]] = ("Error",), email: str | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN, key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = key or kms.Key(self, "Key", enable_key_rotation=True, removal_policy=removal_policy,
                                  description=f"Alerts topic of HyperPod cluster {hyperpod_cluster_name}")
        # EventBridge and CloudWatch alarms publish to the encrypted topic with this key. Their KMS calls carry
        # no aws:SourceAccount, so a condition on it would silently drop every alert; the topic policy below
        # limits who may publish.
        for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com"):
            self.key.add_to_resource_policy(iam.PolicyStatement(
                sid=f"Publish{service.split('.')[0].capitalize()}",
                principals=[iam.ServicePrincipal(service)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            ))
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True,
                               display_name=f"HyperPod {hyperpod_cluster_name} alerts")
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self.rule = events.Rule(
            self, "ClusterEvents",
            description=f"HyperPod cluster events of {hyperpod_cluster_name} at levels {', '.join(levels)}",
            event_pattern=events.EventPattern(
                source=[EVENT_SOURCE], detail_type=[EVENT_DETAIL_TYPE],
                detail={"EventDetails": {"ClusterName": [hyperpod_cluster_name], "EventLevel": list(levels)}},
            ),
        )
        details = "detail.EventDetails"
        message = events.RuleTargetInput.from_text(
            f"HyperPod {events.EventField.from_path(f'$.{details}.EventLevel')} event on cluster "
            f"{events.EventField.from_path(f'$.{details}.ClusterName')}, "
            f"group {events.EventField.from_path(f'$.{details}.InstanceGroupName')}, "
            f"instance {events.EventField.from_path(f'$.{details}.InstanceId')}: "
            f"{events.EventField.from_path(f'$.{details}.Description')} "
            f"(at {events.EventField.from_path('$.time')}, event {events.EventField.from_path(f'$.{details}.EventId')})"
        )
        self.rule.add_target(_TopicWithoutGrant(self.topic, message))
        # EventBridge may publish for this rule only: aws:SourceArn is the rule's ARN, as in EventBridge's own
        # resource-policy examples (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html).
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="RulePublishes", principals=[iam.ServicePrincipal("events.amazonaws.com")],
            actions=["sns:Publish"], resources=[self.topic.topic_arn],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                        "ArnEquals": {"aws:SourceArn": self.rule.rule_arn}},
        ))
        self.failed_nodes_alarm = cloudwatch.Alarm(
            self, "FailedNodes",
            alarm_description=f"Kubernetes nodes of {eks_cluster_name} reported failed by Container Insights",
            metric=cloudwatch.Metric(namespace="ContainerInsights", metric_name="cluster_failed_node_count",
                                     dimensions_map={"ClusterName": eks_cluster_name}, statistic="Maximum",
                                     period=Duration.minutes(5)),
            threshold=0, comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1, treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.failed_nodes_alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        # A topic policy replaces SNS's default one: CloudWatch alarms need their own grant to publish.
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AlarmsPublish", principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"], resources=[self.topic.topic_arn],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                        "ArnLike": {"aws:SourceArn": self.failed_nodes_alarm.alarm_arn}},
        ))


class ClusterDashboard(Construct):
    """A CloudWatch dashboard built in the template: GPU, EFA and node panels; HyperPod event counts when
    ``alert_rule`` is given."""

    def __init__(
        self, scope: Construct, construct_id: str, *, name: str, eks_cluster_name: str,
        alert_rule: events.Rule | None,
    ) -> None:
        super().__init__(scope, construct_id)

        def metric(metric_name: str, statistic: str = "Average") -> cloudwatch.Metric:
            return cloudwatch.Metric(namespace="ContainerInsights", metric_name=metric_name,
                                     dimensions_map={"ClusterName": eks_cluster_name}, statistic=statistic,
                                     period=Duration.minutes(5))

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=name)
        events_note = "; HyperPod events from EventBridge." if alert_rule is not None else "."
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(markdown=f"# HyperPod cluster {name}\nEKS cluster `{eks_cluster_name}`: "
                                  f"Container Insights metrics{events_note}", width=24, height=2),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(title="GPU utilisation (%)", width=12,
                                   left=[metric("node_gpu_utilization"), metric("node_gpu_utilization", "Maximum")]),
            cloudwatch.GraphWidget(title="GPU memory utilisation (%)", width=12,
                                   left=[metric("node_gpu_memory_utilization")]),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(title="EFA traffic (bytes/s)", width=12,
                                   left=[metric("node_efa_rx_bytes", "Sum"), metric("node_efa_tx_bytes", "Sum")]),
            cloudwatch.GraphWidget(title="Nodes", width=12,
                                   left=[metric("cluster_node_count", "Maximum"),
                                         metric("cluster_failed_node_count", "Maximum")]),
        )
        if alert_rule is not None:
            self.dashboard.add_widgets(cloudwatch.GraphWidget(
                title="HyperPod events alerted", width=24,
                left=[cloudwatch.Metric(namespace="AWS/Events", metric_name="TriggeredRules",
                                        dimensions_map={"RuleName": alert_rule.rule_name}, statistic="Sum",
                                        period=Duration.minutes(5))],
            ))
        self.url = Fn.join("", ["https://", Aws.REGION, ".console.aws.amazon.com/cloudwatch/home?region=",
                                Aws.REGION, "#dashboards:name=", name])


class HyperPodObservability(Construct):
    """Observability of one HyperPod cluster and its EKS cluster; each piece optional.

    ``container_insights`` and ``dashboard`` switch those pieces; ``prometheus``, ``grafana`` and ``alerts``
    are the validated settings of the other pieces (the structs the config file uses too), ``None`` for off.
    Grafana needs Prometheus (its dashboards read that workspace) and is refused without it.
    Create it after the HyperPod cluster (the add-ons need nodes): in this app its stack depends on the
    HyperPod stack. Public attributes are None for pieces switched off.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, name: str, eks_cluster_name: str, eks_cluster_arn: str,
        hyperpod_cluster_name: str, container_insights: bool = True, prometheus: PrometheusConfig | None = None,
        grafana: GrafanaConfig | None = None, alerts: AlertsConfig | None = None, dashboard: bool = True,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        grafana_needs_prometheus(grafana, prometheus)
        self.container_insights = (
            ContainerInsights(self, "ContainerInsights", eks_cluster_name=eks_cluster_name,
                              eks_cluster_arn=eks_cluster_arn,
                              log_retention=log_retention, removal_policy=removal_policy)
            if container_insights else None
        )
        self.prometheus = (
            ManagedPrometheus(self, "Prometheus", metrics=prometheus, name=name,
                              eks_cluster_name=eks_cluster_name, eks_cluster_arn=eks_cluster_arn,
                              log_retention=retention(prometheus.log_retention_days),
                              removal_policy=removal_policy, hyperpod_cluster_name=hyperpod_cluster_name)
            if prometheus is not None else None
        )
        self.grafana = None
        if grafana is not None and self.prometheus is not None:
            self.grafana = ManagedGrafana(
                self, "Grafana", name=name, authentication=grafana.authentication,
                admin_user_ids=grafana.admin_user_ids, admin_group_ids=grafana.admin_group_ids,
                network_access=grafana.network_access,
                prometheus_workspace_arn=self.prometheus.workspace.attr_arn,
                log_group_names=cluster_log_groups(eks_cluster_name, hyperpod_cluster_name),
                log_retention=log_retention, removal_policy=removal_policy)
        self.grafana_content = None
        if self.grafana is not None and self.prometheus is not None and grafana is not None \
                and grafana.provision_dashboards:
            self.grafana_content = GrafanaContent(
                self, "GrafanaContent", workspace_id=self.grafana.workspace.attr_id,
                workspace_endpoint=self.grafana.workspace.attr_endpoint, workspace_arn=self.grafana.workspace_arn,
                prometheus_workspace_id=self.prometheus.workspace.attr_workspace_id,
                s3_source=grafana.dashboards_s3_source, log_retention=log_retention,
                removal_policy=removal_policy,
            )
        if self.prometheus is not None:
            self.prometheus.add_hyperpod_observability_addon(self.grafana)
        self.alerts = (
            HyperPodAlerts(self, "Alerts", levels=alerts.levels, email=alerts.email,
                           hyperpod_cluster_name=hyperpod_cluster_name, eks_cluster_name=eks_cluster_name,
                           removal_policy=removal_policy)
            if alerts is not None else None
        )
        self.dashboard = (
            ClusterDashboard(self, "Dashboard", name=name, eks_cluster_name=eks_cluster_name,
                             alert_rule=self.alerts.rule if self.alerts else None)
            if dashboard else None
        )
        if self.grafana is not None:
            CfnOutput(self, "GrafanaUrl", value=self.grafana.url, description="Amazon Managed Grafana URL")
        if self.prometheus is not None:
            CfnOutput(self, "PrometheusEndpoint", value=self.prometheus.workspace.attr_prometheus_endpoint,
                      description="Amazon Managed Service for Prometheus endpoint")
        if self.alerts is not None:
            CfnOutput(self, "AlertsTopicArn", value=self.alerts.topic.topic_arn, description="SNS topic of alerts")
        if self.dashboard is not None:
            CfnOutput(self, "DashboardUrl", value=self.dashboard.url, description="CloudWatch dashboard URL")
