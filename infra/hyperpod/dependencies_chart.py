"""The HyperPod dependencies Helm chart, installed on the EKS cluster by a custom resource before HyperPod."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import CustomResource, Duration, RemovalPolicy, Size, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import custom_resources as cr
from aws_cdk.lambda_layer_kubectl_v33 import KubectlV33Layer
from constructs import Construct

from infra.common import acknowledge, nag_name
from infra.config import ChartConfig

RELEASE_NAME = "hyperpod-dependencies"
NAMESPACE = "kube-system"
HANDLER_DIR = Path(__file__).parent / "chart_installer"
# Helm's --wait must end before the 15-minute Lambda limit, or the release is left pending.
HELM_TIMEOUT_MINUTES = 13


class HyperPodDependenciesChart(Construct):
    """Installs the HyperPod dependencies chart (release ``hyperpod-dependencies`` in ``kube-system``).

    A Lambda-backed custom resource (``chart_installer/handler.py``, with helm from the kubectl layer)
    runs ``helm upgrade --install`` and ``helm uninstall`` with ``--namespace`` every time and reports any
    helm failure as a failure. The chart comes from, per ``ChartConfig.source``:
      - ``git`` (default): the public repository at the pinned commit ``revision`` (never a branch);
      - ``oci``: ``oci_uri`` at the pinned ``version`` (for teams that mirror the chart);
      - ``local``: a chart directory in this repository, uploaded as a CDK asset.
    Synth stays offline: nothing is fetched until the custom resource runs in the account.
    ``health-monitoring-agent.region`` is always set to the stack's region.

    The function runs in ``subnets`` (private, with a route to the chart's sources) with its own security
    group, which is allowed HTTPS into ``cluster_security_group``; its role gets an EKS access entry with
    cluster-admin scope, and the release waits for that entry. Make the HyperPod cluster depend on
    ``self.release``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        chart: ChartConfig,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        cluster_security_group: ec2.ISecurityGroup,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=vpc, allow_all_outbound=False,
            description="HyperPod dependencies chart installer: HTTPS to the EKS API and chart sources",
        )
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "EKS API, chart sources")
        # The rule lives in this stack, so the cluster's stack does not learn about the installer.
        ec2.CfnSecurityGroupIngress(
            self, "ApiFromInstaller",
            group_id=cluster_security_group.security_group_id,
            source_security_group_id=self.security_group.security_group_id,
            ip_protocol="tcp", from_port=443, to_port=443,
            description="EKS API from the HyperPod dependencies chart installer",
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        self.role = iam.Role(
            self, "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Installs the HyperPod dependencies Helm chart on the EKS cluster",
        )
        self.function = lambda_.Function(
            self, "Function",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.X86_64,
            handler="handler.on_event",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            layers=[KubectlV33Layer(self, "KubectlLayer")],
            timeout=Duration.minutes(15),
            memory_size=1024,
            ephemeral_storage_size=Size.gibibytes(2),
            role=self.role,
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=list(subnets)),
            security_groups=[self.security_group],
            log_group=self.log_group,
            environment={"HELM_BIN": "/opt/helm/helm"},
        )
        self.role.add_to_policy(iam.PolicyStatement(
            sid="DescribeThisCluster", actions=["eks:DescribeCluster"], resources=[cluster.cluster_arn],
        ))
        # The Lambda service needs these to attach the function to the VPC; ec2 ENI actions have no
        # resource ARN before the ENI exists.
        self.role.add_to_policy(iam.PolicyStatement(
            sid="LambdaVpcAccess",
            actions=["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
                     "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"],
            resources=["*"],
        ))
        self.log_group.grant_write(self.role)

        properties: dict[str, Any] = {
            "ClusterName": cluster.cluster_name,
            "Region": stack.region,
            "ReleaseName": RELEASE_NAME,
            "Namespace": NAMESPACE,
            "TimeoutMinutes": str(HELM_TIMEOUT_MINUTES),
            "Values": json.dumps(chart.values, sort_keys=True),
        }
        if chart.source == "git":
            properties.update(Source="git", GitRepository=chart.git_repository, GitRevision=chart.revision,
                              ChartPath=chart.chart_path)
        elif chart.source == "oci":
            properties.update(Source="oci", OciChartUri=chart.oci_uri, ChartVersion=chart.version)
        else:
            assert chart.local_path is not None
            asset = s3_assets.Asset(self, "ChartAsset", path=chart.local_path)
            asset.grant_read(self.role)
            properties.update(Source="s3", AssetBucket=asset.s3_bucket_name, AssetKey=asset.s3_object_key)

        self.access_entry = eks.AccessEntry(
            self, "ClusterAccess",
            cluster=cluster,
            principal=self.role.role_arn,
            access_policies=[eks.AccessPolicy.from_access_policy_name(
                "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER)],
        )
        self.provider = cr.Provider(
            self, "Provider",
            on_event_handler=self.function,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=log_retention, removal_policy=removal_policy),
        )
        self.release = CustomResource(
            self, "Release",
            service_token=self.provider.service_token,
            resource_type="Custom::HyperPodHelmRelease",
            properties=properties,
        )
        self.release.node.add_dependency(self.access_entry)
        self._acknowledge()

    def _acknowledge(self) -> None:
        acknowledge(
            self.role, "AwsSolutions-IAM5[Resource::*]",
            "Only the Lambda VPC attachment actions (ec2 ENI create/describe/delete/assign) use '*': the ENI "
            "does not exist before the call, as in AWSLambdaVPCAccessExecutionRole.",
        )
        on_event = self.provider.node.find_child("framework-onEvent")
        acknowledge(
            on_event,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The custom resource framework function (aws-cdk-lib) uses the basic execution policy for its logs.",
        )
        acknowledge(
            on_event,
            f"AwsSolutions-IAM5[Resource::{nag_name(self, self.function.function_arn)}:*]",
            "The framework invokes the installer function and its versions (aws-cdk-lib's Provider).",
        )
        acknowledge(on_event, "AwsSolutions-L1",
                    "The framework function's runtime is set by aws-cdk-lib and moves with library upgrades.")

