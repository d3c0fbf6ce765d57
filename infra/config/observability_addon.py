"""The configuration values of the HyperPod observability add-on, built from the config without the CDK.

One source for both users: the construct (infra/constructs/observability.py) puts them in the template, and
`hpctl preflight` validates them against the schema EKS publishes for the add-on version (hpctl must run
without aws-cdk-lib).
"""

from __future__ import annotations

from collections.abc import Sequence

from infra.config import PrometheusConfig
from infra.facts.addons import HYPERPOD_OBSERVABILITY

HYPERPOD_OBSERVABILITY_ADDON = HYPERPOD_OBSERVABILITY.name

# The add-on's configuration keys, as AWS's Terraform module sends them (awslabs/awsome-distributed-training@
# 0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/
# modules/observability/eks_addon.tf): top-level ampWorkspace {prometheusEndpoint, arn}, amgWorkspace
# {workspaceName, arn}, metricsProvider with one {level, scrapeInterval} per family below, and logging {enabled}.
ADDON_METRIC_FAMILIES: dict[str, str] = {
    "training": "trainingMetrics",
    "inference": "inferenceMetrics",
    "task_governance": "taskGovernanceMetrics",
    "scaling": "scalingMetrics",
    "custom": "customMetrics",
    "node": "nodeMetrics",
    "accelerated_compute": "acceleratedComputeMetrics",
    "network": "networkMetrics",
}
_FAMILY_FIELDS = {"level": "level", "scrapeInterval": "scrape_interval"}


def prometheus_endpoint(region: str, url_suffix: str, workspace_id: str) -> str:
    """The workspace's endpoint as the add-on is given it: without the trailing slash of the AMP attribute."""
    return f"https://aps-workspaces.{region}.{url_suffix}/workspaces/{workspace_id}"


def addon_configuration(
    config: PrometheusConfig, *, prometheus_endpoint: str, prometheus_arn: str,
    grafana_workspace: tuple[str, str] | None,
) -> dict[str, object]:
    """The ``configurationValues`` of the HyperPod observability add-on (EKS validates them against its schema)."""
    families = config.metrics.model_dump()
    configuration: dict[str, object] = {
        "ampWorkspace": {"prometheusEndpoint": prometheus_endpoint, "arn": prometheus_arn},
        "metricsProvider": {
            key: {"level": families[name]["level"], "scrapeInterval": families[name]["scrape_interval"]}
            for name, key in ADDON_METRIC_FAMILIES.items()
        },
        "logging": {"enabled": config.logging},
    }
    if grafana_workspace is not None:
        name, arn = grafana_workspace
        configuration["amgWorkspace"] = {"workspaceName": name, "arn": arn}
    return configuration


def config_key(path: Sequence[str | int]) -> str | None:
    """The config key a path in the configuration values comes from; None for values the deploy fills in."""
    parts = [str(p) for p in path]
    families = {key: name for name, key in ADDON_METRIC_FAMILIES.items()}
    if len(parts) == 3 and parts[0] == "metricsProvider" and parts[1] in families and parts[2] in _FAMILY_FIELDS:
        return f"observability.prometheus.metrics.{families[parts[1]]}.{_FAMILY_FIELDS[parts[2]]}"
    if parts == ["logging", "enabled"]:
        return "observability.prometheus.logging"
    return None
