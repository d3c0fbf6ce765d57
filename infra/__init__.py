"""Reusable CDK constructs for SageMaker HyperPod on Amazon EKS: the public API of this package.

Names are imported lazily, so ``import infra.config`` (used by the ``hpctl`` CLI) does not start the
CDK's JavaScript runtime.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

# The distributions that ship this package: the whole product, or hpctl alone (packaging/hpctl, which carries the
# config, facts and guards hpctl reads). Both take their version from the repository's VERSION file, so a release
# changes one line; `hpctl --version` prints this.
DISTRIBUTIONS = ("hyperpod-eks-cdk", "hyperpod-eks-hpctl")


def _installed_version() -> str:
    for name in DISTRIBUTIONS:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "0.0.0"  # running from a source tree that was never installed


__version__ = _installed_version()

# Public name -> module that defines it.
_EXPORTS: dict[str, str] = {
    # configuration
    "AppConfig": "infra.config",
    "NetworkConfig": "infra.config",
    "EksConfig": "infra.config",
    "HyperPodConfig": "infra.config",
    "InstanceGroupConfig": "infra.config",
    "ObservabilityConfig": "infra.config",
    "StorageConfig": "infra.config",
    "TaskGovernanceConfig": "infra.config",
    "TeamConfig": "infra.config",
    "AddonsConfig": "infra.config",
    "load_config": "infra.config",
    "parse_config": "infra.config",
    "ConfigError": "infra.errors",
    # constructs
    "HyperPodOnEks": "infra.hyperpod_on_eks",
    "HyperPodParts": "infra.composition",  # the type of HyperPodOnEks.parts
    "SharedStorage": "infra.composition",  # the type of HyperPodOnEks.storage
    "HyperPodNetwork": "infra.constructs.network",
    "EksControlPlane": "infra.constructs.eks",
    "LifecycleScripts": "infra.constructs.hyperpod.lifecycle",
    "HyperPodExecutionRole": "infra.constructs.hyperpod.execution_role",
    "HyperPodDependenciesChart": "infra.constructs.hyperpod.dependencies_chart",
    "HelmInstaller": "infra.constructs.helm_release",
    "HelmRelease": "infra.constructs.helm_release",
    "ChartSource": "infra.constructs.helm_release",
    "HyperPodCluster": "infra.constructs.hyperpod.cluster",
    "HyperPodVolumeKey": "infra.constructs.hyperpod.volume_key",
    "LogsKey": "infra.constructs.logs_key",
    "HyperPodAutoscalingRole": "infra.constructs.hyperpod.autoscaling",
    "KarpenterNodePools": "infra.constructs.hyperpod.autoscaling",
    "HyperPodObservability": "infra.constructs.observability",
    "ContainerInsights": "infra.constructs.observability",
    "ManagedPrometheus": "infra.constructs.observability",
    "ManagedGrafana": "infra.constructs.observability",
    "GrafanaContent": "infra.constructs.grafana_content",
    "HyperPodAlerts": "infra.constructs.observability",
    "ClusterDashboard": "infra.constructs.observability",
    "SharedFileSystem": "infra.constructs.storage",
    "FsxCsiDriver": "infra.constructs.storage",
    "HyperPodTaskGovernance": "infra.constructs.task_governance",
    "TrainingOperator": "infra.constructs.addons",
    "S3CsiDriver": "infra.constructs.addons",
    "InferenceOperator": "infra.constructs.addons",
    # checks
    "HyperPodChecks": "infra.guards.nag_pack",
    "guard_replacement": "infra.guards.replacement",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'infra' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return __all__
