"""The `observability` section: Container Insights, Managed Prometheus with the HyperPod observability add-on's
metrics, Managed Grafana, alerts and the CloudWatch dashboard."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from infra.config.base import StrictModel, refusal, refusing
from infra.config.fields import RetentionDays
from infra.errors import ConfigError

# The metric families of the amazon-sagemaker-hyperpod-observability add-on and the levels each accepts, as AWS's
# Terraform module documents them (awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:
# 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/README.md, "Advanced Observability Metrics
# Configuration", and .../modules/observability/eks_addon.tf for the keys). "custom" is the family AWS's
# module sets from its `cluster_metric_level`; "inference" is always BASIC there (no other level documented).


class _MetricFamily(StrictModel):
    # Every AWS setup read sends 30 s. Its bounds are in the add-on's configuration schema, which was not found
    # published (unverified here); `hpctl preflight` (addon-config) checks it against the schema EKS serves.
    scrape_interval: int = Field(default=30, ge=1)


class BasicOrAdvanced(_MetricFamily):
    level: Literal["BASIC", "ADVANCED"] = "BASIC"


class DisabledOrAdvanced(_MetricFamily):
    level: Literal["DISABLED", "ADVANCED"] = "DISABLED"


class BasicOnly(_MetricFamily):
    level: Literal["BASIC"] = "BASIC"


class ObservabilityAddonMetrics(StrictModel):
    """One entry per metric family of the HyperPod observability add-on; defaults are AWS's module defaults."""

    training: BasicOrAdvanced = BasicOrAdvanced()
    inference: BasicOnly = BasicOnly()
    task_governance: DisabledOrAdvanced = DisabledOrAdvanced()
    scaling: DisabledOrAdvanced = DisabledOrAdvanced()
    custom: BasicOrAdvanced = BasicOrAdvanced()
    node: BasicOrAdvanced = BasicOrAdvanced()
    accelerated_compute: BasicOrAdvanced = BasicOrAdvanced()
    network: DisabledOrAdvanced = DisabledOrAdvanced()


class PrometheusConfig(StrictModel):
    """Amazon Managed Service for Prometheus and the HyperPod observability add-on that writes to it."""

    enabled: bool = True
    metrics: ObservabilityAddonMetrics = ObservabilityAddonMetrics()
    # The add-on's `logging.enabled`: it creates log groups and ships every container's logs to CloudWatch
    # (AWS's module default is false; Container Insights already ships container logs when it is on).
    logging: bool = False
    log_retention_days: RetentionDays = 365


class GrafanaNetworkAccess(StrictModel):
    """Who may reach the workspace: prefix lists of allowed source CIDRs and/or interface VPC endpoints.

    AWS::Grafana::Workspace NetworkAccessControl takes up to 5 of each (cfn-lint's bundled schema); with it set,
    requests from anywhere else are refused.
    """

    prefix_list_ids: list[Annotated[str, Field(pattern=r"^pl-[0-9a-f]{8,17}$")]] = Field(default=[], max_length=5)
    vpce_ids: list[Annotated[str, Field(pattern=r"^vpce-[0-9a-f]{8,17}$")]] = Field(default=[], max_length=5)

    @model_validator(mode="after")
    def _something_allowed(self) -> GrafanaNetworkAccess:
        if not self.prefix_list_ids and not self.vpce_ids:
            raise refusal("", {}, "name prefix_list_ids or vpce_ids; with neither nobody could reach the workspace")
        return self


# An S3 prefix: s3://<bucket>/ or s3://<bucket>/<key prefix>/ (ending in "/").
S3_PREFIX_PATTERN = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/(?:[!-~]*/)?$"


class GrafanaConfig(StrictModel):
    """Amazon Managed Grafana; users sign in through IAM Identity Center (AWS_SSO) or SAML."""

    enabled: bool = True
    authentication: Literal["AWS_SSO", "SAML"] = "AWS_SSO"
    # IAM Identity Center user / group IDs made Grafana admins (AWS_SSO only).
    admin_user_ids: list[Annotated[str, Field(min_length=1, max_length=47)]] = []
    admin_group_ids: list[Annotated[str, Field(min_length=1, max_length=47)]] = []
    # null: the workspace is reachable from any network (sign-in still required).
    network_access: GrafanaNetworkAccess | None = None
    # AWS's HyperPod data sources, dashboards and alert rules, provisioned into the workspace at deploy time
    # (infra/constructs/grafana_content.py); the HyperPod observability add-on does not create them.
    provision_dashboards: bool = True
    # Where the provisioner reads AWS's pinned dashboard files when github is unreachable: an s3://bucket/prefix/
    # holding the same files under the same relative paths (their SHA-256 is checked either way).
    dashboards_s3_source: Annotated[str, Field(pattern=S3_PREFIX_PATTERN)] | None = None

    @model_validator(mode="after")
    def _admins(self) -> GrafanaConfig:
        if self.authentication != "AWS_SSO" and (self.admin_user_ids or self.admin_group_ids):
            raise refusal("admin_user_ids", None,
                          "admin assignments need authentication AWS_SSO; with SAML map admins in the SAML assertion")
        if self.network_access is not None and self.provision_dashboards:
            # The provisioner's function runs outside the VPC: a workspace closed to other networks refuses it.
            raise refusal("provision_dashboards", True,
                          "cannot reach a workspace limited by network_access; set provision_dashboards: false")
        return self


class AlertsConfig(StrictModel):
    """HyperPod cluster events (EventBridge) at the chosen levels, to an encrypted SNS topic."""

    enabled: bool = True
    levels: list[Literal["Info", "Warn", "Error"]] = Field(default=["Error"], min_length=1)
    # Printable ASCII but "@" on both sides of one "@" (whether SNS takes internationalised addresses is unverified).
    email: Annotated[str, Field(pattern=r"^[!-?A-~]+@[!-?A-~]+\.[A-Za-z]{2,}$")] | None = None


def grafana_needs_prometheus(
    grafana: GrafanaConfig | None, prometheus: PrometheusConfig | None, *,
    grafana_key: str = "grafana", prometheus_key: str = "prometheus",
) -> None:
    """The one statement of "Grafana only with Prometheus" (its dashboards read the Prometheus workspace), or a
    ConfigError.

    A section is on when it is given and enabled: the config always has both sections and switches them with
    ``enabled``, ``HyperPodObservability`` takes None for off. The config checks it with its keys,
    ``HyperPodObservability`` again with its props' names for a library user who builds it without the file.
    """
    def on(section: GrafanaConfig | PrometheusConfig | None) -> bool:
        return section is not None and section.enabled

    if on(grafana) and not on(prometheus):
        raise ConfigError(grafana_key, True, f"Grafana's dashboards read the Prometheus workspace; enable "
                                             f"{prometheus_key} or disable Grafana")


class ObservabilityConfig(StrictModel):
    container_insights: bool = True
    prometheus: PrometheusConfig = PrometheusConfig()
    grafana: GrafanaConfig = GrafanaConfig()
    alerts: AlertsConfig = AlertsConfig()
    dashboard: bool = True

    @property
    def any_enabled(self) -> bool:
        """Whether any observability piece is on: the one definition of when anything is built for it."""
        return (self.container_insights or self.prometheus.enabled or self.grafana.enabled or self.alerts.enabled
                or self.dashboard)

    @model_validator(mode="after")
    def _grafana_needs_prometheus(self) -> ObservabilityConfig:
        with refusing():
            grafana_needs_prometheus(self.grafana, self.prometheus, grafana_key="grafana.enabled",
                                     prometheus_key="observability.prometheus")
        return self

