"""The `hyperpod` section: instance groups, lifecycle scripts and their settings, the dependencies chart, and the
acknowledgments that let a change replace or shrink the cluster."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from infra.config.base import StrictModel, refusal
from infra.config.fields import (
    AzId,
    ExactVersion,
    K8sKey,
    K8sValue,
    Name63,
    PolicyArn,
    WholeNumber,
    leads_out_through_links,
    path_escapes,
    script_key_problem,
)
from infra.errors import ConfigError, credential_kind
from infra.facts.instances import is_listed, listed_types

# The HyperPod dependencies chart's default commit (see ChartConfig.revision for what it is).
DEPENDENCIES_CHART_REVISION = "a00b22d17ea928a6e39a43bd2efdafe01b1005ea"
DEPENDENCIES_CHART_REPOSITORY = "https://github.com/aws/sagemaker-hyperpod-cli"
# The SHA-256 of that commit's source tree (runtime/chart_installer/handler/charts.py, tree_digest), computed here
# from a clone of aws/sagemaker-hyperpod-cli: `git archive a00b22d1... | tar -x`, then the shell line tree_digest
# names. GitHub's archive is made by git archive too ("Source downloads on GitHub depend on Git's archive command",
# https://github.blog/2023-02-21-update-on-the-future-stability-of-source-code-archives-and-hashes/), and the
# commit has no .gitattributes (no export-ignore or export-subst); the submodule src/hyperpod_cli/
# sagemaker_hyperpod_recipes is in neither. Not compared with a download from GitHub (no network where it was
# computed): the first deploy does that, and refuses with both digests in one line if they differ.
DEPENDENCIES_CHART_SOURCE_SHA256 = "8c918f75a33084155ea1abfddb433f344558ad6b34ae6f034b7778cd983c51f0"

# Service limit on instance groups per cluster (SageMaker HyperPod quotas).
MAX_INSTANCE_GROUPS = 20


DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]
# Who holds the key of a group's EBS volumes (root and /opt/sagemaker): a key this app creates, or AWS's own.
VolumeEncryption = Literal["customer_managed", "aws_managed"]


class Taint(StrictModel):
    key: K8sKey
    value: K8sValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


# --- Rolling software updates, images and automatic patching of an instance group ------------------------------
# Shapes and bounds from the AWS::SageMaker::Cluster schema bundled with cfn-lint 1.58.0 (ScheduledUpdateConfig,
# DeploymentConfig, CapacitySizeConfig, AlarmDetails, AutoRollbackConfiguration, ImageId, AutoPatchConfig) and
# botocore 1.44.8's sagemaker model (ScheduledUpdateConfig, DeploymentConfiguration, AlarmName, ImageId); where the
# two differ the narrower bound is kept.

# ScheduleExpression: the schema's pattern (six fields: minutes hours day-of-month month day-of-week year), matched
# whole here; length 1-256 in both sources.
SCHEDULE_PATTERN = (r"cron\((?:[0-5][0-9]|[0-9]|) (?:[01][0-9]|2[0-3]|[0-9]) (?:[1-9]|0[1-9]|[12][0-9]|3[01]|\?) "
                    r"(?:[1-9]|0[1-9]|1[0-2]|\*|\*/(?:[1-9]|1[0-2])|) "
                    r"(?:MON|TUE|WED|THU|FRI|SAT|SUN|[1-7]|\?|L|(?:[1-7]#[1-5])|(?:[1-7]L)) (?:20[2-9][0-9]|\*|)\)")
# AlarmName: 1-255 characters on one line, not only blanks (botocore: pattern (?!\s*$).+; the CloudFormation schema
# allows 256). Strings are stripped, so a blank name is empty here.
AlarmName = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^.+$")]
BATCH_TYPES = {"percent": "CAPACITY_PERCENTAGE", "count": "INSTANCE_COUNT"}  # NodeUnavailabilityType


class UpdateBatch(StrictModel):
    """RollingUpdatePolicy.MaximumBatchSize: how many nodes of the group are updated at once."""

    type: Literal["percent", "count"] = "percent"
    # NodeUnavailabilityValue: minimum 1, no maximum in either source; a count of nodes is at most a group's
    # InstanceCount maximum, 6758 (ClusterInstanceCount in botocore's sagemaker model).
    value: StrictInt = Field(default=10, ge=1, le=6758)

    @model_validator(mode="after")
    def _percent(self) -> UpdateBatch:
        # The API states no maximum; a share of the group above 100 percent means nothing (hpctl's
        # --batch-percent takes 1-100 too).
        if self.type == "percent" and self.value > 100:
            raise refusal("value", self.value, "a percentage of the group is at most 100")
        return self


class RollingUpdate(StrictModel):
    """The group's rolling software update: ScheduledUpdateConfig when ``schedule`` is set, and the batches
    ``hpctl update-software`` uses for the group either way."""

    schedule: str | None = Field(default=None, max_length=256)
    batch: UpdateBatch = UpdateBatch()
    wait_seconds: StrictInt = Field(default=300, ge=0, le=3600)  # WaitIntervalInSeconds: 0-3600
    rollback_alarms: list[AlarmName] = Field(default=[], max_length=10)  # AutoRollbackConfiguration: 1-10 alarms

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(SCHEDULE_PATTERN, value):
            raise refusal("", value, "not a schedule AWS accepts: cron(minutes hours day-of-month month day-of-week "
                                     "year), one value per field, e.g. cron(0 3 ? * SUN *)")
        return value

    def deployment_config(self) -> dict[str, Any]:
        """DeploymentConfig as the API and the template spell it."""
        config: dict[str, Any] = {
            "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": BATCH_TYPES[self.batch.type],
                                                         "Value": self.batch.value}},
            "WaitIntervalInSeconds": self.wait_seconds,
        }
        if self.rollback_alarms:
            config["AutoRollbackConfiguration"] = [{"AlarmName": a} for a in self.rollback_alarms]
        return config

    def scheduled_update_config(self) -> dict[str, Any] | None:
        """ScheduledUpdateConfig, or None without a schedule (ScheduleExpression is required there)."""
        if self.schedule is None:
            return None
        return {"ScheduleExpression": self.schedule, "DeploymentConfig": self.deployment_config()}


class GroupSoftware(StrictModel):
    """Mixed into InstanceGroupConfig: the image, rolling updates and automatic patching of a group."""

    # ImageId: a custom AMI (ami- and 8-17 hex digits) or "default" (the latest HyperPod image); null = leave it out.
    image_id: str | None = Field(default=None, min_length=7, max_length=21,
                                 pattern=r"^(ami-[0-9a-fA-F]{8,17}|default)$")
    rolling_update: RollingUpdate | None = None
    # AutoPatchConfig.PatchingStrategy (the schema's enum; botocore also has DrainFirst, CloudFormation does not).
    auto_patch: Literal["WhenIdle", "WhenAllIdle"] | None = None


def _known_instance_type(value: str, key: str = "") -> str:
    if not value.startswith("ml."):
        raise refusal(key, None, f"HyperPod instance types start with 'ml.' (e.g. ml.{value}), got {value}")
    if not is_listed(value):
        raise refusal(key, None, f"{value} is not a HyperPod instance type in this botocore release "
                                  f"({len(listed_types())} known, e.g. ml.g5.8xlarge)")
    return value


# InstanceRequirements.InstanceTypes holds 1-20 types (botocore's ClusterInstanceTypes; the AWS::SageMaker::Cluster
# schema's InstanceRequirements.InstanceTypes, maxItems 20): instance_type and at most 19 fallbacks.
MAX_FALLBACK_INSTANCE_TYPES = 19


class InstanceGroupConfig(GroupSoftware):
    name: Name63
    # The group's instance type; with fallback_instance_types, its first choice.
    instance_type: str
    # A flexible instance group: HyperPod provisions instance_type first and falls back to these, in this order,
    # when capacity is short; scale-down removes the lowest-priority type first. The group is then written with
    # InstanceRequirements {InstanceTypes: [instance_type, *fallbacks]} and no InstanceType (the two are mutually
    # exclusive, https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-scaling-eks.html).
    fallback_instance_types: list[str] = Field(default=[], max_length=MAX_FALLBACK_INSTANCE_TYPES)
    instance_count: StrictInt = Field(ge=0, le=6758)
    az_id: AzId
    threads_per_core: Annotated[Literal[1, 2], WholeNumber] = 1
    ebs_volume_gb: StrictInt = Field(default=500, ge=1, le=16384)
    deep_health_checks: list[DeepHealthCheck] = []
    # botocore's TrainingPlanArn pattern, with the plan's name as TrainingPlanName spells it ([a-zA-Z0-9](-*[a-zA-Z0-9])
    # up to 64 characters) instead of ".*"; its region and partition must be the cluster's (infra/config/app.py).
    training_plan_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$",
    )
    # KubernetesConfig: at most 50 labels and 50 taints (botocore's sagemaker model, ClusterKubernetesLabels and
    # ClusterKubernetesTaints; the taints' maxItems 50 in cfn-lint's AWS::SageMaker::Cluster schema too).
    labels: dict[K8sKey, K8sValue] = Field(default={}, max_length=50)
    taints: list[Taint] = Field(default=[], max_length=50)
    # CapacityRequirements: on_demand leaves it out (as every group was created before the field existed), spot
    # writes {Spot: {}} (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-spot.html).
    capacity: Literal["on_demand", "spot"] = "on_demand"
    # MinInstanceCount: the group is InService only once this many instances run (botocore's CreateCluster model).
    min_instance_count: StrictInt | None = Field(default=None, ge=0, le=6758)
    # null = hyperpod.volume_encryption. A deployed group keeps the key it was created with (see HyperPodConfig).
    volume_encryption: VolumeEncryption | None = None

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        return _known_instance_type(value)

    @field_validator("fallback_instance_types")
    @classmethod
    def _fallbacks(cls, value: list[str]) -> list[str]:
        for i, instance_type in enumerate(value):
            _known_instance_type(instance_type, str(i))
        # "the list must not contain duplicates" (https://docs.aws.amazon.com/sagemaker/latest/dg/
        # sagemaker-hyperpod-eks-operate-cli-command-create-cluster.html, "Flexible instance groups").
        if len(set(value)) != len(value):
            raise refusal("", None, f"listed twice: {value}")
        return value

    @property
    def instance_types(self) -> tuple[str, ...]:
        """Every type the group may run, first choice first: what to plan IPs, quotas and checks for."""
        return (self.instance_type, *self.fallback_instance_types)

    @field_validator("deep_health_checks")
    @classmethod
    def _distinct_checks(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise refusal("", None, f"listed twice: {value}")
        return value

    @model_validator(mode="after")
    def _connectivity(self) -> InstanceGroupConfig:
        if "InstanceConnectivity" in self.deep_health_checks and self.instance_count < 2:
            raise refusal("deep_health_checks", None, "InstanceConnectivity needs at least 2 instances in the "
                                                      f"group, instance_count is {self.instance_count}")
        return self

    @model_validator(mode="after")
    def _first_choice_not_a_fallback(self) -> InstanceGroupConfig:
        if self.instance_type in self.fallback_instance_types:
            raise refusal("fallback_instance_types", self.instance_type,
                          "is the group's instance_type already; list only the types to fall back to")
        return self

    @model_validator(mode="after")
    def _capacity(self) -> InstanceGroupConfig:
        # "MinInstanceCount must be less than or equal to InstanceCount" (AWS::SageMaker::Cluster schema in
        # cfn-lint, ClusterInstanceGroup.MinInstanceCount).
        if self.min_instance_count is not None and self.min_instance_count > self.instance_count:
            raise refusal("min_instance_count", self.min_instance_count,
                          f"must not exceed instance_count ({self.instance_count})")
        # Our rule, not found in AWS's documentation: a training plan is reserved capacity, Spot is not; a group
        # asking for both is refused rather than sent to the API to find out which one wins.
        if self.capacity == "spot" and self.training_plan_arn is not None:
            raise refusal("capacity", "spot", "a group with a training_plan_arn runs on the plan's reserved "
                                              "capacity; use on_demand there, or a separate spot group")
        return self


def instance_groups_have_subnets(
    groups: Sequence[InstanceGroupConfig], subnet_az_ids: Iterable[str], *,
    groups_key: str = "instance_groups", subnets_key: str = "subnet_ids_by_az",
) -> None:
    """The one statement of "every instance group's AZ ID has a HyperPod subnet", or a ConfigError.

    A group's nodes take their IPs in the HyperPod subnet of its AZ ID (``HyperPodCluster`` pins each group to
    it), so a group in an AZ ID without one has nowhere to run. The config checks it with its keys
    (``hyperpod.instance_groups``, ``network.hyperpod_subnets``); ``HyperPodCluster`` checks it again with its
    props' names for a library user who builds the groups and subnets without the config file. The key is the
    first group whose AZ ID is missing; the reason names every missing AZ ID and the ones there are.
    """
    have = sorted(set(subnet_az_ids))
    missing = sorted({g.az_id for g in groups} - set(have))
    if missing:
        index, first = next((i, g) for i, g in enumerate(groups) if g.az_id in missing)
        raise ConfigError(f"{groups_key}.{index}.az_id", first.az_id,
                          f"no HyperPod subnet for the instance groups' AZ IDs {missing} in {subnets_key} "
                          f"(have: {', '.join(have) or 'none'})")


# Chart value keys that name a secret (compared lower case without "-" and "_", by their end): the chart's values
# are written into the template, where anyone allowed cloudformation:GetTemplate reads them. "existing..." keys
# (existingSecret, the common way a chart takes the name of a Secret made beforehand) name a secret, hold none.
SECRET_KEY_ENDINGS = ("password", "passwd", "secret", "token", "apikey", "secretkey", "accesskey", "privatekey",
                      "credentials", "credential")


def secret_values(values: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(key path, what it looks like) of each chart value that holds a secret: a string under a key that names
    one (SECRET_KEY_ENDINGS), or a string shaped like a credential (``infra.errors.CREDENTIAL_SHAPES``)."""
    items = values.items() if isinstance(values, dict) else enumerate(values) if isinstance(values, list) else []
    for key, value in items:
        where = f"{path}.{key}" if path else str(key)
        if isinstance(value, dict | list):
            yield from secret_values(value, where)
            continue
        if not isinstance(value, str) or not value:
            continue
        name = str(key).lower().replace("-", "").replace("_", "")
        if (kind := credential_kind(value)) is not None:
            yield where, kind
        elif isinstance(key, str) and not name.startswith("existing") and name.endswith(SECRET_KEY_ENDINGS):
            yield where, "a secret (the key names one)"


class ChartConfig(StrictModel):
    """Where the HyperPod dependencies Helm chart comes from at deploy time."""

    source: Literal["git", "oci", "local"] = "git"
    git_repository: str = Field(
        default=DEPENDENCIES_CHART_REPOSITORY, pattern=r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
    )
    # A full commit SHA: branches and tags move, a commit does not. Default: aws/sagemaker-hyperpod-cli main at
    # a00b22d1 (2026-06-19, "Bump inference operator helm chart version to 2.2.2"), the last commit on main that
    # touches helm_chart/HyperPodHelmChart in the copy read on 2026-12-02 (main was then at 011ca927).
    revision: str = Field(default=DEPENDENCIES_CHART_REVISION, pattern=r"^[0-9a-f]{40}$")
    chart_path: str = "helm_chart/HyperPodHelmChart"
    # The SHA-256 of the source tree at revision (docs/constructs/helm-releases.md, "Pinning the chart source"): a
    # commit SHA alone does not prove which repository it is on, since GitHub serves a fork's commits under the
    # parent's URL. Known for the default repository and revision, required for any other.
    source_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    oci_uri: str | None = Field(default=None, pattern=r"^oci://[A-Za-z0-9_./:-]+$")
    version: ExactVersion | None = None
    local_path: str | None = None
    values: dict[str, Any] = {}

    @property
    def is_default_commit(self) -> bool:
        return (self.git_repository, self.revision) == (DEPENDENCIES_CHART_REPOSITORY, DEPENDENCIES_CHART_REVISION)

    @property
    def pinned_sha256(self) -> str:
        """The source tree's SHA-256 a git source is installed with: ``source_sha256``, or the default commit's."""
        return self.source_sha256 or DEPENDENCIES_CHART_SOURCE_SHA256

    @field_validator("values")
    @classmethod
    def _no_secrets(cls, values: dict[str, Any]) -> dict[str, Any]:
        for where, kind in secret_values(values):
            raise refusal(where, None, f"holds {kind}; chart values are written into the template in clear text. "
                                       "Create a Kubernetes Secret out of band and give the chart its name "
                                       "(docs/safety.md, Secrets)")
        return values

    @model_validator(mode="after")
    def _source(self) -> ChartConfig:
        if self.source == "git" and self.source_sha256 is None and not self.is_default_commit:
            raise refusal("source_sha256", None, "required with a git_repository or revision other than the "
                          "default: the SHA-256 of the source tree, which make vendor-chart prints "
                          "(docs/constructs/helm-releases.md, Pinning the chart source)")
        if self.source_sha256 not in (None, DEPENDENCIES_CHART_SOURCE_SHA256) and self.is_default_commit:
            raise refusal("source_sha256", self.source_sha256, "is not the digest of the default revision "
                          f"{DEPENDENCIES_CHART_REVISION} ({DEPENDENCIES_CHART_SOURCE_SHA256}): remove it")
        if self.source == "oci" and (self.oci_uri is None or self.version is None):
            raise refusal("", self.oci_uri, "source oci needs oci_uri and a pinned version")
        if self.source == "local":
            if self.local_path is None:
                raise refusal("local_path", None, "required with source local")
            if not (Path(self.local_path) / "Chart.yaml").is_file():
                raise refusal("local_path", self.local_path, "no Chart.yaml in that directory")
        return self


class LifecycleOptions(StrictModel):
    """Settings written to lifecycle_config.env next to on_create.sh (see lifecycle_scripts/README.md and
    ``infra.constructs.hyperpod.lifecycle_render``)."""

    containerd_on_opt_sagemaker: bool = True
    fsx_lustre_client: bool = False
    secondary_volume_wait_seconds: StrictInt = Field(default=300, ge=10, le=3600)


class TieredCheckpointingConfig(StrictModel):
    """Managed tiered checkpointing (TieredStorageConfig): checkpoints kept in the nodes' CPU memory."""

    enabled: bool = False
    # "The range is 20-100" (https://docs.aws.amazon.com/sagemaker/latest/dg/managed-tier-checkpointing-setup.html);
    # the API alone allows 0-100 (botocore's ClusterInstanceMemoryAllocationPercentage).
    memory_percent: StrictInt = Field(default=20, ge=20, le=100)
# --- Autoscaling (Karpenter managed by HyperPod) -------------------------------------------------------------
# The oldest health monitoring agent that supports it, with continuous provisioning and Automatic node recovery
# the prerequisites of https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html
# (the list read in its translation at docs.amazonaws.cn/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html).
MIN_AUTOSCALING_AGENT_VERSION = "1.0.742.0_1.0.241.0"
# The agent the default dependencies chart installs, the tag its template falls back to (aws/sagemaker-hyperpod-
# cli@a00b22d1:helm_chart/HyperPodHelmChart/charts/health-monitoring-agent/templates/_helpers.tpl). Another
# revision or source chooses its own: only an override in dependencies_chart.values can be checked at synth.
DEFAULT_CHART_AGENT_VERSION = "1.0.1892.0_1.0.424.0"
# Kubernetes object names (the HyperpodNodeClass and NodePool are named after the group): lowercase DNS labels.
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def agent_version(tag: str) -> tuple[int, ...]:
    """A health monitoring agent image tag (``1.0.742.0_1.0.241.0``) as numbers, to compare releases."""
    return tuple(int(part) for part in re.split(r"[._]", tag))


def agent_image_override(values: dict[str, Any]) -> tuple[str, str] | None:
    """(values key, image tag) of a health monitoring agent image set in the dependencies chart's values.

    The chart's template uses ``hmaimage`` whole when it is set and builds the image from ``imageTag``
    otherwise (aws/sagemaker-hyperpod-cli@a00b22d1:helm_chart/HyperPodHelmChart/charts/health-monitoring-agent/
    templates/_helpers.tpl), so ``hmaimage`` is read first. A digest (``@sha256:...``) has no tag: "".
    """
    hma = values.get("health-monitoring-agent") or {}
    if hma.get("hmaimage"):
        name = str(hma["hmaimage"]).rpartition("/")[2]  # a registry host may carry a :port
        return "health-monitoring-agent.hmaimage", "" if "@" in name or ":" not in name else name.rpartition(":")[2]
    if hma.get("imageTag"):
        return "health-monitoring-agent.imageTag", str(hma["imageTag"])
    return None


class AutoscalingConfig(StrictModel):
    """Karpenter-based autoscaling managed by HyperPod: ``AutoScaling {Mode: Enable, AutoScalerType: Karpenter}``.

    ``instance_groups`` names the groups Karpenter scales: each gets a HyperpodNodeClass and a NodePool of its
    name. Karpenter owns their node count, so they are declared with ``instance_count: 0``.
    """

    enabled: bool = False
    instance_groups: list[Name63] = []
    # Turning autoscaling off on a deployed cluster is refused by the replacement guard until this is true:
    # disable it on the cluster first (docs/constructs/autoscaling.md, "Turning it off").
    acknowledge_disable: bool = False

    @field_validator("instance_groups")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise refusal("", None, f"listed twice: {value}")
        return value

    @model_validator(mode="after")
    def _groups_when_enabled(self) -> AutoscalingConfig:
        if self.enabled and not self.instance_groups:
            raise refusal("instance_groups", None, "name at least one instance group for Karpenter to scale")
        if not self.enabled and self.instance_groups:
            raise refusal("instance_groups", self.instance_groups, "listed while autoscaling.enabled is false")
        if self.enabled and self.acknowledge_disable:
            raise refusal("acknowledge_disable", True, "set while autoscaling.enabled is true; remove it")
        return self


class HyperPodConfig(StrictModel):
    cluster_name: Name63
    instance_groups: list[InstanceGroupConfig] = Field(min_length=1, max_length=MAX_INSTANCE_GROUPS)
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    node_provisioning_mode: Literal["Continuous"] | None = "Continuous"
    # Whatever runs pods on the nodes waits, during the deployment, for a node and the Pod Identity agent
    # (infra/composition.py, _nodes_ready); false creates it once the cluster resource is, as before that wait.
    wait_for_nodes: bool = True
    lifecycle_scripts_dir: str = "lifecycle_scripts"
    # CloudFormation takes at most 128 characters (LifeCycleConfig.OnCreate in the AWS::SageMaker::Cluster schema).
    on_create_script: str = Field(default="on_create.sh", min_length=1, max_length=128)
    lifecycle: LifecycleOptions = LifecycleOptions()
    dependencies_chart: ChartConfig = ChartConfig()
    tiered_checkpointing: TieredCheckpointingConfig = TieredCheckpointingConfig()
    # The key of every group's EBS volumes, unless a group says otherwise. aws_managed by default: a group created
    # with AWS's key cannot switch keys later, so customer_managed as the default would change every deployed
    # group (see docs/constructs/hyperpod-volume-key.md).
    volume_encryption: VolumeEncryption = "aws_managed"
    autoscaling: AutoscalingConfig = AutoscalingConfig()
    permissions_boundary_arn: PolicyArn | None = None
    # Removed: it accepted every replacement of every protected resource and stayed set after the deploy.
    # ``true`` is refused with the new form (the top-level acknowledge_replacement); ``false`` changes nothing.
    allow_cluster_replacement: bool = False
    # Instance groups (deployed with nodes) that this config removes or renames: their nodes are terminated.
    acknowledge_group_removal: list[Name63] = []
    # lifecycle_scripts_dir and dependencies_chart.local_path / chart_path must stay inside the project
    # (relative, no "..") unless this is true.
    allow_paths_outside_project: bool = False

    @field_validator("on_create_script")
    @classmethod
    def _script_inside_folder(cls, value: str) -> str:
        if (problem := script_key_problem(value)) is not None:
            raise refusal("", value, problem)
        return value

    @field_validator("instance_groups")
    @classmethod
    def _unique_names(cls, groups: list[InstanceGroupConfig]) -> list[InstanceGroupConfig]:
        names = [g.name for g in groups]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise refusal("", None, f"instance group names must be unique, repeated: {dups}")
        return groups

    @model_validator(mode="after")
    def _paths_inside_project(self) -> HyperPodConfig:
        chart = self.dependencies_chart
        paths = [("lifecycle_scripts_dir", self.lifecycle_scripts_dir),
                 ("dependencies_chart.chart_path", chart.chart_path),
                 ("dependencies_chart.local_path", chart.local_path)]
        for key, value in paths:
            if value is None or self.allow_paths_outside_project:
                continue
            if path_escapes(value):
                raise refusal(key, value, "leads outside the project (absolute, ~ or '..'); use a path inside it, "
                                          "or set hyperpod.allow_paths_outside_project: true")
            # chart_path is a path inside the fetched chart source, not on this machine.
            target = leads_out_through_links(value, Path.cwd()) if key != "dependencies_chart.chart_path" else None
            if target is not None:
                raise refusal(key, value, f"a symbolic link on the way leads outside the project, to {target}; use "
                                          "a folder inside it, or set hyperpod.allow_paths_outside_project: true")
        return self

    def group_volume_encryption(self, group: InstanceGroupConfig) -> VolumeEncryption:
        return group.volume_encryption or self.volume_encryption

    @model_validator(mode="after")
    def _customer_keys_need_continuous(self) -> HyperPodConfig:
        # "Customer managed key encryption is only supported for clusters using the continuous node provisioning
        # mode" (https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html).
        if self.node_provisioning_mode is None:
            for i, group in enumerate(self.instance_groups):
                if self.group_volume_encryption(group) == "customer_managed":
                    key = f"instance_groups.{i}.volume_encryption" if group.volume_encryption else "volume_encryption"
                    raise refusal(key, "customer_managed", "needs node_provisioning_mode: Continuous")
        return self

    @model_validator(mode="after")
    def _flexible_groups_need_continuous(self) -> HyperPodConfig:
        # "Flexible instance groups are only available for clusters with NodeProvisioningMode set to Continuous"
        # (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-scaling-eks.html).
        if self.node_provisioning_mode is None:
            for i, group in enumerate(self.instance_groups):
                if group.fallback_instance_types:
                    raise refusal(f"instance_groups.{i}.fallback_instance_types", group.fallback_instance_types,
                                  "a flexible instance group needs node_provisioning_mode: Continuous")
        return self

    @field_validator("allow_cluster_replacement")
    @classmethod
    def _replacement_is_acknowledged_per_field(cls, allowed: bool) -> bool:
        if allowed:
            raise refusal("", True, "no longer accepted: it let every replacement through and stayed set; list each "
                                    "replacement the refusal names in acknowledge_replacement: [{resource: <stack>/"
                                    "<logical ID>, field: <field>}] (docs/safety.md) and remove this key")
        return allowed

    @model_validator(mode="after")
    def _acknowledged_groups_are_gone(self) -> HyperPodConfig:
        # An acknowledgment left behind must not let a later removal of a group of that name pass silently.
        present = {g.name for g in self.instance_groups}
        for i, name in enumerate(self.acknowledge_group_removal):
            if name in present:
                raise refusal(f"acknowledge_group_removal.{i}", name,
                              "the group is still in hyperpod.instance_groups; remove the acknowledgment")
        return self

    @model_validator(mode="after")
    def _autoscaling_prerequisites(self) -> HyperPodConfig:
        """What AWS requires before Karpenter may scale a group (sources beside each check)."""
        if not self.autoscaling.enabled:
            return self
        # Prerequisites: continuous provisioning and NodeRecovery Automatic
        # (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html).
        if self.node_provisioning_mode != "Continuous":
            raise refusal("node_provisioning_mode", self.node_provisioning_mode,
                          "autoscaling needs Continuous node provisioning")
        if self.node_recovery != "Automatic":
            raise refusal("node_recovery", self.node_recovery, "autoscaling needs Automatic node recovery")
        # The agent is a subchart with condition health-monitoring-agent.enabled
        # (aws/sagemaker-hyperpod-cli@a00b22d1:helm_chart/HyperPodHelmChart/Chart.yaml).
        hma = self.dependencies_chart.values.get("health-monitoring-agent") or {}
        if hma.get("enabled") is False:
            raise refusal("dependencies_chart.values.health-monitoring-agent.enabled", False,
                          "autoscaling needs the health monitoring agent installed")
        override = agent_image_override(self.dependencies_chart.values)
        if override is not None:
            key, tag = override
            if not re.fullmatch(r"[0-9]+(?:[._][0-9]+)*", tag):
                raise refusal(f"dependencies_chart.values.{key}", tag or "no tag",
                              f"autoscaling needs health monitoring agent {MIN_AUTOSCALING_AGENT_VERSION} or "
                              "later: pin a numbered tag that synth can compare")
            if agent_version(tag) < agent_version(MIN_AUTOSCALING_AGENT_VERSION):
                raise refusal(f"dependencies_chart.values.{key}", tag,
                              f"autoscaling needs health monitoring agent {MIN_AUTOSCALING_AGENT_VERSION} or later")
        groups = {g.name: (i, g) for i, g in enumerate(self.instance_groups)}
        for j, name in enumerate(self.autoscaling.instance_groups):
            key = f"autoscaling.instance_groups.{j}"
            if name not in groups:
                raise refusal(key, name, "no instance group of that name in hyperpod.instance_groups")
            if not _K8S_NAME.fullmatch(name):
                raise refusal(key, name, "names the group's HyperpodNodeClass and NodePool, so it must be "
                                         "lowercase letters, digits and '-'")
            i, group = groups[name]
            # "You must start with 0 nodes in your instance group and let Karpenter handle the autoscaling";
            # groups with deep health checks or a training plan are not supported
            # (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodeclass.html).
            if group.instance_count != 0:
                raise refusal(f"instance_groups.{i}.instance_count", group.instance_count,
                              "a group Karpenter scales starts with 0 nodes (Karpenter owns its count)")
            if group.deep_health_checks:
                raise refusal(f"instance_groups.{i}.deep_health_checks", group.deep_health_checks,
                              "Karpenter does not scale groups with deep health checks")
            if group.training_plan_arn:
                raise refusal(f"instance_groups.{i}.training_plan_arn", group.training_plan_arn,
                              "Karpenter does not scale groups with a training plan")
            # The NodePool carries no taints, so Karpenter would add nodes for pods that do not tolerate the
            # group's taints (a NodePool's taints are what limit the pods it provisions for, per
            # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-nodepool.html).
            if group.taints:
                raise refusal(f"instance_groups.{i}.taints", [t.key for t in group.taints],
                              "the group's NodePool would not carry them, so Karpenter could add nodes that "
                              "the pending pods cannot use; taint groups Karpenter does not scale")
        return self
