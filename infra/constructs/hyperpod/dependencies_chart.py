"""The HyperPod dependencies Helm chart, installed on the EKS cluster by a custom resource before HyperPod."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import ChartConfig
from infra.config.device_plugins import sent_values
from infra.constructs.helm_release import HANDLER_DIR, HELM_TIMEOUT_MINUTES, ChartSource, HelmInstaller, HelmRelease
from infra.errors import ConfigError
from infra.runtime.chart_installer.handler.charts import VENDOR_LOCK

RELEASE_NAME = "hyperpod-dependencies"
NAMESPACE = "kube-system"
__all__ = ["HANDLER_DIR", "HELM_TIMEOUT_MINUTES", "NAMESPACE", "RELEASE_NAME", "HyperPodDependenciesChart"]


def chart_source(scope: Construct, chart: ChartConfig, *, allow_paths_outside_project: bool = False) -> ChartSource:
    """The chart's source per ``ChartConfig.source``."""
    if chart.source == "git":
        return ChartSource.git(chart.git_repository, chart.revision, chart.chart_path, chart.pinned_sha256)
    if chart.source == "oci":
        assert chart.oci_uri is not None and chart.version is not None
        return ChartSource.oci(chart.oci_uri, chart.version)
    assert chart.local_path is not None
    check_vendored_revision(chart)
    return ChartSource.local(scope, "ChartAsset", chart.local_path, key="hyperpod.dependencies_chart.local_path",
                             allow_paths_outside_project=allow_paths_outside_project)


def check_vendored_revision(chart: ChartConfig) -> None:
    """A chart vendored by ``make vendor-chart`` must be of the commit the config pins: after the pin
    moves, the old vendored chart would otherwise deploy unnoticed."""
    lock = Path(str(chart.local_path)) / VENDOR_LOCK
    if not lock.is_file():
        return
    try:
        vendored = json.loads(lock.read_text(encoding="utf-8"))["revision"]
    except (ValueError, KeyError, TypeError):
        raise ConfigError("hyperpod.dependencies_chart.local_path", chart.local_path,
                          f"{VENDOR_LOCK} there is unreadable: run make vendor-chart again") from None
    if vendored != chart.revision:
        raise ConfigError("hyperpod.dependencies_chart.revision", chart.revision,
                          f"{chart.local_path} was vendored at {vendored}: run make vendor-chart again")


class HyperPodDependenciesChart(Construct):
    """Installs the HyperPod dependencies chart (release ``hyperpod-dependencies`` in ``kube-system``).

    Holds a ``HelmInstaller``, ``self.installer`` (function, role, security group, access entry, provider: see
    there), and one ``HelmRelease``, ``self.release``. The chart comes from, per ``ChartConfig.source``:
      - ``git`` (default): the public repository at the pinned commit ``revision`` (never a branch);
      - ``oci``: ``oci_uri`` at the pinned ``version`` (for teams that mirror the chart);
      - ``local``: a chart directory in this repository, uploaded as a CDK asset (a symbolic link in it that
        leads out of it is refused unless ``allow_paths_outside_project``).
    ``health-monitoring-agent.region`` is set to the stack's region (by the handler) unless the chart values
    in config set it.

    ``instance_types``: every type the instance groups may run. The chart's device plugins (NVIDIA, EFA, Neuron)
    then get values that make each select exactly those of the types with its device in the instance catalog, and
    a plugin none needs is switched off (``infra.config.device_plugins.device_plugin_values``); ``chart.values``
    is merged over them, so a value set there wins. Empty: AWS's own lists.

    Other releases of the same stack can share its installer: ``HelmRelease(..., installer=chart.installer)``.
    Make the HyperPod cluster depend on ``self.release``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        eks_cluster: eks.ICluster,
        chart: ChartConfig,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        eks_cluster_security_group: ec2.ISecurityGroup,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        eks_cluster_name: str | None = None,
        allow_paths_outside_project: bool = False,
        instance_types: Sequence[str] = (),
        log_and_trace_waiter: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        # "Default" is left out of logical IDs: the installer's resources keep the IDs they had when this
        # construct was itself the installer (its log groups and security group are in the upgrade baseline).
        self.installer = HelmInstaller(
            self, "Default",
            eks_cluster=eks_cluster, vpc=vpc, subnets=subnets, eks_cluster_security_group=eks_cluster_security_group,
            purpose="HyperPod dependencies chart installer",
            installs="the HyperPod dependencies Helm chart",
            log_retention=log_retention, removal_policy=removal_policy, eks_cluster_name=eks_cluster_name,
            log_and_trace_waiter=log_and_trace_waiter,
        )
        self.release = HelmRelease(
            self, "Release",
            installer=self.installer,
            release_name=RELEASE_NAME,
            namespace=NAMESPACE,
            chart=chart_source(self, chart, allow_paths_outside_project=allow_paths_outside_project),
            values=sent_values(instance_types, chart.values),
            # Installed before the HyperPod cluster, when the EKS cluster has no node: its operators'
            # Deployments cannot be ready yet, so helm must not wait for them (AWS installs it the same way).
            wait=False,
        )
