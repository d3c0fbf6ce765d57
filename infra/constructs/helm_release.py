"""Helm releases on an EKS cluster through one Lambda-backed custom resource provider per stack.

Time limits, and why one synchronous function: aws-cdk-lib's Provider runs its framework onEvent function for
at most 15 minutes and invokes the installer synchronously. The installer's limit is a minute shorter
(``FUNCTION_TIMEOUT_SECONDS``), so when it is killed the framework is still alive to report FAILED; inside it,
every download and helm or kubectl command ends before the installer's own limit (see the handler). Each
release's ``ServiceTimeout`` (``SERVICE_TIMEOUT_MINUTES``) makes CloudFormation give up after 20 minutes if the
framework itself never answers, instead of the default hour.
The Provider's asynchronous mode (``is_complete_handler`` with ``total_timeout`` up to an hour, polled every
``query_interval``) is not used: helm runs as a child of the invocation and cannot outlive it, so an
``is_complete`` poll would have to re-implement helm's readiness wait with kubectl, and the releases here either
install without waiting (the HyperPod dependencies chart, before any node exists) or become ready in
minutes (the shared storage volume and claim).
Why not aws-cdk-lib's ``aws_eks_v2.HelmChart`` and its kubectl provider: docs/decisions/helm-installer.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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

from infra.config import refuse_links_leaving
from infra.constructs.common import acknowledge, nag_name
from infra.constructs.function_placement import LAMBDA_VPC_ACCESS_REASON, lambda_vpc_access_statement
from infra.constructs.provider import logged_provider, runtime_code
from infra.runtime.chart_installer.handler.deadline import DEFAULT_TIMEOUT_MINUTES, FUNCTION_TIMEOUT_SECONDS
from infra.runtime.chart_installer.handler.properties import CHART_SOURCE_ENV_PREFIX
from infra.runtime.chart_installer.handler.readiness import CHECK_FUNCTION_TIMEOUT_SECONDS

# The installer's runtime code (helm upgrade --install / uninstall, see its module docstring), shipped in the
# runtime asset (provider.runtime_code).
HANDLER_DIR = Path(__file__).parents[1] / "runtime" / "chart_installer"
# helm's --timeout for one operation (a wait, a hook); the handler shortens it to the time left.
HELM_TIMEOUT_MINUTES = DEFAULT_TIMEOUT_MINUTES
# CloudFormation's wait for an answer (ServiceTimeout, 1-3600 s, default 3600): the framework's 15 minutes and
# five more for queueing and cold starts.
SERVICE_TIMEOUT_MINUTES = 20
RESOURCE_TYPE = "Custom::HyperPodHelmRelease"
# The readiness provider (its time limits and why: infra/constructs/readiness.py): isComplete every 30 s, as AWS's
# wait-for-hyperpod-nodes.sh polls; the framework gives up after 55 minutes, under the resource's ServiceTimeout
# of an hour and after the last wait a Readiness may ask for (readiness.MAX_TIMEOUT_SECONDS, 50 minutes) plus one
# interval. aws-cdk-lib needs the total to be a whole number of intervals (custom-resources/lib/provider-framework/
# util.js, calculateRetryPolicy).
READINESS_QUERY_INTERVAL_SECONDS = 30
READINESS_TOTAL_TIMEOUT_SECONDS = 55 * 60
# The readiness onEvent function only reads its properties and the clock.
READINESS_START_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class ChartSource:
    """Where a chart comes from at deploy time: the handler's ``Source`` properties, plus the asset to read.

    Synth stays offline for every kind: nothing is fetched until the custom resource runs in the account.
    """

    properties: Mapping[str, str]
    asset: s3_assets.Asset | None = field(default=None, compare=False)

    @staticmethod
    def git(repository: str, revision: str, chart_path: str, sha256: str) -> ChartSource:
        """A chart directory of a GitHub repository at one commit (a full SHA, never a branch), whose extracted
        source tree has the SHA-256 ``sha256`` (``charts.tree_digest``: the commit alone does not prove the
        repository, GitHub serves a fork's commits under the parent's URL too)."""
        return ChartSource({"Source": "git", "GitRepository": repository, "GitRevision": revision,
                            "ChartPath": chart_path, "SourceSha256": sha256})

    @staticmethod
    def oci(uri: str, version: str) -> ChartSource:
        """A chart in an OCI registry at an exact version."""
        return ChartSource({"Source": "oci", "OciChartUri": uri, "ChartVersion": version})

    @staticmethod
    def local(
        scope: Construct, construct_id: str, path: str | Path, *, key: str = "chart",
        allow_paths_outside_project: bool = False,
    ) -> ChartSource:
        """A chart directory of this repository, zipped and uploaded as a CDK asset. A symbolic link in it that
        leads out of it is refused under ``key`` (``refuse_links_leaving``) unless ``allow_paths_outside_project``:
        the asset would hold its target."""
        refuse_links_leaving(key, Path(path), allowed=allow_paths_outside_project)
        asset = s3_assets.Asset(scope, construct_id, path=str(path))
        return ChartSource({"Source": "s3", "AssetBucket": asset.s3_bucket_name, "AssetKey": asset.s3_object_key},
                           asset)


class HelmInstaller(Construct):
    """The Lambda function and custom resource provider that install Helm releases on one EKS cluster.

    Create one per stack and pass it to every ``HelmRelease`` of that stack: the releases share the
    function, its role, its access entry and its provider.

    The function (the ``chart_installer/handler`` package, with helm from the kubectl layer) runs ``helm upgrade
    --install`` and ``helm uninstall`` with ``--namespace`` every time and reports any helm failure as a
    failure; a release left pending by a stopped run is recovered first, a failed new install is removed
    again (the handler package's docstring lists every failure path, this module's the time limits). It runs in
    ``subnets`` (private, with a route to the chart sources) with its own security group, which is allowed
    HTTPS into ``eks_cluster_security_group`` by an ingress rule kept in this stack (the cluster's stack does
    not learn about the installer); its role gets an EKS access entry with cluster-admin scope, and every
    release waits for that entry. ``purpose`` and ``installs`` only word the descriptions of the security
    group, its rule and the role.

    A ``Readiness`` (infra/constructs/readiness.py) of the stack is served by a second, asynchronous provider of
    the installer (``readiness_provider``), made on first use so that a stack without one keeps its template.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        eks_cluster: eks.ICluster,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        eks_cluster_security_group: ec2.ISecurityGroup,
        purpose: str = "Helm release installer",
        installs: str = "Helm charts",
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        eks_cluster_name: str | None = None,
        log_and_trace_waiter: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.eks_cluster = eks_cluster
        # The readiness provider's waiter state machine logged and traced (logged_provider; compliance: control_tower).
        self._log_and_trace_waiter = log_and_trace_waiter
        # A cluster of another stack is a reference that has no name until synthesis; IAM statements whose cdk-nag
        # acknowledgment must name their ARN use the name when the caller knows it.
        self.eks_cluster_name = eks_cluster_name or eks_cluster.cluster_name
        self.security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=vpc, allow_all_outbound=False,
            description=f"{purpose}: HTTPS to the EKS API and chart sources",
        )
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "EKS API, chart sources")
        self.api_ingress = ec2.CfnSecurityGroupIngress(
            self, "ApiFromInstaller",
            group_id=eks_cluster_security_group.security_group_id,
            source_security_group_id=self.security_group.security_group_id,
            ip_protocol="tcp", from_port=443, to_port=443,
            description=f"EKS API from the {purpose}",
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        self._log_retention = log_retention
        self._removal_policy = removal_policy
        self._readiness_provider: cr.Provider | None = None
        self._sources: list[Mapping[str, str]] = []
        self._describes_addons = False
        self.role = iam.Role(
            self, "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Installs {installs} on the EKS cluster",
        )
        self._vpc = vpc
        self._subnets = list(subnets)
        # kubectl 1.33. Kubernetes supports kubectl within one minor version of the API server
        # (https://kubernetes.io/releases/version-skew-policy/#kubectl): eks.version 1.32-1.34 is within it;
        # 1.35 is two ahead, which the installer's kubectl uses (apply of CRDs, get of objects and API groups) are
        # expected to survive but is not verified.
        self.kubectl_layer = KubectlV33Layer(self, "KubectlLayer")
        self.function = self._function(
            self, "Function", handler="runtime.chart_installer.handler.on_event",
            timeout=Duration.seconds(FUNCTION_TIMEOUT_SECONDS), memory_size=1024,
            ephemeral_storage_size=Size.gibibytes(2),
        )
        self.role.add_to_policy(iam.PolicyStatement(
            sid="DescribeThisCluster", actions=["eks:DescribeCluster"], resources=[eks_cluster.cluster_arn],
        ))
        self.role.add_to_policy(lambda_vpc_access_statement())
        self.log_group.grant_write(self.role)
        self.access_entry = eks.AccessEntry(
            self, "ClusterAccess",
            cluster=eks_cluster,
            principal=self.role.role_arn,
            access_policies=[eks.AccessPolicy.from_access_policy_name(
                "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER)],
        )
        self.provider = logged_provider(self, on_event=self.function, log_retention=log_retention,
                                        removal_policy=removal_policy)
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]", LAMBDA_VPC_ACCESS_REASON)

    def _function(self, scope: Construct, construct_id: str, *, handler: str, timeout: Duration, memory_size: int,
                  ephemeral_storage_size: Size | None = None, description: str | None = None) -> lambda_.Function:
        """A function of the runtime asset with the installer's role, kubectl layer, VPC placement, security
        group and log group: what can talk to this cluster's API server."""
        return lambda_.Function(
            scope, construct_id,
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.X86_64,
            handler=handler,
            code=runtime_code(),
            layers=[self.kubectl_layer],
            timeout=timeout,
            memory_size=memory_size,
            ephemeral_storage_size=ephemeral_storage_size,
            role=self.role,
            vpc=self._vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=self._subnets),
            security_groups=[self.security_group],
            log_group=self.log_group,
            environment={"HELM_BIN": "/opt/helm/helm"},
            description=description,
        )

    def allow_source(self, chart: ChartSource) -> None:
        """Lets the function install ``chart``: its source properties go into the function's environment
        (``CHART_SOURCE_<n>``), and the handler refuses any other source it is invoked with
        (``properties.check_allowed_source``), whoever invokes it."""
        if chart.properties in self._sources:
            return
        self.function.add_environment(f"{CHART_SOURCE_ENV_PREFIX}{len(self._sources)}",
                                      Stack.of(self).to_json_string(dict(chart.properties)))
        if chart.properties.get("SourceSha256") and not any("SourceSha256" in p for p in self._sources):
            # checkov's CKV_AWS_45 reads the chart source's SHA-256 digest (64 hex digits) as a hard-coded secret.
            # It is a public digest of a public archive, the same value the config file holds; acknowledged on this
            # function alone, in the resource's metadata as checkov reads it.
            cfn_function: lambda_.CfnFunction = self.function.node.default_child  # type: ignore[assignment]
            cfn_function.add_metadata("checkov", {"skip": [{
                "id": "CKV_AWS_45",
                "comment": "CHART_SOURCE_<n> holds the chart's repository, commit and the SHA-256 digest of its "
                           "source tree: public values that pin what the installer may install, not credentials.",
            }]})
        self._sources.append(chart.properties)

    def readiness_provider(self) -> cr.Provider:
        """The asynchronous provider of ``Readiness`` resources (infra/constructs/readiness.py: the time limits and
        why), made on first use so that a stack without one keeps its template: under the construct ``Readiness``,
        its onEvent function (``ReadinessStart``) and isComplete function (``ReadinessCheck``) run the
        ``readiness`` module of the installer's handler package with the installer's role (its access entry
        admits them to the cluster), layer, VPC placement and log group."""
        if self._readiness_provider is None:
            scope = Construct(self, "Readiness")
            start = self._function(
                scope, "ReadinessStart", handler="runtime.chart_installer.handler.readiness.on_event",
                timeout=Duration.seconds(READINESS_START_TIMEOUT_SECONDS), memory_size=256,
                description="Records when a HyperPod readiness wait ends",
            )
            check = self._function(
                scope, "ReadinessCheck", handler="runtime.chart_installer.handler.readiness.is_complete",
                timeout=Duration.seconds(CHECK_FUNCTION_TIMEOUT_SECONDS), memory_size=512,
                description="Checks once whether what a HyperPod feature waits for is ready",
            )
            self._readiness_provider = logged_provider(
                scope, on_event=start, is_complete=check,
                query_interval=Duration.seconds(READINESS_QUERY_INTERVAL_SECONDS),
                total_timeout=Duration.seconds(READINESS_TOTAL_TIMEOUT_SECONDS),
                log_retention=self._log_retention, removal_policy=self._removal_policy,
                log_and_trace_waiter=self._log_and_trace_waiter,
            )
        return self._readiness_provider

    def allow_describe_addons(self) -> None:
        """Lets the role read the state of this cluster's EKS add-ons (a readiness check of kind ``addon``), once.

        eks:DescribeAddon takes the resource type addon*, ARN
        ``arn:${Partition}:eks:${Region}:${Account}:addon/${ClusterName}/${AddonName}/${UUID}`` (Service
        Authorization Reference, https://docs.aws.amazon.com/service-authorization/latest/reference/
        list_amazonelastickubernetesservice.html, read in a stored copy of the page): ``addon/<cluster>/*`` is this
        cluster's add-ons and no other cluster's."""
        if self._describes_addons:
            return
        self._describes_addons = True
        addons = Stack.of(self).format_arn(service="eks", resource="addon",
                                           resource_name=f"{self.eks_cluster_name}/*")
        self.role.add_to_policy(iam.PolicyStatement(
            sid="DescribeThisClustersAddons", actions=["eks:DescribeAddon"], resources=[addons]))
        acknowledge(
            self.role, f"AwsSolutions-IAM5[Resource::{nag_name(self, addons)}]",
            "eks:DescribeAddon on this cluster's add-ons only: an add-on's ARN ends in an ID EKS assigns "
            "(addon/<cluster>/<name>/<uuid>), unknown at synth.",
        )


class HelmRelease(CustomResource):
    """One Helm release (``release_name`` in ``namespace``) installed by ``installer``.

    ``values`` may hold CloudFormation tokens (e.g. a file system ID): they are serialised to one JSON
    string with ``Stack.to_json_string`` so numbers and booleans keep their type. ``required_kinds``
    ("group/version/Kind") are kinds another party's CRDs define: the installer waits, up to 8 minutes, until
    the API server serves them before it installs (and fails the release, installing nothing, if they do not
    appear). A chart from an S3 asset
    is readable by the installer's role (that one object only). Make whatever needs the release depend on
    this resource.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        installer: HelmInstaller,
        release_name: str,
        namespace: str,
        chart: ChartSource,
        values: Mapping[str, Any] | None = None,
        timeout_minutes: int = HELM_TIMEOUT_MINUTES,
        wait: bool = True,
        required_kinds: Sequence[str] = (),
    ) -> None:
        stack = Stack.of(scope)
        properties: dict[str, Any] = {
            "ClusterName": installer.eks_cluster.cluster_name,
            "Region": stack.region,
            "ReleaseName": release_name,
            "Namespace": namespace,
            "TimeoutMinutes": str(timeout_minutes),
            "Wait": "true" if wait else "false",
            "Values": stack.to_json_string(dict(values or {})),
            **chart.properties,
            # Only when given, so releases without it keep their templates.
            **({"RequiredKinds": json.dumps(list(required_kinds))} if required_kinds else {}),
        }
        super().__init__(
            scope, construct_id,
            service_token=installer.provider.service_token,
            service_timeout=Duration.minutes(SERVICE_TIMEOUT_MINUTES),
            resource_type=RESOURCE_TYPE,
            properties=properties,
        )
        self.release_name = release_name
        self.namespace = namespace
        installer.allow_source(chart)
        if chart.asset is not None:
            installer.role.add_to_policy(iam.PolicyStatement(
                sid=f"ReadChart{construct_id}".replace("-", ""),
                actions=["s3:GetObject"],
                resources=[chart.asset.bucket.arn_for_objects(chart.asset.s3_object_key)],
            ))
        # The release needs its access entry and the path to the API server for as long as it exists:
        # on delete, CloudFormation removes them only after the release is uninstalled.
        self.node.add_dependency(installer.access_entry, installer.api_ingress)
