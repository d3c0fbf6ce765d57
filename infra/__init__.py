"""Reusable CDK constructs for SageMaker HyperPod on Amazon EKS: the public API of this package.

Names are imported lazily, so ``import infra.config`` (used by the ``hpctl`` CLI) does not start the
CDK's JavaScript runtime.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("hyperpod-eks-cdk")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

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
    "HyperPodNetwork": "infra.network",
    "EksControlPlane": "infra.eks",
    "LifecycleScripts": "infra.hyperpod.lifecycle",
    "HyperPodExecutionRole": "infra.hyperpod.execution_role",
    "HyperPodDependenciesChart": "infra.hyperpod.dependencies_chart",
    "HelmInstaller": "infra.helm_release",
    "HelmRelease": "infra.helm_release",
    "ChartSource": "infra.helm_release",
    "HyperPodCluster": "infra.hyperpod.cluster",
    "HyperPodVolumeKey": "infra.hyperpod.volume_key",
    "HyperPodAutoscalingRole": "infra.hyperpod.autoscaling",
    "KarpenterNodePools": "infra.hyperpod.autoscaling",
    "HyperPodObservability": "infra.observability",
    "ContainerInsights": "infra.observability",
    "ManagedPrometheus": "infra.observability",
    "ManagedGrafana": "infra.observability",
    "GrafanaContent": "infra.grafana_content",
    "HyperPodAlerts": "infra.observability",
    "ClusterDashboard": "infra.observability",
    "SharedFileSystem": "infra.storage",
    "FsxCsiDriver": "infra.storage",
    "HyperPodTaskGovernance": "infra.task_governance",
    "TrainingOperator": "infra.addons",
    "S3CsiDriver": "infra.addons",
    # checks
    "HyperPodChecks": "infra.nag_pack",
    "guard_replacement": "infra.hyperpod.lock",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'infra' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return __all__
