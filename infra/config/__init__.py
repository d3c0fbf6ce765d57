"""The typed, validated configuration every stack reads: one YAML file -> one frozen AppConfig.

One module per section (network, eks, hyperpod, observability, storage, addons), the whole document in ``app``, shared
field types in ``fields`` and the one way a validator refuses a value in ``base``. Every name is importable from
``infra.config``; nothing here imports the CDK (``hpctl`` reads the config without it).
"""

from infra.config.addons import S3_BUCKET_ARN, AddonsConfig, S3CsiConfig, TrainingOperatorConfig
from infra.config.app import AppConfig, load_config, parse_config, require_network, sagemaker_regions
from infra.config.base import StrictModel, refusal
from infra.config.eks import (
    MIN_PUBLIC_ACCESS_PREFIX,
    SUPPORTED_K8S_VERSIONS,
    EksConfig,
    NamespaceAdmin,
    eks_cluster_name,
)
from infra.config.fields import (
    RETENTION_DAYS,
    AzId,
    ExactVersion,
    IamArn,
    K8sKey,
    K8sValue,
    Name63,
    RetentionDays,
    TagKey,
    TagValue,
    WholeNumber,
    path_escapes,
)
from infra.config.hyperpod import (
    DEPENDENCIES_CHART_REVISION,
    MAX_INSTANCE_GROUPS,
    ChartConfig,
    DeepHealthCheck,
    HyperPodConfig,
    InstanceGroupConfig,
    LifecycleOptions,
    Taint,
    TieredCheckpointingConfig,
    VolumeEncryption,
    cluster_instance_types,
)
from infra.config.network import HyperPodSubnet, NetworkConfig, az_id_prefix
from infra.config.observability import (
    S3_PREFIX_PATTERN,
    AlertsConfig,
    BasicOnly,
    BasicOrAdvanced,
    DisabledOrAdvanced,
    GrafanaConfig,
    GrafanaNetworkAccess,
    ObservabilityAddonMetrics,
    ObservabilityConfig,
    PrometheusConfig,
)
from infra.config.storage import CLUSTER_NAMESPACES, FsxLustreConfig, S3Uri, StorageConfig

__all__ = [
    "CLUSTER_NAMESPACES",
    "DEPENDENCIES_CHART_REVISION",
    "MAX_INSTANCE_GROUPS",
    "MIN_PUBLIC_ACCESS_PREFIX",
    "RETENTION_DAYS",
    "S3_BUCKET_ARN",
    "S3_PREFIX_PATTERN",
    "SUPPORTED_K8S_VERSIONS",
    "AddonsConfig",
    "AlertsConfig",
    "AppConfig",
    "AzId",
    "BasicOnly",
    "BasicOrAdvanced",
    "ChartConfig",
    "DeepHealthCheck",
    "DisabledOrAdvanced",
    "EksConfig",
    "ExactVersion",
    "FsxLustreConfig",
    "GrafanaConfig",
    "GrafanaNetworkAccess",
    "HyperPodConfig",
    "HyperPodSubnet",
    "IamArn",
    "InstanceGroupConfig",
    "K8sKey",
    "K8sValue",
    "LifecycleOptions",
    "Name63",
    "NamespaceAdmin",
    "NetworkConfig",
    "ObservabilityAddonMetrics",
    "ObservabilityConfig",
    "PrometheusConfig",
    "RetentionDays",
    "S3CsiConfig",
    "S3Uri",
    "StorageConfig",
    "StrictModel",
    "TagKey",
    "TagValue",
    "Taint",
    "TieredCheckpointingConfig",
    "TrainingOperatorConfig",
    "VolumeEncryption",
    "WholeNumber",
    "az_id_prefix",
    "cluster_instance_types",
    "eks_cluster_name",
    "load_config",
    "require_network",
    "parse_config",
    "path_escapes",
    "refusal",
    "sagemaker_regions",
]
